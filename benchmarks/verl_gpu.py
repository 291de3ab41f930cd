"""Real verl + vLLM GRPO steps on the lent H200: our GRPOJob through `grpo-train run`, and verl run directly.

The GPU machine takes commands of at most 10 minutes, stays up only while calls follow each other
(30 minutes at most), keeps /tmp while it is up, and lets a process started in a session of its
own outlive the call that started it. So every attempt here is a process of its own: `start`
launches it detached and returns at once, `wait` follows it from later calls (each one a call of
its own, as long as the device allows) and writes what it did into --out after every call, and
an attempt that resumes another is started by a call of its own too.

    tiny       the offline tiny Qwen3-VL (head_dim 64: vLLM's attention kernels reject smaller heads) on
               geo3k-format synthetic data with images, the geo3k preset and builtin reward, vLLM
               rollouts. Attempt 1 trains steps 1-2 and saves; attempt 2 (a new process, started
               after attempt 1 has ended) resumes from that checkpoint, trains 3-4, saves and exports.
    shapes-4b  the SafeGRPO example's job at Qwen3-VL-4B shapes (random weights) on one GPU: the
               step time and its split (verl's timing_s/*), tokens/s per GPU (perf/throughput), peak
               memory (perf/max_memory_*), the start-up phases. No checkpoint (4B weights and Adam
               state: ~60 GB, beyond the machine's disk beside the stack). Attempt 2 is a retry of
               the same job on the same volume: its start-up against attempt 1's is what a retry
               saves (compile caches and prepared data kept on the job's volume).
    raw-4b     verl's own main_ppo with the SafeGRPO model card's overrides at the same shapes, on
               the same model and data, no grpo-train: the floor our layer is measured against.

Commands (docs/benchmarks/verl-gpu.md has the plan, what to carry and what each call costs):

    here:   python3 benchmarks/verl_gpu.py prepare              # the few wheels grpo-train needs beyond the stack
    there:  eval "$(bash benchmarks/gpu_stack.sh env)"
            python3 benchmarks/verl_gpu.py start tiny [--attempt 2] [--gpus 2]
            python3 benchmarks/verl_gpu.py start shapes-4b [--attempt 2] [--steps 3]
            python3 benchmarks/verl_gpu.py start raw-4b [--steps 3] [--then shapes-4b]   # the second once the first ends
            python3 benchmarks/verl_gpu.py start shapes-4b --steps 1 --then shapes-4b  # a cold attempt, then its retry
            ... start PART --sample-stacks 5      # every Python process's stack every 5 s until step 1 ends
            ... start PART --engine-override KEY=VALUE   # one more engine override in ours' GRPOJob
            ... wait shapes-4b --stop-at-startup  # stop each attempt once its rollout server is up
    here:   python3 benchmarks/verl_gpu.py stacks DIR/PART-logs.tar.gz [--attempt N]   # their timeline
            python3 benchmarks/verl_gpu.py wait tiny --out "$OUT" [--seconds 540]
            python3 benchmarks/verl_gpu.py stop tiny                # the running attempt and its Ray
    CPU smoke (everything up to launching verl: model, data, spec, plan, validate, data preparation):
            python3 benchmarks/verl_gpu.py start tiny --smoke --out /tmp/smoke

`wait` returns when the attempt ends or its time is up, printing the attempt's progress lines;
an attempt started with `--then` is followed by the one its chain starts next, in the same call.
Its summary (`<part>-summary.json`) and the logs (`<part>-logs.tar.gz`) land in --out each time.
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
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "trainer"), str(ROOT / "operator")]
sys.path.append(str(ROOT / "benchmarks"))  # last: the scripts here shadow no package

from flash_attn_build import find_nvcc  # noqa: E402  (the benchmarks' one nvcc lookup)

WHEELS = ROOT / ".cache" / "verl-gpu" / "wheels"
EXTRA_SITE = Path("/tmp/verl-gpu-extra")
WORK = Path("/tmp/verl-gpu-work")
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
    # `--sample-stacks`: the stacks of every Python process through start-up (a static binary).
    "py-spy==0.4.3",
    # `jit-check`: FlashInfer builds its sampling kernels with ninja (a static binary), and
    # imports pynvml, which the carried stack leaves out.
    "ninja==1.13.0",
    "nvidia-ml-py==13.615.71",
    # `jit-check` without the stack: FlashInfer itself, and the FFI its kernels build against (the
    # stack's own versions, which win where the stack is installed).
    "flashinfer-python==0.6.12",
    "apache-tvm-ffi==0.1.9",
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
NINJA_DIRS = (EXTRA_SITE / "ninja" / "data" / "bin", EXTRA_SITE / "bin")
"""Where the carried ninja wheel puts its binary (and its wrapper) in the extra site."""


def find_ninja() -> Path | None:
    found = shutil.which("ninja") or shutil.which("ninja", path=os.pathsep.join(map(str, NINJA_DIRS)))
    return Path(found) if found else None


def flashinfer_build_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """What FlashInfer's kernel builds need: CUDA_HOME for nvcc's headers, ninja and nvcc on PATH."""
    nvcc, ninja = find_nvcc(), find_ninja()
    if nvcc is None or ninja is None:
        raise SystemExit(
            "FlashInfer's builds need nvcc and ninja on this machine (carry .cache/verl-gpu/wheels)"
        )
    path = (environ if environ is not None else os.environ).get("PATH", "")
    return {
        "CUDA_HOME": str(nvcc.resolve().parents[1]),
        "PATH": os.pathsep.join(filter(None, [str(ninja.parent), str(nvcc.parent), path])),
    }


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
    platforms = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux1_x86_64", "any"]
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


def preflight(out: Path, *, sampler: bool = False) -> list[str]:
    """Import what `grpo-train run` needs; install the carried extra wheels for what is missing
    (py-spy too, when the stacks are to be sampled)."""
    if EXTRA_SITE.is_dir():  # an earlier start on this machine installed them
        use_extra_site()
    missing = _missing()
    extra = {"yaml", "lightkube"} & set(missing)
    if sampler and py_spy() is None:
        extra.add("py-spy")
    if extra and WHEELS.is_dir():
        install_carried(extra)
        missing = _missing()
    if sampler and py_spy() is None:
        missing.append("py-spy")
    if missing:
        log(
            f"cannot run: missing {', '.join(missing)} (carry the GPU stack first: docs/benchmarks/verl-gpu.md)"
        )
        write_json(out / "summary.json", {"ok": False, "missing": missing})
    return missing


def install_carried(wanted: set[str]) -> None:
    """The carried extra wheels into EXTRA_SITE, which goes after the stack on every path: the
    stack's packages win where both have one."""
    log(f"installing the carried wheels for {', '.join(sorted(wanted))} into {EXTRA_SITE}")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
         str(EXTRA_SITE), *map(str, WHEELS.glob("*.whl"))],
        check=True,
    )  # fmt: skip
    use_extra_site()


def use_extra_site() -> None:
    """EXTRA_SITE on this process's path and its children's, once (a later `start` on the same
    machine finds the wheels installed and skips pip)."""
    if str(EXTRA_SITE) not in sys.path:
        sys.path.append(str(EXTRA_SITE))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(EXTRA_SITE) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, str(EXTRA_SITE)])
    importlib.invalidate_caches()


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except Exception:  # ImportError, or a broken install
        return False
    return True


def _missing() -> list[str]:
    return [name for name in NEEDED if not _importable(name)]


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


def build_geo3k(folder: Path, train: int, test: int, side: int, *, varied: bool = False) -> Path:
    """geo3k's hub layout (images, problem, answer), read by the trainer's own geo3k preset.

    `varied` gives each problem a different length (up to 64 extra words), so prompts differ in
    length the way real data's do; otherwise every prompt has one length, which with a random
    model writing every response to the limit makes every sequence of a batch one length.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The same arguments give the same bytes (one seed): a later start on the same machine (a
    # retry, the chain's) keeps them instead of drawing 2,101 images again, ~40 s of every start.
    built = {"train": train, "test": test, "side": side, "varied": varied}
    stamp = folder / "built.json"
    splits = [folder / "data" / f"{split}-00000-of-00001.parquet" for split in ("train", "test")]
    if stamp.is_file() and json.loads(stamp.read_text()) == built and all(p.is_file() for p in splits):
        return folder
    stamp.unlink(missing_ok=True)
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
                "problem": "<image>Find x. Round to the nearest tenth."
                + (" Look at the figure." * rng.randrange(16) if varied else ""),
                "answer": rng.choice(["5", "7"]),
            }
            for i in range(rows)
        ]
        path = folder / "data" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    write_json(stamp, built)
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
                **sizes.get("algorithm", {}),
                "learningRate": 1.0e-6,
                "totalSteps": steps,
            },
            "rollout": {
                "tensorParallelSize": 1,
                "gpuMemoryUtilization": sizes["gpu_memory"],
                "enforceEager": sizes["eager"],
                **sizes.get("rollout", {}),
            },
            "engine": {
                "name": "verl",
                "strategy": "fsdp2",
                "gradientCheckpointing": True,
                "overrides": [*sizes.get("overrides", []), *ATTENTION["overrides"]],
                "useRemovePadding": ATTENTION["remove_padding"],
                **sizes.get("engine", {}),
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


# --- detached attempts -----------------------------------------------------------------------------
#
# An attempt's folder (WORK/<part>/attempt-<n>/) holds `command.json` (what runs, its environment),
# `pid`, `output.log` (every line of the attempt, stamped with the seconds since it started) and,
# once it has ended, `rc`. The supervisor that writes them runs in a session of its own, so it
# outlives the device call that started it; `wait` in a later call only reads the folder.


@dataclass(frozen=True)
class Attempt:
    part: str
    number: int

    @property
    def folder(self) -> Path:
        return WORK / self.part / f"attempt-{self.number}"

    def rc(self) -> int | None:
        file = self.folder / "rc"
        return int(file.read_text()) if file.is_file() else None

    def pid(self) -> int | None:
        file = self.folder / "pid"
        return int(file.read_text()) if file.is_file() else None

    def running(self) -> bool:
        pid = self.pid()
        if pid is None or self.rc() is not None:
            return False
        return _alive(pid)


def attempts(part: str) -> list[Attempt]:
    found = sorted((WORK / part).glob("attempt-*"), key=lambda p: int(p.name.rpartition("-")[2]))
    return [Attempt(part, int(p.name.rpartition("-")[2])) for p in found]


def launch(attempt: Attempt, command: list[str], env: dict[str, str], *, sample_every: float = 0) -> int:
    """Start `command` under the supervisor, detached; returns the supervisor's pid. With
    `sample_every`, the supervisor samples every Python process's stack that often until the
    first step ends (`stacks.log`)."""
    for other in (a for p in PARTS for a in attempts(p)):
        if other.running():
            raise SystemExit(f"{other.part} attempt {other.number} is still running: wait for it or stop it")
    folder = attempt.folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    write_json(
        folder / "command.json",
        {"command": command, "env": env, "started": time.time(), "sample_every": sample_every},
    )
    supervisor = [sys.executable, str(Path(__file__).resolve()), "_supervise", str(folder)]
    with open(folder / "supervisor.log", "w") as out:
        process = subprocess.Popen(
            supervisor, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    (folder / "pid").write_text(str(process.pid))
    log(
        f"{attempt.part} attempt {attempt.number} started (pid {process.pid}); follow it with `wait {attempt.part}`"
    )
    return process.pid


def supervise(folder: Path) -> int:
    """Run the attempt's command to its end: stamped output, its exit code, then Ray stopped."""
    spec = json.loads((folder / "command.json").read_text())
    env = {**os.environ, **spec["env"]}
    started = time.monotonic()
    first_step = threading.Event()
    monitor = start_gpu_monitor(folder / "gpu.log", started)
    ended = threading.Event()
    threading.Thread(
        target=watch_host, args=(folder / "host.log", started, ended, HOST_SAMPLE_S), daemon=True
    ).start()
    with open(folder / "output.log", "w") as out:
        process = subprocess.Popen(
            spec["command"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        (folder / "child-pid").write_text(str(process.pid))
        if spec.get("sample_every"):
            threading.Thread(
                target=sample_stacks,
                args=(folder / "stacks.log", process.pid, float(spec["sample_every"]), started, first_step),
                daemon=True,
            ).start()
        assert process.stdout is not None
        for line in process.stdout:
            out.write(f"[{time.monotonic() - started:8.1f}s] {line}")
            out.flush()
            if not first_step.is_set() and FIRST_STEP.search(line):
                first_step.set()
        code = process.wait()
        first_step.set()
        ended.set()
    if monitor is not None:
        monitor.terminate()
        monitor.wait(timeout=30)
    (folder / "rc").write_text(str(code))
    stop_ray()
    return code


GPU_QUERY = (
    "index",
    "memory.used",
    "utilization.gpu",
    "clocks.sm",
    "power.draw",
    "temperature.gpu",
    "clocks_throttle_reasons.active",
)
"""What the GPU monitor records every GPU_SAMPLE_MS, one line per GPU (`gpu.log`, each line
stamped like output.log)."""
GPU_SAMPLE_MS = 1000
NO_THROTTLE = "0x0000000000000000"


HOST_SAMPLE_S = 5.0
MACHINE_HOLD_MIN = 30.0
"""A lent machine goes back after this many minutes held, whatever the device time charged for
them (which runs slower while the lease `counts` only part of the held time)."""


HELD_BEFORE_BOOT_MIN = 1.1
"""How much longer a machine has been held than it has been up: the lease starts before the boot.
Read on two machines of 2026-12-05: the first reply's `held_s` was 91 s with an uptime of 29 s,
and `start` printed 3.6 and 3.7 minutes up at 4.6 and 4.8 minutes held."""


def machine_minutes(uptime: Path = Path("/proc/uptime")) -> float:
    """Minutes since the machine booted; it has been held about HELD_BEFORE_BOOT_MIN longer (the
    device tool's `held_s` says, but a lost call never returns it)."""
    return round(float(uptime.read_text().split()[0]) / 60, 1)


def host_sample(tmp: Path = Path("/tmp")) -> dict[str, float]:
    """The machine's side of an attempt at one moment: memory available, shared memory (tmpfs, Ray's
    object store), free disk under /tmp, load, process count and the machine's age. Three leases
    were lost to a machine that stopped answering or went back during a 4B attempt, with no trace
    of why; these are the candidates, the 30-minute hold among them."""
    info: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        value = rest.split()
        info[name] = int(value[0]) if value else 0
    gib = 1024**2  # meminfo counts kB
    return {
        "available_gib": round(info.get("MemAvailable", 0) / gib, 1),
        "shmem_gib": round(info.get("Shmem", 0) / gib, 1),
        "tmp_free_gib": round(shutil.disk_usage(tmp).free / 1024**3, 1),
        "load1": round(os.getloadavg()[0], 1),
        "processes": float(sum(1 for p in Path("/proc").iterdir() if p.name.isdigit())),
        "machine_up_min": machine_minutes(),
    }


def watch_host(file: Path, started: float, done: threading.Event, every: float) -> None:
    """`host.log`: a host_sample every `every` seconds until `done`, stamped as output.log is."""
    with open(file, "w") as out:
        while True:
            sample = " ".join(f"{k}={v:g}" for k, v in host_sample().items())
            out.write(f"[{time.monotonic() - started:8.1f}s] {sample}\n")
            out.flush()
            if done.wait(every):
                return


def host_extremes(text: str) -> dict[str, float]:
    """From `host.log`: the least memory available, the most shared memory, the least free disk
    under /tmp, the highest load and process count, and the machine's age at the last sample
    ({} without samples)."""
    rows = [dict(re.findall(r"(\w+)=([\d.]+)", line)) for line in text.splitlines()]
    rows = [r for r in rows if r]
    if not rows:
        return {}
    pick_by = {
        "available_gib": min,
        "shmem_gib": max,
        "tmp_free_gib": min,
        "load1": max,
        "processes": max,
        "machine_up_min": max,
    }
    return {
        f"{'min' if how is min else 'max'}_{key}": how(float(r[key]) for r in rows if key in r)
        for key, how in pick_by.items()
        if any(key in r for r in rows)
    }


def start_gpu_monitor(file: Path, started: float) -> subprocess.Popen[str] | None:
    """nvidia-smi's own loop (one process for the whole attempt, not one per sample) reporting the
    GPUs' memory, load, clock, power, temperature and throttle reasons, each line stamped with the
    seconds since `started` as output.log's are: what tells a slower step of one run from the
    same step of another apart from the code (a clock held down, less free memory). None where
    there is no nvidia-smi."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    process = subprocess.Popen(
        [
            tool,
            f"--query-gpu={','.join(GPU_QUERY)}",
            "--format=csv,noheader,nounits",
            "-lms",
            str(GPU_SAMPLE_MS),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )

    def stamp() -> None:
        assert process.stdout is not None
        with open(file, "w") as out:
            for line in process.stdout:
                out.write(f"[{time.monotonic() - started:8.1f}s] {line}")
                out.flush()

    threading.Thread(target=stamp, daemon=True).start()
    return process


def _mean(rows: list[tuple[float, ...]], column: int) -> float:
    return round(sum(row[column] for row in rows) / len(rows), 1)


def gpu_per_step(
    gpu_log: str, step_ends: dict[int, float], step_seconds: dict[int, float]
) -> dict[int, dict[str, Any]]:
    """Per step, what the GPU monitor saw between the step's start and end (its line's stamp less
    its time): mean SM clock, power and load, the most memory used, the hottest reading, and the
    throttle reasons other than none (nvidia-smi's bit masks, as it prints them)."""
    rows: list[tuple[float, ...]] = []
    reasons: list[str] = []
    for line in gpu_log.splitlines():
        stamped = STAMP.match(line)
        if stamped is None:
            continue
        fields = [field.strip() for field in line[stamped.end() :].split(",")]
        if len(fields) != len(GPU_QUERY):
            continue  # nvidia-smi's own messages
        try:
            rows.append((float(stamped[1]), *(float(v) for v in fields[1:6])))
        except ValueError:  # "[N/A]" and the like
            continue
        reasons.append(fields[6])
    found: dict[int, dict[str, Any]] = {}
    for step, end in sorted(step_ends.items()):
        begin = end - step_seconds.get(step, 0.0)
        inside = [i for i, row in enumerate(rows) if begin <= row[0] <= end]
        if not inside:
            continue
        window = [rows[i] for i in inside]
        found[step] = {
            "samples": len(window),
            "sm_clock_mhz_mean": _mean(window, 3),
            "power_w_mean": _mean(window, 4),
            "utilization_pct_mean": _mean(window, 2),
            "memory_used_gib_max": round(max(row[1] for row in window) / 1024, 2),
            "temperature_c_max": max(row[5] for row in window),
            "throttle_reasons": sorted({reasons[i] for i in inside} - {NO_THROTTLE}),
        }
    return found


FIRST_STEP = re.compile(r"step:\d+ - ")
"""verl's line at the end of a step: the start-up's sampling stops at the first."""
SAMPLED_TITLES = re.compile(r"^(ray::|VLLM::)|python")
"""Which processes' stacks are sampled: Python interpreters, and the Ray and vLLM workers that
rename themselves."""
SAMPLING_SKIPS = ("dashboard", "log_monitor", "monitor.py", "runtime_env")
"""Ray's own service processes: not where the start-up goes."""
SAMPLES_MAX_BYTES = 64 * 1024 * 1024


def py_spy() -> str | None:
    """The py-spy binary: on the PATH, beside this Python (a virtualenv's), or where `preflight`
    installs the carried wheel."""
    for found in (
        shutil.which("py-spy"),
        Path(sys.executable).with_name("py-spy"),
        EXTRA_SITE / "bin" / "py-spy",
    ):
        if found and Path(found).is_file():
            return str(found)
    return None


def sampled_processes(root: int) -> list[tuple[int, str]]:
    """(pid, title) of the Python processes under `root` (the attempt's command: Ray's local
    instance, its workers and vLLM's engine all descend from it), Ray's service ones left out."""
    parents: dict[int, int] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # it ended meanwhile
            continue
        # stat: "pid (comm) state ppid ...", where comm may hold spaces and parentheses
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
        titles[int(entry.name)] = title
    found = []
    for pid, title in titles.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        first = title.split(" ", 1)[0]
        if (
            ancestor == root
            and SAMPLED_TITLES.search(Path(first).name)
            and not any(word in title for word in SAMPLING_SKIPS)
        ):
            found.append((pid, title))
    return sorted(found)


def sample_stacks(file: Path, root: int, every: float, started: float, done: threading.Event) -> None:
    """Every `every` seconds until `done`, the stack of each Python process under `root` (py-spy,
    non-blocking: the processes never stop for it), stamped like output.log, so the start-up's
    phases can be split by what each process was doing. Steps are not sampled: they are what
    runs compare."""
    tool = py_spy()
    with open(file, "w") as out:
        if tool is None:
            out.write("py-spy not found: no stacks sampled\n")
            return
        while not done.wait(every) and out.tell() < SAMPLES_MAX_BYTES:
            stamp = time.monotonic() - started
            for pid, title in sampled_processes(root):
                result = subprocess.run(
                    [tool, "dump", "--nonblocking", "--pid", str(pid)],
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=60,
                    check=False,
                )
                out.write(f"=== [{stamp:8.1f}s] pid {pid} {title[:160]}\n{result.stdout}{result.stderr}\n")
            out.flush()


def terminate(attempt: Attempt) -> None:
    """SIGTERM to the attempt's process group, as a pod's stop would send it."""
    child = attempt.folder / "child-pid"
    if child.is_file():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(child.read_text()), signal.SIGTERM)


def stop(part: str) -> int:
    for attempt in attempts(part):
        if attempt.running():
            terminate(attempt)
            log(f"{part} attempt {attempt.number}: stopped")
    stop_ray()
    return 0


def _started(attempt: Attempt) -> bool:
    """Whether the attempt's output shows its start-up over (the rollout server's mark)."""
    return phases(attempt.folder / "output.log")[STARTUP_END] is not None


def stop_attempt(attempt: Attempt, seconds: float = 120) -> None:
    """Stop one attempt, then wait for its supervisor to exit, which is what a `--then` chain
    waits for to start the next one."""
    terminate(attempt)
    deadline = time.monotonic() + seconds
    while attempt.running() and time.monotonic() < deadline:
        time.sleep(1)
    log(f"{attempt.part} attempt {attempt.number}: stopped at the end of its start-up")


def stop_ray() -> None:
    """What a finished or stopped run's local Ray left behind (this machine runs nothing else on Ray)."""
    subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"],
        capture_output=True,
        timeout=120,
        check=False,
    )


PROGRESS = re.compile(r"step:\d+ |GRPO_FAILURE|Traceback|Error|engine command|exported|training-complete")


def follow(attempt: Attempt, seconds: float, until: re.Pattern[str] | None = None) -> int | None:
    """Print the attempt's progress lines until it ends or `seconds` pass; its exit code, if it ended.

    With `until`, also return (None) at the first output line that matches it."""
    log_file = attempt.folder / "output.log"
    deadline = time.monotonic() + seconds
    position = 0
    while True:
        if log_file.is_file():
            with log_file.open(errors="replace") as text:
                text.seek(position)
                for line in text:
                    reached = until is not None and until.search(line) is not None
                    if reached or (PROGRESS.search(line) and "Warning" not in line):
                        print("    " + line.rstrip()[:240], flush=True)
                    if reached:
                        return None
                position = text.tell()
        code = attempt.rc()
        if code is not None or not attempt.running() or time.monotonic() >= deadline:
            return code
        time.sleep(5)


# --- start-up phases ---------------------------------------------------------------------------------

PHASES = (
    # (phase, the first output line that ends it), in the order start-up passes them
    ("trainer", re.compile(r"engine command:")),
    ("engine_process", re.compile(r"ray init kwargs")),
    ("ray", re.compile(r"Started a local Ray instance|Connected to Ray cluster")),
    ("data", re.compile(r"train and validate dataloader initialized")),
    ("actor_and_reference", re.compile(r"actor and ref model engine initialized")),
    ("rollout_server", re.compile(r"checkpoint engine manager initialized")),
    ("first_step", re.compile(r"step:\d+ - ")),
)
"""Marks in an attempt's output, in the order start-up passes them (a raw main_ppo run has no
"engine command" line: its first phase is then empty)."""
STAMP = re.compile(r"^\[\s*([\d.]+)s\] ")
STARTUP_END = "rollout_server"
"""The last phase before step 1: by its mark the compile caches a retry reuses are written."""
STARTED = dict(PHASES)[STARTUP_END]


def phases(log_file: Path) -> dict[str, float | None]:
    """Seconds from the attempt's start to the first line of each phase's mark."""
    found: dict[str, float | None] = {name: None for name, _ in PHASES}
    if not log_file.is_file():
        return found
    for line in log_file.read_text(errors="replace").splitlines():
        stamp = STAMP.match(line)
        if not stamp:
            continue
        for name, mark in PHASES:
            if found[name] is None and mark.search(line):
                found[name] = float(stamp.group(1))
    return found


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


# --- the parts ---------------------------------------------------------------------------------------


def grpo_train_command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """`grpo-train ARGS` as the Ray job's entrypoint runs it (the console script is cli:main; the
    package is not installed on the GPU machine, so it runs from this checkout)."""
    entry = "import sys; from grpo_trainer.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", entry, *args], {
        "PYTHONPATH": _pythonpath(ROOT / "trainer", ROOT / "operator")
    }


def _pythonpath(*first: Path) -> str:
    rest = [os.environ.get("PYTHONPATH", "")]
    if EXTRA_SITE.is_dir():
        rest.append(str(EXTRA_SITE))  # after the stack: its packages win where both have one
    return os.pathsep.join(filter(None, [*map(str, first), *rest]))


def run_now(args: list[str], log_file: Path) -> int:
    """A short grpo-train command in the foreground (smoke checks, data preparation)."""
    command, env = grpo_train_command(args)
    log(f"$ grpo-train {' '.join(args)}")
    with log_file.open("a") as out:
        return subprocess.run(
            command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        ).returncode


def smoke(work: Path, job_spec: Path, out: Path) -> int:
    """Everything up to launching verl: the plan, verl's composition check, the data preparation."""
    logs = out / "smoke.log"
    codes = {
        name: run_now([name, "--spec", str(job_spec), "--workdir", str(work)], logs)
        for name in ("plan", "validate", "prepare-data")
    }
    write_json(out / "summary.json", {"ok": not any(codes.values()), "smoke": codes})
    log(f"smoke: {codes}")
    return 0 if not any(codes.values()) else 1


def tiny_sizes(args: argparse.Namespace, work: Path) -> dict[str, Any]:
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
        "engine": {"strategy": args.strategy},
        "overrides": list(args.engine_override),
    }
    if args.reward == "custom-batch":
        sizes["reward"] = custom_batch_reward(work)
    return sizes


def as_a_retry(work: Path) -> None:
    """A later attempt of a finished job only exports: drop the completion mark so this one trains
    on, as a retried attempt after a crash between its last step and the end would."""
    for marker in work.rglob("training-complete.json"):
        marker.unlink()


def start_tiny(args: argparse.Namespace) -> int:
    work = WORK / "tiny"
    if args.attempt == 1 and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    model = build_model(work / "models" / "qwen3-vl-tiny", "tiny", args.smoke)
    data = build_geo3k(work / "geo3k-hub", train=64, test=8, side=64)
    steps = 2 * args.attempt  # attempt 1: steps 1-2; attempt 2 resumes at 3 and trains to 4
    job = write_spec(
        work / f"job-attempt-{args.attempt}.yaml",
        spec("verl-tiny", model, data, args.gpus, steps=steps, **tiny_sizes(args, work)),
    )
    if args.smoke:
        return smoke(work, job, args.out)
    if args.attempt > 1:
        as_a_retry(work)
    command, env = grpo_train_command(["run", "--spec", str(job), "--workdir", str(work), "--no-report"])
    launch(
        Attempt("tiny", args.attempt),
        command,
        {**env, "GRPO_ATTEMPT": str(args.attempt)},
        sample_every=args.sample_stacks,
    )
    return 0


def sizes_4b(args: argparse.Namespace) -> dict[str, Any]:
    """The SafeGRPO example's per-GPU load as far as one H200 holds it (docs/benchmarks/verl-gpu.md
    says why each departure)."""
    return {
        "prompt": 2048,
        "response": args.response_length,
        "group": 8,
        # The example's 256 prompts on 4 GPUs are 64 per GPU; one GPU steps 16 in a call's time.
        "batch": 16 * args.gpus,
        # The example's 4 updates per step (mini-batch 64 of 256).
        "mini": 4 * args.gpus,
        # The example's 16 per GPU shares the actor's fp32 state with 3 other GPUs; one GPU holds all
        # of it (~70 GB) beside vLLM.
        "micro": 4,
        "gpu_memory": 0.35 if args.gpus == 1 else 0.45,
        "eager": False,
        "rollout": {"enableChunkedPrefill": True, "freeCacheEngine": True},
        # fsdp2 for every step measured (verl's Qwen3-VL examples); `--strategy fsdp` starts the
        # examples' own, FSDP1.
        # `--actor-offload`: the geo3k recipe's actor offload, which lets a 4B step fit an H100's
        # 80 GB (a step without it used 99.6 GiB of the H200).
        "engine": {
            "refParamOffload": True,
            "strategy": args.strategy,
            "paramOffload": args.actor_offload,
            "optimizerOffload": args.actor_offload,
        },
        "algorithm": {"kl": {"coefficient": 0.01, "type": "low_var_kl", "placement": "loss"}},
        "save": 1000000,
        "export": False,
        # No checkpoint (4B weights and optimiser state: ~60 GB, minutes to write).
        "overrides": ["trainer.save_freq=-1", *args.engine_override],
    }


def threads_override(args: argparse.Namespace) -> list[str]:
    """`--omp-threads N` for raw verl: OMP_NUM_THREADS for every Ray worker of main_ppo run
    directly, whose workers otherwise get Ray's 1 (verl's workers ask for no CPUs). Ours sets each
    device's share of the machine's CPUs itself (the engine's default outside a pod; the operator's
    value in one); `--omp-threads` gives ours the same N through its environment, so a comparison
    can run both with equal threads."""
    if not args.omp_threads:
        return []
    return [f"+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS='{args.omp_threads}'"]


def threads_env(args: argparse.Namespace) -> dict[str, str]:
    """`--omp-threads N` for ours: the pod's value, as the operator would set it."""
    return {"OMP_NUM_THREADS": str(args.omp_threads)} if args.omp_threads else {}


DATA_ROWS_PER_GPU = 64
"""Training rows of the 4B runs per GPU (prompts per step per GPU: 16)."""


def train_rows(args: argparse.Namespace) -> int:
    """`--train-rows N` (the geo3k recipe's 2,101, to time its over-long prompt filter at its size),
    else DATA_ROWS_PER_GPU per GPU."""
    return args.train_rows or DATA_ROWS_PER_GPU * args.gpus


def inputs_4b(args: argparse.Namespace, part: str) -> tuple[Path, Path, Path]:
    """The model, data and job of a 4B run; the shapes it starts with are kept beside them for the
    summaries of later calls (which run with their own flags)."""
    work = WORK / "shapes-4b"  # raw-4b runs on the same model and data
    model = build_model(work / "models" / "qwen3-vl-4b-random", "4b", args.smoke)
    # A fixed number of rows, whatever --steps is: the data (and the key of its prepared parquet)
    # must not change between ours and raw-4b run with different step counts, or the two train
    # on different batches. Four batches an epoch; later steps start another epoch.
    rows = train_rows(args)
    data = build_geo3k(
        work / f"geo3k-hub-{args.prompts}",
        train=rows,
        test=8,
        side=args.image_side,
        varied=args.prompts == "varied",
    )
    job = write_spec(
        work / f"job-{args.prompts}.yaml",
        spec("verl-4b", model, data, args.gpus, steps=args.steps, **sizes_4b(args)),
    )
    shapes = {k: v for k, v in sizes_4b(args).items() if k != "overrides"}
    write_json(
        work / f"{part}.shapes.json",
        {
            **shapes,
            "prompts": args.prompts,
            "image_side": args.image_side,
            "train_rows": rows,
        },
    )
    return work, model, job


def start_4b(args: argparse.Namespace) -> int:
    work, _, job = inputs_4b(args, "shapes-4b")
    if args.smoke:
        return smoke(work, job, args.out)
    if args.attempt > 1:  # no checkpoint at 4B: the retry trains from step 1 on the same volume
        as_a_retry(work)
    command, env = grpo_train_command(["run", "--spec", str(job), "--workdir", str(work), "--no-report"])
    launch(
        Attempt("shapes-4b", args.attempt),
        command,
        {**env, **threads_env(args), "GRPO_ATTEMPT": str(args.attempt)},
        sample_every=args.sample_stacks,
    )
    return 0


def raw_overrides(
    args: argparse.Namespace, model: Path, train: str, val: str, metrics_dir: Path
) -> list[str]:
    """The SafeGRPO model card's main_ppo command at the shapes of sizes_4b, in verl 0.9.1's keys.

    Its keys that verl 0.9.1 no longer reads as written take their working form (docs/verl.md):
    the removed vLLM flag becomes `mm_processor_cache_gb=0`, the logger is console and file (no
    W&B here), and the reward is verl's own geo3k scorer for this data (the card's safety file is
    not published). Attention and padding follow what this machine can run, as ours do.
    """
    s = sizes_4b(args)
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train}",
        f"data.val_files={val}",
        f"data.train_batch_size={s['batch']}",
        f"data.max_prompt_length={s['prompt']}",
        f"data.max_response_length={s['response']}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        "data.image_key=images",
        "data.image_patch_size=16",
        # The card leaves the sampler's seed to verl (none); ours passes the spec's (42). The same
        # seed gives both runs the same batches, and with them the same padding per micro-batch.
        f"data.seed={DATA_SEED}",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        f"actor_rollout_ref.model.use_remove_padding={ATTENTION['remove_padding']}",
        f"actor_rollout_ref.actor.strategy={s['engine']['strategy']}",
        f"actor_rollout_ref.ref.strategy={s['engine']['strategy']}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={s['mini']}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        f"actor_rollout_ref.actor.fsdp_config.param_offload={s['engine']['paramOffload']}",
        f"actor_rollout_ref.actor.fsdp_config.optimizer_offload={s['engine']['optimizerOffload']}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.name=vllm",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb=0",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={s['gpu_memory']}",
        "actor_rollout_ref.rollout.enable_chunked_prefill=True",
        "actor_rollout_ref.rollout.enforce_eager=False",
        "actor_rollout_ref.rollout.free_cache_engine=True",
        f"actor_rollout_ref.rollout.n={s['group']}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        "algorithm.use_kl_in_reward=False",
        "trainer.critic_warmup=0",
        "trainer.logger=[console,file]",
        "trainer.project_name=verl_grpo",
        "trainer.experiment_name=raw_4b",
        f"trainer.n_gpus_per_node={args.gpus}",
        "trainer.nnodes=1",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=False",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.default_local_dir={metrics_dir / 'checkpoints'}",
        *ATTENTION["overrides"],
        *raw_reward(args),
        *threads_override(args),
    ]


def raw_reward(args: argparse.Namespace) -> list[str]:
    """Which reward raw verl scores with. The SafeGRPO card passes its own file through
    `custom_reward_function`; here that is our geo3k file, the one our job's builtin `geo3k` runs, so
    the reward is not one of the differences a comparison measures (the first three leases scored
    raw verl with verl's own, `--raw-reward verl`)."""
    if args.raw_reward == "verl":
        return []
    from grpo_trainer.rewards.registry import get_reward

    geo3k = get_reward("geo3k")
    return [
        f"reward.custom_reward_function.path={geo3k.path}",
        f"reward.custom_reward_function.name={geo3k.function}",
    ]


DATA_SEED = 42
"""`spec.algorithm.seed`'s default, which our engine passes to verl as `data.seed`."""


def start_raw(args: argparse.Namespace) -> int:
    work, model, job = inputs_4b(args, "raw-4b")
    if args.smoke:
        return smoke(work, job, args.out)
    # The same parquet files our job trains on (prepared by the trainer's geo3k preset, untimed).
    if run_now(["prepare-data", "--spec", str(job), "--workdir", str(work)], work / "prepare-data.log"):
        raise SystemExit("prepare-data failed: see prepare-data.log")
    prepared = max(work.rglob("train.parquet"), key=lambda p: p.stat().st_mtime)
    attempt = Attempt("raw-4b", args.attempt)
    overrides = raw_overrides(
        args, model, str(prepared), str(prepared.with_name("test.parquet")), attempt.folder
    )
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
    env = {
        "VERL_FILE_LOGGER_PATH": str(attempt.folder / "metrics.jsonl"),
        # verl's workers need trl's value-head name, which the carried trl lacks (docs/verl.md): the
        # same shadow package our engine puts first, or main_ppo cannot start its actor at all.
        # Our reward file (--raw-reward ours) imports the trainer's package in verl's reward workers.
        "PYTHONPATH": _pythonpath(
            ROOT / "trainer" / "grpo_trainer" / "engines" / "verl" / "shadows",
            ROOT / "trainer",
            ROOT / "operator",
        ),
    }
    launch(attempt, command, env, sample_every=args.sample_stacks)
    return 0


START = {"tiny": start_tiny, "shapes-4b": start_4b, "raw-4b": start_raw}
PARTS = tuple(START)
THEN_POLL_S = 5.0
THEN_LIMIT_S = 2 * 3600.0
THEN_REQUEST = "then.json"
"""In the first attempt's folder: the `start` arguments its `--then` runs once it has ended."""
THEN_STARTED = "then-rc"
"""In the first attempt's folder, once its `--then` has tried to start the next part: `start`'s
exit code (a `wait` reads it to know whether there is an attempt to follow on to)."""


def then_argv(argv: list[str], part: str, then: str, attempt: int = 1) -> list[str]:
    """`start PART ... --then THEN`'s command line for THEN: the same options, the other part; or,
    when THEN is PART, its next attempt (a retry of it, started as `--attempt N+1` would)."""
    out: list[str] = []
    skip = False
    replaced = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--then", "--attempt"):
            skip = True
            continue
        if arg.startswith(("--then=", "--attempt=")):
            continue
        if arg == part and not replaced:
            out.append(then)
            replaced = True
            continue
        out.append(arg)
    return [*out, "--attempt", str(attempt + 1)] if then == part else out


def start_then(first: Attempt, argv: list[str]) -> int:
    """Start the next part once `first` has ended, from a detached process of its own.

    So a comparison's second run starts the moment the first ends, not when a device call comes
    to start it: a call that waits and then starts can run past the call's limit, and a machine
    left without a call for ~30 s is given back with everything on it.
    """
    folder = first.folder
    write_json(folder / THEN_REQUEST, {"argv": argv})
    with open(folder / "then.log", "w") as out:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "_then", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    log(f"then: `{' '.join(argv)}` once {first.part} attempt {first.number} has ended (pid {process.pid})")
    return process.pid


def run_then(folder: Path) -> int:
    """The detached side of `--then`: wait for the first attempt's supervisor to exit (its exit
    code written and its Ray stopped), then start the next part as `start` would."""
    argv = json.loads((folder / THEN_REQUEST).read_text())["argv"]
    pid_file = folder / "pid"
    deadline = time.monotonic() + THEN_LIMIT_S
    while time.monotonic() < deadline:
        pid = int(pid_file.read_text()) if pid_file.is_file() else None
        if pid is not None and not _alive(pid):
            break
        time.sleep(THEN_POLL_S)
    else:
        log(f"then: gave up after {THEN_LIMIT_S:.0f} s: the first attempt is still running")
        return 1
    rc = folder / "rc"
    ended = rc.read_text().strip() if rc.is_file() else "unknown"
    log(f"then: the first attempt ended (exit code {ended}); `{' '.join(argv)}`")
    started = 1
    try:
        started = main(argv)
    except SystemExit as refused:  # `start` refuses with a message: a `wait` must still hear of it
        started = refused.code if isinstance(refused.code, int) else 1
        raise
    finally:
        (folder / THEN_STARTED).write_text(str(started))
    return started


def chained(first: Attempt, deadline: float) -> Attempt | None:
    """The attempt `--then` started after `first` (which has ended), waiting until `deadline` for
    its start; None when `first` chains nothing, or the next one did not start in time.

    So one `wait` call follows a cold attempt and then its retry: a `wait` called in the seconds
    between the two used to find only the ended attempt and return, and the call after it came
    too late for a machine that is given back after 30 s without one.
    """
    request = first.folder / THEN_REQUEST
    if not request.is_file():
        return None
    part = json.loads(request.read_text())["argv"][1]
    marker = first.folder / THEN_STARTED
    while not marker.is_file():
        if time.monotonic() >= deadline:
            return None
        time.sleep(THEN_POLL_S)
    started = marker.read_text().strip()
    if started != "0":
        log(f"then: the next part did not start (exit code {started}; then.log says why)")
        return None
    found = attempts(part)
    return found[-1] if found and found[-1] != first else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- summaries -----------------------------------------------------------------------------------------


def metrics_of(attempt: Attempt) -> list[dict[str, Any]]:
    if attempt.part == "raw-4b":
        return metrics(attempt.folder / "metrics.jsonl")
    work = WORK / ("shapes-4b" if attempt.part == "shapes-4b" else "tiny")
    return metrics(next(iter((work / "grpo").rglob(f"attempt-{attempt.number}.jsonl")), work / "none"))


def attempt_summary(attempt: Attempt) -> dict[str, Any]:
    steps = metrics_of(attempt)
    command = json.loads((attempt.folder / "command.json").read_text())
    engine_command = next(iter((WORK / attempt.part).rglob(f"attempt-{attempt.number}.command.txt")), None)
    host_log = attempt.folder / "host.log"
    return {
        "attempt": attempt.number,
        "exit_code": attempt.rc(),
        "running": attempt.running(),
        "seconds": round(time.time() - command["started"]),
        "startup_s": phases(attempt.folder / "output.log"),
        "host": host_extremes(host_log.read_text()) if host_log.is_file() else {},
        "steps": [m["step"] for m in steps],
        "per_step": [
            {
                "step": m["step"],
                **pick(
                    m["data"],
                    "timing_s/",
                    "perf/",
                    "actor/perf/",
                    "response_length/mean",
                    "prompt_length/mean",
                    "critic/score/mean",
                ),
            }
            for m in steps
        ],
        "failure": failure_line(attempt.folder / "output.log"),
        # raw-4b leaves FlashInfer's cache in the home folder, as verl does
        "jit_builds": [] if attempt.part == "raw-4b" else jit_builds(WORK / attempt.part, command["started"]),
        "engine_overrides": (
            engine_command.read_text().split("\n")[3:] if engine_command else command["command"][3:]
        ),
    }


JIT_MODULES = "grpo/checkpoints/*/cache/compile/*/flashinfer/.cache/flashinfer/*/*/cached_ops/*"
"""FlashInfer's kernel builds under the compile caches ours keeps on the job's volume."""


def jit_builds(work: Path, started: float, pattern: str = JIT_MODULES) -> list[dict[str, Any]]:
    """Each FlashInfer module in the job's cache: when its build file and its library were last
    written, in seconds from the attempt's start. FlashInfer rewrites the build file only when it
    changes and ninja relinks only what is stale, so a module built by this attempt has both times
    positive (the build took the difference) and one it found on the volume has both negative."""

    def at(file: Path) -> float | None:
        return round(file.stat().st_mtime - started, 1) if file.is_file() else None

    builds = []
    for folder in sorted(work.glob(pattern)):
        library = folder / f"{folder.name}.so"
        builds.append(
            {
                "module": folder.name,
                "build_file_s": at(folder / "build.ninja"),
                "library_s": at(library),
                "built_by_this_attempt": library.is_file() and library.stat().st_mtime > started,
            }
        )
    return builds


JIT_CALL = """
import json, time
started = time.monotonic()
import torch, flashinfer, flashinfer.sampling
imported = time.monotonic() - started
rows, vocab = 8, 151936  # a batch of Qwen3-VL's vocabulary, as vLLM's sampler warm-up samples it
logits = torch.randn(rows, vocab, device="cuda")
top_k = torch.full((rows,), vocab - 1, device="cuda", dtype=torch.int32)
top_p = torch.full((rows,), 0.9, device="cuda")
calls = []
for _ in range(2):
    call = time.monotonic()
    flashinfer.sampling.top_k_top_p_sampling_from_logits(logits, top_k, top_p)
    torch.cuda.synchronize()
    calls.append(round(time.monotonic() - call, 2))
print(json.dumps({"import_s": round(imported, 2), "calls_s": calls, "flashinfer": flashinfer.__version__}))
"""
"""What vLLM's sampler warm-up asks of FlashInfer (top-k and top-p from logits) where the engine
lets vLLM sample with it, in a process of its own: its first call builds FlashInfer's `sampling`
module when the workspace is cold. (verl's rollout never does: docs/verl.md.)"""
WORKSPACE_MODULES = ".cache/flashinfer/*/*/cached_ops/*"


def cmd_jit_check(args: argparse.Namespace) -> int:
    """FlashInfer's sampling kernels built with this machine's nvcc, timed: once in a cold
    workspace (what a kernel module's first use costs an image without FlashInfer's prebuilt
    kernels), once more in a new process on the same workspace (what a retry pays with the
    workspace on the job's volume). Writes `jit-check.json` into --out after each."""
    if (not _importable("flashinfer") or find_ninja() is None) and WHEELS.is_dir():
        install_carried({"flashinfer", "ninja"})
    nvcc = find_nvcc()
    if nvcc is None or find_ninja() is None or not _importable("flashinfer"):
        raise SystemExit("jit-check needs nvcc, ninja and flashinfer (carry .cache/verl-gpu/wheels)")
    version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout.strip()
    workspace = Path(tempfile.mkdtemp(prefix="flashinfer-jit-"))
    env = {**os.environ, **flashinfer_build_env(), "FLASHINFER_WORKSPACE_BASE": str(workspace)}
    result: dict[str, Any] = {
        "machine": gpu_facts(),
        "nvcc": {"path": str(nvcc), "version": version.splitlines()[-1] if version else None},
        "workspace": str(workspace),
    }
    for name in ("cold", "warm"):
        started = time.time()
        log(f"jit-check: {name} workspace, a process of its own (up to {args.seconds:.0f} s)")
        try:
            done = subprocess.run(
                [sys.executable, "-c", JIT_CALL],
                env=env,
                capture_output=True,
                text=True,
                timeout=args.seconds,
            )
            code, output, tail = done.returncode, done.stdout.strip(), done.stderr[-2000:]
        except subprocess.TimeoutExpired as timeout:
            code, output, tail = None, "", f"still building after {args.seconds:.0f} s: {timeout}"
        run: dict[str, Any] = {"exit_code": code, "wall_s": round(time.time() - started, 1)}
        if code == 0 and output:
            run.update(json.loads(output.splitlines()[-1]))
        else:
            run["stderr_tail"] = tail
        run["jit_builds"] = jit_builds(workspace, started, WORKSPACE_MODULES)
        result[name] = run
        write_json(args.out / "jit-check.json", result)
        log(f"jit-check: {name}: {json.dumps(run)[:400]}")
        if code != 0:
            return 1
    return 0


def failure_line(log_file: Path) -> dict[str, Any] | None:
    from grpo_operator.api.contract import failure_in

    return failure_in(log_file.read_text(errors="replace")) if log_file.is_file() else None


def summary(part: str) -> dict[str, Any]:
    work = WORK / ("shapes-4b" if part != "tiny" else "tiny")
    found = {f"attempt_{a.number}": attempt_summary(a) for a in attempts(part)}
    out: dict[str, Any] = {
        "part": part,
        "machine": gpu_facts(),
        "attention": ATTENTION["implementation"],
        "attempts": found,
    }
    if part == "tiny":
        record = next(iter(work.rglob("export.json")), None)
        out["checkpoints"] = sorted(p.name for p in work.rglob("global_step_*") if p.is_dir())
        out["export"] = json.loads(record.read_text()) if record else None
        out["reward_calls"] = reward_calls(work)
        first, second = found.get("attempt_1", {}), found.get("attempt_2", {})
        out["ok"] = (
            first.get("exit_code") == 0
            and second.get("exit_code") == 0
            and first.get("steps", [])[-1:] == [2]
            and second.get("steps", [])[:1] == [3]
            and second.get("steps", [])[-1:] == [4]
            and bool(out["export"])
            and out["export"].get("step") == 4
        )
    else:
        shapes = work / f"{part}.shapes.json"
        out["shapes"] = json.loads(shapes.read_text()) if shapes.is_file() else None
        out["ok"] = all(a["exit_code"] == 0 and len(a["steps"]) >= 1 for a in found.values()) and bool(found)
    return out


def cmd_wait(args: argparse.Namespace) -> int:
    """Follow the part's newest attempt, and the attempts its `--then` chain starts after it,
    until the chain's last one ends or the time is up."""
    found = attempts(args.part)
    if not found:
        raise SystemExit(f"no {args.part} attempt has been started")
    attempt: Attempt | None = found[-1]
    deadline = time.monotonic() + args.seconds
    log_machine_age()
    followed: list[tuple[Attempt, int | None]] = []
    stopped: set[Attempt] = set()
    while attempt is not None:
        left = max(0.0, deadline - time.monotonic())
        log(f"following {attempt.part} attempt {attempt.number} for up to {left:.0f} s")
        code = follow(attempt, left, STARTED if args.stop_at_startup else None)
        if code is None and args.stop_at_startup and _started(attempt):
            stop_attempt(attempt)
            stopped.add(attempt)
            code = attempt.rc()
        followed.append((attempt, code))
        if code is None and attempt.running():
            break
        attempt = chained(attempt, deadline)
    results = {part: summary(part) for part in dict.fromkeys(a.part for a, _ in followed)}
    for part, result in results.items():
        write_json(args.out / f"{part}-summary.json", result)
        archive_logs(args.out, WORK / part, part)
    last, code = followed[-1]
    if last in stopped:
        state = f"stopped at the end of its start-up, exit code {code}"
    elif code is None and last.running():
        state = "still running"
    else:
        state = f"ended, exit code {code}"
    steps = results[last.part]["attempts"][f"attempt_{last.number}"]["steps"]
    log(f"{last.part} attempt {last.number}: {state}; steps {steps}")
    log_machine_age()
    # An attempt this wait stopped exits as a stopped pod does (not 0), and that is what was asked
    # for: so `wait --stop-at-startup && start ... --attempt N` goes on to the next retry in one call.
    failed = [a for a, c in followed if c not in (0, None) and a not in stopped]
    return 1 if failed else 0


def log_machine_age() -> None:
    """How long this machine has been held against the 30 minutes it may be: the next call's plan
    (another `wait`, or a pair that needs ~10 minutes) depends on it."""
    up = machine_minutes()
    held = up + HELD_BEFORE_BOOT_MIN
    log(
        f"machine up {up:.1f} min, held about {held:.1f}; it goes back at {MACHINE_HOLD_MIN:.0f} min held, "
        f"{MACHINE_HOLD_MIN - held:.1f} left"
    )


def archive_logs(out: Path, work: Path, name: str) -> None:
    """The run logs, metrics and commands in one file (the device tool returns at most 8)."""
    with tarfile.open(out / f"{name}-logs.tar.gz", "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.suffix in {".log", ".jsonl", ".txt", ".yaml", ".json"}:
                tar.add(path, arcname=str(path.relative_to(work)))


STEP_KEYS = (
    "timing_s/",
    "perf/throughput",
    "actor/perf/max_memory",
    "response_length/mean",
    "prompt_length/mean",
)


def logged_steps(archive: Path, attempt: str) -> list[dict[str, Any]]:
    """verl's own per-step metrics for an attempt, from the logs a `wait` call archived."""
    if not archive.is_file():
        return []
    name = f"{attempt.replace('_', '-')}.jsonl"
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.name.endswith(("/metrics/" + name, f"{attempt.replace('_', '-')}/metrics.jsonl")):
                text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
                return [
                    {"step": m["step"], **m["data"]}
                    for m in map(json.loads, text.splitlines())
                    if "step" in m
                ]
    return []


STEP_END = re.compile(r"^\[\s*([\d.]+)s\] .*?step:(\d+) - ")


def logged_gpu(archive: Path, attempt: str, step_seconds: dict[int, float]) -> dict[int, dict[str, Any]]:
    """What the GPU monitor saw in each step of an attempt (gpu_per_step), from its archived
    `gpu.log` and output; {} for a run without them (no nvidia-smi, or older)."""
    if not archive.is_file():
        return {}
    folder = f"{attempt.replace('_', '-')}/"
    files: dict[str, str] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            for name in ("gpu.log", "output.log"):
                if member.name.endswith(folder + name):
                    files[name] = tar.extractfile(member).read().decode(errors="replace")  # type: ignore[union-attr]
    if len(files) < 2:
        return {}
    ends = {int(m[2]): float(m[1]) for m in map(STEP_END.match, files["output.log"].splitlines()) if m}
    return gpu_per_step(files["gpu.log"], ends, step_seconds)


def logged_phases(archive: Path, attempt: str) -> dict[str, float | None]:
    """The start-up phases of an attempt, re-read from its archived output (the marks may have
    been refined since the run)."""
    if not archive.is_file():
        return {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.name.endswith(f"{attempt.replace('_', '-')}/output.log"):
                with tempfile.NamedTemporaryFile("wb", suffix=".log") as copy:
                    copy.write(tar.extractfile(member).read())  # type: ignore[union-attr]
                    copy.flush()
                    return phases(Path(copy.name))
    return {}


# --- the sampled stacks, read back -----------------------------------------------------------------

SAMPLE_HEAD = re.compile(r"^=== \[\s*([\d.]+)s\] pid (\d+) (.*)$", re.M)
FRAME = re.compile(r"^\s+(\S+) \((.+):\d+\)$")
SITE_PREFIXES = re.compile(r"^.*?/(site|dist)-packages/")


@dataclass(frozen=True)
class StackSample:
    seconds: float
    pid: int
    title: str
    busy: tuple[tuple[tuple[str, str], ...], ...]
    """The frames (function, file) of each thread py-spy saw busy, innermost first."""


def stack_samples(text: str) -> list[StackSample]:
    """The samples of a `stacks.log`, in order."""
    heads = list(SAMPLE_HEAD.finditer(text))
    samples = []
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : after.start() if after else len(text)]
        busy = []
        for thread in re.split(r"^Thread ", body, flags=re.M)[1:]:
            first, _, frames = thread.partition("\n")
            if "(idle)" in first:
                continue
            found = (FRAME.match(line) for line in frames.splitlines())
            busy.append(tuple((m[1], SITE_PREFIXES.sub("", m[2])) for m in found if m))
        samples.append(StackSample(float(head[1]), int(head[2]), head[3].strip(), tuple(busy)))
    return samples


def activity(sample: StackSample) -> str:
    """What a sample's process was doing, in a few words: idle, Python compiling source on import,
    importing, or its innermost verl or vLLM frame (else its innermost frame)."""
    if not sample.busy:
        return "idle"
    frames = sample.busy[0]
    functions = {function for function, _ in frames}
    if "SourceLoader.source_to_code" in functions:
        return "importing: compiling source"
    if "_find_and_load" in functions:
        return "importing"
    ours = [f"{function} ({file})" for function, file in frames if file.startswith(("verl/", "vllm/"))]
    if ours:
        return ours[0]
    return f"{frames[0][0]} ({frames[0][1]})" if frames else "busy"


def stacks_report(text: str) -> list[str]:
    """A timeline of a sampled start-up: each process's runs of one activity (idle ones left out),
    then how many busy samples there were and how many of them compiled source."""
    spans: dict[int, list[list[Any]]] = {}
    samples = stack_samples(text)
    for sample in samples:
        what = activity(sample)
        runs = spans.setdefault(sample.pid, [])
        if runs and runs[-1][2] == what:
            runs[-1][1] = sample.seconds
            runs[-1][3] += 1
        else:
            runs.append([sample.seconds, sample.seconds, what, 1, sample.title])
    rows = sorted(
        (start, end, pid, title, what, count)
        for pid, runs in spans.items()
        for start, end, what, count, title in runs
        if what != "idle"
    )
    lines = [
        f"{start:7.1f} – {end:7.1f} s  pid {pid:<7} {title[:40]:40}  {what} ({count})"
        for start, end, pid, title, what, count in rows
    ]
    busy = [s for s in samples if s.busy]
    compiling = sum(activity(s) == "importing: compiling source" for s in busy)
    importing = sum(activity(s).startswith("importing") for s in busy)
    lines.append(
        f"{len(samples)} samples, {len(busy)} busy: {importing} importing, {compiling} of them compiling source"
    )
    return lines


def cmd_stacks(archive: Path, attempt: int) -> int:
    """Here: the timeline of an attempt's sampled stacks, from the logs a `wait` call archived."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.name.endswith(f"attempt-{attempt}/stacks.log"):
                text = tar.extractfile(member).read().decode(errors="replace")  # type: ignore[union-attr]
                print("\n".join(stacks_report(text)))
                return 0
    raise SystemExit(f"no attempt-{attempt}/stacks.log in {archive}: start the attempt with --sample-stacks")


def attempt_number(name: str) -> int:
    """`attempt_12` -> 12, so attempts sort as numbers, not as text."""
    return int(name.rsplit("_", 1)[1])


def retry_ratios(first: dict[str, Any], later: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every retry's ratio against the one cold attempt, and the mean retry's: the figure to hold
    against a target, since two retries of one machine have differed by a tenth of the cold time."""
    each = {"attempt_2": first, **later}
    mean_retry_s = sum(pair["retry_s"] for pair in each.values()) / len(each)
    return {
        "each": {name: pair["ratio"] for name, pair in each.items()},
        "mean_retry_s": round(mean_retry_s, 1),
        "mean_ratio": round(mean_retry_s / first["cold_s"], 3),
    }


def startup_against_cold(cold: dict[str, Any], retry: dict[str, Any]) -> dict[str, Any]:
    """What a retry pays before its first step, against the cold attempt: the time until step 1
    began (its line's stamp less its own step time), each phase's share, and the ratio.

    A pair stopped at the end of its start-up (`wait --stop-at-startup`) has no step: both are
    then measured to the rollout server's mark, the last one before step 1 (1.8 s before it in
    the cold attempt of the geo3k recipe's rows that ran to its step)."""
    to_step = bool(cold["steps"] and retry["steps"])

    def before_first_step(run: dict[str, Any]) -> float:
        if not to_step:
            return round(run["startup_s"][STARTUP_END], 1)
        first = run["steps"][0]
        return round(run["startup_s"]["first_step"] - run["timing_s"][first]["timing_s/step"], 1)

    def phases(run: dict[str, Any]) -> dict[str, float]:
        marks = run["startup_s"]
        names = [name for name in marks if name != "first_step"]
        ends = [marks[name] for name in names]
        starts = [0.0, *ends[:-1]]
        return {name: round(end - start, 1) for name, start, end in zip(names, starts, ends, strict=True)}

    cold_s, retry_s = before_first_step(cold), before_first_step(retry)
    return {
        "measured_to": "step 1" if to_step else f"the {STARTUP_END} mark",
        "cold_s": cold_s,
        "retry_s": retry_s,
        "ratio": round(retry_s / cold_s, 3),
        "cold_phases_s": phases(cold),
        "retry_phases_s": phases(retry),
    }


def train_file(overrides: list[str]) -> str | None:
    """The parquet file a run trained on, from its engine command (ours gives a one-item list)."""
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "data.train_files":
            return value.strip("[]'\"")
    return None


def vllm_executor(overrides: list[str]) -> str:
    """The executor vLLM's server ran with: the engine command's own value, else verl's ("mp")."""
    from grpo_trainer.engines.verl.overrides import VLLM_EXECUTOR_KEY

    for item in overrides:
        key, _, value = item.partition("=")
        if key.lstrip("+") == VLLM_EXECUTOR_KEY:
            return value.strip("'\"")
    return "mp"


def last_completed(found: dict[str, Any]) -> str:
    """The newest attempt that ended with exit code 0 (an earlier one may have failed to start)."""
    done = [name for name, one in found["attempts"].items() if one["exit_code"] == 0]
    return max(done or list(found["attempts"]), key=attempt_number)


def steady_difference(ours: dict[str, Any], raw: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each steady-state timing of ours against raw verl's: seconds each and the difference."""
    out = {}
    for key, value in ours["steady_state"].items():
        if key.endswith("_s"):
            other = raw["steady_state"][key]
            out[key] = {"ours": value, "raw_verl": other, "difference": round(value - other, 2)}
    return out


MAIN_RUN_KEYS = (
    "machine", "gpus", "attention", "shapes", "ours", "raw_verl", "ours_retry", "retry_startup",
    "overhead_pct", "same_data",
)  # fmt: skip
"""The keys of a summary's main run; every other key is a section that `record` keeps."""


def record(source: Path, gpus: int, section: str | None = None, previous_as: str | None = None) -> int:
    """Here: the committed summary of a 4B run (docs/benchmarks/data/verl-4b-<N>gpu.json) from the
    `wait` summaries a device call brought back (`shapes-4b-summary.json`, `raw-4b-summary.json`).

    With `section`, the pair (ours and raw verl, from one lease; or ours and its retry, for the
    start-up a retry saves), or ours alone when there is neither, goes under that key of the
    existing summary and the rest of it is kept: a run at other shapes or settings than the
    summary's own (a shorter response, to fit both runs in one lease) must not replace them.
    Without it, the new run becomes the main one and the sections stay; `previous_as` keeps the
    main run it replaces under that key (a run with other attention, say), so no measurement is
    lost by recording a newer one."""
    ours = json.loads((source / "shapes-4b-summary.json").read_text())
    raw_file = source / "raw-4b-summary.json"
    raw = json.loads(raw_file.read_text()) if raw_file.is_file() else None

    def run(found: dict[str, Any], attempt: str = "attempt_1") -> dict[str, Any]:
        one = found["attempts"][attempt]
        archive = source / f"{found['part']}-logs.tar.gz"
        per_step = logged_steps(archive, attempt) or one["per_step"]
        startup_s = logged_phases(archive, attempt) or one["startup_s"]
        if not per_step:  # stopped or failed before a step ended: its start-up, and why it ended
            return {
                "exit_code": one["exit_code"],
                "steps": [],
                "startup_s": startup_s,
                "train_file": train_file(one["engine_overrides"]),
                "vllm_executor": vllm_executor(one["engine_overrides"]),
                "jit_builds": one.get("jit_builds", []),
                **{key: one[key] for key in ("failure", "host") if one.get(key)},
            }
        steps = [
            {k: v for k, v in step.items() if k == "step" or k.startswith(STEP_KEYS)} for step in per_step
        ]
        steady = steps[1:] or steps
        mean = lambda key: round(sum(s[key] for s in steady) / len(steady), 2)  # noqa: E731
        return {
            "exit_code": one["exit_code"],
            "steps": [s["step"] for s in steps],
            "timing_s": {
                s["step"]: {k: round(v, 2) for k, v in s.items() if k.startswith("timing_s/")} for s in steps
            },
            "throughput": {s["step"]: round(s["perf/throughput"], 1) for s in steps},
            "peak_memory_gb": {
                "allocated": max(s["actor/perf/max_memory_allocated_gb"] for s in steps),
                "reserved": max(s["actor/perf/max_memory_reserved_gb"] for s in steps),
            },
            "steady_state": {
                "steps": [s["step"] for s in steady],
                "step_s": mean("timing_s/step"),
                "gen_s": mean("timing_s/gen"),
                "old_log_prob_s": mean("timing_s/old_log_prob"),
                "ref_s": mean("timing_s/ref"),
                "update_actor_s": mean("timing_s/update_actor"),
                "tokens_per_s_per_gpu": mean("perf/throughput"),
            },
            "startup_s": startup_s,
            "gpu_per_step": logged_gpu(
                archive,
                attempt,
                {s["step"]: s["timing_s/step"] for s in steps},
            ),
            "train_file": train_file(one["engine_overrides"]),
            "vllm_executor": vllm_executor(one["engine_overrides"]),
            "jit_builds": one.get("jit_builds", []),
            "tokens_per_sequence": {
                "prompt_mean": mean("prompt_length/mean"),
                "response_mean": mean("response_length/mean"),
            },
        }

    summary = {
        "machine": ours["machine"],
        "gpus": gpus,
        "attention": ours["attention"],
        "shapes": ours["shapes"],
        "ours": run(ours),
        "raw_verl": run(raw, last_completed(raw)) if raw else None,
    }
    if "attempt_2" in ours["attempts"]:
        summary["ours_retry"] = retry = run(ours, "attempt_2")
        summary["retry_startup"] = startup_against_cold(summary["ours"], retry)
        later = [name for name in sorted(ours["attempts"], key=attempt_number) if attempt_number(name) > 2]
        if later:  # more retries on the same machine: one pair is one sample of a noisy ratio
            summary["later_retries_startup"] = {
                name: startup_against_cold(summary["ours"], run(ours, name)) for name in later
            }
            summary["retry_ratios"] = retry_ratios(summary["retry_startup"], summary["later_retries_startup"])
    if raw:
        ours_s, raw_s = (
            summary["ours"]["steady_state"]["step_s"],
            summary["raw_verl"]["steady_state"]["step_s"],
        )
        summary["overhead_pct"] = round(100 * (ours_s - raw_s) / raw_s, 2)
        summary["same_data"] = summary["ours"]["train_file"] == summary["raw_verl"]["train_file"]
        if not summary["same_data"]:
            log("ours and raw verl trained on different files: their steps are different batches")
    target = ROOT / "docs" / "benchmarks" / "data" / f"verl-4b-{gpus}gpu.json"
    kept = json.loads(target.read_text()) if target.is_file() else {}
    if section and previous_as:
        raise SystemExit("record: --section adds a pair beside the main run; --previous-as replaces it")
    if not section:
        sections = {key: value for key, value in kept.items() if key not in MAIN_RUN_KEYS}
        if previous_as:
            if previous_as in MAIN_RUN_KEYS or previous_as in sections:
                raise SystemExit(f"record --previous-as {previous_as}: that key is taken")
            previous = {key: value for key, value in kept.items() if key in MAIN_RUN_KEYS}
            if not previous:
                raise SystemExit(f"record --previous-as {previous_as}: {target.name} holds no main run")
            sections[previous_as] = previous
        summary = {**summary, **sections}
    elif raw:
        pair = {key: summary[key] for key in ("machine", "attention", "shapes", "ours", "raw_verl")}
        pair["overhead_pct"] = summary["overhead_pct"]
        pair["same_data"] = summary["same_data"]
        pair["per_phase_s"] = steady_difference(pair["ours"], pair["raw_verl"])
        summary = {**kept, section: pair}
    else:  # ours, with its retries when it has them (the start-up they save), or alone
        retries = ("ours_retry", "retry_startup", "later_retries_startup", "retry_ratios")
        keys = ("machine", "attention", "shapes", "ours", *(key for key in retries if key in summary))
        summary = {**kept, section: {key: summary[key] for key in keys}}
        log(f"section {section}: {', '.join(keys[3:])} (no raw-4b-summary.json in {source})")
    write_json(target, summary)
    log(f"wrote {target.relative_to(ROOT)}")
    return 0


def parser() -> argparse.ArgumentParser:
    """Every verb's options, in one parser (a test reads its defaults)."""
    out = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    out.add_argument(
        "verb",
        choices=["prepare", "start", "wait", "stop", "record", "stacks", "jit-check", "_supervise", "_then"],
    )
    out.add_argument(
        "part", nargs="?", help=f"one of {', '.join(PARTS)} (for _supervise: the attempt's folder)"
    )
    out.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/verl-gpu-out")))
    out.add_argument("--attempt", type=int, default=1)
    out.add_argument("--gpus", type=int, default=1)
    out.add_argument("--steps", type=int, default=3, help="steps of a 4B run")
    out.add_argument(
        "--response-length", type=int, default=1024, help="4B runs (a random model writes to it)"
    )
    out.add_argument("--image-side", type=int, default=896, help="4B runs: pixels per side of each image")
    out.add_argument(
        "--prompts",
        choices=["equal", "varied"],
        default="varied",
        help="4B runs: every prompt one length (with full-length responses, every sequence one length), or varied",
    )
    out.add_argument(
        "--train-rows",
        type=int,
        default=0,
        help=f"4B runs: training rows of the generated geo3k data (default {DATA_ROWS_PER_GPU} per GPU; "
        "the geo3k recipe has 2,101)",
    )
    out.add_argument(
        "--omp-threads",
        type=int,
        default=0,
        help="4B runs: OMP_NUM_THREADS for every Ray worker (raw verl: Ray's 1 without it; ours: "
        "each GPU's share of the CPUs without it)",
    )
    out.add_argument("--section", help="record: put ours and raw verl under this key of the existing summary")
    out.add_argument("--previous-as", help="record: keep the main run the new one replaces under this key")
    out.add_argument(
        "--engine-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="tiny and 4B runs of ours: one more of the GRPOJob's engine overrides (repeatable; a --then "
        "chain hands it on), e.g. +actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=uni",
    )
    out.add_argument(
        "--strategy",
        choices=("fsdp2", "fsdp"),
        default="fsdp2",
        help="tiny and 4B runs, ours and raw verl: verl's FSDP (default fsdp2, which every step "
        "measurement ran; the examples run fsdp, verl's default; a --then chain hands it on)",
    )
    out.add_argument(
        "--actor-offload",
        action="store_true",
        help="4B runs, ours and raw verl: the actor's parameters and optimiser state offloaded to host "
        "memory between phases, as the geo3k recipe runs (a step fits an H100's 80 GB; a --then chain "
        "hands it on)",
    )
    out.add_argument("--seconds", type=float, default=540, help="wait: how long to follow")
    out.add_argument(
        "--stop-at-startup",
        action="store_true",
        help="wait: stop each attempt it follows once its start-up is over (the rollout server up, the "
        "compile caches written), so a start-up pair fits a lease with little device time left",
    )
    out.add_argument(
        "--sample-stacks",
        type=float,
        default=0,
        metavar="S",
        help="start: every S seconds until the first step ends, every Python process's stack (py-spy)",
    )
    out.add_argument("--smoke", action="store_true", help="start: stop before launching verl (CPU)")
    out.add_argument(
        "--then",
        choices=PARTS,
        help="start: start this part too (same options), from a detached process, once the first has ended; "
        "the part being started: its next attempt (a retry)",
    )
    out.add_argument(
        "--raw-reward",
        choices=["ours", "verl"],
        default="ours",
        help="raw-4b: our geo3k reward file through verl's custom_reward_function, as ours runs it, or verl's own scorer",
    )
    out.add_argument("--keep", action="store_true", help="start tiny: reuse the work folder (model, data)")
    out.add_argument(
        "--reward",
        choices=["geo3k", "custom-batch"],
        default="geo3k",
        help="tiny: the builtin geo3k, or a user batch reward that logs each call's size",
    )
    return out


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    options = parser()
    args = options.parse_args(given)
    if args.verb == "prepare":
        return prepare()
    if args.verb == "record":  # here, with the folder a device call's files came back to
        return record(Path(args.part), args.gpus, args.section, args.previous_as)
    if args.verb == "stacks":  # here, with a logs archive a `wait` call brought back
        return cmd_stacks(Path(args.part), args.attempt)
    if args.verb == "jit-check":  # there: FlashInfer's sampling kernels, built and loaded, timed
        args.out.mkdir(parents=True, exist_ok=True)
        return cmd_jit_check(args)
    if args.verb == "_supervise":
        return supervise(Path(args.part))
    if args.verb == "_then":
        return run_then(Path(args.part))
    if args.part not in PARTS:
        options.error(f"name a part: {', '.join(PARTS)}")
    if args.verb == "stop":
        return stop(args.part)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.verb == "wait":
        return cmd_wait(args)
    log(f"start {args.part} attempt {args.attempt}: {args.gpus} GPU(s)")
    if not args.smoke and preflight(args.out, sampler=bool(args.sample_stacks)):
        return 3
    code = START[args.part](args)
    if code == 0 and args.then and not args.smoke:
        start_then(Attempt(args.part, args.attempt), then_argv(given, args.part, args.then, args.attempt))
    if not args.smoke:
        log_machine_age()
    return code


if __name__ == "__main__":
    sys.exit(main())
