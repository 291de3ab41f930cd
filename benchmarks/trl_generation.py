"""Rollout speed of the TRL engine's generation paths, side by side, at the single-GPU LoRA recipe's shapes.

One process, one model: Qwen3-VL-4B's shapes with random bf16 weights (speed and memory do not
depend on the values), LoRA r=16 on the vision and language layers as the single-GPU LoRA recipe, 2 sequences of a
`--prompt-tokens` prompt (a 448x448 image and text) and `--new-tokens` new tokens. Every path is
told to ignore its end tokens (`--ignore-eos`, on by default: vLLM's `ignore_eos`, transformers'
`min_new_tokens`), so every completion runs to the full length and the paths do the same work;
each path's completion lengths and the sampling parameters its generator received are reported.

Part 1, decoding only (transformers' `generate` on the peft model, one step timed by a logits
processor that synchronises the device, so prefill is left out):
  - `unmerged`: the adapters applied unmerged, as TRL generates today (the engine's `eager` path);
  - `merged`: the same after peft's `merge_adapter` (timed too), then `unmerge_adapter`; with what
    merging costs in bf16: the share of a LoRA update that survives being added to the weights, the
    logits' distance from the policy's, and the rounding residue one merge/unmerge leaves behind.
Part 2, whole GRPO steps through the engine (`runner.train`, the single-GPU LoRA recipe's settings at these lengths)
for each path of `spec.rollout.generation`: `eager`, `compiled` (static cache + CUDA graphs) and,
where vLLM imports, `vllm` (TRL's colocated vLLM). Per path: seconds per step, generation seconds
and ms per generated token per step, peak memory allocated by PyTorch and peak device memory in
use (sampled from the driver, so vLLM's own pools count too).

Writes `generation.json` (after every part, so a run cut short keeps what it measured) and
`generation.png` under `--out`, and prints progress as it goes.

    # the H200, after benchmarks/gpu_stack.sh has installed the stack (one device call, < 9 min):
    eval "$(bash benchmarks/gpu_stack.sh env)"
    python -m benchmarks.trl_generation --out $OUT/generation
    # CPU smoke (tiny shapes; compiled falls back to the static cache without CUDA graphs):
    python -m benchmarks.trl_generation --shape tiny --prompt-tokens 64 \\
        --new-tokens 8 --image-side 64 --steps 2 --out /tmp/gen-smoke

`--memory-budget-gib B` sizes vLLM as a job's `spec.rollout.memoryBudget` does (the engine's own
arithmetic, engines/trl/memory.py: what the budget leaves after the policy and the trainer's
estimate); the report keeps that estimate beside the measured peak, so the estimates can be
corrected from the measurement. A budget the estimate says cannot hold vLLM is recorded as such.

`record` turns what a device call brought back (one or more `--out` folders, each with its
`generation.json`) into the committed summary, `docs/benchmarks/data/trl-generation.json`: per
run and path, steady-state ms per token and seconds per step, the device's peak against the
single-GPU LoRA recipe's 16 GB, completion lengths against the requested length, and the
verdict on the targets (vLLM within 16 GB and 8 ms per token, as long completions as eager's):

    python -m benchmarks.trl_generation record RUN_DIR [RUN_DIR ...] [--to FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from grpo_trainer import metric_keys

from . import paths

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

GIB = 1024**3
BUDGET_GIB = 16 * 10**9 / GIB
"""The single-GPU LoRA recipe's card (engines/trl/memory.py's RECIPE_BUDGET_GIB)."""
TARGET_MS_PER_TOKEN = 8.0
RECORD_TO = paths.DATA / "trl-generation.json"
STARTED = time.monotonic()
TRL_HEALTH = ("trl/loss", "trl/grad_norm", "trl/entropy")


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.0f}s] {message}", flush=True)


class DeviceMemory:
    """Peak device memory in use (all of it, as the driver reports), sampled every 20 ms."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> DeviceMemory:
        if self.cuda:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        import torch

        while not self._stop.is_set():
            free, total = torch.cuda.mem_get_info()
            self.peak = max(self.peak, total - free)
            time.sleep(0.02)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class StepTimer:
    """A logits processor: called once per decoding step, it records when each step's logits exist."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.times: list[float] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        return scores

    def decode_ms(self) -> list[float]:
        """Milliseconds of each decoding step after the first token (which ends the prefill)."""
        return [(b - a) * 1000 for a, b in zip(self.times, self.times[1:], strict=False)]


def median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def prompt_inputs(processor: Any, row: dict[str, Any], batch: int, device: Any) -> dict[str, Any]:
    from trl.data_utils import prepare_multimodal_messages

    messages = prepare_multimodal_messages(row["prompt"], images=[row["image"]])
    encoded = processor.apply_chat_template(
        [messages] * batch, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    return {k: v.to(device) for k, v in encoded.items()}


def lora_model(model: Any, b_std: float) -> Any:
    """The engine's LoRA on `model`, with B drawn at the size a trained adapter reaches."""
    import torch
    from grpo_trainer.engines.trl.settings import TrlSettings, build_trl_config
    from peft import LoraConfig, get_peft_model

    _, lora = build_trl_config(TrlSettings())
    peft_model = get_peft_model(model, LoraConfig(**lora))
    generator = torch.Generator(device="cpu").manual_seed(0)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                noise = torch.randn(parameter.shape, generator=generator) * b_std
                parameter.copy_(noise.to(parameter.dtype))
    return peft_model


def decode(peft_model: Any, inputs: dict[str, Any], new_tokens: int, cuda: bool, pad: int) -> dict[str, Any]:
    import torch

    timer = StepTimer(cuda)
    started = time.perf_counter()
    with torch.no_grad():
        peft_model.generate(
            **inputs,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            pad_token_id=pad,
            logits_processor=[timer],
            disable_compile=True,
        )
    steps = timer.decode_ms()
    return {
        "seconds": time.perf_counter() - started,
        "ms_per_token_median": median(steps),
        "ms_per_token_mean": sum(steps) / len(steps) if steps else None,
        "decode_steps_timed": len(steps),
    }


def merge_costs(peft_model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """What merging the adapters into bf16 weights does to the policy (see generation.py)."""
    import torch

    layer = next(
        m for n, m in peft_model.named_modules() if n.endswith("language_model.layers.0.self_attn.q_proj")
    )
    weight = layer.base_layer.weight
    delta = layer.get_delta_weight("default").detach().float()
    merged = (weight.float() + delta).to(weight.dtype).float()
    kept = ((merged - weight.float()) * delta).sum() / (delta * delta).sum()
    vanished = ((merged == weight.float()) & (delta != 0)).float().mean()
    # The prompt's last 256 tokens: text only, so no image features are needed.
    short = {"input_ids": inputs["input_ids"][:, -256:], "attention_mask": inputs["attention_mask"][:, -256:]}
    with torch.no_grad():
        with peft_model.disable_adapter():
            base = peft_model(**short).logits.float()
        policy = peft_model(**short).logits.float()
        saved = weight.detach().clone()
        peft_model.merge_adapter()
        merged_logits = peft_model(**short).logits.float()
        peft_model.unmerge_adapter()
    residue = (weight != saved).float().mean()
    adapter_effect = (policy - base).norm()
    return {
        "q_proj_layer0": {
            "weight_dtype": str(weight.dtype),
            "relative_update": float(delta.norm() / weight.detach().float().norm()),
            "share_of_update_kept_by_merge": float(kept),
            "share_of_updated_elements_unchanged_by_merge": float(vanished),
            "share_of_weights_changed_by_merge_then_unmerge": float(residue),
        },
        "logits_text_prompt": {
            "adapter_effect_norm": float(adapter_effect),
            "merged_minus_policy_over_adapter_effect": float(
                (merged_logits - policy).norm() / adapter_effect
            ),
        },
    }


def part_decoding(
    model: Any, processor: Any, row: dict[str, Any], args: argparse.Namespace, cuda: bool
) -> Any:
    import torch

    device = next(model.parameters()).device
    peft_model = lora_model(model, args.lora_b_std)
    peft_model.train()  # as TRL generates: the trainer's model stays in training mode
    inputs = prompt_inputs(processor, row, 2, device)
    pad = processor.tokenizer.pad_token_id
    report: dict[str, Any] = {"prompt_tokens": int(inputs["input_ids"].shape[1])}
    say(f"decoding, unmerged adapters ({args.decode_tokens} tokens)")
    decode(peft_model, inputs, 4, cuda, pad)  # warm-up: kernels, allocator
    report["unmerged"] = decode(peft_model, inputs, args.decode_tokens, cuda, pad)
    say(f"  {report['unmerged']['ms_per_token_median']:.1f} ms per token")
    say("decoding, adapters merged")
    started = time.perf_counter()
    peft_model.merge_adapter()
    if cuda:
        torch.cuda.synchronize()
    merge_seconds = time.perf_counter() - started
    report["merged"] = decode(peft_model, inputs, args.decode_tokens, cuda, pad)
    started = time.perf_counter()
    peft_model.unmerge_adapter()
    if cuda:
        torch.cuda.synchronize()
    report["merged"].update(merge_seconds=merge_seconds, unmerge_seconds=time.perf_counter() - started)
    say(f"  {report['merged']['ms_per_token_median']:.1f} ms per token")
    say("what a bf16 merge does to the policy")
    report["merge_costs"] = merge_costs(peft_model, inputs)
    say(f"  {json.dumps(report['merge_costs'])}")
    base = peft_model.unload()
    del peft_model
    gc.collect()
    return report, base


def _diagnose(
    report: dict[str, Any],
    result: Any,
    steps: list[dict[str, Any]],
    path: str,
    probe: Any,
    processor: Any,
    cuda: bool,
    new_tokens: int,
) -> None:
    """What a path's run says beyond its timings: decode time without the weight sync, whether it
    fell back to eager, TRL's view of the sampler against the policy, the vLLM weight-sync probe and
    the compiled graphs."""
    if report["sync_seconds"]:
        report["decode_ms_per_token"] = [
            1000 * (g - w) / new_tokens
            for g, w in zip(report["generation_seconds"], report["sync_seconds"], strict=True)
        ]
    report["fell_back_to_eager"] = getattr(result.trainer, "generation_fallback", None)
    # What TRL saw of the sampler's distribution against the policy's, and whether the loss was live.
    report["trl_sampling"] = [
        {k: v for k, v in r["data"].items() if k.startswith("trl/sampling/") or k in TRL_HEALTH}
        for r in steps
    ]
    if path == "vllm":
        try:
            report["sync_probe"] = probe.compare(result.trainer.model, processor)
        except Exception as error:  # the probe is a diagnosis: it must not cost the paths after it
            report["sync_probe"] = {"error": f"{type(error).__name__}: {error}"}
        say(f"  sync probe: {json.dumps(report['sync_probe'])}")
    if cuda:
        import torch._dynamo

        report["dynamo_unique_graphs"] = int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def part_engine(
    model: Any, processor: Any, rows: list[dict[str, Any]], path: str, args: argparse.Namespace, cuda: bool
) -> tuple[dict[str, Any], Any]:
    """`args.steps` GRPO steps through the engine with one generation path."""
    import torch
    from grpo_trainer.engines.trl.generation import sampling
    from grpo_trainer.engines.trl.metrics import LOCAL_METRICS_FILE, read_records
    from grpo_trainer.engines.trl.runner import RunRequest, train
    from grpo_trainer.engines.trl.settings import TrlSettings

    from .trl_memory_4b import random_reward, time_generation
    from .trl_sync_probe import SyncProbe

    out = Path(args.work or args.out) / f"engine-{path}"
    shutil.rmtree(out, ignore_errors=True)
    for stale in ("_cache", "_compiled_call", "_last_compile_config"):
        if hasattr(model, stale):
            delattr(model, stale)
    generation_seconds = time_generation(cuda)
    sync_seconds = time_weight_sync(cuda) if path == "vllm" else {}
    sizing = vllm_sizing(model, args) if path == "vllm" else {}
    if "refused" in sizing:
        return {"refused": sizing["refused"], "estimate": sizing["estimate"]}, model
    settings = replace(
        TrlSettings(),
        output_dir=str(out / "checkpoints"),
        max_steps=args.steps,
        save_steps=10**6,
        max_prompt_length=args.prompt_tokens,
        max_completion_length=args.new_tokens,
        bf16=cuda,
        generation=path,
        vllm_gpu_memory_utilization=args.vllm_memory,
        vllm_memory_gib=sizing.get("vllm_gib", args.vllm_memory_gib),
        memory_budget_gib=args.memory_budget_gib if path == "vllm" else None,
        vllm_sleep=args.vllm_sleep,
        vllm_park_policy=bool(sizing.get("parked")),
        # Like for like: every path decodes --new-tokens tokens per completion.
        ignore_eos=args.ignore_eos,
    )
    probe = SyncProbe()
    if path == "vllm":
        config = model.config
        probe.install({config.image_token_id, config.vision_start_token_id, config.vision_end_token_id})
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    try:
        with DeviceMemory(cuda) as device_memory:
            result = train(
                RunRequest(
                    settings=settings,
                    model_path=str(getattr(model.config, "_name_or_path", "")),
                    rows=rows,
                    reward_funcs=[random_reward],
                    metrics_path=str(out / LOCAL_METRICS_FILE),
                    policy=(model, processor),
                )
            )
    finally:
        probe.uninstall()
    steps = [r for r in read_records(out / LOCAL_METRICS_FILE) if "data" in r]
    step_seconds = [r["data"].get(metric_keys.STEP_SECONDS) for r in steps]
    lengths = [r["data"].get(metric_keys.RESPONSE_LENGTH) for r in steps]
    shortest = [r["data"].get(metric_keys.RESPONSE_LENGTH_MIN) for r in steps]
    longest = [r["data"].get(metric_keys.RESPONSE_LENGTH_MAX) for r in steps]
    generation = [generation_seconds.get(s, 0.0) for s in range(1, result.global_step + 1)]
    report = {
        "steps": result.global_step,
        "step_seconds": step_seconds,
        "generation_seconds": generation,
        "completion_mean_length": lengths,
        "completion_min_length": shortest,
        "completion_max_length": longest,
        # What TRL hands this path's generator (vLLM's SamplingParams or transformers' generate),
        # from the GRPOConfig the runner gave it.
        "sampling": sampling(path, vars(result.trainer.args)),
        "vllm_sleep": args.vllm_sleep if path == "vllm" else None,
        "vllm_park_policy": settings.vllm_park_policy if path == "vllm" else None,
        "vllm_memory_gib": settings.vllm_memory_gib if path == "vllm" else None,
        "vllm_gpu_memory_utilization": (
            result.trainer.args.vllm_gpu_memory_utilization if path == "vllm" else None
        ),
        # The engine's estimate of the whole process's least with vLLM, to hold against the peak.
        "estimate": sizing.get("estimate"),
        "ms_per_token": [1000 * g / args.new_tokens for g in generation],
        "sync_seconds": [sync_seconds.get(s, 0.0) for s in range(1, result.global_step + 1)]
        if sync_seconds
        else None,
        "peak_allocated_gib": torch.cuda.max_memory_allocated() / GIB if cuda else None,
        "peak_device_used_gib": device_memory.peak / GIB if cuda else None,
    }
    _diagnose(report, result, steps, path, probe, processor, cuda, args.new_tokens)
    base = result.trainer.model.unload()
    del result
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return report, base


def time_weight_sync(cuda: bool) -> dict[int, float]:
    """Seconds per step in the colocated vLLM's weight sync (inside the generation seconds).

    TRL's own sync merges the adapters and loads every weight into vLLM; the parked path's copies
    the frozen weights from host memory as well. Both count in `generation_seconds` (the
    trainer's generation call makes them), so the report gives them apart: `ms_per_token` is
    the whole round, `decode_ms_per_token` the round without the sync.
    """
    import torch
    from trl import GRPOTrainer

    seconds: dict[int, float] = {}
    original = GRPOTrainer._generate_single_turn

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        generation = getattr(self, "vllm_generation", None)
        if generation is not None and not getattr(generation.sync_weights, "timed", False):
            sync = generation.sync_weights

            def timed_sync() -> None:
                if cuda:
                    torch.cuda.synchronize()
                started = time.perf_counter()
                sync()
                if cuda:
                    torch.cuda.synchronize()
                step = self.state.global_step + 1
                seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - started

            timed_sync.timed = True  # type: ignore[attr-defined]
            generation.sync_weights = timed_sync
        return original(self, *args, **kwargs)

    GRPOTrainer._generate_single_turn = wrapped  # type: ignore[method-assign]
    return seconds


def vllm_sizing(model: Any, args: argparse.Namespace) -> dict[str, Any]:
    """vLLM's GiB from `--memory-budget-gib` by the engine's arithmetic, with its estimate.

    {} without a budget (then `--vllm-memory-gib` or `--vllm-memory` size vLLM as given).
    """
    from dataclasses import asdict

    from grpo_trainer.engines.trl.generation import vllm_context
    from grpo_trainer.engines.trl.memory import (
        BudgetError,
        ModelFootprint,
        kv_bytes_per_token,
        vllm_gib,
        vllm_layout,
        vllm_need,
    )

    weights = sum(p.numel() * p.element_size() for p in model.parameters()) / GIB
    need = vllm_need(
        ModelFootprint(weights, kv_bytes_per_token(model.config.to_dict())),
        sequences=2,
        sequence_tokens=args.prompt_tokens + args.new_tokens,
        context=vllm_context(args.prompt_tokens, args.new_tokens),
    )
    if args.memory_budget_gib is not None:
        need = vllm_layout(need, args.memory_budget_gib)
    elif args.park_policy:
        need = replace(need, parked=True)
    estimate = {**asdict(need), "vllm_gib_least": need.vllm, "process_gib_least": need.total}
    if args.memory_budget_gib is None:
        return {"estimate": estimate, "parked": need.parked}
    try:
        gib = vllm_gib(need, args.memory_budget_gib, field="--memory-budget-gib")
    except BudgetError as error:
        return {"refused": str(error), "estimate": estimate}
    return {"vllm_gib": gib, "estimate": estimate, "parked": need.parked}


def _mean(values: list[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, int | float)]
    return sum(numbers) / len(numbers) if numbers else None


def _steady(values: list[Any]) -> list[Any]:
    """Steps after the first (which compiles, loads vLLM, warms the allocator), if there are any."""
    return values[1:] if len(values) > 1 else values


def summarise_path(run: dict[str, Any], new_tokens: int, budget_gib: float) -> dict[str, Any]:
    """One path of one run: the figures the targets are judged on, and whether each target is met."""
    if not isinstance(run, dict) or not run.get("steps"):
        return {key: run[key] for key in ("error", "skipped", "refused", "estimate") if key in run}
    shortest = [v for v in run.get("completion_min_length", []) if isinstance(v, int | float)]
    ms = _mean(_steady(run.get("ms_per_token", [])))
    peak = run.get("peak_device_used_gib")
    out = {
        "steps": run["steps"],
        "ms_per_token_steady": ms,
        "step_seconds_steady": _mean(_steady(run.get("step_seconds", []))),
        "decode_ms_per_token_steady": _mean(_steady(run.get("decode_ms_per_token") or [])),
        "sync_seconds_steady": _mean(_steady(run.get("sync_seconds") or [])),
        "generation_seconds_steady": _mean(_steady(run.get("generation_seconds", []))),
        "peak_device_used_gib": peak,
        "peak_allocated_gib": run.get("peak_allocated_gib"),
        "completion_mean_length": _mean(run.get("completion_mean_length", [])),
        "completion_min_length": min(shortest) if shortest else None,
        "full_length": bool(shortest) and min(shortest) >= new_tokens,
        "within_budget": None if peak is None else peak <= budget_gib,
        "within_8_ms": None if ms is None else ms <= TARGET_MS_PER_TOKEN,
    }
    for key in (
        "sampling",
        "vllm_sleep",
        "vllm_park_policy",
        "vllm_memory_gib",
        "vllm_gpu_memory_utilization",
        "fell_back_to_eager",
        "trl_sampling",
        "sync_probe",
    ):
        if run.get(key) is not None:
            out[key] = run[key]
    if peak is not None and run.get("vllm_memory_gib"):
        # vLLM fills what it is given (its KV cache takes the rest): the remainder is the policy and
        # the trainer's part at the peak, against the policy + TRAINER_OVERHEAD_GIB estimate.
        out["peak_minus_vllm_gib"] = peak - run["vllm_memory_gib"]
    estimate = run.get("estimate")
    if estimate:
        out["estimate"] = estimate
        if peak is not None:
            # What the constants in engines/trl/memory.py should move by: measured minus estimated.
            out["peak_minus_estimate_gib"] = peak - estimate["process_gib_least"]
    return out


def summarise_run(report: dict[str, Any]) -> dict[str, Any]:
    new_tokens = int(report.get("new_tokens", 0))
    budget = float(report.get("budget_gib", BUDGET_GIB))
    decoding = report.get("decoding") or {}
    summary: dict[str, Any] = {
        "command": report.get("command"),
        "device": report.get("device"),
        "versions": {k: report.get(k) for k in ("torch", "transformers", "trl", "peft", "vllm")},
        "shape": report.get("shape"),
        "prompt_tokens": report.get("prompt_tokens"),
        "new_tokens": new_tokens,
        "sequences": report.get("sequences"),
        "weights_gib": report.get("weights_gib"),
        "memory_budget_gib": report.get("memory_budget_gib"),
        "decoding_ms_per_token": {
            key: decoding[key].get("ms_per_token_median")
            for key in ("unmerged", "merged")
            if isinstance(decoding.get(key), dict)
        },
        "paths": {
            path: summarise_path(run, new_tokens, budget)
            for path, run in (report.get("engine") or {}).items()
        },
        "seconds": report.get("seconds"),
    }
    paths = summary["paths"]
    vllm, eager = paths.get("vllm") or {}, paths.get("eager") or {}
    if vllm.get("steps"):
        summary["vllm_meets_the_targets"] = bool(
            vllm["within_budget"]
            and vllm["within_8_ms"]
            and vllm["full_length"]
            and (not eager.get("steps") or vllm["completion_mean_length"] >= eager["completion_mean_length"])
        )
    return summary


def _one_line(figures: dict[str, Any]) -> str:
    """A path's figures as `record` prints them."""
    if not figures.get("steps"):
        return str(figures.get("error") or figures.get("refused") or figures.get("skipped") or "no steps")
    ms, peak = figures.get("ms_per_token_steady"), figures.get("peak_device_used_gib")
    return (
        f"{'?' if ms is None else f'{ms:.1f}'} ms/token, "
        f"peak {'not measured (no CUDA)' if peak is None else f'{peak:.1f} GiB'}, "
        f"completions {figures.get('completion_mean_length')}"
    )


def record(argv: list[str]) -> Path:
    """`record RUN_DIR ...`: the committed summary of what device calls brought back."""
    parser = argparse.ArgumentParser(
        prog="trl_generation.py record",
        description="write docs/benchmarks/data/trl-generation.json from the runs a device call brought back",
    )
    parser.add_argument("runs", nargs="+", help="--out folders (or their generation.json files), one per run")
    parser.add_argument(
        "--to", type=Path, default=RECORD_TO, help="the summary to write (default: %(default)s)"
    )
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the runs already in the summary (a run of the same name is replaced)",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="also draw every recorded path against the two targets (peak device memory, ms per token)",
    )
    args = parser.parse_args(argv)
    runs: dict[str, Any] = {}
    if args.add and args.to.is_file():
        runs.update(json.loads(args.to.read_text(encoding="utf-8")).get("runs", {}))
    for given in args.runs:
        path = Path(given)
        file = path if path.is_file() else path / "generation.json"
        if not file.is_file():
            parser.error(f"{given}: no generation.json there (did the device call bring it back?)")
        report = json.loads(file.read_text(encoding="utf-8"))
        name = path.name if not path.is_file() else path.parent.name
        runs[name] = {**summarise_run(report), "source": file.name, "raw": report}
    document = {
        "what": "TRL engine rollout paths at the single-GPU LoRA recipe's shapes (benchmarks.trl_generation)",
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "targets": {"peak_device_used_gib": BUDGET_GIB, "ms_per_token": TARGET_MS_PER_TOKEN},
        "runs": runs,
    }
    args.to.parent.mkdir(parents=True, exist_ok=True)
    args.to.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    for name, run in runs.items():
        for path_name, figures in run["paths"].items():
            print(f"{name} {path_name}: {_one_line(figures)}")
    print(f"wrote {args.to}")
    if args.plot is not None:
        plot_targets(args.plot, document)
        print(f"wrote {args.plot}")
    return args.to


def target_points(document: dict[str, Any]) -> list[tuple[str, float, float, bool]]:
    """(label, peak device GiB, steady ms per token, meets both targets) of every recorded path
    that ran steps: what `plot_targets` draws."""
    targets = document["targets"]
    points = []
    for name, run in document["runs"].items():
        for path_name, figures in run["paths"].items():
            peak, ms = figures.get("peak_device_used_gib"), figures.get("ms_per_token_steady")
            if not figures.get("steps") or peak is None or ms is None:
                continue
            meets = peak <= targets["peak_device_used_gib"] and ms <= targets["ms_per_token"]
            label = f"{name} {path_name}, {run.get('new_tokens')} tokens"
            points.append((label, float(peak), float(ms), bool(meets and figures.get("full_length"))))
    return points


def plot_targets(file: Path, document: dict[str, Any]) -> None:
    """Every recorded run's paths as points against the recipe's card (peak device memory) and the
    8 ms target: the corner they must land in, lower left, shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    targets = document["targets"]
    points = target_points(document)
    figure, axes = plt.subplots(figsize=(8, 4.8))
    budget, target_ms = targets["peak_device_used_gib"], targets["ms_per_token"]
    axes.fill_between([0, budget], 1, target_ms, color="tab:green", alpha=0.12, label="both targets met")
    axes.axvline(budget, color="black", linestyle="--", linewidth=1)
    axes.axhline(target_ms, color="black", linestyle=":", linewidth=1)
    for index, (label, peak, ms, meets) in enumerate(sorted(points, key=lambda p: (p[1], p[2]))):
        axes.scatter([peak], [ms], color="tab:green" if meets else "tab:red", zorder=3)
        # Alternate above and below: runs of one configuration land close together.
        axes.annotate(
            label, (peak, ms), textcoords="offset points", xytext=(6, 4 if index % 2 else -10), fontsize=7
        )
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axes.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_yticks([3, 4, 6, 8, 10, 20, 40, 60, 100])
    axes.set_xlim(
        left=min([p[1] for p in points] + [budget]) - 2, right=max([p[1] for p in points] + [budget]) + 4
    )
    axes.set_ylim(bottom=3, top=max([p[2] for p in points] + [target_ms]) * 1.5)
    axes.set_xlabel(f"peak device memory in use, GiB (the driver's figure; the card: {budget:.1f} GiB)")
    axes.set_ylabel(f"ms per generated token, steady steps (target {target_ms:g})")
    axes.set_title("Single-GPU engine rollouts at Qwen3-VL-4B shapes, each recorded run", fontsize=9)
    axes.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    file.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(file, dpi=120)
    plt.close(figure)


def plot(out: Path, report: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars: dict[str, float] = {}
    decoding = report.get("decoding") or {}
    for key in ("unmerged", "merged"):
        if decoding.get(key, {}).get("ms_per_token_median") is not None:
            bars[f"{key} (decode only)"] = decoding[key]["ms_per_token_median"]
    for path, run in (report.get("engine") or {}).items():
        steady = run.get("ms_per_token", [])[1:] if isinstance(run, dict) else []
        if steady:
            bars[f"engine {path}"] = sum(steady) / len(steady)
    if not bars:
        return
    figure, axes = plt.subplots(figsize=(7, 3.6))
    names = list(bars)
    axes.barh(names, [bars[n] for n in names], color="tab:blue")
    for index, name in enumerate(names):
        axes.text(bars[name], index, f" {bars[name]:.1f}", va="center", fontsize=8)
    axes.axvline(8.0, color="black", linestyle="--", linewidth=1, label="target: 8 ms")
    axes.set_xscale("log")
    axes.set_xlabel("ms per generated token (2 sequences; engine rows: steps after the first)")
    axes.set_title(f"TRL engine rollouts, Qwen3-VL-4B shapes ({report.get('device', '?')})", fontsize=9)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "generation.png", dpi=120)
    plt.close(figure)


def save(out: Path, report: dict[str, Any]) -> None:
    (out / "generation.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    try:
        plot(out, report)
    except Exception as error:  # the numbers matter more than the picture
        say(f"plot failed: {error}")


def run_decoding(
    model: Any,
    processor: Any,
    row: dict[str, Any],
    args: argparse.Namespace,
    cuda: bool,
    report: dict[str, Any],
) -> Any:
    """Part 1 into `report["decoding"]`; a failure is recorded and the engine parts still run."""
    try:
        report["decoding"], model = part_decoding(model, processor, row, args, cuda)
    except Exception as error:
        report["decoding"] = {
            "error": f"{type(error).__name__}: {error}",
            "trace": traceback.format_exc()[:1500] + "\n...\n" + traceback.format_exc()[-1500:],
        }
        say(f"part 1 failed: {error}")
    return model


def run_engine_paths(
    model: Any,
    processor: Any,
    rows: list[dict[str, Any]],
    args: argparse.Namespace,
    cuda: bool,
    out: Path,
    report: dict[str, Any],
) -> None:
    """Part 2: `args.steps` GRPO steps through the engine for each path in `args.paths`, in order,
    within the budget; a failed path ends the part (what it left in the model would taint the next)."""
    from grpo_trainer.engines.trl.generation import vllm_installed

    report["engine"] = {}
    for path in [p for p in args.paths.split(",") if p]:
        left = args.budget - (time.monotonic() - STARTED)
        if path == "vllm" and not vllm_installed():
            report["engine"][path] = {"skipped": "vllm is not installed"}
            continue
        if left < 60:
            report["engine"][path] = {"skipped": f"{left:.0f} s of the budget left"}
            continue
        if path == "vllm":
            # TRL's colocated vLLM loads the policy from disk by name, then receives the weights.
            folder = Path(os.environ.get("TMPDIR", "/tmp")) / "trl-generation-model"
            say(f"saving the model for vLLM to {folder}")
            model.save_pretrained(folder)
            processor.save_pretrained(folder)
            model.config._name_or_path = str(folder)
            model.name_or_path = str(folder)
        say(f"part 2: {args.steps} GRPO steps through the engine, generation={path}")
        try:
            report["engine"][path], model = part_engine(model, processor, rows, path, args, cuda)
            run = report["engine"][path]
            if "refused" in run:
                say(f"  not run: {run['refused']}")
                save(out, report)
                continue
            say(
                f"  step seconds {run['step_seconds']}, ms/token {[round(v, 1) for v in run['ms_per_token']]}"
            )
            say(f"  peak allocated {run['peak_allocated_gib']}, device {run['peak_device_used_gib']} GiB")
            say(
                f"  completion lengths mean {run['completion_mean_length']}, min {run['completion_min_length']}"
            )
        except Exception as error:
            report["engine"][path] = {
                "error": f"{type(error).__name__}: {error}",
                "trace": traceback.format_exc()[:1500] + "\n...\n" + traceback.format_exc()[-1500:],
            }
            say(f"  failed: {type(error).__name__}: {error}")
            traceback.print_exc()  # the whole trace, in the log the suite archives
            # The failed run may have left LoRA layers in the model (or vLLM holding the device):
            # nothing measured after it would be clean.
            break
        save(out, report)


def _arguments() -> argparse.Namespace:
    """The run's options (the `record` subcommand has its own: `record --help`)."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="`trl_generation.py record RUN_DIR ... [--to FILE]` writes the committed summary "
        "(docs/benchmarks/data/trl-generation.json) from the runs a device call brought back; "
        "`record --help` for its options.",
    )
    parser.add_argument("--out", required=True, help="generation.json and generation.png")
    parser.add_argument(
        "--work", default=None, help="each path's checkpoints and metrics (default: under --out)"
    )
    parser.add_argument("--shape", choices=["4b", "tiny"], default="4b")
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--new-tokens", type=int, default=256, help="completion length in the engine runs")
    parser.add_argument(
        "--decode-tokens", type=int, default=64, help="tokens timed per decoding run (part 1)"
    )
    parser.add_argument("--image-side", type=int, default=448)
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per engine path (part 2)")
    parser.add_argument("--paths", default="eager,compiled,vllm", help="engine paths, in order")
    parser.add_argument(
        "--decoding",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="part 1 (decoding alone, unmerged and merged); --no-decoding: the engine paths only",
    )
    parser.add_argument("--vllm-memory", type=float, default=0.1, help="vLLM's share of the device")
    parser.add_argument(
        "--vllm-memory-gib",
        type=float,
        default=None,
        help="vLLM's memory in GiB (weights, KV cache, graphs); wins over --vllm-memory",
    )
    parser.add_argument(
        "--memory-budget-gib",
        type=float,
        default=None,
        help="the whole process's budget, as a job's rollout.memoryBudget: vLLM gets what the engine's "
        "arithmetic leaves it (wins over --vllm-memory-gib)",
    )
    parser.add_argument(
        "--vllm-sleep",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="vLLM frees its weights and KV cache while the policy trains (TRL's sleep mode)",
    )
    parser.add_argument(
        "--park-policy",
        action="store_true",
        help="the policy's frozen weights wait in host memory while vLLM generates (without "
        "--memory-budget-gib; with it, the engine's arithmetic decides)",
    )
    parser.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="every path decodes --new-tokens per completion (like for like); --no-ignore-eos: as training",
    )
    parser.add_argument("--lora-b-std", type=float, default=3e-4, help="LoRA B entries (~60 steps at 5e-6)")
    parser.add_argument("--budget", type=float, default=510, help="seconds; later parts are skipped past it")
    return parser.parse_args()


def main() -> None:
    if sys.argv[1:2] == ["record"]:
        record(sys.argv[2:])
        return
    args = _arguments()

    import torch
    from grpo_trainer.testing.tiny_vlm import QWEN3_VL_4B, TINY, build_model, build_processor, build_tokenizer

    from .trl_memory_4b import filler_rows

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    shape = QWEN3_VL_4B if args.shape == "4b" else TINY
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "shape": args.shape,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "sequences": 2,
        "budget_gib": BUDGET_GIB,
        "memory_budget_gib": args.memory_budget_gib,
        "command": " ".join(["python", "-m", "benchmarks.trl_generation", *sys.argv[1:]]),
        "lora_b_std": args.lora_b_std,
    }
    for package in ("transformers", "trl", "peft", "vllm"):
        try:
            report[package] = __import__(package).__version__
        except Exception:
            report[package] = None
    say(f"building the {args.shape} model on {device}")
    tokenizer = build_tokenizer(vocab_size=shape.vocab_size)
    processor = build_processor(tokenizer, patch_size=shape.patch_size, max_image_side=args.image_side)
    with device:
        model = build_model(shape, tokenizer, dtype=torch.bfloat16 if cuda else torch.float32)
    report["weights_gib"] = torch.cuda.memory_allocated() / GIB if cuda else None
    rows = filler_rows(processor, max(args.steps, 1), args.prompt_tokens, args.image_side)
    save(out, report)

    if not args.decoding:
        report["decoding"] = {"skipped": "--no-decoding"}
    else:
        say("part 1: decoding with the adapters unmerged and merged")
        model = run_decoding(model, processor, rows[0], args, cuda, report)
    save(out, report)

    run_engine_paths(model, processor, rows, args, cuda, out, report)
    report["seconds"] = time.monotonic() - STARTED
    save(out, report)
    say(f"done: {out / 'generation.json'}")


if __name__ == "__main__":
    main()
