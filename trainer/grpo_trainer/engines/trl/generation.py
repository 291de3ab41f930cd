"""How rollouts are generated: eager, compiled (static cache + CUDA graphs), or TRL's colocated vLLM.

At the single-GPU LoRA recipe's shapes nearly all of a step is generation, and TRL's plain `generate` spends it
launching kernels: ~80 ms per decoding step for 2 sequences of a 4B model whose weights take ~2 ms
to read. The paths (`spec.rollout.generation`):

- `eager`: TRL's own path (transformers' `generate` with a dynamic KV cache, one Python-driven
  forward per token, LoRA adapters applied unmerged).
- `compiled`: the same `generate`, the same sampling and the same model (adapters unmerged), with a
  static KV cache sized once for the longest prompt + completion and the decoding forward compiled
  by torch.compile in `reduce-overhead` mode, i.e. replayed as CUDA graphs. Only how the kernels
  are launched changes; the loss recomputes log-probabilities exactly as before.
- `vllm`: TRL's colocated vLLM (`use_vllm`, `vllm_mode="colocate"`): a second copy of the weights
  in vLLM, adapters merged into it after every update, and TRL's importance-sampling correction
  for the mismatch between vLLM's and the trainer's probabilities.

Generating with adapters merged into bf16 weights samples from another policy than the one being
trained. In bf16 a LoRA update smaller than half a unit in the last place of a weight disappears
when added to it, and early in training nearly all of them are that small: a merge keeps 38.5 %
of a realistic update at 4B (docs/benchmarks/trl-engine.md; `tests/unit/trl_engine/
test_generation.py` shows it on the tiny model), so a merged model samples from nearly the base
model. TRL 1.16's colocated vLLM is only such a merge (its `sync_weights` merges the adapters, loads
the merged weights and unmerges them; vLLM's own LoRA serving is not a path it offers), and its
importance sampling then absorbs the gap: with its default `sequence_mask` a sequence whose
probability under the policy is over 3 times vLLM's is dropped from the loss, which at the
recipe's G=2 halves or empties a step's gradient.

So `auto` (`choose_auto`) keeps the on-policy path for the TRL engine's jobs, all of which train
LoRA adapters: `compiled` on CUDA (the policy itself samples, adapters unmerged), `eager`
elsewhere (torch.compile's CUDA graphs need CUDA; on CPU the launch overhead it removes is small).
`vllm` is the job's explicit choice: faster (docs/benchmarks/trl-engine.md has the figures), and
its plan states what it changes in the loss (the `vllm_importance_sampling_*` keys). vLLM's
memory then comes from `spec.rollout.memoryBudget` in GiB for the whole process (memory.py turns
it into vLLM's share of the device at run time), and its weights and KV cache sleep while the
policy trains (`vllm_sleep`). benchmarks/trl_offpolicy.py measures, at 4B shapes, how far the
merged path's sampler is from the policy against the compiled path's.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

log = logging.getLogger(__name__)

PATHS = ("eager", "compiled", "vllm")


def resolve(choice: str, device: str, *, vllm: str | None) -> tuple[str, str]:
    """The path a job's `rollout.generation` means on `device`, with the reason.

    `vllm`: the version of vLLM the job's trainer image holds (None: it has none).
    """
    if choice == "auto":
        return choose_auto(device, vllm=vllm)
    if choice not in PATHS:
        raise ValueError(f"rollout.generation: {choice!r} is not one of auto, {', '.join(PATHS)}")
    if choice == "vllm":
        return choice, (
            "spec.rollout.generation: TRL's colocated vLLM, sampling from its own bf16 copy of the weights "
            "with the adapters merged in (a bf16 merge keeps about 38.5 % of a realistic LoRA update: "
            "docs/trainer.md), so the loss is corrected by importance sampling (the "
            "vllm_importance_sampling_* keys)"
        )
    return choice, "spec.rollout.generation"


def choose_auto(device: str, *, vllm: str | None) -> tuple[str, str]:
    """`auto`: the policy samples its own rollouts: compiled on CUDA, eager elsewhere (module docstring)."""
    if device != "cuda":
        return "eager", f"rollout.generation=auto on {device}: CUDA graphs need CUDA"
    left = (
        f"; the image's vLLM {vllm} is left to rollout.generation: vllm, which samples from a bf16 merge "
        "of the adapters and corrects the loss by importance sampling"
        if vllm
        else ""
    )
    return "compiled", (
        "rollout.generation=auto: the policy samples its own rollouts, adapters unmerged, so the loss "
        f"is the recipe's (no importance correction); static KV cache + CUDA-graph decoding{left}"
    )


def vllm_installed() -> bool:
    """Whether vLLM is installed where this process runs: the run's own check before it starts
    (plans read the image's manifest instead: grpo_trainer.trainer_image)."""
    return importlib.util.find_spec("vllm") is not None


VLLM_PROMPT_HEADROOM = 2
"""vLLM's context is this many times maxPromptLength plus the completion (see `trl_config`)."""


def vllm_context(max_prompt_length: int, max_completion_length: int) -> int:
    """vLLM's `max_model_len` for these lengths (see `trl_config`)."""
    return VLLM_PROMPT_HEADROOM * max_prompt_length + max_completion_length


def trl_config(
    path: str,
    *,
    max_prompt_length: int,
    max_completion_length: int,
    gpu_memory_utilization: float,
    ignore_eos: bool = False,
    sleep: bool = True,
    park_policy: bool = False,
) -> dict[str, Any]:
    """GRPOConfig keys of a path (pure: tested without TRL).

    vLLM ends a sequence at its context length (`max_model_len`) whatever `max_tokens` says, and
    counts a prompt's image tokens with its own processor, which need not agree with the count the
    engine filtered prompts by: with a context of exactly prompt + completion, a prompt vLLM counts
    longer leaves its completion short (most likely why the first GPU run's vLLM completions averaged
    61 of 256 tokens while the other paths ran to 256; the next run's per-path lengths will say). The context gets a second prompt's worth of
    room; vLLM allocates its KV cache by blocks as sequences grow, so the headroom costs nothing
    unless it is used.

    `ignore_eos` (benchmarks only): each path's own way of never stopping before
    `max_completion_length`, so every path decodes the same number of tokens.
    """
    config: dict[str, Any] = {}
    if path == "compiled":
        # TRL passes it to transformers' generate; compilation is switched on in `configure`.
        config["cache_implementation"] = "static"
    if path == "vllm":
        config.update(
            use_vllm=True,
            vllm_mode="colocate",
            vllm_gpu_memory_utilization=gpu_memory_utilization,
            vllm_max_model_length=vllm_context(max_prompt_length, max_completion_length),
            # vLLM's weights and KV cache are released while the trainer computes the loss (TRL
            # sleeps it at level 2 after each generation and wakes the KV cache for the next); a
            # parked policy takes that memory, so parking always sleeps.
            vllm_enable_sleep_mode=sleep or park_policy,
        )
    if ignore_eos:
        # TRL hands generation_kwargs to vLLM's SamplingParams or to transformers' generate.
        config["generation_kwargs"] = (
            {"ignore_eos": True} if path == "vllm" else {"min_new_tokens": max_completion_length}
        )
    return config


def ban_image_token(
    path: str, generation_kwargs: dict[str, Any] | None, image_token_id: int | None
) -> dict[str, Any]:
    """`generation_kwargs` with the image placeholder token banned from vLLM's sampling.

    A completion holding `<|image_pad|>` makes the policy's forward pass fail ("Image features and
    image tokens do not match": the model counts the placeholders of prompt and completion together
    against the images it was given). TRL 1.16 suppresses that token when transformers generates
    (`suppress_tokens`, GRPOTrainer.__init__) but not on its vLLM path, where the tiny model of the
    learning test sampled it at its second step on the H200 and ended the run. The same ban for
    vLLM, as a logit bias of -100, keeps the paths sampling alike; it wins over an override's bias
    for that token. The transformers paths are left to TRL (a `suppress_tokens` here would replace
    its list).
    """
    merged = dict(generation_kwargs or {})
    if path == "vllm" and image_token_id is not None:
        merged["logit_bias"] = {**(merged.get("logit_bias") or {}), int(image_token_id): -100.0}
    return merged


def sampling(path: str, grpo: dict[str, Any]) -> dict[str, Any]:
    """What TRL 1.16 hands the generator of `path` from these GRPOConfig keys, in its own names.

    vLLM's SamplingParams (trl/generation/vllm_generation.py, colocate mode) or transformers'
    generate (GRPOTrainer.__init__), with TRL's own defaults for keys not given; then
    `generation_kwargs` on top, as TRL applies it. Compared across paths by the tests and written
    into the benchmark's report, so a difference in how the paths sample is seen, not guessed.
    """
    temperature = grpo.get("temperature", 1.0)
    top_p = grpo.get("top_p", 1.0)
    top_k = grpo.get("top_k", 0)
    min_p = grpo.get("min_p")
    repetition = grpo.get("repetition_penalty", 1.0)
    if path == "vllm":
        params: dict[str, Any] = {
            "temperature": temperature,
            "top_p": top_p,
            "top_k": top_k,
            "min_p": 0.0 if min_p is None else min_p,
            "repetition_penalty": repetition,
            "max_tokens": grpo["max_completion_length"],
        }
    else:
        params = {
            "do_sample": True,
            "temperature": temperature,
            "top_p": top_p,
            "top_k": top_k,
            "min_p": min_p,
            "repetition_penalty": repetition,
            "max_new_tokens": grpo["max_completion_length"],
        }
    params.update(grpo.get("generation_kwargs") or {})
    return params


def configure(trainer: Any, path: str, *, generation_batch: int, max_length: int) -> None:
    """Switch compiled decoding on in a built GRPOTrainer (nothing to do for eager and vllm).

    TRL builds its GenerationConfig with `disable_compile=True`; the compiled path turns that off
    and gives transformers a compile config. The static cache is created here at its final size
    (every prompt of a generation batch padded to the longest, plus the completion), so later
    rounds reuse it and the compiled decoding graph is captured once, not once per prompt length.
    """
    if path != "compiled":
        return
    from transformers import CompileConfig

    config = trainer.generation_config
    config.disable_compile = False
    config.compile_config = CompileConfig(fullgraph=False, dynamic=False, mode="reduce-overhead")
    base = trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") else trainer.model
    if hasattr(base, "_prepare_static_cache"):
        cache = base._prepare_static_cache(
            cache_implementation="static",
            batch_size=generation_batch,
            max_cache_len=max_length,
            model_kwargs={},
        )
        # transformers allocates a static cache on its first use, and reusing one checks its batch
        # size, which only an allocated cache has.
        text = base.config.get_text_config(decoder=True)
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        # Keys and values come out of the base weights' projections, in the weights' dtype (LoRA's
        # own parameters may be fp32).
        weights = base.get_input_embeddings().weight
        cache.early_initialization(
            generation_batch, text.num_key_value_heads, head_dim, weights.dtype, weights.device
        )
    _fall_back_to_eager_on_failure(trainer)


def _fall_back_to_eager_on_failure(trainer: Any) -> None:
    """If the first compiled generation fails (a model or driver torch.compile cannot handle), log it
    and continue the run on the eager path instead of losing it; later failures are real errors."""
    original = trainer._generate_single_turn
    state = {"first": True}

    def generate(*args: Any, **kwargs: Any) -> Any:
        if not state["first"]:
            return original(*args, **kwargs)
        state["first"] = False
        try:
            return original(*args, **kwargs)
        except Exception as error:  # torch._dynamo / inductor errors have no common base class
            log.warning(
                "compiled generation failed (%s: %s); continuing with eager generation",
                type(error).__name__,
                error,
            )
            make_eager(trainer)
            trainer.generation_fallback = f"{type(error).__name__}: {error}"
            return original(*args, **kwargs)

    trainer._generate_single_turn = generate


def make_eager(trainer: Any) -> None:
    config = trainer.generation_config
    config.disable_compile = True
    config.compile_config = None
    config.cache_implementation = None
    trainer.generation_kwargs["cache_implementation"] = None
