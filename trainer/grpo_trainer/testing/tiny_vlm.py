"""A Qwen3-VL-architecture model, tokenizer and processor built in code, for offline tests.

No hub is reachable from CI or the GPU machine, so tests cannot download even a tiny model. This
module builds one from a config with random weights, a word-level tokenizer over a small vocabulary
with Qwen's special tokens and chat template, and a real `Qwen3VLProcessor`, and saves them as a
normal Hugging Face folder that `from_pretrained` (and so both engines) can load.

`QWEN3_VL_4B` holds the real Qwen3-VL-4B shapes, for memory and speed measurements where random
weights cost the same as trained ones.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTROL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# The single-GPU LoRA recipe's tags: one token each, but ordinary text (decoding keeps them), as in
# Qwen's own vocabulary, so a reward reading decoded responses sees them.
TAG_TOKENS = ("<REASONING>", "</REASONING>", "<SOLUTION>", "</SOLUTION>")
SPECIAL_TOKENS = (*CONTROL_TOKENS, *TAG_TOKENS)
"""Every token matched whole, in vocabulary order."""
UNK_TOKEN = "[UNK]"
NEWLINE = "\n"
# What the whitespace pre-tokenizer keeps in one piece: a run of word characters or of punctuation.
_PIECE = re.compile(r"\w+|[^\w\s]+")
BASE_WORDS = ("system", "user", "assistant", "the", "is", "a", "what", "?", ".", ",", ":")

# Qwen's chat layout, reduced to what the tests need: text and image parts, generation prompt.
# Without the newline token (the default) the whitespace pre-tokenizer drops its newlines.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class VlmShape:
    """The sizes of a Qwen3-VL model; `vocab_size=None` means the tokenizer's own size."""

    text_hidden: int
    text_layers: int
    text_heads: int
    text_kv_heads: int
    head_dim: int
    text_intermediate: int
    mrope_section: tuple[int, int, int]
    vision_hidden: int
    vision_depth: int
    vision_heads: int
    vision_intermediate: int
    deepstack_indexes: tuple[int, ...]
    vocab_size: int | None = None
    patch_size: int = 16
    tie_word_embeddings: bool = True
    # Standard deviation of the (tied) token embeddings; None keeps the model's initialiser.
    # A tiny model initialised at 0.02 has logits so flat (|h| * |e| is small after the final
    # norm) that no LoRA update can make it confident; trained models' embeddings are larger.
    embedding_std: float | None = None


TINY = VlmShape(
    text_hidden=64,
    text_layers=2,
    text_heads=4,
    text_kv_heads=2,
    head_dim=16,
    text_intermediate=128,
    mrope_section=(4, 2, 2),
    vision_hidden=32,
    vision_depth=2,
    vision_heads=2,
    vision_intermediate=64,
    deepstack_indexes=(0,),
    embedding_std=0.1,
)

# Qwen3-VL-4B-Instruct's config.json shapes.
QWEN3_VL_4B = VlmShape(
    text_hidden=2560,
    text_layers=36,
    text_heads=32,
    text_kv_heads=8,
    head_dim=128,
    text_intermediate=9728,
    mrope_section=(24, 20, 20),
    vision_hidden=1024,
    vision_depth=24,
    vision_heads=16,
    vision_intermediate=4096,
    deepstack_indexes=(5, 11, 17),
    vocab_size=151936,
)


def build_tokenizer(
    words: Sequence[str] = (), *, vocab_size: int | None = None, newline: bool = False
) -> Any:
    """A word-level tokenizer: whitespace-split words, Qwen's special tokens, a chat template.

    Word-level keeps every task answer a single token, so "chance" is well defined. `vocab_size`
    pads the vocabulary with filler words up to a real model's size. Words the whitespace
    pre-tokenizer would split (`<think>`, `\\boxed{5}`) are matched whole, so a response written
    with them decodes back to the same text and a reward that parses it sees what the model wrote.

    `newline=True` makes the newline a token of its own, as in Qwen's byte-level vocabulary: verl's
    rollout (its Qwen continuous-token builder) refuses a tokenizer whose newline is not exactly one
    token, and the chat template's newlines then reach the model. It is off by default because the
    TRL engine's learning test is tuned on the model without it: one more token the policy can
    sample changes its trajectory, and it then misses its threshold in 150 steps (measured). The
    newline comes last, so every other token keeps its id.
    """
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for token in (UNK_TOKEN, *SPECIAL_TOKENS, *BASE_WORDS, *words, *([NEWLINE] if newline else [])):
        vocab.setdefault(token, len(vocab))
    if vocab_size is not None:
        if vocab_size < len(vocab):
            raise ValueError(f"vocab_size {vocab_size} is below the {len(vocab)} tokens needed")
        for index in range(vocab_size - len(vocab)):
            vocab[f"w{index}"] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.add_special_tokens(list(CONTROL_TOKENS))
    extra = (w for w in dict.fromkeys(words) if w not in SPECIAL_TOKENS and not _PIECE.fullmatch(w))
    whole = [*TAG_TOKENS, *([NEWLINE] if newline else []), *extra]
    backend.add_tokens([AddedToken(token, normalized=False, special=False) for token in whole])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=UNK_TOKEN,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def build_processor(tokenizer: Any, *, patch_size: int = 16, max_image_side: int = 64) -> Any:
    """A real Qwen3VLProcessor: the image processor resizes to patch multiples and the processor
    expands each `<|image_pad|>` into one token per merged 2x2 patch group."""
    from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    factor = patch_size * 2
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch_size,
        temporal_patch_size=2,
        merge_size=2,
        min_pixels=factor * factor,
        max_pixels=max_image_side * max_image_side,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    video_processor = Qwen3VLVideoProcessor(patch_size=patch_size, temporal_patch_size=2, merge_size=2)
    return Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )


def build_config(shape: VlmShape, tokenizer: Any, vocab_size: int | None = None) -> Any:
    from transformers import Qwen3VLConfig

    ids = tokenizer.convert_tokens_to_ids
    vocab_size = vocab_size or shape.vocab_size or len(tokenizer)
    return Qwen3VLConfig(
        text_config={
            "hidden_size": shape.text_hidden,
            "num_hidden_layers": shape.text_layers,
            "num_attention_heads": shape.text_heads,
            "num_key_value_heads": shape.text_kv_heads,
            "head_dim": shape.head_dim,
            "intermediate_size": shape.text_intermediate,
            "vocab_size": vocab_size,
            "max_position_embeddings": 32768,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 5000000.0,
                "mrope_section": list(shape.mrope_section),
                "mrope_interleaved": True,
            },
            "tie_word_embeddings": shape.tie_word_embeddings,
            "bos_token_id": None,
            "eos_token_id": ids("<|im_end|>"),
            "pad_token_id": ids("<|endoftext|>"),
        },
        vision_config={
            "depth": shape.vision_depth,
            "hidden_size": shape.vision_hidden,
            "num_heads": shape.vision_heads,
            "intermediate_size": shape.vision_intermediate,
            "out_hidden_size": shape.text_hidden,
            "patch_size": shape.patch_size,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "deepstack_visual_indexes": list(shape.deepstack_indexes),
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=shape.tie_word_embeddings,
    )


def blind_projector(model: Any, *, bias_std: float = 0.1, seed: int = 0) -> None:
    """Make the projectors' output independent of the image: zero weights, a fixed random bias.

    A random vision tower still maps different images to different embeddings, and LoRA on the
    language model alone can learn to read them, so a learning test on such a model would pass
    with the vision tower frozen. Starting blind (as a text model with an untrained projector
    is) means only training the vision side, through LoRA on the projector and encoder, can
    make the model see: the control run with the vision layers frozen must then stay at chance.
    The bias keeps image tokens an ordinary non-zero embedding; an all-zero one sits at the
    RMS norm's singular point, where gradients are ~1/sqrt(eps) and training is unstable.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    visual = model.model.visual
    with torch.no_grad():
        for merger in (visual.merger, *visual.deepstack_merger_list):
            merger.linear_fc2.weight.zero_()
            bias = torch.randn(merger.linear_fc2.bias.shape, generator=generator) * bias_std
            merger.linear_fc2.bias.copy_(bias.to(merger.linear_fc2.bias.dtype))


def build_model(
    shape: VlmShape, tokenizer: Any, *, seed: int = 0, blind: bool = False, dtype: Any = None
) -> Any:
    """A randomly initialised `Qwen3VLForConditionalGeneration` (on the default device).

    A tokenizer whose last token is the newline gets the weights the same seed gave before that
    token existed, plus one embedding row for it from a generator of its own: tests tuned on the
    earlier model (the TRL engine's learning test) see the same network.
    """
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    vocab = shape.vocab_size or len(tokenizer)
    appended = (
        shape.vocab_size is None
        and NEWLINE in tokenizer.get_vocab()
        and tokenizer.convert_tokens_to_ids(NEWLINE) == vocab - 1
    )
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration._from_config(
        build_config(shape, tokenizer, vocab - 1 if appended else vocab), dtype=dtype or torch.float32
    )
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    if shape.embedding_std is not None:
        with torch.no_grad():
            model.get_input_embeddings().weight.normal_(0.0, shape.embedding_std)
    if blind:
        blind_projector(model, bias_std=shape.embedding_std or 0.02, seed=seed)
    if appended:
        model.resize_token_embeddings(vocab, mean_resizing=False)
        row = torch.randn(shape.text_hidden, generator=torch.Generator().manual_seed(seed + 1), device="cpu")
        with torch.no_grad():
            embeddings = model.get_input_embeddings().weight
            embeddings[vocab - 1] = (row * (shape.embedding_std or 0.02)).to(
                embeddings.device, embeddings.dtype
            )
    return model


def build_tiny_vlm(
    out_dir: str | os.PathLike[str],
    *,
    words: Sequence[str] = (),
    shape: VlmShape = TINY,
    seed: int = 0,
    blind: bool = False,
    max_image_side: int = 64,
    newline: bool = False,
) -> Path:
    """Build and save model, tokenizer and processor to `out_dir`; return the folder.

    `newline=True` for verl's rollout (see `build_tokenizer`)."""
    target = Path(out_dir)
    tokenizer = build_tokenizer(words, vocab_size=shape.vocab_size, newline=newline)
    processor = build_processor(tokenizer, patch_size=shape.patch_size, max_image_side=max_image_side)
    model = build_model(shape, tokenizer, seed=seed, blind=blind)
    model.save_pretrained(target)
    processor.save_pretrained(target)
    return target
