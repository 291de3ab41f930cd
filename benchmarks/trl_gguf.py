"""How long the GGUF export takes on CPU, on the tiny Qwen3-VL the CI round trip uses (or a bigger one).

Builds a random Qwen3-VL with Qwen's tokenizer (`testing/qwen_tokenizer.py`; the GGUF tests' shape
by default), then runs the engine's `export_gguf` for each `--quantization` and reports the seconds
of the whole export and the files' sizes; the engine's log has each tool's own time.

    python -m benchmarks.trl_gguf --out /tmp/gguf-bench
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--quantization", default="q4_k_m,q8_0", help="comma-separated export.gguf types")
    parser.add_argument("--hidden", type=int, default=256, help="language model width (the tests': 256)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from grpo_trainer.engines.trl.gguf import export_gguf
    from grpo_trainer.engines.trl.gguf_tools import LLAMA_CPP_PYTHON, find_tools
    from grpo_trainer.testing.qwen_tokenizer import VOCAB_FILE, build_qwen_vlm, cached_qwen_tokenizer
    from grpo_trainer.testing.tiny_vlm import TINY

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tools = find_tools()
    started = time.monotonic()
    tokenizer = cached_qwen_tokenizer(tools.source / VOCAB_FILE, tools.root / "qwen2-tokenizer")
    shape = replace(
        TINY,
        text_hidden=args.hidden,
        text_intermediate=2 * args.hidden,
        text_heads=args.hidden // 64,
        text_kv_heads=max(1, args.hidden // 128),
        head_dim=64,
        mrope_section=(16, 8, 8),
        vision_hidden=64,
        vision_intermediate=128,
        embedding_std=None,
    )
    model_dir = build_qwen_vlm(out / "model", tokenizer, shape)
    report: dict[str, object] = {
        "llama_cpp_python_sdist": LLAMA_CPP_PYTHON,
        "model_build_seconds": time.monotonic() - started,
        "safetensors_mib": sum(p.stat().st_size for p in model_dir.glob("*.safetensors")) / 2**20,
        "exports": {},
    }
    for quantization in args.quantization.split(","):
        started = time.monotonic()
        files = export_gguf(
            model_dir, out / quantization, quantization=quantization, projector="f16", tools=tools
        )
        report["exports"][quantization] = {  # type: ignore[index]
            "seconds": time.monotonic() - started,
            "model_mib": Path(files.model).stat().st_size / 2**20,
            "projector_mib": Path(files.projector).stat().st_size / 2**20,
        }
    (out / "gguf.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
