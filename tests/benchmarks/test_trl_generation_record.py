"""`python -m benchmarks.trl_generation record`: what a device call brought back -> the committed summary.

The GPU run writes one `generation.json` per `--out` folder; `record` reads those as they come
back (here: small fake ones in the same shape) and writes docs/benchmarks/data/trl-generation.json,
judging each path on the targets: vLLM within 16 GB and 8 ms per token, as long as eager's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import trl_generation


def engine_run(ms: list[float], peak: float, shortest: list[int], **extra: Any) -> dict[str, Any]:
    return {
        "steps": len(ms),
        "step_seconds": [3 * m for m in ms],
        "generation_seconds": [m * 256 / 1000 for m in ms],
        "ms_per_token": ms,
        "completion_mean_length": [256.0] * len(ms) if min(shortest) == 256 else [61.0] * len(ms),
        "completion_min_length": shortest,
        "completion_max_length": [256] * len(ms),
        "peak_allocated_gib": peak - 1,
        "peak_device_used_gib": peak,
        "sampling": {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0},
        **extra,
    }


def fake_report(vllm: dict[str, Any], command: str) -> dict[str, Any]:
    return {
        "device": "NVIDIA H200",
        "torch": "2.11.0+cu130",
        "transformers": "5.9.0",
        "trl": "1.16.0",
        "peft": "0.21.0",
        "vllm": "0.24.0",
        "shape": "4b",
        "prompt_tokens": 1024,
        "new_tokens": 256,
        "sequences": 2,
        "budget_gib": 16 * 10**9 / 2**30,
        "command": command,
        "weights_gib": 8.27,
        "decoding": {"unmerged": {"ms_per_token_median": 58.0}, "merged": {"ms_per_token_median": 30.2}},
        "engine": {
            "eager": engine_run([80.0, 70.0, 72.0], 11.1, [256, 256, 256]),
            "compiled": engine_run([300.0, 17.0, 17.4], 11.7, [256, 256, 256]),
            "vllm": vllm,
        },
        "seconds": 480.0,
    }


def write(folder: Path, report: dict[str, Any]) -> Path:
    folder.mkdir(parents=True)
    (folder / "generation.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


def test_record_summarises_each_run_and_judges_the_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    estimate = {"process_gib_least": 21.4, "vllm_gib_least": 10.1}
    fast_but_large = engine_run(
        [40.0, 3.8, 4.2], 23.76, [256, 256, 256], vllm_sleep=True, vllm_memory_gib=10.5, estimate=estimate
    )
    short = engine_run([40.0, 3.6, 4.0], 14.2, [1, 1, 1], vllm_sleep=False)
    awake = write(tmp_path / "back" / "gen-awake", fake_report(short, "python3 ... --no-vllm-sleep"))
    sleep = write(tmp_path / "back" / "gen-sleep", fake_report(fast_but_large, "python3 ... --paths eager"))
    refused = fake_report({"refused": "--memory-budget-gib: 14.9 GiB cannot hold colocated vLLM"}, "budget")
    budget = write(tmp_path / "back" / "gen-budget", refused)
    to = tmp_path / "docs" / "trl-generation.json"

    assert (
        trl_generation.record([str(sleep), str(awake), str(budget / "generation.json"), "--to", str(to)])
        == to
    )
    document = json.loads(to.read_text(encoding="utf-8"))
    assert document["targets"] == {"peak_device_used_gib": pytest.approx(14.9, abs=0.01), "ms_per_token": 8.0}
    runs = document["runs"]
    assert list(runs) == ["gen-sleep", "gen-awake", "gen-budget"]

    first = runs["gen-sleep"]
    assert first["command"] == "python3 ... --paths eager"
    assert first["device"] == "NVIDIA H200"
    assert first["versions"]["vllm"] == "0.24.0"
    assert first["decoding_ms_per_token"] == {"unmerged": 58.0, "merged": 30.2}
    compiled = first["paths"]["compiled"]
    # Steady state leaves out the first step (compilation, vLLM's start).
    assert compiled["ms_per_token_steady"] == pytest.approx(17.2)
    assert compiled["step_seconds_steady"] == pytest.approx(51.6)
    assert (compiled["full_length"], compiled["within_budget"], compiled["within_8_ms"]) == (
        True,
        True,
        False,
    )
    vllm = first["paths"]["vllm"]
    assert (vllm["within_8_ms"], vllm["within_budget"], vllm["full_length"]) == (True, False, True)
    # The measured peak against the engine's estimate: what the estimates in memory.py must move by.
    assert vllm["peak_minus_estimate_gib"] == pytest.approx(23.76 - 21.4)
    assert vllm["peak_minus_vllm_gib"] == pytest.approx(23.76 - 10.5)
    assert first["vllm_meets_the_targets"] is False
    assert first["raw"]["engine"]["vllm"]["peak_device_used_gib"] == 23.76  # nothing measured is dropped

    # Fast and small, but not like for like (1-token completions): not a pass.
    second = runs["gen-awake"]
    assert second["paths"]["vllm"]["full_length"] is False
    assert second["vllm_meets_the_targets"] is False
    # A budget the estimate refuses is recorded as such, not as a failure of the run.
    assert runs["gen-budget"]["paths"]["vllm"] == {"refused": refused["engine"]["vllm"]["refused"]}
    assert "vllm_meets_the_targets" not in runs["gen-budget"]

    printed = capsys.readouterr().out
    assert "gen-sleep vllm: 4.0 ms/token, peak 23.8 GiB, completions 256.0" in printed
    assert f"wrote {to}" in printed


def test_a_run_that_meets_every_target_says_so(tmp_path: Path) -> None:
    good = engine_run([40.0, 6.0, 6.4], 14.5, [256, 256, 256])
    run = write(tmp_path / "gen", fake_report(good, "c"))
    to = tmp_path / "out.json"
    trl_generation.record([str(run), "--to", str(to)])
    assert json.loads(to.read_text(encoding="utf-8"))["runs"]["gen"]["vllm_meets_the_targets"] is True


def test_record_add_keeps_the_runs_already_recorded(tmp_path: Path) -> None:
    to = tmp_path / "out.json"
    earlier = write(
        tmp_path / "lease-1" / "gen-sleep", fake_report(engine_run([40.0, 6.7, 6.6], 20.0, [256] * 3), "a")
    )
    trl_generation.record([str(earlier), "--to", str(to)])
    turns = write(
        tmp_path / "lease-2" / "gen-turns", fake_report(engine_run([40.0, 6.9, 7.0], 12.4, [256] * 3), "b")
    )
    again = write(
        tmp_path / "lease-2" / "gen-sleep", fake_report(engine_run([40.0, 6.5, 6.5], 19.9, [256] * 3), "c")
    )
    trl_generation.record(["--add", str(turns), str(again), "--to", str(to)])
    runs = json.loads(to.read_text(encoding="utf-8"))["runs"]
    assert list(runs) == ["gen-sleep", "gen-turns"]
    assert runs["gen-sleep"]["command"] == "c"  # a run of the same name is replaced
    assert runs["gen-turns"]["vllm_meets_the_targets"] is True
    # Without --add the summary holds only the runs given.
    trl_generation.record([str(turns), "--to", str(to)])
    assert list(json.loads(to.read_text(encoding="utf-8"))["runs"]) == ["gen-turns"]


def test_record_plots_every_path_against_the_two_targets(tmp_path: Path) -> None:
    turns = write(
        tmp_path / "gen-turns", fake_report(engine_run([40.0, 6.4, 6.6], 12.9, [256] * 3), "taking turns")
    )
    two_copies = write(
        tmp_path / "gen-plain", fake_report(engine_run([40.0, 8.3, 8.5], 19.9, [256] * 3), "two copies")
    )
    short = write(tmp_path / "gen-short", fake_report(engine_run([40.0, 5.0, 5.0], 12.0, [61] * 3), "short"))
    picture = tmp_path / "pictures" / "targets.png"
    to = tmp_path / "out.json"
    trl_generation.record([str(turns), str(two_copies), str(short), "--to", str(to), "--plot", str(picture)])
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    points = {
        label: (peak, ms, meets)
        for label, peak, ms, meets in trl_generation.target_points(json.loads(to.read_text(encoding="utf-8")))
    }
    # eager (11.1 GiB, 71 ms) and compiled (11.7 GiB, 17.2 ms) are in every fake run: within the
    # card, too slow; vLLM taking turns meets both; two copies neither; short completions are fast and
    # small but not like for like, so not a pass either.
    assert points["gen-turns vllm, 256 tokens"] == (12.9, pytest.approx(6.5), True)
    assert points["gen-plain vllm, 256 tokens"] == (19.9, pytest.approx(8.4), False)
    assert points["gen-short vllm, 256 tokens"][2] is False
    assert points["gen-turns eager, 256 tokens"] == (11.1, pytest.approx(71.0), False)
    assert len(points) == 9
    # Without --plot nothing is drawn.
    trl_generation.record([str(turns), "--to", str(tmp_path / "again.json")])
    assert sorted(p.name for p in tmp_path.rglob("*.png")) == ["targets.png"]


def test_record_names_a_folder_the_call_did_not_bring_back(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        trl_generation.record([str(tmp_path / "missing"), "--to", str(tmp_path / "x.json")])


def test_a_budget_sizes_the_benchmarks_vllm_by_the_engines_own_arithmetic() -> None:
    import argparse
    from types import SimpleNamespace

    import torch

    text = {"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128}

    class Model:  # what vllm_sizing reads of the benchmark's model: its parameters and its config
        config = SimpleNamespace(to_dict=lambda: {"text_config": text})

        def parameters(self) -> list[Any]:
            return [torch.zeros(1024, 1024, dtype=torch.bfloat16)]  # 2 MiB of weights

    def sized(budget: float | None, park: bool = False) -> dict[str, Any]:
        args = argparse.Namespace(
            prompt_tokens=1024, new_tokens=256, memory_budget_gib=budget, park_policy=park
        )
        return trl_generation.vllm_sizing(Model(), args)

    # No budget: only the estimate is recorded (2 x 1,280 tokens of KV cache at 144 KiB each).
    assert set(sized(None)) == {"estimate", "parked"}
    assert sized(None)["estimate"]["kv_tokens"] == 2560
    assert sized(None, park=True)["parked"] is True
    assert sized(14.9)["vllm_gib"] == pytest.approx(14.9 - 2 / 1024 - 3.0)
    assert sized(14.9)["parked"] is False
    # Two copies do not fit 4.5 GiB, taking turns does: vLLM gets its least and the headroom.
    turns = sized(4.5)
    assert turns["parked"] is True
    assert turns["vllm_gib"] == pytest.approx(turns["estimate"]["vllm_gib_least"] + 1.0)
    refused = sized(3.5)
    assert refused["refused"].startswith("--memory-budget-gib: 3.5 GiB cannot hold colocated vLLM")
    assert refused["estimate"]["process_gib_least"] > 3.5
