"""Does colocated vLLM sample from the policy? Its log-probabilities against the policy's, on one sequence.

TRL corrects for vLLM sampling from a slightly different distribution than the policy's (bf16
kernels differ) by importance sampling, and with `vllm_importance_sampling_mode` `sequence_mask`
(TRL's default) a sequence whose ratio leaves [0, 3] contributes nothing to the loss. So if the
weights vLLM holds are not the policy's (a name that does not map, a weight not received, an
adapter not added), every sequence is masked, the loss and the gradient are exactly 0 and the run
learns nothing while it looks healthy. This probe tells that apart from kernel noise:

- On the first generation round, right before vLLM generates (its weights just synchronised), it
  asks vLLM for the prompt log-probabilities of one of the round's own prompts, cut to the image
  and 64 tokens after it (`image`), and of the same tokens without the image (`text`), and keeps
  a copy of the adapters' weights at that moment.
- After training, `compare` puts that copy back into the policy and computes the same
  log-probabilities with transformers, and reports the mean and largest absolute difference per
  token. Kernel noise in bf16 is a few hundredths; a wrong weight is of the order of the logits'
  spread (about 1 for a random model).

The text probe leaves out the vision tower, so the two together say which half is wrong.
"""

from __future__ import annotations

import math
from typing import Any

TAIL_TOKENS = 64
"""Tokens kept after the image's last placeholder (enough positions, a small logits tensor)."""


class SyncProbe:
    """Installed around one `runner.train`: `install()` before, `compare(policy, processor)` after."""

    def __init__(self) -> None:
        self.vllm: dict[str, list[float]] = {}
        self.sequences: dict[str, list[int]] = {}
        self.image: Any = None
        self.adapters: dict[str, Any] = {}
        self.error: str | None = None
        self._original: Any = None

    def install(self, special_ids: set[int]) -> None:
        """Wrap TRL's colocated generation so its first round runs the probe (once)."""
        from trl.generation.vllm_generation import VLLMGeneration

        original = VLLMGeneration.generate
        self._original = original
        probe = self

        def generate(generation: Any, *args: Any, **kwargs: Any) -> Any:
            if not probe.vllm and probe.error is None:
                probe._wrap_llm(generation, special_ids)
            return original(generation, *args, **kwargs)

        VLLMGeneration.generate = generate  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if self._original is not None:
            from trl.generation.vllm_generation import VLLMGeneration

            VLLMGeneration.generate = self._original  # type: ignore[method-assign]
            self._original = None

    def _wrap_llm(self, generation: Any, special_ids: set[int]) -> None:
        llm = generation.llm
        llm_generate = llm.generate
        probe = self

        def first_generate(prompts: Any, *args: Any, **kwargs: Any) -> Any:
            llm.generate = llm_generate  # once
            try:
                probe._measure(llm_generate, prompts[0], special_ids, generation.model)
            except Exception as error:  # the probe must never cost the run
                probe.error = f"{type(error).__name__}: {error}"
            return llm_generate(prompts, *args, **kwargs)

        llm.generate = first_generate

    def _measure(self, llm_generate: Any, prompt: dict[str, Any], special_ids: set[int], model: Any) -> None:
        from vllm import SamplingParams

        ids = list(prompt["prompt_token_ids"])
        image = (prompt.get("multi_modal_data") or {}).get("image")
        placeholders = [i for i, token in enumerate(ids) if token in special_ids]
        cut = min(len(ids), (placeholders[-1] + 1 if placeholders else 0) + TAIL_TOKENS)
        self.sequences["image"] = ids[:cut]
        self.sequences["text"] = [t for t in ids[:cut] if t not in special_ids]
        self.image = image
        params = SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0)
        requests = {
            "image": {"prompt_token_ids": self.sequences["image"], "multi_modal_data": {"image": image}},
            "text": {"prompt_token_ids": self.sequences["text"]},
        }
        if image is None:
            del requests["image"]
        for name, request in requests.items():
            output = llm_generate([request], sampling_params=params, use_tqdm=False)[0]
            tokens = self.sequences[name]
            if list(output.prompt_token_ids) != tokens:
                self.sequences[f"{name}_vllm_prompt"] = list(output.prompt_token_ids)
            # A position vLLM reports no log-probability for (None) is left out on both sides.
            self.vllm[name] = [
                float(entry[tokens[i]].logprob) if entry and tokens[i] in entry else math.nan
                for i, entry in enumerate(output.prompt_logprobs[1 : len(tokens)], start=1)
            ]
        self.adapters = {
            name: param.detach().to("cpu", copy=True)
            for name, param in model.named_parameters()
            if param.requires_grad
        }

    def compare(self, policy: Any, processor: Any) -> dict[str, Any]:
        """The same log-probabilities from the policy (its adapters as vLLM received them)."""
        import torch

        if self.error or not self.vllm:
            return {"error": self.error or "the probe did not run (no vLLM generation round)"}
        params = dict(policy.named_parameters())
        with torch.no_grad():
            for name, saved in self.adapters.items():
                params[name].copy_(saved.to(params[name].device))
        device = next(policy.parameters()).device
        report: dict[str, Any] = {"adapters_restored": len(self.adapters)}
        policy.eval()  # no LoRA dropout: vLLM's merged weights have none
        for name, values in self.vllm.items():
            tokens = self.sequences[name]
            inputs: dict[str, Any] = {"input_ids": torch.tensor([tokens], device=device)}
            inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
            if name == "image":
                pixels = processor.image_processor(images=[self.image], return_tensors="pt")
                inputs.update({k: v.to(device) for k, v in pixels.items()})
                inputs["pixel_values"] = inputs["pixel_values"].to(next(policy.parameters()).dtype)
                # Qwen3-VL's M-RoPE reads which positions are image tokens (1) from this mask.
                image_token = policy.config.image_token_id
                inputs["mm_token_type_ids"] = (inputs["input_ids"] == image_token).int()
            with torch.no_grad():
                logits = policy(**inputs).logits[0, :-1].float()
            own = torch.log_softmax(logits, dim=-1).gather(1, inputs["input_ids"][0, 1:, None])[:, 0]
            theirs = torch.tensor(values, device=device)
            known = ~torch.isnan(theirs)
            difference = (own - theirs).abs()[known]
            own, theirs = own[known], theirs[known]
            report[name] = {
                "tokens": int(known.sum()),
                "tokens_without_vllm_logprob": int((~known).sum()),
                "vllm_prompt_differs": f"{name}_vllm_prompt" in self.sequences,
                "mean_abs_logp_difference": float(difference.mean()),
                "max_abs_logp_difference": float(difference.max()),
                "policy_mean_logp": float(own.mean()),
                "vllm_mean_logp": float(theirs.mean()),
                "uniform_logp": -math.log(logits.shape[-1]),
            }
        return report
