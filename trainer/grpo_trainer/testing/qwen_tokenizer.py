"""Qwen's real byte-level BPE tokenizer, rebuilt from the vocabulary file llama.cpp ships.

The GGUF converter recognises a model's pre-tokenizer by hashing how the tokenizer splits a fixed
text, so a tiny test model with the word-level tokenizer of `tiny_vlm` cannot be converted, and no
hub is reachable to fetch Qwen's `tokenizer.json`. llama.cpp's sources (from the `llama-cpp-python`
sdist the GGUF tooling is built from) carry `models/ggml-vocab-qwen2.gguf`: Qwen2's 151,643 BPE
tokens and 151,387 merges, with test inputs and the token ids Qwen's tokenizer gives for them
(`.inp`/`.out`). This module turns that file back into a Hugging Face fast tokenizer with Qwen2's
pre-tokenizer and the special tokens of the Qwen2.5-VL / Qwen3-VL layout (ids 151643-151656), so a
tiny Qwen3-VL converts and runs in llama.cpp exactly as the real one does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .tiny_vlm import CHAT_TEMPLATE

# Qwen2's pre-tokenizer split (tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
# Qwen2.5-VL / Qwen3-VL special tokens, from id 151643 on.
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
QWEN_VOCAB_SIZE = 151936
"""The embedding rows of every Qwen3-VL model (the tokenizer has fewer; the rest is padding)."""
VOCAB_FILE = "models/ggml-vocab-qwen2.gguf"


def _strings(field: Any) -> list[str]:
    return [bytes(field.parts[index]).decode("utf-8") for index in field.data]


def read_gguf_vocab(path: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """The normal (type 1) tokens in id order and the merges of a llama.cpp vocabulary file."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    tokens = _strings(reader.fields["tokenizer.ggml.tokens"])
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[index][0]) for index in types_field.data]
    normal = [token for token, kind in zip(tokens, types, strict=True) if kind == 1]
    if normal != tokens[: len(normal)]:
        raise ValueError(f"{path}: normal tokens are not the first ids")
    return normal, _strings(reader.fields["tokenizer.ggml.merges"])


def build_qwen_tokenizer(vocab_file: str | os.PathLike[str]) -> Any:
    """Qwen2's tokenizer (byte-level BPE, NFC, Qwen's split) with the VL special tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokens, merges = read_gguf_vocab(vocab_file)
    vocab = {token: index for index, token in enumerate(tokens)}
    for offset, special in enumerate(QWEN_SPECIAL_TOKENS):
        vocab[special] = len(tokens) + offset
    pairs = [tuple(merge.split(" ", 1)) for merge in merges]
    backend = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def vocab_test_cases(vocab_file: str | os.PathLike[str]) -> list[tuple[str, list[int]]]:
    """llama.cpp's tokenizer test inputs beside the vocabulary file, with Qwen's ids for each."""
    base = Path(vocab_file)
    separator = "\n__ggml_vocab_test__\n"
    texts = base.with_name(base.name + ".inp").read_text(encoding="utf-8").split(separator)
    ids = base.with_name(base.name + ".out").read_text(encoding="utf-8").splitlines()
    # The .inp file ends with a separator; the .out file has one line per text.
    texts = texts[: len(ids)]
    return [(text, [int(v) for v in line.split()]) for text, line in zip(texts, ids, strict=True)]


def cached_qwen_tokenizer(vocab_file: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> Any:
    """`build_qwen_tokenizer`, saved under `cache_dir` the first time (reading the 300,000 strings
    of the vocabulary file takes tens of seconds; loading the saved tokenizer, one)."""
    from transformers import PreTrainedTokenizerFast

    folder = Path(cache_dir)
    if (folder / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(folder)
    tokenizer = build_qwen_tokenizer(vocab_file)
    staging = folder.with_name(folder.name + ".partial")
    tokenizer.save_pretrained(staging)
    staging.rename(folder)
    return tokenizer


def build_qwen_vlm(out_dir: str | os.PathLike[str], tokenizer: Any, shape: Any, *, seed: int = 0) -> Path:
    """A random Qwen3-VL of `shape` with Qwen's tokenizer, saved as a Hugging Face folder."""
    from dataclasses import replace

    from .tiny_vlm import build_model, build_processor

    shape = replace(shape, vocab_size=QWEN_VOCAB_SIZE)
    processor = build_processor(tokenizer, patch_size=shape.patch_size)
    model = build_model(shape, tokenizer, seed=seed)
    target = Path(out_dir)
    model.save_pretrained(target)
    processor.save_pretrained(target)
    return target
