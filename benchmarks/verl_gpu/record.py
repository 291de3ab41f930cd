"""`record`: the committed summary of a 4B run (docs/benchmarks/data/verl-4b-<N>gpu.json), from
the `wait` summaries and logs a device call brought back."""

from __future__ import annotations

import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from grpo_trainer import metric_keys

from benchmarks import paths
from benchmarks.paths import DATA

from .attempts import metrics_name
from .machine import log, write_json
from .monitor import gpu_per_step
from .phases import STARTUP_END, STEP_END, phases

STEP_KEYS = (
    metric_keys.TIMING_PREFIX,
    metric_keys.THROUGHPUT,
    metric_keys.MAX_MEMORY_PREFIX,
    metric_keys.RESPONSE_LENGTH,
    metric_keys.PROMPT_LENGTH,
)


def logged_steps(archive: Path, attempt: str) -> list[dict[str, Any]]:
    """verl's own per-step metrics for an attempt, from the logs a `wait` call archived (ours under
    the job's metrics folder, raw verl's in its attempt's folder: one name, the contract's)."""
    from grpo_trainer.progress import parse_line  # pydantic and YAML, which the GPU machine may lack

    if not archive.is_file():
        return []
    name = "/" + metrics_name(attempt_number(attempt))
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.name.endswith(name):
                text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
                found = (parse_line(line) for line in text.splitlines())
                return [{"step": step, **data} for step, data in filter(None, found)]
    return []


def logged_gpu(archive: Path, attempt: str, step_seconds: dict[int, float]) -> dict[int, dict[str, Any]]:
    """What the GPU monitor saw in each step of an attempt (gpu_per_step), from its archived
    `gpu.log` and output; {} for a run without them (no nvidia-smi, or older)."""
    if not archive.is_file():
        return {}
    folder = f"{attempt.replace('_', '-')}/"
    files: dict[str, str] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            for name in ("gpu.log", "output.log"):
                if member.name.endswith(folder + name):
                    files[name] = tar.extractfile(member).read().decode(errors="replace")  # type: ignore[union-attr]
    if len(files) < 2:
        return {}
    ends = {int(m[2]): float(m[1]) for m in map(STEP_END.match, files["output.log"].splitlines()) if m}
    return gpu_per_step(files["gpu.log"], ends, step_seconds)


def logged_phases(archive: Path, attempt: str) -> dict[str, float | None]:
    """The start-up phases of an attempt, re-read from its archived output (the marks may have
    been refined since the run)."""
    if not archive.is_file():
        return {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.name.endswith(f"{attempt.replace('_', '-')}/output.log"):
                with tempfile.NamedTemporaryFile("wb", suffix=".log") as copy:
                    copy.write(tar.extractfile(member).read())  # type: ignore[union-attr]
                    copy.flush()
                    return phases(Path(copy.name))
    return {}


def attempt_number(name: str) -> int:
    """`attempt_12` -> 12, so attempts sort as numbers, not as text."""
    return int(name.rsplit("_", 1)[1])


def retry_ratios(first: dict[str, Any], later: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every retry's ratio against the one cold attempt, and the mean retry's: the figure to hold
    against a target, since two retries of one machine have differed by a tenth of the cold time."""
    each = {"attempt_2": first, **later}
    mean_retry_s = sum(pair["retry_s"] for pair in each.values()) / len(each)
    return {
        "each": {name: pair["ratio"] for name, pair in each.items()},
        "mean_retry_s": round(mean_retry_s, 1),
        "mean_ratio": round(mean_retry_s / first["cold_s"], 3),
    }


def startup_against_cold(cold: dict[str, Any], retry: dict[str, Any]) -> dict[str, Any]:
    """What a retry pays before its first step, against the cold attempt: the time until step 1
    began (its line's stamp less its own step time), each phase's share, and the ratio.

    A pair stopped at the end of its start-up (`wait --stop-at-startup`) has no step: both are
    then measured to the rollout server's mark, the last one before step 1 (1.8 s before it in
    the cold attempt of the geo3k recipe's rows that ran to its step)."""
    to_step = bool(cold["steps"] and retry["steps"])

    def before_first_step(run: dict[str, Any]) -> float:
        if not to_step:
            return round(run["startup_s"][STARTUP_END], 1)
        first = run["steps"][0]
        return round(run["startup_s"]["first_step"] - run["timing_s"][first][metric_keys.STEP_SECONDS], 1)

    def phases(run: dict[str, Any]) -> dict[str, float]:
        marks = run["startup_s"]
        names = [name for name in marks if name != "first_step"]
        ends = [marks[name] for name in names]
        starts = [0.0, *ends[:-1]]
        return {name: round(end - start, 1) for name, start, end in zip(names, starts, ends, strict=True)}

    cold_s, retry_s = before_first_step(cold), before_first_step(retry)
    return {
        "measured_to": "step 1" if to_step else f"the {STARTUP_END} mark",
        "cold_s": cold_s,
        "retry_s": retry_s,
        "ratio": round(retry_s / cold_s, 3),
        "cold_phases_s": phases(cold),
        "retry_phases_s": phases(retry),
    }


def train_file(overrides: list[str]) -> str | None:
    """The parquet file a run trained on, from its engine command (ours gives a one-item list)."""
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "data.train_files":
            return value.strip("[]'\"")
    return None


def vllm_executor(overrides: list[str]) -> str:
    """The executor vLLM's server ran with: the engine command's own value, else verl's ("mp")."""
    from grpo_trainer.engines.verl.overrides import VLLM_EXECUTOR_KEY

    for item in overrides:
        key, _, value = item.partition("=")
        if key.lstrip("+") == VLLM_EXECUTOR_KEY:
            return value.strip("'\"")
    return "mp"


def last_completed(found: dict[str, Any]) -> str:
    """The newest attempt that ended with exit code 0 (an earlier one may have failed to start)."""
    done = [name for name, one in found["attempts"].items() if one["exit_code"] == 0]
    return max(done or list(found["attempts"]), key=attempt_number)


def steady_difference(ours: dict[str, Any], raw: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each steady-state timing of ours against raw verl's: seconds each and the difference."""
    out = {}
    for key, value in ours["steady_state"].items():
        if key.endswith("_s"):
            other = raw["steady_state"][key]
            out[key] = {"ours": value, "raw_verl": other, "difference": round(value - other, 2)}
    return out


MAIN_RUN_KEYS = (
    "machine", "gpus", "attention", "shapes", "ours", "raw_verl", "ours_retry", "retry_startup",
    "overhead_pct", "same_data",
)  # fmt: skip
"""The keys of a summary's main run; every other key is a section that `record` keeps."""


def _run_summary(source: Path, found: dict[str, Any], attempt: str = "attempt_1") -> dict[str, Any]:
    """One run's figures (an attempt of `found`, a `wait` summary), per step from its logs archive
    in `source` where it has one."""
    one = found["attempts"][attempt]
    archive = source / f"{found['part']}-logs.tar.gz"
    per_step = logged_steps(archive, attempt) or one["per_step"]
    startup_s = logged_phases(archive, attempt) or one["startup_s"]
    if not per_step:  # stopped or failed before a step ended: its start-up, and why it ended
        return {
            "exit_code": one["exit_code"],
            "steps": [],
            "startup_s": startup_s,
            "train_file": train_file(one["engine_overrides"]),
            "vllm_executor": vllm_executor(one["engine_overrides"]),
            "jit_builds": one.get("jit_builds", []),
            **{key: one[key] for key in ("failure", "host") if one.get(key)},
        }
    steps = [{k: v for k, v in step.items() if k == "step" or k.startswith(STEP_KEYS)} for step in per_step]
    steady = steps[1:] or steps
    mean = lambda key: round(sum(s[key] for s in steady) / len(steady), 2)  # noqa: E731
    return {
        "exit_code": one["exit_code"],
        "steps": [s["step"] for s in steps],
        "timing_s": {
            s["step"]: {k: round(v, 2) for k, v in s.items() if k.startswith(metric_keys.TIMING_PREFIX)}
            for s in steps
        },
        "throughput": {s["step"]: round(s[metric_keys.THROUGHPUT], 1) for s in steps},
        "peak_memory_gb": {
            "allocated": max(s[metric_keys.MAX_MEMORY_ALLOCATED] for s in steps),
            "reserved": max(s[metric_keys.MAX_MEMORY_RESERVED] for s in steps),
        },
        "steady_state": {
            "steps": [s["step"] for s in steady],
            "step_s": mean(metric_keys.STEP_SECONDS),
            "gen_s": mean(metric_keys.GENERATION_SECONDS),
            "old_log_prob_s": mean(metric_keys.OLD_LOG_PROB_SECONDS),
            "ref_s": mean(metric_keys.REFERENCE_SECONDS),
            "update_actor_s": mean(metric_keys.UPDATE_ACTOR_SECONDS),
            "tokens_per_s_per_gpu": mean(metric_keys.THROUGHPUT),
        },
        "startup_s": startup_s,
        "gpu_per_step": logged_gpu(
            archive,
            attempt,
            {s["step"]: s[metric_keys.STEP_SECONDS] for s in steps},
        ),
        "train_file": train_file(one["engine_overrides"]),
        "vllm_executor": vllm_executor(one["engine_overrides"]),
        "jit_builds": one.get("jit_builds", []),
        "tokens_per_sequence": {
            "prompt_mean": mean(metric_keys.PROMPT_LENGTH),
            "response_mean": mean(metric_keys.RESPONSE_LENGTH),
        },
    }


def record(source: Path, gpus: int, section: str | None = None, previous_as: str | None = None) -> int:
    """Here: the committed summary of a 4B run (docs/benchmarks/data/verl-4b-<N>gpu.json) from the
    `wait` summaries a device call brought back (`shapes-4b-summary.json`, `raw-4b-summary.json`).

    With `section`, the pair (ours and raw verl, from one machine; or ours and its retry, for the
    start-up a retry saves), or ours alone when there is neither, goes under that key of the
    existing summary and the rest of it is kept: a run at other shapes or settings than the
    summary's own (a shorter response, to fit both runs in one machine's time) must not replace them.
    Without it, the new run becomes the main one and the sections stay; `previous_as` keeps the
    main run it replaces under that key (a run with other attention, say), so no measurement is
    lost by recording a newer one."""
    ours = json.loads((source / "shapes-4b-summary.json").read_text())
    raw_file = source / "raw-4b-summary.json"
    raw = json.loads(raw_file.read_text()) if raw_file.is_file() else None

    summary = {
        "machine": ours["machine"],
        "gpus": gpus,
        "attention": ours["attention"],
        "shapes": ours["shapes"],
        "ours": _run_summary(source, ours),
        "raw_verl": _run_summary(source, raw, last_completed(raw)) if raw else None,
    }
    if "attempt_2" in ours["attempts"]:
        summary["ours_retry"] = retry = _run_summary(source, ours, "attempt_2")
        summary["retry_startup"] = startup_against_cold(summary["ours"], retry)
        later = [name for name in sorted(ours["attempts"], key=attempt_number) if attempt_number(name) > 2]
        if later:  # more retries on the same machine: one pair is one sample of a noisy ratio
            summary["later_retries_startup"] = {
                name: startup_against_cold(summary["ours"], _run_summary(source, ours, name))
                for name in later
            }
            summary["retry_ratios"] = retry_ratios(summary["retry_startup"], summary["later_retries_startup"])
    if raw:
        ours_s, raw_s = (
            summary["ours"]["steady_state"]["step_s"],
            summary["raw_verl"]["steady_state"]["step_s"],
        )
        summary["overhead_pct"] = round(100 * (ours_s - raw_s) / raw_s, 2)
        summary["same_data"] = summary["ours"]["train_file"] == summary["raw_verl"]["train_file"]
        if not summary["same_data"]:
            log("ours and raw verl trained on different files: their steps are different batches")
    target = DATA / f"verl-4b-{gpus}gpu.json"
    kept = json.loads(target.read_text()) if target.is_file() else {}
    if section and previous_as:
        raise SystemExit("record: --section adds a pair beside the main run; --previous-as replaces it")
    if not section:
        sections = {key: value for key, value in kept.items() if key not in MAIN_RUN_KEYS}
        if previous_as:
            if previous_as in MAIN_RUN_KEYS or previous_as in sections:
                raise SystemExit(f"record --previous-as {previous_as}: that key is taken")
            previous = {key: value for key, value in kept.items() if key in MAIN_RUN_KEYS}
            if not previous:
                raise SystemExit(f"record --previous-as {previous_as}: {target.name} holds no main run")
            sections[previous_as] = previous
        summary = {**summary, **sections}
    elif raw:
        pair = {key: summary[key] for key in ("machine", "attention", "shapes", "ours", "raw_verl")}
        pair["overhead_pct"] = summary["overhead_pct"]
        pair["same_data"] = summary["same_data"]
        pair["per_phase_s"] = steady_difference(pair["ours"], pair["raw_verl"])
        summary = {**kept, section: pair}
    else:  # ours, with its retries when it has them (the start-up they save), or alone
        retries = ("ours_retry", "retry_startup", "later_retries_startup", "retry_ratios")
        keys = ("machine", "attention", "shapes", "ours", *(key for key in retries if key in summary))
        summary = {**kept, section: {key: summary[key] for key in keys}}
        log(f"section {section}: {', '.join(keys[3:])} (no raw-4b-summary.json in {source})")
    write_json(target, summary)
    log(f"wrote {paths.shown(target)}")
    return 0
