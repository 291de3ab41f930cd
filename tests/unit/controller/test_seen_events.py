"""Which GRPOJob watch events are worth a reconcile (handlers/wiring.SeenEvents).

The trainer patches its progress every few seconds; only what the operator writes from it may
bring a reconcile forward, or the ETA column would wait for the resync (a minute by default).
"""

from __future__ import annotations

from typing import Any

from grpo_operator.handlers.wiring import SeenEvents

KEY = ("ns", "job")


def _body(generation: int = 1, **progress: Any) -> dict[str, Any]:
    return {"metadata": {"uid": "u", "generation": generation}, "status": {"progress": progress}}


def test_a_progress_report_counts_only_when_the_eta_it_shows_changes() -> None:
    seen = SeenEvents()
    assert seen.job_changed(KEY, _body(step=1))
    assert not seen.job_changed(KEY, _body(step=2))  # no estimate yet, nothing to show
    assert seen.job_changed(KEY, _body(step=3, attempt=1, etaSeconds=5400))
    assert not seen.job_changed(KEY, _body(step=4, attempt=1, etaSeconds=5420))  # still 1h30m
    assert seen.job_changed(KEY, _body(step=5, attempt=1, etaSeconds=5340))  # 1h29m
    assert seen.job_changed(KEY, _body(step=6, attempt=2, etaSeconds=5340))  # a new attempt's own
    assert seen.job_changed(KEY, _body(step=7, attempt=2))  # its estimate gone (the last step)
    assert seen.job_changed(KEY, _body(generation=2, step=7, attempt=2))
