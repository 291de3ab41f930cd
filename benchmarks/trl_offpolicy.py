"""How far each rollout path samples from the policy it trains: TRL's importance weights, at 4B shapes.

TRL 1.16's vLLM path samples from the adapters merged into bf16 weights and weights each sequence's
loss by w = exp(sum over its tokens of log pi_policy - log pi_sampler), dropping a sequence whose w
is over 3 (`vllm_importance_sampling_mode=sequence_mask`, `clip_max=3`, no lower bound). The
engine's `generation: auto` samples from the policy itself instead (adapters unmerged, the
compiled path), where w is 1 but for kernel noise. This measures both, on one model, adapter and
prompt set, so the choice rests on numbers (engines/trl/generation.py says why it was made):

- Part 1, the samplers. Qwen3-VL-4B's shapes, with an adapter of the size 60 recipe steps give
  (`--lora-b-std`, default `recipe_update_bound()`: the most a LoRA B entry can move in 60 AdamW
  steps at 5e-6 under the recipe's schedule), and weights made peaked as a trained model's are: a
  random 4B network is nearly uniform (11.4 of 11.9 nats), where any two samplers disagree on
  every token, so the final norm is scaled until the policy's mean next-token entropy on the
  prompts is `--target-entropy` nats (`peak`). `--model DIR --adapter CKPT` measures a trained
  policy instead, peaked by its training: the tiny model after its learning test
  (`benchmarks.trl_learning --out X` leaves it in X/work/model, its adapter in
  X/work/vision/checkpoints/checkpoint-N). For each path, `--prompts` prompts x G=2 completions of `--new-tokens`:
    - `merged`: sampled with the adapters merged into the bf16 weights (peft's merge, what TRL's
      `sync_weights` hands vLLM; vLLM's own kernels add ~0.02 nats a token on top, measured by
      benchmarks/trl_sync_probe.py), then unmerged, as TRL does;
    - `compiled`: sampled from the policy, adapters unmerged, static KV cache (CUDA graphs on CUDA).
  Then the policy (adapters unmerged) is teacher-forced on every completion, as TRL's loss does,
  and per sequence log w is taken: the sampler's log-probabilities are its processed ones (the
  image placeholder banned, as vLLM's `processed_logprobs` are), the policy's over the whole
  vocabulary, as TRL computes the two. Reported per path: the fraction of sequences TRL would mask,
  log w's quantiles, the mean per-token |log-ratio| and the policy's entropy (TRL weighs only the
  vLLM path's sequences; the compiled path's w says how far from 1 kernel noise alone takes it).
- Part 2, `--parts learning`: the colour-task learning test on the chosen path
  (`python -m benchmarks.trl_learning --generation compiled`), against eager's 0.92
  (docs/benchmarks/data/trl-learning.json).

Writes `offpolicy.json` under `--out` after every part.

    eval "$(bash benchmarks/gpu_stack.sh env)"    # the GPU machine (issue 66), one call per part
    python -m benchmarks.trl_offpolicy --out $OUT/offpolicy                    # part 1, 4B shapes
    python -m benchmarks.trl_offpolicy --out $OUT/offpolicy-learn --parts learning   # part 2
    python -m benchmarks.trl_offpolicy --out /tmp/op --shape tiny --prompts 2 --new-tokens 8   # CPU smoke
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import paths

STARTED = time.monotonic()
CLIP_MAX = 3.0
"""TRL 1.16's `vllm_importance_sampling_clip_max` (the engine writes it: engines/trl/settings.py)."""
QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
EAGER_LEARNING = paths.DATA / "trl-learning.json"
LEARNING_TOLERANCE = 0.03
"""How far below eager's last-window mean the chosen path may end and still learn as eager does
(run-to-run noise of the 200-step test: eager 0.921, vLLM taking turns 0.922)."""


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.0f}s] {message}", flush=True)


# --- the arithmetic (tests/benchmarks/test_trl_offpolicy.py) -------------------------------------


def recipe_update_bound(
    learning_rate: float = 5e-6, steps: int = 60, warmup_ratio: float = 0.1, min_ratio: float = 0.0
) -> float:
    """The most one LoRA parameter moves in `steps` AdamW updates under the recipe's schedule.

    AdamW's step is the learning rate times m / sqrt(v), at most about 1 in size when every
    gradient has the same sign: so the bound is the sum of the schedule's learning rates (linear
    warmup over warmup_ratio of the steps, then cosine to min_ratio, as transformers schedules).
    """
    warmup = math.ceil(warmup_ratio * steps)
    total = 0.0
    for step in range(steps):
        if step < warmup:
            factor = step / max(1, warmup)
        else:
            progress = (step - warmup) / max(1, steps - warmup)
            factor = min_ratio + (1 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
        total += learning_rate * factor
    return total


def sequence_log_ratios(
    policy: list[list[float]], sampler: list[list[float]], lengths: list[int]
) -> list[float]:
    """log w per sequence: the sum over its first `length` tokens of policy - sampler log-probabilities
    (TRL's sequence-level ratio; tokens after a sequence's end count nothing)."""
    return [
        sum(p - s for p, s in zip(ps[:n], ss[:n], strict=True))
        for ps, ss, n in zip(policy, sampler, lengths, strict=True)
    ]


def masked(
    log_ratios: list[float], clip_max: float | None = CLIP_MAX, clip_min: float | None = None
) -> list[bool]:
    """Which sequences TRL's `sequence_mask` drops: a weight above clip_max or below clip_min."""
    high = math.inf if clip_max is None else math.log(clip_max)
    low = -math.inf if clip_min is None else math.log(clip_min)
    return [not (low <= r <= high) for r in log_ratios]


def quantiles(values: list[float], points: tuple[float, ...] = QUANTILES) -> dict[str, float]:
    """Linear-interpolated quantiles, named q0, q5, ..., q100."""
    ordered = sorted(values)
    found = {}
    for q in points:
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        found[f"q{round(q * 100)}"] = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return found


def path_summary(log_ratios: list[float], token_gaps: list[float], entropies: list[float]) -> dict[str, Any]:
    """What part 1 reports for one path."""
    dropped = masked(log_ratios)
    return {
        "sequences": len(log_ratios),
        "masked_fraction": sum(dropped) / len(dropped),
        "masked_fraction_if_clip_min_1_over_3": sum(masked(log_ratios, CLIP_MAX, 1 / CLIP_MAX))
        / len(dropped),
        "log_ratio": quantiles(log_ratios),
        "mean_abs_token_log_ratio": sum(token_gaps) / len(token_gaps),
        "policy_entropy_nats": sum(entropies) / len(entropies),
        "log_ratios": log_ratios,
    }


def peak(entropy_at: Any, target: float, low: float = 1.0, high: float = 64.0, rounds: int = 20) -> float:
    """The scale of the final norm at which `entropy_at(scale)` (decreasing in it) meets `target`."""
    if entropy_at(low) <= target:
        return low
    for _ in range(rounds):
        middle = math.sqrt(low * high)
        if entropy_at(middle) > target:
            low = middle
        else:
            high = middle
    return high


def learning_verdict(chosen: dict[str, Any], eager: dict[str, Any], window: int = 10) -> dict[str, Any]:
    """Whether the chosen path's learning test ends as eager's does (within LEARNING_TOLERANCE)."""
    eager_curve = eager["curves"]["vision LoRA"]
    eager_last = sum(eager_curve[-window:]) / window
    last = chosen["vision_last_window_mean"]
    return {
        "eager_last_window_mean": eager_last,
        "chosen_last_window_mean": last,
        "learns_as_eager": last is not None and last >= eager_last - LEARNING_TOLERANCE,
    }


# --- part 1: the samplers (GPU) -------------------------------------------------------------------


def _entropy(model: Any, inputs: dict[str, Any]) -> float:
    import torch

    with torch.no_grad():
        logits = model(**inputs).logits[0].float()
    return float(-(torch.log_softmax(logits, -1).exp() * torch.log_softmax(logits, -1)).sum(-1).mean())


def make_peaked(model: Any, inputs: dict[str, Any], target: float) -> dict[str, float]:
    """Scale the language model's final norm (logits scale with it) until the mean entropy is `target`."""
    import torch

    norm = model.model.language_model.norm.weight
    original = norm.detach().clone()

    def entropy_at(scale: float) -> float:
        with torch.no_grad():
            norm.copy_(original * scale)
        return _entropy(model, inputs)

    before = entropy_at(1.0)
    scale = peak(entropy_at, target)
    return {"scale": scale, "entropy_before": before, "entropy_after": entropy_at(scale)}


def sample(peft_model: Any, inputs: dict[str, Any], args: argparse.Namespace, *, compiled: bool) -> Any:
    """G completions of the prompt, with the sampler's log-probabilities of each sampled token."""
    import torch

    options: dict[str, Any] = {"cache_implementation": "static"} if compiled else {"disable_compile": True}
    # As TRL generates (and the engine bans it for vLLM): a sampled image placeholder would break
    # the policy's forward pass.
    options["suppress_tokens"] = [peft_model.config.image_token_id]
    with torch.no_grad():
        out = peft_model.generate(
            **inputs,
            max_new_tokens=args.new_tokens,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            output_scores=True,
            return_dict_in_generate=True,
            **options,
        )
    completion = out.sequences[:, inputs["input_ids"].shape[1] :]
    scores = torch.stack(out.scores, dim=1).float().log_softmax(-1)
    logps = scores.gather(-1, completion[..., None])[..., 0]
    return out.sequences, completion, logps


def teacher_forced(peft_model: Any, sequences: Any, inputs: dict[str, Any], new: int) -> Any:
    """The policy's log-probabilities of the completion tokens (adapters unmerged, as the loss)."""
    import torch

    prompt = inputs["input_ids"].shape[1]
    forward = {}
    for key, value in inputs.items():
        if key in ("input_ids", "attention_mask"):
            continue
        if key.endswith("token_type_ids"):  # one entry per token: the completion's are text (0)
            value = torch.nn.functional.pad(value, (0, sequences.shape[1] - prompt))
        forward[key] = value
    with torch.no_grad():
        logits = peft_model(input_ids=sequences, attention_mask=torch.ones_like(sequences), **forward).logits
    logps = logits[:, prompt - 1 : -1].float().log_softmax(-1)
    return logps.gather(-1, sequences[:, prompt:, None])[..., 0][:, :new]


def measure_path(
    peft_model: Any, prompts: list[dict[str, Any]], path: str, args: argparse.Namespace, eos: int
) -> dict[str, Any]:
    import torch

    ratios: list[float] = []
    gaps: list[float] = []
    entropies: list[float] = []
    for inputs in prompts:
        if path == "merged":
            peft_model.merge_adapter()
        sequences, completion, sampler = sample(peft_model, inputs, args, compiled=path == "compiled")
        if path == "merged":
            peft_model.unmerge_adapter()
        policy = teacher_forced(peft_model, sequences, inputs, completion.shape[1])
        ends = (completion == eos).int()
        lengths = [int(row.argmax()) + 1 if bool(row.any()) else completion.shape[1] for row in ends]
        ratios += sequence_log_ratios(policy.tolist(), sampler.tolist(), lengths)
        for p, s, n in zip(policy, sampler, lengths, strict=True):
            gaps += (p[:n] - s[:n]).abs().tolist()
        entropies.append(_entropy(peft_model, inputs))
        del sequences, policy, sampler
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return path_summary(ratios, gaps, entropies)


def part_samplers(args: argparse.Namespace, report: dict[str, Any]) -> None:
    import torch
    from grpo_trainer.testing.tiny_vlm import QWEN3_VL_4B, TINY, build_model, build_processor, build_tokenizer

    from .trl_generation import lora_model, prompt_inputs
    from .trl_memory_4b import filler_rows

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    if args.model:
        from grpo_trainer.engines.trl.runner import load_policy

        model, processor = load_policy(args.model, bf16=cuda)
        model.to(device)
    else:
        shape = QWEN3_VL_4B if args.shape == "4b" else TINY
        tokenizer = build_tokenizer(vocab_size=shape.vocab_size)
        processor = build_processor(tokenizer, patch_size=shape.patch_size, max_image_side=args.image_side)
        with device:
            model = build_model(shape, tokenizer, dtype=dtype)
    rows = filler_rows(processor, args.prompts, args.prompt_tokens, args.image_side)
    prompts = [prompt_inputs(processor, row, 2, device) for row in rows]
    if args.target_entropy > 0:
        report["peaked"] = make_peaked(model, {k: v[:1] for k, v in prompts[0].items()}, args.target_entropy)
        say(f"peaked: {report['peaked']}")
    if args.adapter:
        from peft import PeftModel

        peft_model = PeftModel.from_pretrained(model, args.adapter)
        report["adapter"] = args.adapter
    else:
        peft_model = lora_model(model, args.lora_b_std)
    peft_model.eval()  # no LoRA dropout: the recipe's is 0
    eos = processor.tokenizer.eos_token_id
    report["paths"] = {}
    for path in ("merged", "compiled"):
        say(f"part 1: {path}, {args.prompts} prompts x 2 completions of {args.new_tokens} tokens")
        report["paths"][path] = measure_path(peft_model, prompts, path, args, eos)
        summary = {k: v for k, v in report["paths"][path].items() if k != "log_ratios"}
        say(f"  {json.dumps(summary)}")


def part_learning(args: argparse.Namespace, report: dict[str, Any]) -> None:
    out = Path(args.out) / "learning-compiled"
    say("part 2: the learning test with generation=compiled")
    code = subprocess.call(
        [sys.executable, "-m", "benchmarks.trl_learning", "--out", str(out), "--generation", "compiled"],
        cwd=paths.REPO,
    )
    done = out / "learning.json"
    if code != 0 or not done.exists():
        report["learning"] = {"error": f"benchmarks.trl_learning exited {code}"}
        return
    chosen = json.loads(done.read_text(encoding="utf-8"))
    eager = json.loads(EAGER_LEARNING.read_text(encoding="utf-8"))
    report["learning"] = {"generation": "compiled", **learning_verdict(chosen, eager)}
    say(f"  {json.dumps(report['learning'])}")


def save(out: Path, report: dict[str, Any]) -> None:
    (out / "offpolicy.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="offpolicy.json (and the learning test's folder)")
    parser.add_argument("--shape", choices=["4b", "tiny"], default="4b")
    parser.add_argument("--model", default=None, help="a model folder instead of a random one")
    parser.add_argument("--adapter", default=None, help="a trained LoRA adapter instead of a drawn one")
    parser.add_argument("--prompts", type=int, default=16, help="prompts, 2 completions each")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--image-side", type=int, default=224)
    parser.add_argument("--lora-b-std", type=float, default=recipe_update_bound())
    parser.add_argument(
        "--target-entropy", type=float, default=1.0, help="nats a token (0: the weights as they are)"
    )
    parser.add_argument(
        "--parts",
        default="samplers",
        help="comma-separated: samplers (part 1), learning (part 2); one device call each fits 10 min",
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": " ".join(["python", "-m", "benchmarks.trl_offpolicy", *sys.argv[1:]]),
        "clip_max": CLIP_MAX,
        "lora_b_std": args.lora_b_std,
        "target_entropy": args.target_entropy,
    }
    parts = {p for p in args.parts.split(",") if p}
    if unknown := parts - {"samplers", "learning"}:
        parser.error(f"--parts: no part {', '.join(sorted(unknown))} (samplers, learning)")
    if "samplers" in parts:
        part_samplers(args, report)
        save(out, report)
    if "learning" in parts:
        part_learning(args, report)
    report["seconds"] = time.monotonic() - STARTED
    save(out, report)
    say(f"done: {out / 'offpolicy.json'}")


if __name__ == "__main__":
    main()
