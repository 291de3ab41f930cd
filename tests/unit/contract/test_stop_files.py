"""The planned-stop part of the contract: exit code, per-attempt files, the two records."""

from __future__ import annotations

from grpo_operator.api import contract
from grpo_operator.api.contract import StopRequest, YieldRecord


def test_yielded_is_its_own_retryable_code_with_a_phrase() -> None:
    assert contract.YIELDED not in (
        contract.OK,
        contract.UNKNOWN,
        contract.RETRYABLE,
        *contract.NOT_RETRYABLE,
    )
    assert contract.is_retryable(f"Job entrypoint command failed with exit code {contract.YIELDED}")
    assert contract.describe_exit(contract.YIELDED).startswith("yielded")


def test_the_files_lie_beside_the_attempts_metrics_file_one_set_per_attempt() -> None:
    metrics = contract.metrics_file("/grpo/checkpoints/j-1/metrics", 3)
    assert contract.stop_request_file(metrics) == "/grpo/checkpoints/j-1/metrics/attempt-3.stop.json"
    assert contract.yield_record_file(metrics) == "/grpo/checkpoints/j-1/metrics/attempt-3.yield.json"
    assert contract.exit_record_file(metrics) == "/grpo/checkpoints/j-1/metrics/attempt-3.exit.json"
    other = contract.metrics_file("/grpo/checkpoints/j-1/metrics", 4)
    assert contract.stop_request_file(other) != contract.stop_request_file(metrics)


def test_records_read_back_and_a_partial_write_reads_as_none() -> None:
    request = StopRequest(100.0, 160.0, "head-0")
    assert StopRequest.parse(request.to_json()) == request
    record = YieldRecord(step=7, steps_lost=0, requested_at=100.0, saved_at=130.0, save_seconds=12.5)
    assert YieldRecord.parse(record.to_json()) == record
    for text in ("", request.to_json()[:10], "[]", '{"step": "x"}'):
        assert StopRequest.parse(text) is None
        assert YieldRecord.parse(text) is None
