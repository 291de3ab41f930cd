"""The GPU confirmations: one plan of this round's GPU measurements for whatever one-GPU NVIDIA
machine comes, most valuable first, each part's summary written into --out as it finishes.

    yield-verl     save, then yield on verl: the tiny verl job (benchmarks.verl_gpu's) gets a stop
                   request mid-run, written as every Ray pod's preStop hook writes it
                   (grpo_trainer/stopping.py); the step it was in is checkpointed and the attempt
                   exits YIELDED; attempt 2, a new process, starts at the next step; no step is
                   trained twice (the metrics files, read with the trainer's own parser).
    trl-offpolicy  benchmarks.trl_offpolicy's part 1: the share of sequences TRL's sequence_mask
                   drops, merged path against the plan's path, at Qwen3-VL-4B shapes.
    save-4b        the save time of a Qwen3-VL-4B-shaped verl checkpoint (weights and optimiser
                   state; the figure api/stop_bound.py's verl default of 900 s must cover): one
                   step of benchmarks.verl_gpu's shapes-4b job that saves, verl's own
                   timing_s/save_checkpoint and the checkpoint's size.
    trl-learning   benchmarks.trl_offpolicy's part 2: the colour-task learning test on the chosen
                   path against eager's 0.92.

Every device call runs the same command; each call goes on where the last stopped, since every
attempt is a detached process of its own (benchmarks.verl_gpu.attempts) whose folder outlives the
call while the machine stays warm:

    there:  bash benchmarks/gpu_stack.sh receive ... install     # the carried stack (gpu_stack.sh)
            eval "$(bash benchmarks/gpu_stack.sh env)"
            python -m benchmarks.gpu_confirmations next --out "$OUT" [--seconds 540] [--only PART]

`next` writes `<part>.json` for each part it finished and `plan.json` (every part's state and
the device seconds the calls spent on it) into --out on every call, so a machine taken back
halfway still returns what ran.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import YIELDED

from benchmarks.verl_gpu import machine
from benchmarks.verl_gpu.attempts import Attempt, launch, metrics_name
from benchmarks.verl_gpu.machine import log, write_json

PARTS = ("yield-verl", "trl-offpolicy", "save-4b", "trl-learning")
YIELD_STEPS = 4
"""The tiny job's steps: the stop comes in step 2, attempt 2 trains the rest."""
STOP_AFTER_STEP = 1
"""The stop request is written once this step is in the metrics file, so it lands mid-run."""
STATE = machine.WORK / "confirmations.json"
SAVE_KEY = "timing_s/save_checkpoint"


# --- the pure parts: what a part's files say ------------------------------------------------------


def trained_steps(records: Iterable[dict[str, Any]]) -> list[int]:
    """The trained steps of one metrics file, in file order: a validation before training logs
    step 0, and validation-only lines (`val-*` keys only) are no step."""
    return [
        int(r["step"])
        for r in records
        if r["step"] >= 1 and any(not key.startswith("val-") for key in r["data"])
    ]


def steps_exactly_once(first: list[int], second: list[int], total: int, saved: int | None) -> dict[str, Any]:
    """The verdict on a stop and a resume: attempt 1 trained 1..saved and stopped there, attempt 2
    trained saved+1..total, no step twice and none missing."""
    every = first + second
    twice = sorted({s for s in every if every.count(s) > 1})
    missing = sorted(set(range(1, total + 1)) - set(every))
    problems = []
    if saved is None:
        problems.append("attempt 1 wrote no yield record with a saved step")
    elif first[-1:] != [saved]:
        problems.append(f"attempt 1's last step is {first[-1:] or 'none'}, its yield record says {saved}")
    if saved is not None and second[:1] != [saved + 1]:
        problems.append(f"attempt 2 began at step {second[:1] or 'none'}, not {saved + 1}")
    if twice:
        problems.append(f"steps trained twice: {twice}")
    if missing:
        problems.append(f"steps never trained: {missing}")
    return {"ok": not problems, "problems": problems, "attempt_1": first, "attempt_2": second}


def yield_summary(
    record: dict[str, Any] | None,
    exit_codes: tuple[int | None, int | None],
    requested_after: int | None,
    verdict: dict[str, Any],
    checkpointed: int | None,
) -> dict[str, Any]:
    """yield-verl's summary: what attempt 1 saved and how, and the resume's verdict."""
    saved = record.get("step") if record else None
    expected = requested_after + 1 if requested_after is not None else None
    checks = {
        "attempt_1_exit_yielded": exit_codes[0] == YIELDED,
        "attempt_2_exit_ok": exit_codes[1] == 0,
        "saved_the_step_it_was_in": saved is not None and saved == expected,
        "checkpoint_is_that_step": checkpointed is not None and checkpointed == saved,
        "no_step_lost": bool(record) and record.get("stepsLost") == 0,
        "every_step_once": verdict["ok"],
    }
    return {
        "ok": all(checks.values()),
        "checks": checks,
        "stop_requested_after_step": requested_after,
        "yield_record": record,
        "save_seconds": record.get("saveSeconds") if record else None,
        "exit_codes": list(exit_codes),
        "steps": verdict,
    }


def save_summary(records: list[dict[str, Any]], checkpoint_bytes: int) -> dict[str, Any]:
    """save-4b's summary: verl's own time for each save, and what it wrote."""
    seconds = [float(r["data"][SAVE_KEY]) for r in records if SAVE_KEY in r["data"]]
    return {
        "ok": bool(seconds),
        "save_seconds": seconds,
        "checkpoint_gib": round(checkpoint_bytes / 2**30, 2),
        "verl_default_bound_seconds": 900,
    }


def plan_entry(state: dict[str, Any], part: str) -> dict[str, Any]:
    return state.setdefault(part, {"state": "waiting", "device_seconds": 0.0})


def next_part(state: dict[str, Any], only: str | None = None) -> str | None:
    """The first part, in the plan's order, that has not finished."""
    for part in PARTS if only is None else (only,):
        if plan_entry(state, part)["state"] != "done":
            return part
    return None


# --- the machine's side ---------------------------------------------------------------------------


def _metrics(path: Path | None) -> list[dict[str, Any]]:
    from benchmarks.verl_gpu.summaries import metrics

    return metrics(path) if path is not None else []


def _metrics_file(work: Path, attempt: int) -> Path | None:
    return next(iter((work / "grpo").rglob(metrics_name(attempt))), None)


def _tiny_job(work: Path) -> Path:
    from benchmarks.verl_gpu.inputs import build_geo3k, build_model, spec, write_spec
    from benchmarks.verl_gpu.parts import tiny_sizes

    sizes = tiny_sizes(argparse.Namespace(gpus=1, strategy="fsdp2", engine_override=[], reward="geo3k"), work)
    # No periodic save before the stop: the checkpoint of the stopped step is the stop's own.
    sizes.update(save=YIELD_STEPS * 10, export=False)
    model = build_model(work / "models" / "qwen3-vl-tiny", "tiny", False)
    data = build_geo3k(work / "geo3k-hub", train=64, test=8, side=64)
    return write_spec(work / "job.yaml", spec("verl-yield", model, data, 1, steps=YIELD_STEPS, **sizes))


def _start(part: str, number: int, args: list[str]) -> None:
    from benchmarks.verl_gpu.parts import grpo_train_command

    command, env = grpo_train_command(args)
    launch(Attempt(part, number), command, {**env, "GRPO_ATTEMPT": str(number)})


def step_yield(entry: dict[str, Any], out: Path) -> bool:
    """One call's share of yield-verl; True once its summary is written."""
    from grpo_trainer.stopping import AttemptFiles

    work = machine.WORK / "yield-verl"
    first, second = Attempt("yield-verl", 1), Attempt("yield-verl", 2)
    run = ["run", "--spec", str(work / "job.yaml"), "--workdir", str(work), "--no-report"]
    if not first.folder.is_dir():
        _tiny_job(work)
        _start("yield-verl", 1, run)
        return False
    metrics_1 = _metrics_file(work, 1)
    if first.rc() is None:
        done = trained_steps(_metrics(metrics_1))
        if metrics_1 is not None and "requested_after" not in entry and done and done[-1] >= STOP_AFTER_STEP:
            # As the pods' hook writes it: the attempt sees it at the end of the step it is in.
            AttemptFiles(metrics_1).request_stop(600, by="benchmarks.gpu_confirmations")
            entry["requested_after"] = done[-1]
            log(f"yield-verl: stop requested after step {done[-1]}")
        return False
    if not second.folder.is_dir():
        _start("yield-verl", 2, run)
        return False
    if second.rc() is None:
        return False
    files = AttemptFiles(metrics_1) if metrics_1 else None
    record = json.loads(files.yield_record.read_text()) if files and files.yield_record.is_file() else None
    saved = record.get("step") if record else None
    # verl's tracker file names the newest checkpoint, which after attempt 2 is its own final
    # save; only attempt 1 can have written the yielded step's folder (attempt 2 starts after it).
    checkpointed = saved if saved is not None and _checkpoint_folder(work, saved) else None
    steps_1 = trained_steps(_metrics(metrics_1))
    steps_2 = trained_steps(_metrics(_metrics_file(work, 2)))
    verdict = steps_exactly_once(steps_1, steps_2, YIELD_STEPS, record.get("step") if record else None)
    summary = yield_summary(
        record, (first.rc(), second.rc()), entry.get("requested_after"), verdict, checkpointed
    )
    write_json(out / "yield-verl.json", summary)
    return True


def _checkpoint_folder(work: Path, step: int) -> bool:
    """Whether verl's checkpoint of `step` is under `work` (its global_step_<n> folder, not empty)."""
    return any(p.is_dir() and any(p.iterdir()) for p in work.rglob(f"global_step_{step}"))


FAILURE_LINES = 60


def failure_tail(attempt: Attempt) -> dict[str, Any]:
    """For a part whose attempt failed: the end of its output, so the summary says why without the
    machine (which is gone by the time anyone reads it)."""
    if attempt.rc() in (0, None):
        return {}
    log_file = attempt.folder / "supervisor.log"
    lines = log_file.read_text(errors="replace").splitlines() if log_file.is_file() else []
    return {"log_tail": lines[-FAILURE_LINES:]}


def step_save(entry: dict[str, Any], out: Path) -> bool:
    """One call's share of save-4b; True once its summary is written."""
    from benchmarks.verl_gpu.inputs import spec, write_spec
    from benchmarks.verl_gpu.parts import inputs_4b, sizes_4b

    attempt = Attempt("save-4b", 1)
    work = machine.WORK / "shapes-4b"
    if not attempt.folder.is_dir():
        options = argparse.Namespace(
            gpus=1, steps=1, response_length=1024, image_side=896, prompts="varied", train_rows=0,
            omp_threads=0, engine_override=[], strategy="fsdp2", actor_offload=True, smoke=False,
        )  # fmt: skip
        _, model, _ = inputs_4b(options, "save-4b")
        sizes = {**sizes_4b(options), "save": 1, "overrides": []}  # verl saves after its one step
        data = next(work.glob("geo3k-hub-varied"))
        job = write_spec(work / "job-save.yaml", spec("verl-4b-save", model, data, 1, steps=1, **sizes))
        _start("save-4b", 1, ["run", "--spec", str(job), "--workdir", str(work), "--no-report"])
        return False
    if attempt.rc() is None:
        return False
    folders = [p for p in work.rglob("global_step_1") if p.is_dir()]
    size = sum(f.stat().st_size for folder in folders for f in folder.rglob("*") if f.is_file())
    write_json(
        out / "save-4b.json",
        {
            **save_summary(_metrics(_metrics_file(work, 1)), size),
            "exit_code": attempt.rc(),
            **failure_tail(attempt),
        },
    )
    return True


def _trl(part: str, extra: list[str]) -> Callable[[dict[str, Any], Path], bool]:
    def step(entry: dict[str, Any], out: Path) -> bool:
        attempt = Attempt(part, 1)
        if not attempt.folder.is_dir():
            command = [sys.executable, "-m", "benchmarks.trl_offpolicy", "--out", str(out / part), *extra]
            launch(attempt, command, {})
            return False
        if attempt.rc() is None:
            return False
        write_json(
            out / f"{part}.json",
            {
                "ok": attempt.rc() == 0,
                "exit_code": attempt.rc(),
                "report": f"{part}/offpolicy.json",
                **failure_tail(attempt),
            },
        )
        return True

    return step


STEPS: dict[str, Callable[[dict[str, Any], Path], bool]] = {
    "yield-verl": step_yield,
    "trl-offpolicy": _trl("trl-offpolicy", []),
    "save-4b": step_save,
    "trl-learning": _trl("trl-learning", ["--parts", "learning"]),
}
assert tuple(STEPS) == PARTS


def run_next(out: Path, seconds: float, only: str | None) -> int:
    from benchmarks.verl_gpu.stack import preflight

    out.mkdir(parents=True, exist_ok=True)
    if preflight(out):
        return 3
    state = json.loads(STATE.read_text()) if STATE.is_file() else {}
    began = time.monotonic()
    while (part := next_part(state, only)) is not None:
        entry = plan_entry(state, part)
        entry["state"] = "running"
        tick = time.monotonic()
        finished = STEPS[part](entry, out)
        if finished:
            entry["state"] = "done"
        entry["device_seconds"] = round(entry["device_seconds"] + time.monotonic() - tick, 1)
        write_json(STATE, state)
        write_json(out / "plan.json", state)
        if time.monotonic() - began > seconds:
            break
        if not finished:  # a detached attempt is working: look again shortly
            time.sleep(10)
            entry["device_seconds"] = round(entry["device_seconds"] + 10, 1)
    log(f"plan: {json.dumps({p: plan_entry(state, p)['state'] for p in PARTS})}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_confirmations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("verb", choices=["next"])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu-confirmations")))
    parser.add_argument("--seconds", type=float, default=540, help="how long this call may follow the plan")
    parser.add_argument("--only", choices=PARTS, help="only this part")
    args = parser.parse_args(argv)
    return run_next(args.out, args.seconds, args.only)


if __name__ == "__main__":
    sys.exit(main())
