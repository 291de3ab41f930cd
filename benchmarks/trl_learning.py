"""The learning test at full size: GRPO on the colour task with and without the vision layers.

Writes `learning.json` (per-step mean reward of both runs and the verdict) and `learning.png`
(both curves, the blind optimum and the 0.9 target) under `--out`.

    python -m benchmarks.trl_learning --out /tmp/learning            # GPU, full
    python -m benchmarks.trl_learning --out /tmp/l --steps 5 --small  # CPU smoke
    # the same test with the fast rollout paths (GPU; vLLM from the carried stack):
    python -m benchmarks.trl_learning --out /tmp/learning-vllm --generation vllm
    # ... with the policy's weights in host memory while vLLM generates (the 16 GB layout at 4B):
    python -m benchmarks.trl_learning --out /tmp/l --generation vllm --park-policy
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from . import paths

TARGET = 0.9
WINDOW = 10


def plot(out: Path, curves: dict[str, list[float]], blind: float, generation: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for label, curve in curves.items():
        axes.plot(range(1, len(curve) + 1), curve, label=label, linewidth=1.2)
    axes.axhline(blind, color="grey", linestyle=":", label=f"blind optimum ({blind:.2f})")
    axes.axhline(TARGET, color="black", linestyle="--", label=f"target ({TARGET})")
    axes.set_xlabel("GRPO step")
    axes.set_ylabel("mean reward (max 1)")
    axes.set_ylim(-0.02, 1.02)
    axes.set_title(f"TRL engine: colour-of-the-square task, tiny Qwen3-VL, rollouts {generation}")
    axes.legend(loc="center right", fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "learning.png", dpi=120)


RUNS = {"vision LoRA": True, "vision frozen + detached": False}
"""The two runs, by their label in the report, and whether the vision layers train."""


def run_one(args: argparse.Namespace) -> None:
    """One run in this process (`--run LABEL`): its curve and seconds into `--work`/<run>.json."""
    import torch
    from grpo_trainer.testing.learning import CI_PLAN, GPU_PLAN, build_model_dir, run_colour_grpo

    work = Path(args.work)
    base = CI_PLAN if args.small else GPU_PLAN
    plan = replace(
        base,
        steps=args.steps or base.steps,
        bf16=torch.cuda.is_available() and not args.small,
        generation=args.generation,
        park_policy=args.park_policy,
    )
    model_dir = build_model_dir(work, plan)  # the same seed, so the same model in both runs
    started = time.perf_counter()
    curve, _ = run_colour_grpo(work, model_dir, plan, vision=RUNS[args.run])
    result = {
        "curve": curve,
        "seconds": time.perf_counter() - started,
        "plan": {k: str(v) for k, v in vars(plan).items()},
    }
    (work / f"{_slug(args.run)}.json").write_text(json.dumps(result), encoding="utf-8")


def _slug(label: str) -> str:
    return "vision" if RUNS[label] else "control"


def report_of(args: argparse.Namespace, runs: dict[str, dict]) -> dict:
    """learning.json from the runs that finished (a run cut short leaves its curve out)."""
    from grpo_trainer.testing.colour_task import blind_optimum
    from grpo_trainer.testing.learning import window_mean

    curves = {label: run["curve"] for label, run in runs.items()}
    full = curves.get("vision LoRA", [])
    control = curves.get("vision frozen + detached", [])
    first_at_target = next(
        (i + 1 for i in range(WINDOW - 1, len(full)) if window_mean(full[: i + 1], WINDOW) >= TARGET), None
    )
    return {
        "plan": next(iter(runs.values()))["plan"] if runs else None,
        "device": _device(),
        "generation": args.generation,
        "park_policy": args.park_policy,
        "blind_optimum": blind_optimum(),
        "target": TARGET,
        "window": WINDOW,
        "vision_first10_mean": window_mean(full[:WINDOW], WINDOW) if full else None,
        "vision_last_window_mean": window_mean(full, WINDOW) if full else None,
        "vision_first_step_window_at_target": first_at_target,
        "control_last_window_mean": window_mean(control, WINDOW) if control else None,
        "control_max_window_mean": max(
            window_mean(control[: i + 1], WINDOW) for i in range(WINDOW - 1, len(control))
        )
        if len(control) >= WINDOW
        else None,
        "seconds": {label: run["seconds"] for label, run in runs.items()},
        "curves": curves,
    }


def _device() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="learning.json and learning.png")
    parser.add_argument(
        "--work", default=None, help="the model, checkpoints and metrics of both runs (default: OUT/work)"
    )
    parser.add_argument("--steps", type=int, default=None, help="default: the plan's")
    parser.add_argument("--small", action="store_true", help="the CI plan's sizes (the CPU test's)")
    parser.add_argument(
        "--generation",
        choices=["eager", "compiled", "vllm"],
        default="eager",
        help="the rollout path both runs generate with (spec.rollout.generation)",
    )
    parser.add_argument(
        "--park-policy",
        action="store_true",
        help="vllm only: the policy's weights wait in host memory while vLLM generates (as at 4B in 16 GB)",
    )
    parser.add_argument("--run", choices=sorted(RUNS), default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.work = args.work or str(out / "work")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.run:
        run_one(args)
        return

    # Each run in a process of its own: colocated vLLM's sleep mode allows one engine per process
    # (its CuMem allocator), and nothing of the first run's state can reach the second.
    runs: dict[str, dict] = {}
    for label in RUNS:
        print(f"[learning] {label}: {args.generation} rollouts", flush=True)
        command = [
            sys.executable,
            "-m",
            "benchmarks.trl_learning",
            *sys.argv[1:],
            "--work",
            args.work,
            "--run",
            label,
        ]
        code = subprocess.call(command, cwd=paths.REPO)
        done = Path(args.work) / f"{_slug(label)}.json"
        if code != 0 or not done.exists():
            print(f"[learning] {label} failed (exit code {code})", flush=True)
            continue
        runs[label] = json.loads(done.read_text(encoding="utf-8"))
        # After every run, so a run cut short keeps what the first one measured.
        report = report_of(args, runs)
        (out / "learning.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        plot(out, report["curves"], report["blind_optimum"], args.generation)
    if len(runs) != len(RUNS):
        raise SystemExit("[learning] not every run finished: learning.json holds the ones that did")
    print(json.dumps({k: v for k, v in report_of(args, runs).items() if k != "curves"}, indent=2))


if __name__ == "__main__":
    main()
