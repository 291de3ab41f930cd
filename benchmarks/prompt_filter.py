"""The over-long prompt filter's speed: worker processes against the threads each one runs.

verl's dataset runs every training prompt through the processor, image included, before step 1
(`data.filter_overlong_prompts`), in `data.filter_overlong_prompts_workers` processes forked by
`datasets`. Each forked worker inherits the TaskRunner's thread settings: with the pod's
`OMP_NUM_THREADS` as the worker count and as every worker's thread count, W workers run W x W
threads on W cores. This script times the same work (the chat template and the Qwen3-VL processor
on a geo3k-like row with one image) in a new process per setting, on synthetic rows:

    python -m benchmarks.prompt_filter [--rows 2101] [--side 896] [--workers 16]
                                       [--threads 16] [--json out.json]

Settings compared, one after the other in one run:
- `inherit`: every worker keeps the parent's threads (`--threads` each), as verl's filter did;
- `shared`: the filter runs inside the engine's own `worker_setup.threads_shared_by`, so the
  forked workers share the threads (threads // workers each, at least 1);
- `one-process`: one process with all the threads (verl's default of one worker).

It needs transformers, datasets, torch and Pillow; no GPU. The machine's CPUs (count, affinity and
any cgroup quota) are recorded with the figures.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .paths import REPO

MODES = ("inherit", "shared", "one-process")


def cpu_facts() -> dict[str, Any]:
    """What the process may use: the CPU count, its affinity, and a cgroup quota if any."""
    facts: dict[str, Any] = {"cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0))}
    for path in ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        with_quota = Path(path)
        if with_quota.is_file():
            facts[with_quota.name] = with_quota.read_text().strip()
    period = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if period.is_file():
        facts["cpu.cfs_period_us"] = period.read_text().strip()
    return facts


def build(folder: Path, rows: int, side: int) -> None:
    """The 4B-shaped processor and tokenizer, and `rows` geo3k-like rows (one image each)."""
    import random

    import datasets
    from grpo_trainer.testing import tiny_vlm
    from PIL import Image, ImageDraw

    shape = tiny_vlm.QWEN3_VL_4B
    words = ("<think>", "</think>", "x", "find", "5", "7")
    tokenizer = tiny_vlm.build_tokenizer(words, vocab_size=shape.vocab_size, newline=True)
    processor = tiny_vlm.build_processor(tokenizer, patch_size=shape.patch_size, max_image_side=448)
    processor.save_pretrained(folder / "processor")
    rng = random.Random(0)

    def png() -> bytes:
        image = Image.new("RGB", (side, side), "white")
        draw = ImageDraw.Draw(image)
        for _ in range(3):
            draw.polygon([(rng.randrange(side), rng.randrange(side)) for _ in range(3)], outline="black")
        out = io.BytesIO()
        image.save(out, format="PNG")
        return out.getvalue()

    records = [
        {"image": png(), "problem": "Find x." + " Look at the figure." * rng.randrange(16)}
        for _ in range(rows)
    ]
    datasets.Dataset.from_list(records).to_parquet(str(folder / "rows.parquet"))


def child(folder: Path, mode: str, workers: int, threads: int) -> dict[str, Any]:
    """One setting, in this (new) process: the filter over every row, timed."""
    import contextlib

    import datasets
    import torch
    from grpo_trainer.engines.verl.worker_setup import threads_shared_by
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(folder / "processor")
    rows = datasets.Dataset.from_parquet(str(folder / "rows.parquet"))
    torch.set_num_threads(threads)

    def short_enough(doc: dict[str, Any]) -> bool:
        image = Image.open(io.BytesIO(doc["image"])).convert("RGB")
        messages = [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": doc["problem"]}]}
        ]
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return len(processor(text=[text], images=[image])["input_ids"][0]) <= 2048

    def worker_threads(_: dict[str, Any]) -> dict[str, int]:
        return {"torch_threads": torch.get_num_threads()}

    processes = 1 if mode == "one-process" else workers
    num_proc = processes if processes > 1 else None
    with threads_shared_by(workers) if mode == "shared" else contextlib.nullcontext():
        seen = rows.select(range(min(len(rows), processes))).map(
            worker_threads, num_proc=num_proc, load_from_cache_file=False
        )
        started = time.monotonic()
        kept = rows.filter(short_enough, num_proc=num_proc, load_from_cache_file=False)
        seconds = time.monotonic() - started
    return {
        "mode": mode,
        "processes": processes,
        "threads_each": sorted(set(seen["torch_threads"])),
        "rows": len(rows),
        "kept": len(kept),
        "seconds": round(seconds, 2),
        "rows_per_s": round(len(rows) / seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2101, help="training rows (the geo3k recipe has 2,101)")
    parser.add_argument("--side", type=int, default=896, help="image side in pixels")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="filter processes")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="OMP_NUM_THREADS of the parent"
    )
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.folder, args.child, args.workers, args.threads)))
        return 0

    modes = [mode for mode in args.modes.split(",") if mode]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)} (expected {', '.join(MODES)})")
    result: dict[str, Any] = {
        "machine": cpu_facts(),
        "workers": args.workers,
        "threads": args.threads,
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="prompt-filter-") as tmp:
        folder = Path(tmp)
        started = time.monotonic()
        build(folder, args.rows, args.side)
        print(
            f"[prompt-filter] {args.rows} rows of {args.side}-pixel images built in {time.monotonic() - started:.0f} s",
            flush=True,
        )
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
        for mode in modes:
            command = [
                sys.executable,
                "-m",
                "benchmarks.prompt_filter",
                "--child",
                mode,
                "--folder",
                str(folder),
                "--workers",
                str(args.workers),
                "--threads",
                str(args.threads),
            ]
            print(
                f"[prompt-filter] {mode}: {args.workers} workers, OMP_NUM_THREADS={args.threads} ...",
                flush=True,
            )
            done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return done.returncode
            run = json.loads(done.stdout.strip().splitlines()[-1])
            result["runs"].append(run)
            print(
                f"[prompt-filter] {mode}: {run['seconds']} s, {run['rows_per_s']} rows/s "
                f"({run['processes']} processes x {run['threads_each']} threads)",
                flush=True,
            )
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
