"""Peak GPU memory and seconds per step of the single-GPU LoRA recipe's TRL recipe on a Qwen3-VL-4B-shaped model.

The model has Qwen3-VL-4B-Instruct's shapes with random weights (memory and speed do not depend on
the values), LoRA r=16 on the vision encoder, projector and language layers, G=2, prompts of
`--prompt-tokens` (image placeholders included) and `--completion-tokens` new tokens, gradient
checkpointing, bf16: the single-GPU LoRA recipe's configuration through the engine's own code path. A random
model never emits its end token, so every completion runs to the full length, the worst case.

One run per optimiser in `--optims` (default: `adamw_torch` then `adamw_8bit`, the single-GPU LoRA recipe's, which
needs bitsandbytes), on the same model, so the optimiser's memory effect is read off one process:
peak allocated per run and the optimiser state's size. `--generation` picks the engine's rollout
path (`compiled` shortens the run; the memory peak is in the loss and backward either way).

    python -m benchmarks.trl_memory_4b --out /tmp/mem4b
    python -m benchmarks.trl_memory_4b --shape tiny --steps 2 \
        --prompt-tokens 64 --completion-tokens 8 --image-side 64 --optims adamw_torch \
        --out /tmp/mem-smoke   # CPU smoke
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from grpo_trainer import metric_keys

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

GIB = 1024**3


def filler_rows(processor: Any, count: int, prompt_tokens: int, image_side: int) -> list[dict[str, Any]]:
    """Rows whose prompt (chat markup + image placeholders + text) is exactly `prompt_tokens` long."""
    from grpo_trainer.engines.trl.data import prompt_length
    from PIL import Image

    rng = random.Random(0)
    rows = []
    for _ in range(count):
        image = Image.frombytes("RGB", (image_side, image_side), rng.randbytes(image_side * image_side * 3))
        row: dict[str, Any] = {"prompt": [{"role": "user", "content": ""}], "image": image, "answer": "0"}
        overhead = prompt_length(processor, row)
        if overhead > prompt_tokens:
            raise SystemExit(f"the image alone takes {overhead} tokens, more than --prompt-tokens")
        row["prompt"] = [{"role": "user", "content": " ".join(["the"] * (prompt_tokens - overhead))}]
        rows.append(row)
    return rows


def time_generation(cuda: bool) -> dict[int, float]:
    """Time TRL's generation call per step (the rest of a step is scoring, loss and backward).

    TRL's own profiling goes only to wandb/trackio, so the benchmark wraps the method itself.
    """
    import torch
    from trl import GRPOTrainer

    seconds: dict[int, float] = {}
    original = GRPOTrainer._generate_single_turn

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        if cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        result = original(self, *args, **kwargs)
        if cuda:
            torch.cuda.synchronize()
        step = self.state.global_step + 1
        seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - started
        return result

    GRPOTrainer._generate_single_turn = timed  # type: ignore[method-assign]
    return seconds


def random_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """Distinct rewards within each group, so advantages are non-zero and the full backward runs."""
    return [random.random() for _ in completions]


def run_once(
    model: Any, processor: Any, args: argparse.Namespace, optim: str, out: Path, cuda: bool
) -> tuple[dict[str, Any], Any]:
    """Train `args.steps` steps with one optimiser; return the report and the model without LoRA."""
    import torch
    from grpo_trainer.engines.trl.metrics import LOCAL_METRICS_FILE, read_records
    from grpo_trainer.engines.trl.runner import RunRequest, train
    from grpo_trainer.engines.trl.settings import TrlSettings
    from transformers import TrainerCallback

    run_dir = out / optim
    for stale in ("_cache", "_compiled_call", "_last_compile_config"):  # a previous run's compiled decoding
        if hasattr(model, stale):
            delattr(model, stale)
    samples: list[dict[str, float]] = []
    generation_seconds = time_generation(cuda)
    steps_file = out / f"memory-steps-{optim}.jsonl"
    steps_file.unlink(missing_ok=True)

    class MemoryProbe(TrainerCallback):
        def on_train_begin(
            self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
        ) -> None:
            samples.append(
                {"trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad)}
            )
            if cuda:
                torch.cuda.reset_peak_memory_stats()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if cuda:
                samples.append(
                    {
                        "step": state.global_step,
                        "peak_allocated_gib": torch.cuda.max_memory_allocated() / GIB,
                        "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
                        "generation_seconds": generation_seconds.get(state.global_step, 0.0),
                    }
                )
                # Written as it goes, so a run cut short by a time limit still leaves its numbers.
                with steps_file.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(samples[-1]) + "\n")

    settings = replace(
        TrlSettings(),
        output_dir=str(run_dir / "checkpoints"),
        max_steps=args.steps,
        save_steps=10**6,
        max_prompt_length=args.prompt_tokens,
        max_completion_length=args.completion_tokens,
        bf16=cuda,
        gradient_checkpointing=not args.no_gradient_checkpointing,
        optim=optim,
        generation=args.generation,
    )
    if cuda:
        torch.cuda.empty_cache()
    request = RunRequest(
        settings=settings,
        model_path="(built in memory)",
        rows=filler_rows(processor, args.steps, args.prompt_tokens, args.image_side),
        reward_funcs=[random_reward],
        metrics_path=str(run_dir / LOCAL_METRICS_FILE),
        policy=(model, processor),
        callbacks=[MemoryProbe()],
    )
    result = train(request)
    optimizer_state_bytes = sum(
        value.numel() * value.element_size()
        for state in result.trainer.optimizer.state.values()
        for value in state.values()
        if torch.is_tensor(value)
    )
    steps = [r for r in read_records(run_dir / LOCAL_METRICS_FILE) if "data" in r]
    step_seconds = [
        r["data"][metric_keys.STEP_SECONDS] for r in steps if metric_keys.STEP_SECONDS in r["data"]
    ]
    steady = step_seconds[1:] or step_seconds
    report = {
        "optim": optim,
        "generation": args.generation,
        "trainable_params": samples[0]["trainable_params"] if samples else None,
        "optimizer_state_gib": optimizer_state_bytes / GIB,
        "global_step": result.global_step,
        "step_seconds": step_seconds,
        "mean_step_seconds_after_first": sum(steady) / len(steady) if steady else None,
        "generation_seconds": [
            generation_seconds.get(step, 0.0) for step in range(1, result.global_step + 1)
        ],
        "completion_mean_length": [r["data"].get(metric_keys.RESPONSE_LENGTH) for r in steps],
        "memory_by_step": samples[1:],
        "peak_allocated_gib": max((s["peak_allocated_gib"] for s in samples[1:]), default=None),
        "peak_reserved_gib": max((s["peak_reserved_gib"] for s in samples[1:]), default=None),
        "generation_fell_back_to_eager": getattr(result.trainer, "generation_fallback", None),
        "trl_timings_last_step": {k: v for k, v in steps[-1]["data"].items() if "time" in k.lower()}
        if steps
        else {},
    }
    base = result.trainer.model.unload()
    del result
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return report, base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", choices=["4b", "tiny"], default="4b")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--completion-tokens", type=int, default=1024)
    parser.add_argument("--image-side", type=int, default=448)
    parser.add_argument("--no-gradient-checkpointing", action="store_true")
    parser.add_argument(
        "--optims",
        default="adamw_torch,adamw_8bit",
        help="optimisers, one run each on the same model (adamw_8bit needs bitsandbytes)",
    )
    parser.add_argument(
        "--generation", default="eager", help="the engine's rollout path (eager, compiled, vllm)"
    )
    args = parser.parse_args()

    import torch
    from grpo_trainer.testing.tiny_vlm import QWEN3_VL_4B, TINY, build_model, build_processor, build_tokenizer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    shape = QWEN3_VL_4B if args.shape == "4b" else TINY

    tokenizer = build_tokenizer(vocab_size=shape.vocab_size)
    processor = build_processor(tokenizer, patch_size=shape.patch_size, max_image_side=args.image_side)
    started = time.perf_counter()
    with device:
        model = build_model(shape, tokenizer, dtype=torch.bfloat16 if cuda else torch.float32)
    report: dict[str, Any] = {
        "shape": args.shape,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "total_params": sum(p.numel() for p in model.parameters()),
        "weights_gib": torch.cuda.memory_allocated() / GIB if cuda else 0,
        "model_build_seconds": time.perf_counter() - started,
        "prompt_tokens": args.prompt_tokens,
        "completion_tokens": args.completion_tokens,
        "gradient_checkpointing": not args.no_gradient_checkpointing,
        "runs": {},
    }
    for optim in [o for o in args.optims.split(",") if o]:
        print(f"[memory] {optim}: {args.steps} steps", flush=True)
        try:
            report["runs"][optim], model = run_once(model, processor, args, optim, out, cuda)
        except Exception as error:  # e.g. bitsandbytes missing: the other optimiser's numbers still count
            report["runs"][optim] = {"error": f"{type(error).__name__}: {error}"}
            print(f"[memory] {optim} failed: {error}", flush=True)
            break
        (out / "memory-4b.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    runs = report["runs"]
    if all(
        isinstance(runs.get(o), dict) and "peak_allocated_gib" in runs[o]
        for o in ("adamw_torch", "adamw_8bit")
    ):
        torch_peak, bnb_peak = (
            runs["adamw_torch"]["peak_allocated_gib"],
            runs["adamw_8bit"]["peak_allocated_gib"],
        )
        report["adamw_8bit_saves_gib"] = (
            None if torch_peak is None or bnb_peak is None else torch_peak - bnb_peak
        )
    (out / "memory-4b.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2))
    for optim, run in runs.items():
        print(optim, json.dumps({k: v for k, v in run.items() if k != "memory_by_step"}))


if __name__ == "__main__":
    main()
