"""`python -m benchmarks.verl_gpu record`: the committed GPU summary from what a device call brought back.

A comparison run (ours and verl's own main_ppo in one lease) may be at other shapes than the
summary's main run; `--section` must keep the main run and add the pair beside it, and raw verl's
figures must come from its attempt that completed (its first start may have failed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.verl_gpu import chain, cli, inputs, machine, parts, record, stack


@pytest.fixture(autouse=True)
def _repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`record` writes into a repository of the test's own."""
    monkeypatch.setattr(record, "DATA", tmp_path / "repo" / "docs" / "benchmarks" / "data")


def start_args(*argv: str) -> argparse.Namespace:
    """`start shapes-4b --response-length 512 ARGV` as the verl_gpu cli parses it: every other option at
    its default, so a new option needs no edit here."""
    return cli.parser().parse_args(["start", "shapes-4b", "--response-length", "512", *argv])


def step(number: int, step_s: float, update_s: float) -> dict[str, Any]:
    return {
        "step": number,
        "timing_s/step": step_s,
        "timing_s/gen": 10.0,
        "timing_s/old_log_prob": 12.0,
        "timing_s/ref": 21.0,
        "timing_s/update_actor": update_s,
        "perf/throughput": 1000.0 + number,
        "actor/perf/max_memory_allocated_gb": 82.8,
        "actor/perf/max_memory_reserved_gb": 87.6,
        "response_length/mean": 512.0,
        "prompt_length/mean": 295.0,
    }


UNI_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend"


def attempt(
    exit_code: int, steps: list[dict[str, Any]], train: str = "data.train_files=/v/data/geo3k-a/train.parquet"
) -> dict[str, Any]:
    return {
        "exit_code": exit_code,
        "steps": [s["step"] for s in steps],
        "per_step": steps,
        "startup_s": {"engine_process": 15.0, "first_step": 450.0},
        "engine_overrides": ["algorithm.adv_estimator=grpo", train, "trainer.nnodes=1"],
    }


def summary(part: str, attempts: dict[str, Any]) -> dict[str, Any]:
    return {
        "part": part,
        "machine": {"gpus": ["H200"]},
        "attention": "sdpa",
        "shapes": {"response": 512},
        "attempts": attempts,
    }


def test_section_keeps_the_main_run_and_reads_raw_verls_completed_attempt(tmp_path: Path) -> None:
    source = tmp_path / "came-back"
    source.mkdir()
    ours = summary(
        "shapes-4b", {"attempt_1": attempt(0, [step(1, 115, 43), step(2, 92, 46), step(3, 94, 48)])}
    )
    raw = summary(
        "raw-4b",
        {
            "attempt_1": attempt(1, []),  # failed to start
            "attempt_2": attempt(0, [step(1, 120, 45), step(2, 86, 42), step(3, 86, 40)]),
        },
    )
    (source / "shapes-4b-summary.json").write_text(json.dumps(ours))
    (source / "raw-4b-summary.json").write_text(json.dumps(raw))
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"ours": {"steady_state": {"step_s": 130.7}}, "shapes": {"response": 1024}}))

    assert record.record(source, 1, "comparison_512") == 0

    written = json.loads(target.read_text())
    assert written["ours"] == {"steady_state": {"step_s": 130.7}}  # the main run is kept
    assert written["shapes"] == {"response": 1024}
    pair = written["comparison_512"]
    assert pair["raw_verl"]["steps"] == [1, 2, 3]
    assert pair["raw_verl"]["steady_state"]["step_s"] == 86.0
    assert pair["ours"]["steady_state"]["step_s"] == 93.0
    assert pair["overhead_pct"] == pytest.approx(100 * (93 - 86) / 86, abs=0.01)
    assert pair["per_phase_s"]["update_actor_s"] == {"ours": 47.0, "raw_verl": 41.0, "difference": 6.0}
    assert pair["shapes"] == {"response": 512}
    assert pair["same_data"] is True  # ours passes a one-item list, main_ppo's card a bare path


def test_a_pair_on_different_files_says_so(tmp_path: Path) -> None:
    source = tmp_path / "came-back"
    source.mkdir()
    ours = summary(
        "shapes-4b",
        {
            "attempt_1": attempt(
                0, [step(1, 115, 43), step(2, 92, 46)], "data.train_files=[/v/geo3k-a/train.parquet]"
            )
        },
    )
    raw = summary(
        "raw-4b",
        {
            "attempt_1": attempt(
                0, [step(1, 120, 45), step(2, 86, 42)], "data.train_files=/v/geo3k-b/train.parquet"
            )
        },
    )
    (source / "shapes-4b-summary.json").write_text(json.dumps(ours))
    (source / "raw-4b-summary.json").write_text(json.dumps(raw))

    assert record.record(source, 1, "comparison_512") == 0

    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    pair = json.loads(target.read_text())["comparison_512"]
    assert pair["same_data"] is False
    assert pair["ours"]["train_file"] == "/v/geo3k-a/train.parquet"
    assert pair["raw_verl"]["train_file"] == "/v/geo3k-b/train.parquet"


def test_the_data_does_not_follow_the_step_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """raw-4b run with fewer steps than ours must prepare the very same parquet files."""
    rows: list[int] = []
    monkeypatch.setattr(machine, "WORK", tmp_path / "work")
    monkeypatch.setattr(parts, "build_model", lambda *a, **k: tmp_path / "model")
    monkeypatch.setattr(parts, "build_geo3k", lambda *a, train, **k: rows.append(train) or tmp_path)
    monkeypatch.setattr(parts, "write_spec", lambda path, value: path)
    for steps in (3, 4, 9):
        parts.inputs_4b(start_args("--steps", str(steps)), "shapes-4b")
    assert len(set(rows)) == 1


def test_a_section_of_ours_alone_keeps_the_main_run(tmp_path: Path) -> None:
    """Steps at other settings than the main run's (the engine's defaults, say), with neither raw
    verl nor a retry beside them, go under their own key; the main run and other sections stay."""
    source = tmp_path / "came-back"
    source.mkdir()
    first = attempt(0, [step(1, 115, 43), step(2, 92, 46), step(3, 94, 44)])
    first["engine_overrides"].append(f"+{UNI_KEY}=uni")
    (source / "shapes-4b-summary.json").write_text(json.dumps(summary("shapes-4b", {"attempt_1": first})))
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"ours": {"kept": True}, "startup_uni": {"kept": True}}))

    assert record.record(source, 1, "engine_defaults") == 0

    written = json.loads(target.read_text())
    assert written["ours"] == written["startup_uni"] == {"kept": True}
    section = written["engine_defaults"]
    assert set(section) == {"machine", "attention", "shapes", "ours"}
    assert section["ours"]["steps"] == [1, 2, 3]
    assert section["ours"]["steady_state"]["step_s"] == 93.0  # steps 2 and 3
    assert section["ours"]["vllm_executor"] == "uni"


def test_a_start_up_section_keeps_the_main_run_and_reads_the_retry(tmp_path: Path) -> None:
    """A cold attempt and its retry in one lease, recorded beside the main run, not over it."""
    source = tmp_path / "came-back"
    source.mkdir()
    cold, retry = attempt(0, [step(1, 110, 43)]), attempt(0, [step(1, 100, 43)])
    retry["startup_s"] = {"engine_process": 15.0, "first_step": 300.0}
    ours = summary("shapes-4b", {"attempt_1": cold, "attempt_2": retry})
    (source / "shapes-4b-summary.json").write_text(json.dumps(ours))
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"ours": {"kept": True}, "comparison_512": {"kept": True}}))

    record.record(source, 1, "startup_512")

    written = json.loads(target.read_text())
    assert written["ours"] == {"kept": True}
    assert written["comparison_512"] == {"kept": True}
    section = written["startup_512"]
    assert set(section) == {"machine", "attention", "shapes", "ours", "ours_retry", "retry_startup"}
    # Before step 1 began: its line's stamp less its own time (450 - 110 and 300 - 100).
    assert section["retry_startup"]["cold_s"] == 340.0
    assert section["retry_startup"]["retry_s"] == 200.0
    assert section["retry_startup"]["ratio"] == round(200 / 340, 3)
    assert section["retry_startup"]["measured_to"] == "step 1"


def test_a_pair_stopped_at_startup_is_measured_to_the_rollout_servers_mark(tmp_path: Path) -> None:
    """`wait --stop-at-startup` stops both attempts before any step: both are then measured to the
    last mark before step 1, and the section says so."""
    source = tmp_path / "came-back"
    source.mkdir()
    cold, retry = attempt(75, []), attempt(75, [])
    cold["startup_s"] = {
        "trainer": 4.0,
        "actor_and_reference": 135.5,
        "rollout_server": 294.2,
        "first_step": None,
    }
    retry["startup_s"] = {
        "trainer": 3.4,
        "actor_and_reference": 120.3,
        "rollout_server": 193.4,
        "first_step": None,
    }
    (source / "shapes-4b-summary.json").write_text(
        json.dumps(summary("shapes-4b", {"attempt_1": cold, "attempt_2": retry}))
    )
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"startup_2101": {"kept": True}}))

    record.record(source, 1, "startup_2101_cached")

    written = json.loads(target.read_text())
    assert written["startup_2101"] == {"kept": True}
    section = written["startup_2101_cached"]
    pair = section["retry_startup"]
    assert pair["measured_to"] == "the rollout_server mark"
    assert (pair["cold_s"], pair["retry_s"], pair["ratio"]) == (294.2, 193.4, round(193.4 / 294.2, 3))
    assert pair["retry_phases_s"] == {"trainer": 3.4, "actor_and_reference": 116.9, "rollout_server": 73.1}
    assert section["ours_retry"]["steps"] == []
    assert section["ours"]["train_file"] == "/v/data/geo3k-a/train.parquet"


def test_a_run_that_failed_before_its_first_step_keeps_why_and_the_hosts_extremes(tmp_path: Path) -> None:
    """A run killed in step 1 (the host out of memory, say) is recorded with its failure line and
    the host's extremes, which say what ran out; a run that ended well has neither key."""
    source = tmp_path / "came-back"
    source.mkdir()
    failed = attempt(75, [])
    failed["startup_s"] = {"trainer": 1.9, "rollout_server": 170.7, "first_step": None}
    failed["failure"] = {"reason": "NodeLost", "retryable": True, "exitCode": 75, "message": "actor died"}
    failed["host"] = {"min_available_gib": 1.5, "max_shmem_gib": 105.7}
    (source / "shapes-4b-summary.json").write_text(json.dumps(summary("shapes-4b", {"attempt_1": failed})))
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"ours": {"kept": True}}))

    assert record.record(source, 1, "offload_h100") == 0

    section = json.loads(target.read_text())["offload_h100"]["ours"]
    assert section["steps"] == []
    assert section["failure"]["reason"] == "NodeLost"
    assert section["host"] == {"min_available_gib": 1.5, "max_shmem_gib": 105.7}
    stopped = attempt(75, [])
    (source / "shapes-4b-summary.json").write_text(json.dumps(summary("shapes-4b", {"attempt_1": stopped})))
    assert record.record(source, 1, "stopped") == 0
    assert not {"failure", "host"} & set(json.loads(target.read_text())["stopped"]["ours"])


def test_later_retries_are_measured_against_the_same_cold_attempt(tmp_path: Path) -> None:
    """A third (and tenth) attempt on the same machine is another sample of the retry's start-up:
    each gets its ratio, attempts sort as numbers, and the mean retry is held against the cold one."""
    source = tmp_path / "came-back"
    source.mkdir()
    attempts = {}
    for name, end in (
        ("attempt_1", 210.0),
        ("attempt_2", 118.0),
        ("attempt_3", 142.0),
        ("attempt_10", 130.0),
    ):
        attempts[name] = attempt(75, [])
        attempts[name]["startup_s"] = {"trainer": 2.0, "rollout_server": end, "first_step": None}
        attempts[name]["engine_overrides"].append(f"+{UNI_KEY}=uni")
    (source / "shapes-4b-summary.json").write_text(json.dumps(summary("shapes-4b", attempts)))
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)

    record.record(source, 1, "startup_uni")

    section = json.loads(target.read_text())["startup_uni"]
    assert section["retry_startup"]["retry_s"] == 118.0
    later = section["later_retries_startup"]
    assert list(later) == ["attempt_3", "attempt_10"]
    assert later["attempt_3"]["cold_s"] == 210.0
    assert later["attempt_3"]["retry_s"] == 142.0
    assert later["attempt_10"]["ratio"] == round(130 / 210, 3)
    assert section["ours"]["vllm_executor"] == section["ours_retry"]["vllm_executor"] == "uni"
    ratios = section["retry_ratios"]
    assert ratios["each"] == {"attempt_2": 0.562, "attempt_3": 0.676, "attempt_10": 0.619}
    assert ratios["mean_retry_s"] == 130.0
    assert ratios["mean_ratio"] == round(130 / 210, 3)


def test_a_single_retry_has_no_later_retries(tmp_path: Path) -> None:
    source = tmp_path / "came-back"
    source.mkdir()
    attempts = {name: attempt(75, []) for name in ("attempt_1", "attempt_2")}
    for one, end in zip(attempts.values(), (210.0, 118.0), strict=True):
        one["startup_s"] = {"trainer": 2.0, "rollout_server": end, "first_step": None}
    (source / "shapes-4b-summary.json").write_text(json.dumps(summary("shapes-4b", attempts)))
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)

    record.record(source, 1, "startup_uni")

    section = json.loads(target.read_text())["startup_uni"]
    assert "later_retries_startup" not in section
    assert "retry_ratios" not in section
    assert section["ours"]["vllm_executor"] == "mp"  # no override: verl's own choice


def test_raw_verl_gets_the_same_batches(tmp_path: Path) -> None:
    from grpo_operator.api.v1alpha1.spec import AlgorithmSpec

    assert AlgorithmSpec.model_fields["seed"].default == parts.DATA_SEED
    args = start_args("--raw-reward", "verl")
    overrides = parts.raw_overrides(args, tmp_path / "model", "train.parquet", "test.parquet", tmp_path)
    assert f"data.seed={parts.DATA_SEED}" in overrides


def test_raw_verl_scores_with_the_reward_file_ours_runs(tmp_path: Path) -> None:
    """`--raw-reward ours` gives main_ppo the reward our job's builtin geo3k passes (the registry's,
    which the engine's `reward_function` hands verl for a builtin)."""
    from grpo_trainer.rewards.registry import get_reward

    args = start_args()
    overrides = parts.raw_overrides(args, tmp_path / "model", "train.parquet", "test.parquet", tmp_path)
    ours = get_reward("geo3k")
    assert f"reward.custom_reward_function.path={ours.path}" in overrides
    assert f"reward.custom_reward_function.name={ours.function}" in overrides
    args.raw_reward = "verl"
    overrides = parts.raw_overrides(args, tmp_path / "model", "train.parquet", "test.parquet", tmp_path)
    assert not [o for o in overrides if o.startswith("reward.custom_reward_function")]


def test_omp_threads_reach_both_runs_by_their_own_routes(tmp_path: Path) -> None:
    """raw verl: a runtime_env override (Ray's 1 without it); ours: the environment the engine reads
    as the pod's (its own default outside a pod otherwise), never a second override of the key the
    engine already sets, which Hydra would refuse."""
    args = start_args()
    raw = parts.raw_overrides(args, tmp_path / "model", "train.parquet", "test.parquet", tmp_path)
    assert not [o for o in raw if "OMP_NUM_THREADS" in o]
    assert parts.threads_env(args) == {}
    args.omp_threads = 16
    raw = parts.raw_overrides(args, tmp_path / "model", "train.parquet", "test.parquet", tmp_path)
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS='16'" in raw
    assert parts.threads_env(args) == {"OMP_NUM_THREADS": "16"}
    assert not [o for o in parts.sizes_4b(args)["overrides"] if "OMP_NUM_THREADS" in o]


def test_an_engine_override_reaches_ours_job_and_its_retry(tmp_path: Path) -> None:
    """`--engine-override` tries one engine setting (vLLM's executor, say) in ours' GRPOJob, after the
    run's own overrides, and a `--then` chain hands it to the retry."""
    backend = "+actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=uni"
    args = start_args("--engine-override", backend)
    sizes = parts.sizes_4b(args)
    job = inputs.spec("verl-4b", tmp_path / "model", tmp_path / "data", 1, steps=1, **sizes)
    assert job["spec"]["engine"]["overrides"][:2] == ["trainer.save_freq=-1", backend]
    assert parts.tiny_sizes(args, tmp_path)["overrides"] == [backend]
    argv = ["start", "shapes-4b", "--engine-override", backend, "--then", "shapes-4b"]
    assert chain.then_argv(argv, "shapes-4b", "shapes-4b") == [
        "start",
        "shapes-4b",
        "--engine-override",
        backend,
        "--attempt",
        "2",
    ]


def test_the_strategy_reaches_ours_raw_verl_and_the_retry(tmp_path: Path) -> None:
    """`--strategy fsdp` starts the examples' FSDP1 in ours' GRPOJob (tiny and 4B) and in raw verl's
    command alike, and a `--then` chain hands it to the retry; fsdp2 stays the default."""
    assert start_args().strategy == "fsdp2"
    args = start_args("--strategy", "fsdp")
    job = inputs.spec("verl-4b", tmp_path / "model", tmp_path / "data", 1, steps=1, **parts.sizes_4b(args))
    assert job["spec"]["engine"]["strategy"] == "fsdp"
    assert job["spec"]["engine"]["refParamOffload"] is True
    tiny = inputs.spec(
        "verl-tiny", tmp_path / "model", tmp_path / "data", 1, steps=2, **parts.tiny_sizes(args, tmp_path)
    )
    assert tiny["spec"]["engine"]["strategy"] == "fsdp"
    raw = parts.raw_overrides(args, tmp_path / "model", "train.parquet", "test.parquet", tmp_path)
    assert [o for o in raw if ".strategy=" in o] == [
        "actor_rollout_ref.actor.strategy=fsdp",
        "actor_rollout_ref.ref.strategy=fsdp",
    ]
    argv = ["start", "shapes-4b", "--strategy", "fsdp", "--then", "shapes-4b"]
    assert chain.then_argv(argv, "shapes-4b", "shapes-4b") == [
        "start",
        "shapes-4b",
        "--strategy",
        "fsdp",
        "--attempt",
        "2",
    ]


def test_actor_offload_reaches_ours_and_raw_verl(tmp_path: Path) -> None:
    """`--actor-offload` offloads the actor's parameters and optimiser state in ours' GRPOJob and in
    raw verl's command alike (the geo3k recipe's setting, with which a 4B step fits an H100); off,
    both keep them on the GPU as the SafeGRPO recipe does."""

    def offload(args: argparse.Namespace) -> tuple[dict[str, bool], list[str]]:
        job = inputs.spec(
            "verl-4b", tmp_path / "model", tmp_path / "data", 1, steps=1, **parts.sizes_4b(args)
        )
        engine = job["spec"]["engine"]
        raw = parts.raw_overrides(args, tmp_path / "model", "train.parquet", "test.parquet", tmp_path)
        return (
            {k: engine[k] for k in ("paramOffload", "optimizerOffload", "refParamOffload")},
            [o for o in raw if "actor.fsdp_config" in o and "offload" in o],
        )

    assert offload(start_args()) == (
        {"paramOffload": False, "optimizerOffload": False, "refParamOffload": True},
        [
            "actor_rollout_ref.actor.fsdp_config.param_offload=False",
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
        ],
    )
    assert offload(start_args("--actor-offload")) == (
        {"paramOffload": True, "optimizerOffload": True, "refParamOffload": True},
        [
            "actor_rollout_ref.actor.fsdp_config.param_offload=True",
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
        ],
    )


def test_train_rows_sizes_the_generated_geo3k_data(tmp_path: Path) -> None:
    """`--train-rows` gives the 4B runs the geo3k recipe's row count (its over-long filter at size);
    without it, 64 rows per GPU, as every run before."""
    import pyarrow.parquet as pq

    assert parts.train_rows(argparse.Namespace(gpus=1, train_rows=0)) == 64
    assert parts.train_rows(argparse.Namespace(gpus=2, train_rows=0)) == 128
    assert parts.train_rows(argparse.Namespace(gpus=1, train_rows=2101)) == 2101
    hub = parts.build_geo3k(tmp_path / "hub", train=7, test=2, side=32, varied=True)
    assert pq.read_table(hub / "data" / "train-00000-of-00001.parquet").num_rows == 7
    assert pq.read_table(hub / "data" / "test-00000-of-00001.parquet").num_rows == 2


def test_a_later_start_keeps_the_generated_data_it_would_draw_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every start (the chain's retry too) builds the data; the same arguments are the same bytes,
    so a second build draws nothing, and other arguments (or a half-written folder) build anew."""
    import pyarrow.parquet as pq

    train = tmp_path / "hub" / "data" / "train-00000-of-00001.parquet"
    first = parts.build_geo3k(tmp_path / "hub", train=7, test=2, side=32, varied=True)
    before = train.read_bytes()
    drawn: list[int] = []
    real_png = inputs.png
    monkeypatch.setattr(inputs, "png", lambda rng, side: drawn.append(side) or real_png(rng, side))

    assert parts.build_geo3k(tmp_path / "hub", train=7, test=2, side=32, varied=True) == first
    assert drawn == []
    assert train.read_bytes() == before

    parts.build_geo3k(tmp_path / "hub", train=5, test=2, side=32, varied=True)
    assert len(drawn) == 7
    assert pq.read_table(train).num_rows == 5

    drawn.clear()
    train.unlink()
    parts.build_geo3k(tmp_path / "hub", train=5, test=2, side=32, varied=True)
    assert len(drawn) == 7
    assert pq.read_table(train).num_rows == 5


def test_a_later_start_finds_the_extra_wheels_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first start installs the carried wheels into EXTRA_SITE; a later one puts the folder on
    its path (once) instead of running pip again."""
    site = tmp_path / "extra"
    site.mkdir()
    monkeypatch.setattr(stack, "EXTRA_SITE", site)
    monkeypatch.setattr(stack, "NEEDED", ("lightkube",))
    # lightkube importable only from the extra folder, as on the GPU machine.
    monkeypatch.setattr(stack, "_importable", lambda name: str(site) in sys.path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(site)])
    monkeypatch.setenv("PYTHONPATH", "/stack")
    monkeypatch.setattr(stack, "install_carried", lambda wanted: pytest.fail("pip ran again"))

    assert stack.preflight(tmp_path) == []
    stack.use_extra_site()
    assert sys.path.count(str(site)) == 1
    assert os.environ["PYTHONPATH"] == f"/stack{os.pathsep}{site}"


def test_a_new_main_run_keeps_the_sections_and_the_run_it_replaces(tmp_path: Path) -> None:
    """Recording the image's attention over an SDPA run must lose neither it nor the comparisons."""
    source = tmp_path / "came-back"
    source.mkdir()
    ours = summary(
        "shapes-4b", {"attempt_1": attempt(0, [step(1, 124, 40), step(2, 79, 34), step(3, 81, 34)])}
    )
    ours["attention"] = "flash_attention_2"
    (source / "shapes-4b-summary.json").write_text(json.dumps(ours))
    target = tmp_path / "repo" / "docs" / "benchmarks" / "data" / "verl-4b-1gpu.json"
    target.parent.mkdir(parents=True)
    before = {
        "attention": "sdpa",
        "ours": {"steady_state": {"step_s": 130.7}},
        "ours_retry": {"steady_state": {"step_s": 131.0}},
        "comparison_512": {"overhead_pct": 7.0},
    }
    target.write_text(json.dumps(before))

    assert record.record(source, 1, previous_as="sdpa_1024") == 0

    written = json.loads(target.read_text())
    assert written["attention"] == "flash_attention_2"
    assert written["ours"]["steady_state"]["step_s"] == 80.0
    assert "ours_retry" not in written  # the retry belonged to the run it replaced
    assert written["comparison_512"] == {"overhead_pct": 7.0}
    assert written["sdpa_1024"] == {k: before[k] for k in ("attention", "ours", "ours_retry")}

    # Recorded again without --previous-as, the sections (the moved run among them) stay.
    assert record.record(source, 1) == 0
    again = json.loads(target.read_text())
    assert again["sdpa_1024"] == written["sdpa_1024"]
    assert again["comparison_512"] == {"overhead_pct": 7.0}
    with pytest.raises(SystemExit, match="that key is taken"):
        record.record(source, 1, previous_as="sdpa_1024")
