"""Real verl + vLLM GRPO steps on the lent H200, through `grpo-train run` with a GRPOJob spec.

Each part fits one device call (under 9 minutes) and leaves at most 8 files under --out:

    tiny       the offline tiny Qwen3-VL (head_dim 64: vLLM's attention kernels reject smaller heads) on
               geo3k-format synthetic data with images, through the geo3k preset and the builtin geo3k
               reward, vLLM rollouts: attempt 1 trains steps 1-2 and saves a checkpoint; attempt 2, a
               second process, resumes from it, trains steps 3-4, saves and exports (merged model/).
    shapes-4b  the same job at Qwen3-VL-4B shapes (random weights): 3 steps, for the step time and its
               split (generation, log-probs, update: verl's timing_s/*), tokens/s per GPU (verl's
               perf/throughput) and peak memory (perf/max_memory_*); no checkpoint (it would be ~50 GB).

Commands (docs/benchmarks/verl-gpu.md has the whole sequence and what to carry):

    here:   python3 benchmarks/verl_gpu.py prepare          # the few wheels grpo-train needs beyond the stack
    there:  eval "$(bash benchmarks/gpu_stack.sh env)"
            python3 benchmarks/verl_gpu.py tiny --out "$OUT" [--gpus 2]
            python3 benchmarks/verl_gpu.py shapes-4b --out "$OUT" [--gpus 2] [--steps 3]
    CPU smoke (everything up to launching verl: model, data, spec, plan, validate, data preparation):
            python3 benchmarks/verl_gpu.py tiny --out /tmp/smoke --smoke

Progress goes to standard output; each `grpo-train run` log is kept (compressed) under --out.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "trainer"), str(ROOT / "operator")]

WHEELS = ROOT / ".cache" / "verl-gpu" / "wheels"
EXTRA_SITE = Path("/tmp/verl-gpu-extra")
# What `grpo-train run` imports beyond the carried GPU stack (benchmarks/gpu_stack_requirements.txt),
# pure Python or small: fetched here by `prepare`, installed there only if missing.
EXTRA_WHEELS = (
    "lightkube==1.0.1",
    "lightkube-models==1.37.0.8",
    "PyYAML==6.0.4",
    # lightkube's HTTP client, in case the machine has none (appended after the stack: theirs win).
    "httpx==0.28.1",
    "httpcore==1.0.9",
    "h11==0.16.0",
    "anyio==4.16.0",
    "idna==3.20",
    "certifi==2026.10.19.post1",
)
NEEDED = (
    "yaml",
    "lightkube",
    "pydantic",
    "pyarrow",
    "PIL",
    "tqdm",
    "huggingface_hub",
    "hydra",
    "torch",
    "transformers",
    "peft",
    "ray",
    "vllm",
    "verl",
    "tensordict",
    "transfer_queue",
    "torchdata",
    "qwen_vl_utils",
    "mathruler",
    "codetiming",
)
WORDS = ("<think>", "</think>", "x", "find", "5", "7", "\\boxed{5}", "\\boxed{7}")
RUN_TIMEOUT_S = 420
# The tiny part's attempts: on the H200 verl + vLLM take ~3 minutes to start (Ray, the FSDP workers,
# the vLLM server) before the first step, so each attempt gets most of a call.
TINY_ATTEMPT_S = int(os.environ.get("VERL_GPU_TINY_ATTEMPT_S", "330"))


def _attention() -> dict[str, Any]:
    """verl's actor asks transformers for FlashAttention 2, which the trainer image compiles
    (Dockerfile.cuda) but PyPI has no wheel of for this torch: without the package the actor and
    reference use PyTorch's SDPA, and padding stays in (verl's remove-padding path goes through
    flash-attn's varlen kernel). Recorded in each summary, since it changes the step time."""
    if importlib.util.find_spec("flash_attn") is not None:
        return {"implementation": "flash_attention_2", "overrides": [], "remove_padding": True}
    return {
        "implementation": "sdpa",
        "overrides": ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa"],
        "remove_padding": False,
    }


ATTENTION = _attention()


def log(message: str) -> None:
    print(f"[verl-gpu {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- the stack ---------------------------------------------------------------------------------


def prepare() -> int:
    """Here: download the extra wheels (CPython 3.12 manylinux, as benchmarks/gpu_stack.sh does)."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "any"]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--abi",
        "cp312",
        "--abi",
        "abi3",
        "--abi",
        "none",
        *[arg for platform in platforms for arg in ("--platform", platform)],
        "-d",
        str(WHEELS),
        *EXTRA_WHEELS,
    ]
    subprocess.run(command, check=True)
    files = sorted(p.name for p in WHEELS.glob("*.whl"))
    log(f"{len(files)} wheels in {WHEELS.relative_to(ROOT)}: {', '.join(files)}")
    print(json.dumps({"carry": [str(WHEELS.relative_to(ROOT))]}))
    return 0


def preflight(out: Path) -> list[str]:
    """Import what `grpo-train run` needs; install the carried extra wheels for what is missing."""
    missing = _missing()
    extra = {"yaml", "lightkube"} & set(missing)
    if extra and WHEELS.is_dir():
        log(f"installing the carried wheels for {', '.join(sorted(extra))} into {EXTRA_SITE}")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--target",
                str(EXTRA_SITE),
            ]
            + [str(p) for p in WHEELS.glob("*.whl")],
            check=True,
        )
        sys.path.append(str(EXTRA_SITE))  # after the stack: its packages win where both have one
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [os.environ.get("PYTHONPATH"), str(EXTRA_SITE)])
        )
        importlib.invalidate_caches()
        missing = _missing()
    if missing:
        log(
            f"cannot run: missing {', '.join(missing)} (carry the GPU stack first: docs/benchmarks/verl-gpu.md)"
        )
        write_json(out / "summary.json", {"ok": False, "missing": missing})
    return missing


def _missing() -> list[str]:
    found = []
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except Exception:  # ImportError, or a broken install
            found.append(name)
    return found


# --- model, data, spec ---------------------------------------------------------------------------


def build_model(folder: Path, shape_name: str, smoke: bool) -> Path:
    """The offline Qwen3-VL: tiny (head_dim 64 for vLLM's kernels) or Qwen3-VL-4B's shapes."""
    import torch
    from grpo_trainer.testing import tiny_vlm

    if (folder / "config.json").is_file():
        return folder
    if shape_name == "tiny" or smoke:
        # vLLM's attention kernels reject heads under 64 wide (text and vision tower alike).
        shape = replace(
            tiny_vlm.TINY,
            head_dim=64,
            mrope_section=(16, 8, 8),
            vision_hidden=128,
            vision_heads=2,
            vision_intermediate=256,
        )
    else:
        shape = tiny_vlm.QWEN3_VL_4B
    started = time.monotonic()
    tokenizer = tiny_vlm.build_tokenizer(WORDS, vocab_size=shape.vocab_size, newline=True)
    processor = tiny_vlm.build_processor(tokenizer, patch_size=shape.patch_size, max_image_side=448)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = tiny_vlm.build_model(shape, tokenizer, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    del model
    log(
        f"model: {shape_name}, {params / 1e9:.3f}B parameters, built on {device} in {time.monotonic() - started:.0f} s"
    )
    return folder


def png(rng: random.Random, side: int) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(image)
    for _ in range(3):
        points = [(rng.randrange(side), rng.randrange(side)) for _ in range(3)]
        draw.polygon(points, outline="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def build_geo3k(folder: Path, train: int, test: int, side: int) -> Path:
    """geo3k's hub layout (images, problem, answer), read by the trainer's own geo3k preset."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(0)
    schema = pa.schema(
        [
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("problem", pa.string()),
            ("answer", pa.string()),
        ]
    )
    for split, rows in (("train", train), ("test", test)):
        records = [
            {
                "images": [{"bytes": png(rng, side), "path": f"{split}_{i}.png"}],
                "problem": "<image>Find x. Round to the nearest tenth.",
                "answer": rng.choice(["5", "7"]),
            }
            for i in range(rows)
        ]
        path = folder / "data" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    return folder


def spec(name: str, model: Path, data: Path, gpus: int, *, steps: int, **sizes: Any) -> dict[str, Any]:
    """The GRPOJob: geo3k preset, builtin geo3k reward, verl + vLLM on `gpus` H200s of one node."""
    return {
        "apiVersion": "grpo.dev/v1alpha1",
        "kind": "GRPOJob",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {
            "model": {"source": str(model)},
            "dataset": {
                "preset": "geo3k",
                "source": str(data),
                "maxPromptLength": sizes["prompt"],
                "maxResponseLength": sizes["response"],
            },
            "reward": sizes.get("reward", {"builtin": "geo3k"}),
            "algorithm": {
                "groupSize": sizes["group"],
                "trainBatchSize": sizes["batch"],
                "miniBatchSize": sizes["mini"],
                "microBatchSizePerDevice": sizes["micro"],
                "learningRate": 1.0e-6,
                "totalSteps": steps,
            },
            "rollout": {
                "tensorParallelSize": 1,
                "gpuMemoryUtilization": sizes["gpu_memory"],
                "enforceEager": sizes["eager"],
            },
            "engine": {
                "name": "verl",
                "strategy": "fsdp2",
                "gradientCheckpointing": True,
                "overrides": [*sizes.get("overrides", []), *ATTENTION["overrides"]],
                "useRemovePadding": ATTENTION["remove_padding"],
            },
            "resources": {"accelerator": "nvidia", "devicesPerNode": gpus, "nodes": 1},
            "checkpoint": {"saveInterval": sizes["save"], "keep": 2},
            "evaluation": {"interval": 0},
            "export": {"huggingFace": sizes["export"]},
        },
    }


def write_spec(path: Path, manifest: dict[str, Any]) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, default=str) + "\n")


BATCH_REWARD = """
import json, os

def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, log=None, **kwargs):
    with open(log, "a") as out:
        out.write(json.dumps({"size": len(solution_strs), "pid": os.getpid()}) + "\\n")
    return [float("\\\\boxed{" + str(t) + "}" in s) for s, t in zip(solution_strs, ground_truths)]
"""


def custom_batch_reward(work: Path) -> dict[str, Any]:
    """A user's batch reward in the job's reward mount: it logs the size of every call it gets."""
    # The operator mounts the file at /grpo/reward/reward.py; --workdir DIR puts /grpo at DIR/grpo.
    mount = work / "grpo" / "reward"
    mount.mkdir(parents=True, exist_ok=True)
    (mount / "reward.py").write_text(BATCH_REWARD)
    calls = work / "reward-calls.jsonl"
    return {
        "custom": {"configMap": "bench-reward", "function": "compute_score_batch", "batch": True},
        "kwargs": {"log": str(calls)},
    }


def reward_calls(work: Path) -> list[dict[str, Any]]:
    file = work / "reward-calls.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.is_file() else []


# --- running grpo-train ---------------------------------------------------------------------------


def grpo_train(args: list[str], log_file: Path, env: dict[str, str] | None = None, timeout: int = 120) -> int:
    """`grpo-train ARGS` (as the Ray job's entrypoint runs it), output to `log_file`, progress echoed."""
    # The console script `grpo-train` is grpo_trainer.cli:main (the package is not installed there).
    entry = "import sys; from grpo_trainer.cli import main; sys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", entry, *args]
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT / "trainer"), str(ROOT / "operator"), full_env.get("PYTHONPATH")])
    )
    log(f"$ grpo-train {' '.join(args)}")
    started = time.monotonic()
    with log_file.open("a") as out:
        # Its own session, so a stop reaches verl and the Ray processes it started.
        process = subprocess.Popen(
            command,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        watchdog = threading.Timer(timeout, _stop, args=(process, timeout))
        watchdog.start()
        assert process.stdout is not None
        try:
            for line in process.stdout:
                out.write(line)
                if _progress(line):
                    print("    " + line.rstrip()[:240], flush=True)
            code = process.wait()
        finally:
            watchdog.cancel()
    log(f"exit code {code} after {time.monotonic() - started:.0f} s (log: {log_file.name})")
    if args[0] == "run":
        stop_ray()
    return code


def _stop(process: subprocess.Popen[str], timeout: int) -> None:
    log(f"still running after {timeout} s: stopping it")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def stop_ray() -> None:
    """What a finished or stopped run's local Ray left behind (this machine runs nothing else on Ray)."""
    subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"],
        capture_output=True,
        timeout=120,
        check=False,
    )


def _progress(line: str) -> bool:
    markers = (
        "step:",
        "GRPO_FAILURE",
        "Traceback",
        "Error",
        "engine command",
        "exported",
        "training-complete",
    )
    return any(marker in line for marker in markers) and "Warning" not in line


def metrics(file: Path) -> list[dict[str, Any]]:
    """verl's file logger: one JSON line per step, {"step": N, "data": {...}}."""
    if not file.is_file():
        return []
    lines = []
    for raw in file.read_text().splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue
    return [line for line in lines if isinstance(line, dict) and "step" in line]


def pick(data: dict[str, Any], *prefixes: str) -> dict[str, Any]:
    return {k: v for k, v in sorted(data.items()) if k.startswith(prefixes)}


def gpu_facts() -> dict[str, Any]:
    try:
        query = "name,memory.total,driver_version"
        text = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        text = "no nvidia-smi"
    versions = {}
    for name in ("torch", "vllm", "verl", "ray", "transformers"):
        try:
            versions[name] = importlib.import_module(name).__version__
        except Exception:
            versions[name] = None
    return {"gpus": text.splitlines(), "versions": versions}


def smoke(work: Path, job_spec: Path, out: Path) -> int:
    """Everything up to launching verl: the plan, verl's composition check, the data preparation."""
    logs = out / "smoke.log"
    codes = {
        "plan": grpo_train(["plan", "--spec", str(job_spec), "--workdir", str(work)], logs),
        "validate": grpo_train(["validate", "--spec", str(job_spec), "--workdir", str(work)], logs),
        "prepare-data": grpo_train(["prepare-data", "--spec", str(job_spec), "--workdir", str(work)], logs),
    }
    write_json(out / "summary.json", {"ok": not any(codes.values()), "smoke": codes})
    log(f"smoke: {codes}")
    return 0 if not any(codes.values()) else 1


def archive_logs(out: Path, work: Path, name: str) -> None:
    """The run logs, metrics and commands in one file (the device tool returns at most 8)."""
    with tarfile.open(out / f"{name}-logs.tar.gz", "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.suffix in {".log", ".jsonl", ".txt", ".yaml", ".json"}:
                tar.add(path, arcname=str(path.relative_to(work)))


# --- the parts ------------------------------------------------------------------------------------


def tiny_summary(
    work: Path, args: argparse.Namespace, codes: dict[str, int], started: float
) -> dict[str, Any]:
    """What the attempts that ran left on the volume: steps, checkpoints, export, rewards, timings."""
    attempts = {
        name: metrics(next(iter(work.rglob(f"{name.replace('_', '-')}.jsonl")), work / "none"))
        for name in codes
    }
    every = [m for steps in attempts.values() for m in steps]
    record = next(iter(work.rglob("export.json")), None)
    return {
        "machine": gpu_facts(),
        "gpus": args.gpus,
        "attention": ATTENTION["implementation"],
        "exit_codes": codes,
        "steps": {name: [m["step"] for m in steps] for name, steps in attempts.items()},
        "checkpoints": sorted(p.name for p in work.rglob("global_step_*") if p.is_dir()),
        "export": json.loads(record.read_text()) if record else None,
        "rewards": {m["step"]: m["data"].get("critic/score/mean") for m in every},
        "reward_calls": reward_calls(work),
        "timing_s": {m["step"]: pick(m["data"], "timing_s/") for m in every},
        "seconds": round(time.monotonic() - started),
        "ok": False,  # part_tiny decides once both attempts have run
    }


def part_tiny(args: argparse.Namespace) -> int:
    out, work = args.out, args.work / "tiny"
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    model = build_model(work / "models" / "qwen3-vl-tiny", "tiny", args.smoke)
    data = build_geo3k(work / "geo3k-hub", train=64, test=8, side=64)
    sizes = {
        "prompt": 256,
        "response": 64,
        "group": 4,
        "batch": 8 * args.gpus,
        "mini": 4 * args.gpus,
        "micro": 4,
        "gpu_memory": 0.3,
        "eager": True,
        "save": 2,
        "export": True,
    }
    if args.reward == "custom-batch":
        sizes["reward"] = custom_batch_reward(work)
    first = write_spec(
        work / "job-steps-1-2.yaml", spec("verl-tiny", model, data, args.gpus, steps=2, **sizes)
    )
    if args.smoke:
        return smoke(work, first, out)
    env = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    started = time.monotonic()
    run_log = work / "run.log"
    code_1 = grpo_train(
        ["run", "--spec", str(first), "--workdir", str(work), "--no-report"],
        run_log,
        {**env, "GRPO_ATTEMPT": "1"},
        timeout=TINY_ATTEMPT_S,
    )
    # Written after each attempt: a call cut short still returns what attempt 1 did.
    summary = tiny_summary(work, args, {"attempt_1": code_1}, started)
    write_json(out / "tiny-summary.json", summary)
    archive_logs(out, work, "tiny")
    if code_1 != 0:
        log(f"attempt 1 failed (exit code {code_1}); attempt 2 not started")
        return 1
    # A later attempt of a finished job only exports: drop the mark so attempt 2 trains on, as a
    # retried attempt after a crash between checkpoint and end would.
    for marker in work.rglob("training-complete.json"):
        marker.unlink()
    second = write_spec(
        work / "job-steps-3-4.yaml", spec("verl-tiny", model, data, args.gpus, steps=4, **sizes)
    )
    code_2 = grpo_train(
        ["run", "--spec", str(second), "--workdir", str(work), "--no-report"],
        run_log,
        {**env, "GRPO_ATTEMPT": "2"},
        timeout=TINY_ATTEMPT_S,
    )
    summary = tiny_summary(work, args, {"attempt_1": code_1, "attempt_2": code_2}, started)
    exported = summary["export"]
    if args.reward == "custom-batch":  # every call scored one whole group, on whichever reward worker
        summary["reward_call_sizes"] = sorted({c["size"] for c in summary["reward_calls"]})
    summary["ok"] = (
        (args.reward != "custom-batch" or summary["reward_call_sizes"] == [sizes["group"]])
        and code_1 == 0
        and code_2 == 0
        and summary["steps"]["attempt_1"][-1:] == [2]
        and summary["steps"]["attempt_2"][:1] == [3]
        and summary["steps"]["attempt_2"][-1:] == [4]
        and bool(exported)
        and exported.get("step") == 4
    )
    write_json(out / "tiny-summary.json", summary)
    archive_logs(out, work, "tiny")
    log(f"tiny: ok={summary['ok']} steps={summary['steps']} export={exported}")
    return 0 if summary["ok"] else 1


def part_4b(args: argparse.Namespace) -> int:
    out, work = args.out, args.work / "shapes-4b"
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    model = build_model(work / "models" / "qwen3-vl-4b-random", "4b", args.smoke)
    data = build_geo3k(work / "geo3k-hub", train=16 * 4 * args.gpus, test=8, side=448)
    sizes = {
        "prompt": 1024,
        "response": args.response_length,
        "group": 5,
        "batch": 16 * args.gpus,
        "mini": 8 * args.gpus,
        "micro": 4,
        # One GPU holds the whole actor (fp32 master weights and Adam state, ~60 GB) beside vLLM.
        "gpu_memory": 0.35 if args.gpus == 1 else 0.45,
        "eager": False,
        "save": 1000000,
        "export": False,
        # No checkpoint (4B weights and optimiser state: ~50 GB, minutes to write).
        "overrides": ["trainer.save_freq=-1"],
    }
    job = write_spec(work / "job.yaml", spec("verl-4b", model, data, args.gpus, steps=args.steps, **sizes))
    if args.smoke:
        return smoke(work, job, out)
    started = time.monotonic()
    code = grpo_train(
        ["run", "--spec", str(job), "--workdir", str(work), "--no-report"],
        work / "run.log",
        {"VLLM_USE_FLASHINFER_SAMPLER": "0", "GRPO_ATTEMPT": "1"},
        timeout=RUN_TIMEOUT_S,
    )
    steps = metrics(next(iter(work.rglob("attempt-1.jsonl")), work / "none"))
    per_step = [
        {
            "step": m["step"],
            **pick(m["data"], "timing_s/", "perf/", "response_length/mean", "prompt_length/mean"),
        }
        for m in steps
    ]
    summary = {
        "machine": gpu_facts(),
        "gpus": args.gpus,
        "attention": ATTENTION["implementation"],
        "exit_code": code,
        "sizes": {k: v for k, v in sizes.items() if k != "overrides"},
        "steps": per_step,
        "seconds": round(time.monotonic() - started),
        "ok": code == 0 and len(per_step) == args.steps,
    }
    write_json(out / f"4b-{args.gpus}gpu-summary.json", summary)
    archive_logs(out, work, f"4b-{args.gpus}gpu")
    log(f"4b: ok={summary['ok']}, {len(per_step)} steps")
    return 0 if summary["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("part", choices=["prepare", "tiny", "shapes-4b"])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/verl-gpu-out")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/verl-gpu-work"))
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3, help="steps of the 4B run")
    parser.add_argument(
        "--response-length", type=int, default=1024, help="4B run (a random model writes to it)"
    )
    parser.add_argument("--smoke", action="store_true", help="CPU: stop before launching verl")
    parser.add_argument("--keep", action="store_true", help="reuse the work folder (model, data)")
    parser.add_argument(
        "--reward",
        choices=["geo3k", "custom-batch"],
        default="geo3k",
        help="tiny: the builtin geo3k (the seed's), or a user batch reward that logs each call's size",
    )
    args = parser.parse_args(argv)
    if args.part == "prepare":
        return prepare()
    args.out.mkdir(parents=True, exist_ok=True)
    log(f"{args.part}: {args.gpus} GPU(s), results in {args.out}")
    if not args.smoke and preflight(args.out):
        return 3
    return part_tiny(args) if args.part == "tiny" else part_4b(args)


if __name__ == "__main__":
    sys.exit(main())
