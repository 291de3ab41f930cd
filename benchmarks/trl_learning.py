"""The learning test at full size: GRPO on the colour task with and without the vision layers.

Writes `learning.json` (per-step mean reward of both runs and the verdict) and `learning.png`
(both curves, the blind optimum and the 0.9 target) under `--out`.

    PYTHONPATH=trainer:operator python benchmarks/trl_learning.py --out /tmp/learning            # GPU, full
    PYTHONPATH=trainer:operator python benchmarks/trl_learning.py --out /tmp/l --steps 5 --small  # CPU smoke
    # the same test with the fast rollout paths (GPU; vLLM from the carried stack):
    PYTHONPATH=trainer:operator python benchmarks/trl_learning.py --out /tmp/learning-vllm --generation vllm
    # ... with the policy's weights in host memory while vLLM generates (the 16 GB layout at 4B):
    PYTHONPATH=trainer:operator python benchmarks/trl_learning.py --out /tmp/l --generation vllm --park-policy
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
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
    args = parser.parse_args()

    import torch
    from grpo_trainer.testing.colour_task import blind_optimum
    from grpo_trainer.testing.learning import CI_PLAN, GPU_PLAN, build_model_dir, run_colour_grpo, window_mean

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = CI_PLAN if args.small else GPU_PLAN
    plan = replace(
        base,
        steps=args.steps or base.steps,
        bf16=torch.cuda.is_available() and not args.small,
        generation=args.generation,
        park_policy=args.park_policy,
    )
    model_dir = build_model_dir(out, plan)
    curves: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for label, vision in (("vision LoRA", True), ("vision frozen + detached", False)):
        started = time.perf_counter()
        curves[label], _ = run_colour_grpo(out, model_dir, plan, vision=vision)
        seconds[label] = time.perf_counter() - started
    blind = blind_optimum()
    full, control = curves["vision LoRA"], curves["vision frozen + detached"]
    first_at_target = next(
        (i + 1 for i in range(WINDOW - 1, len(full)) if window_mean(full[: i + 1], WINDOW) >= TARGET), None
    )
    report = {
        "plan": {k: str(v) for k, v in vars(plan).items()},
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "generation": args.generation,
        "park_policy": args.park_policy,
        "blind_optimum": blind,
        "target": TARGET,
        "window": WINDOW,
        "vision_first10_mean": window_mean(full[:WINDOW], WINDOW),
        "vision_last_window_mean": window_mean(full, WINDOW),
        "vision_first_step_window_at_target": first_at_target,
        "control_last_window_mean": window_mean(control, WINDOW),
        "control_max_window_mean": max(
            window_mean(control[: i + 1], WINDOW) for i in range(WINDOW - 1, len(control))
        )
        if len(control) >= WINDOW
        else None,
        "seconds": seconds,
        "curves": curves,
    }
    (out / "learning.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    plot(out, curves, blind, args.generation)
    print(json.dumps({k: v for k, v in report.items() if k != "curves"}, indent=2))


if __name__ == "__main__":
    main()
