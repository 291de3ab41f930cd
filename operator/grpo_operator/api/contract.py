"""The contract between the operator and the trainer: every fact both sides must agree on, once.

The operator writes a resolved job file and sets environment variables on every Ray pod; the
trainer reads them, reports progress into the job's status and ends with an exit code and, on a
failure, one `GRPO_FAILURE` line that Ray copies into the RayJob's message. Both sides import
this module, and so do the trainer image and the GPU benchmarks, which carry no operator
dependencies: it imports nothing outside the standard library.

What is here:

- exit codes and which of them a retry cannot fix;
- the failure line: its format (`Failure.line`) and how the operator reads it back;
- environment variable names;
- paths on the pods: mounts, the spec file, the layout of a job's folder, per-attempt files (metrics,
  checkpoint events, the attempt's log, the stop request and the yield record of a planned stop);
- the accelerator device types the trainer can be asked to run on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

# --- exit codes ------------------------------------------------------------------------------

OK = 0
UNKNOWN = 1
"""An unclassified crash. Retried: most of them on real clusters are infrastructure."""
USAGE = 2
"""Bad command line (argparse's own code)."""
CONFIG_ERROR = 3
"""The job cannot work as written (overrides rejected, batch sizes, missing reward). Never retried."""
DATA_ERROR = 4
"""The dataset is missing or malformed. Never retried."""
RETRYABLE = 75
"""A transient fault the trainer recognised (EX_TEMPFAIL): device OOM, a collective timeout, a lost node."""
YIELDED = 76
"""A planned stop, not a failure: asked to stop (its pods are going: a suspension, a deadline, an
eviction, a preemption), the trainer saved the step it was on, wrote the attempt's yield record
and ended. The next attempt resumes after that step; it costs no retry of backoffLimit."""

NOT_RETRYABLE = frozenset({USAGE, CONFIG_ERROR, DATA_ERROR})

_EXIT_NAMES = {
    OK: "succeeded",
    UNKNOWN: "crashed",
    USAGE: "bad command line",
    CONFIG_ERROR: "configuration error",
    DATA_ERROR: "data error",
    RETRYABLE: "transient failure (OOM, collective timeout or lost node)",
    YIELDED: "yielded: saved its last step and stopped as asked",
}


_SIGNAL_HINTS = {
    9: " (SIGKILL: the kernel's out-of-memory killer, or a forced stop)",
    15: " (SIGTERM: stopped from outside)",
}
"""What a person reads into the signals a trainer is usually killed with: a SIGKILL with no line of
its own is most often memory (the TRL engine trains in the trainer's own process)."""


def describe_exit(code: int) -> str:
    """A short phrase for a condition message."""
    if code in _EXIT_NAMES:
        return _EXIT_NAMES[code]
    if code > 128 or code < 0:
        signal = code - 128 if code > 128 else -code
        return f"killed by signal {signal}{_SIGNAL_HINTS.get(signal, '')}"
    return f"exit code {code}"


# --- the failure line ------------------------------------------------------------------------

FAILURE_MARKER = "GRPO_FAILURE"
"""Prefix of the trainer's last line on a failure: `GRPO_FAILURE {"reason", "retryable", "exitCode",
"message"[, "signature"]}`."""
FAILURE_MESSAGE_LIMIT = 512
"""Characters of the message the line carries: Ray keeps only the tail of the log in the RayJob."""
SIGNATURE_LENGTH = 12
"""Hex characters of the crash signature the trainer writes (a prefix of a SHA-256)."""
SIGNATURE_MAX_LENGTH = 64
SIGNATURE_PATTERN = rf"[0-9a-f]{{1,{SIGNATURE_MAX_LENGTH}}}"
"""What the operator and the status schema accept as a signature: lowercase hex, up to a whole
SHA-256, so a trainer that writes a longer one still stops a repeated crash."""
_FAILURE_LINE = re.compile(FAILURE_MARKER + r" (\{.*\})")
# Ray: "Job entrypoint command failed with exit code N, last available logs ...".
_EXIT_CODE = re.compile(r"exit code (-?\d+)")


@dataclass(frozen=True)
class Failure:
    """Why an attempt ended badly, in the words the operator shows."""

    code: int
    reason: str
    message: str
    signature: str = ""
    """A short hash of the root exception and where it was raised, for a crash the trainer read
    from the engine's log: two consecutive attempts with the same one are not retried again."""

    @property
    def retryable(self) -> bool:
        return self.code not in NOT_RETRYABLE

    def line(self) -> str:
        """The one machine-readable line for the end of the log (and so for the RayJob's message)."""
        payload = {
            "reason": self.reason,
            "retryable": self.retryable,
            "exitCode": self.code,
            "message": self.message[:FAILURE_MESSAGE_LIMIT],
            **({"signature": self.signature} if self.signature else {}),
        }
        return f"{FAILURE_MARKER} {json.dumps(payload, ensure_ascii=False)}"


def failure_in(text: str) -> dict[str, Any] | None:
    """The trainer's own account of a failure (the last failure line in `text`), if it has one."""
    found = None
    for match in _FAILURE_LINE.finditer(text or ""):
        try:
            payload = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(payload, dict) and isinstance(payload.get("reason"), str):
            found = payload
    return found


def exit_code_in(message: str) -> int | None:
    """The entrypoint's exit code in a Ray job failure message, if it has one."""
    match = _EXIT_CODE.search(message or "")
    return int(match.group(1)) if match else None


def is_retryable(message: str) -> bool:
    """Whether a failed attempt described by a Ray job message should be retried.

    An explicit non-retryable exit code wins; anything else that failed is worth another attempt
    from the latest checkpoint (the retry budget, backoffLimit, bounds the cost).
    """
    code = exit_code_in(message)
    return code is None or code not in NOT_RETRYABLE


# --- environment -----------------------------------------------------------------------------


class Env:
    """Names of the variables the operator sets on every trainer pod (and tools may set by hand)."""

    JOB_NAME = "GRPO_JOB_NAME"
    NAMESPACE = "GRPO_NAMESPACE"
    ATTEMPT = "GRPO_ATTEMPT"
    """The 1-based attempt number; a retried attempt always resumes from the latest checkpoint."""
    SPEC_FILE = "GRPO_SPEC_FILE"
    METRICS_FILE = "GRPO_METRICS_FILE"
    """This attempt's per-step metrics file (one per attempt: verl's file logger truncates)."""
    WORKDIR = "GRPO_WORKDIR"
    """Where the pod's `/grpo` tree lies when the trainer runs outside a pod (a workstation, the
    local test cluster): every path under MOUNT_ROOT is read and written under this folder."""
    THREADS = "OMP_NUM_THREADS"
    """CPU threads of each process's math libraries: the operator sets `threads_per_device` of the
    worker pods' CPUs on every pod of a verl job, and the verl engine passes the pod's value to
    every Ray worker. Ray's own default for a worker that asks for no CPUs, as verl's do, is 1: the
    actor's FSDP set-up at Qwen3-VL-4B shapes (a copy and cast of 17.8 GB of weights on the CPU)
    then ran on one core."""


def threads_per_device(cpus: float, devices: int) -> int:
    """Math-library threads per process on a node of `cpus` CPUs and `devices` accelerators: each
    device's worker process gets its share, whole, at least one (a CPU-only node: all of them)."""
    return max(1, int(cpus // max(1, devices)))


CACHE_HOMES = {"HF_HOME": "huggingface", "MODELSCOPE_CACHE": "modelscope"}
"""Hub clients' cache variables -> their folder under the job's cache dir (kept across attempts)."""


# --- paths -----------------------------------------------------------------------------------

MOUNT_ROOT = "/grpo"
SPEC_MOUNT_DIR = f"{MOUNT_ROOT}/spec"
SPEC_KEY = "job.json"
"""The spec ConfigMap's key, and the file's name in SPEC_MOUNT_DIR."""
SPEC_FILE = f"{SPEC_MOUNT_DIR}/{SPEC_KEY}"
CHECKPOINT_MOUNT = f"{MOUNT_ROOT}/checkpoints"
"""The checkpoint volume; each job has a folder on it named after the job and its uid (job_dir)."""
REWARD_MOUNT_DIR = f"{MOUNT_ROOT}/reward"
SOURCES_ROOT = f"{MOUNT_ROOT}/sources"
"""pvc:// model and dataset claims are mounted read-only at SOURCES_ROOT/<claim>."""

JOB_SUBDIRS = {
    "checkpoint_dir": "checkpoints",
    "metrics_dir": "metrics",
    "data_dir": "data",
    "cache_dir": "cache",
    "export_dir": "export",
}
"""A job's folder on the checkpoint volume: JobPaths field -> sub-folder."""

COMPLETE_FILE = "training-complete.json"
"""In the job's folder once training has finished: a later attempt only exports."""
EXPORT_RECORD = "export.json"
"""In the export folder, written last: which step was exported and where (a finished export)."""
EXPORT_MODEL_DIR = "model"
EXPORT_ADAPTER_DIR = "lora-adapter"


JOB_UID_CHARS = 8
"""Characters of the job's uid in its folder's name."""


def job_dir(job_name: str, job_uid: str = "") -> str:
    """A job's folder on the checkpoint volume: `<name>-<first 8 characters of its uid>`.

    The uid keeps a job deleted and re-created under the same name (on a retained volume) from
    finding the old one's checkpoints, completion marker or export: it starts afresh. Without a
    uid (`grpo-train plan` of a plain manifest, a run by hand) the folder is the name alone.
    """
    short = job_uid.replace("-", "")[:JOB_UID_CHARS]
    return f"{CHECKPOINT_MOUNT}/{job_name}-{short}" if short else f"{CHECKPOINT_MOUNT}/{job_name}"


def metrics_file(metrics_dir: str, attempt: int) -> str:
    """One file per attempt: verl's file logger truncates its file on every start."""
    return f"{metrics_dir}/attempt-{attempt}.jsonl"


def attempt_log_file(metrics_dir: str, attempt: int) -> str:
    """The attempt's own output (trainer and engine, stdout and stderr), kept after its Ray cluster
    is gone; LOG_MAX_BYTES bounds it, the older half moved to `<file>.1` when it fills."""
    return f"{metrics_dir}/attempt-{attempt}.log"


LOG_MAX_BYTES = 64 << 20
"""Bytes of one attempt's log file before it rolls over to `<file>.1` (so at most twice this)."""
ROTATED_SUFFIX = ".1"


def _beside_metrics(metrics_file_path: str, suffix: str) -> str:
    stem, dot, _ = metrics_file_path.rpartition(".")
    return f"{stem if dot else metrics_file_path}{suffix}"


def checkpoint_events_file(metrics_file_path: str) -> str:
    """Where the engine appends checkpoint save events for the reporter: beside the metrics file.

    Derived from the metrics file, so an engine process on any node (which sees only the pod's
    environment) and the reporter agree without another variable.
    """
    return _beside_metrics(metrics_file_path, ".checkpoints.jsonl")


# --- a planned stop: save, then yield ----------------------------------------------------------
#
# Whatever stops an attempt's pods gracefully (runPolicy.suspend, activeDeadlineSeconds, Kueue,
# an eviction) runs each Ray pod's preStop hook first, `grpo-train yield`, which writes the
# attempt's stop request on the checkpoint volume and waits. The attempt's driver sees it at the
# end of the step it is on, saves that step, writes the yield record and exits YIELDED; the
# supervisor then writes the exit record, and the hooks return. Every file is per attempt, so a
# request for one attempt never stops the next. The driver always runs on the head pod, which
# mounts the volume: the channel works in every RayJob submission mode.


YIELD_COMMAND = ("grpo-train", "yield", "--timeout")
"""Every Ray pod's preStop hook, with the seconds it may wait appended (api/stop_bound.py)."""


def stop_request_file(metrics_file_path: str) -> str:
    """`attempt-N.stop.json`: an attempt is asked to save and stop (StopRequest)."""
    return _beside_metrics(metrics_file_path, ".stop.json")


def yield_record_file(metrics_file_path: str) -> str:
    """`attempt-N.yield.json`: the attempt saved (or could not save) its last step and stopped
    (YieldRecord), written by the driver once its checkpoint is complete."""
    return _beside_metrics(metrics_file_path, ".yield.json")


def exit_record_file(metrics_file_path: str) -> str:
    """`attempt-N.exit.json`: the attempt's process has ended ({"exitCode", "endedAt"}), written by
    `grpo-train run`'s supervisor; a stopping pod's hook waits for nothing more."""
    return _beside_metrics(metrics_file_path, ".exit.json")


def heartbeat_file(metrics_file_path: str) -> str:
    """`attempt-N.alive`: a count `grpo-train run`'s supervisor rewrites every HEARTBEAT_SECONDS
    while its attempt runs. A stopping pod's hook that sees it unchanged for HEARTBEAT_STALE_SECONDS
    (by its own clock: pods' clocks need not agree) knows the attempt died without its exit record
    (the supervisor itself killed) and waits for nothing more."""
    return _beside_metrics(metrics_file_path, ".alive")


HEARTBEAT_SECONDS = 5.0
HEARTBEAT_STALE_SECONDS = 30.0
"""Six missed beats: a supervisor's write may stall behind a checkpoint's on a busy volume."""


@dataclass(frozen=True)
class StopRequest:
    """What the stop request file holds."""

    requested_at: float
    """Seconds since the epoch when the first pod asked."""
    deadline: float
    """When the pods are killed (the hook's own timeout): a save that cannot end by then is not
    begun, and the previous checkpoint stands."""
    by: str = ""
    """Who asked: the pod's name (the head's, or a worker's)."""

    def to_json(self) -> str:
        return json.dumps({"requestedAt": self.requested_at, "deadline": self.deadline, "by": self.by})

    @classmethod
    def parse(cls, text: str) -> StopRequest | None:
        """The request in `text`; None for anything else (a partial write reads as no request yet)."""
        try:
            data = json.loads(text)
            return cls(float(data["requestedAt"]), float(data["deadline"]), str(data.get("by") or ""))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


@dataclass(frozen=True)
class YieldRecord:
    """What the yield record holds: the trainer's account of a planned stop."""

    step: int
    """The newest complete checkpoint when the attempt stopped: the next attempt resumes after it."""
    steps_lost: int
    """Steps trained after that checkpoint, which the next attempt trains again (0 when it saved)."""
    requested_at: float
    saved_at: float | None = None
    """When the save on stop was complete; None when none was made."""
    save_seconds: float | None = None
    reason: str = "SavedOnStop"
    """SavedOnStop, or SaveWouldNotFit (the save would not end before the pods' deadline)."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "step": self.step,
                "stepsLost": self.steps_lost,
                "requestedAt": self.requested_at,
                "savedAt": self.saved_at,
                "saveSeconds": self.save_seconds,
                "reason": self.reason,
            }
        )

    @classmethod
    def parse(cls, text: str) -> YieldRecord | None:
        try:
            data = json.loads(text)
            saved, seconds = data.get("savedAt"), data.get("saveSeconds")
            return cls(
                step=int(data["step"]),
                steps_lost=int(data["stepsLost"]),
                requested_at=float(data["requestedAt"]),
                saved_at=None if saved is None else float(saved),
                save_seconds=None if seconds is None else float(seconds),
                reason=str(data.get("reason") or "SavedOnStop"),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def under_workdir(path: str, workdir: str | None) -> str:
    """Where a pod path lies outside the pod: paths under MOUNT_ROOT move under `workdir`.

    Paths elsewhere (a model baked into the image, /dev/shm) are the same everywhere.
    """
    if not workdir or not (path == MOUNT_ROOT or path.startswith(MOUNT_ROOT + "/")):
        return path
    return workdir.rstrip("/") + path


def pod_path(path: str, workdir: str | None) -> str:
    """The inverse of under_workdir: what a path under the workdir is called on the pods.

    Paths the trainer reports (checkpoints, exports) are written into the job's status in pod
    terms, so they read the same whether the trainer ran in a pod or outside one.
    """
    if not workdir:
        return path
    root = workdir.rstrip("/")
    inside = path[len(root) :]
    if path.startswith(root + MOUNT_ROOT) and (inside == MOUNT_ROOT or inside.startswith(MOUNT_ROOT + "/")):
        return inside
    return path


# --- accelerators ----------------------------------------------------------------------------

DeviceType = Literal["cuda", "npu", "cpu"]
"""What the engine trains on: torch's device type (NVIDIA GPUs, Ascend NPUs, host CPUs)."""
