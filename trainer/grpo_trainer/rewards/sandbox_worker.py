"""A user's reward function in a process of its own: what `sandbox` runs, one process per worker.

    python -P -u sandbox_worker.py --file /grpo/reward/reward.py --function compute_score

Why a process: the trainer must survive whatever the function does. Inside verl's reward worker
a function that calls `sys.exit`, loops forever, segfaults or calls `os._exit` would stop the
step or hang it (verl calls rewards from executor threads, which cannot be interrupted); here the
parent answers a timeout or a crash and starts another worker.

Protocol, on the standard input and output this process starts with (the function's own prints go
to standard error, so they cannot corrupt it): frames of a 4-byte big-endian length and a pickle.
    first frame out   {"ready": True, "kind": "batch" | "sample"}  or  {"ready": False, "error": str}
    request in        {"args": [...], "kwargs": {...}}
    reply out         {"ok": True, "value": ...}  or  {"ok": False, "error": "TypeName: message"}
The process exits when its input closes or its parent is gone, and takes its process group
(the sandbox starts it as the group's leader) with it: whatever the user's function started dies
too.

Self-contained (standard library only), run by path from wherever the package is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import inspect
import os
import pickle
import signal
import struct
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

_BATCH_PARAMETERS = frozenset({"data_sources", "solution_strs", "ground_truths", "extra_infos"})
_HEADER = struct.Struct(">I")


def write_frame(out: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


def read_frame(source: BinaryIO) -> Any | None:
    header = _read_exactly(source, _HEADER.size)
    if header is None:
        return None
    body = _read_exactly(source, _HEADER.unpack(header)[0])
    return None if body is None else pickle.loads(body)


def _read_exactly(source: BinaryIO, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = source.read(size - len(chunks))
        if not chunk:
            return None
        chunks.extend(chunk)
    return bytes(chunks)


def function_kind(function: Any, name: str) -> str:
    """ "batch" when the function takes verl's plural arguments (or is named *_batch), else "sample"."""
    try:
        parameters = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        parameters = set()
    return "batch" if parameters & _BATCH_PARAMETERS or name.endswith("_batch") else "sample"


def load(path: str, name: str) -> Any:
    """The function `name` of the file at `path`, imported under a name of its own."""
    module_name = "grpo_user_reward_" + hashlib.sha256(path.encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import reward file {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickle look the module up by name
    spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if not callable(function):
        defined = sorted(
            attr
            for attr, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module_name
        )
        raise AttributeError(
            f"reward file {path!r} defines no function {name!r}; it defines: {', '.join(defined) or 'none'}"
        )
    return function


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 2000 else text[:2000] + "..."


def end_group() -> None:
    """Kill this worker's process group, itself last: nothing the user's function started outlives it.

    Only when this process leads its group (as the sandbox starts it); run by hand from a shell,
    it must not kill the shell's group.
    """
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(0)


def _watch_parent(parent: int) -> None:
    """Leave when the trainer process is gone, even in the middle of the user's function."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            end_group()


def _limit_memory(megabytes: int) -> None:
    if megabytes <= 0:
        return
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def _first_for_the_oom_killer() -> None:
    """When the pod runs out of memory, the kernel kills this worker before the trainer.

    A reward that allocates without bound then costs one call (the sandbox sees a crash), not
    the training process; raising one's own score needs no privilege.
    """
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as adj:
            adj.write("1000")
    except OSError:
        pass


def serve(path: str, name: str, memory_mb: int) -> None:
    # The protocol keeps the original descriptors; the user's code gets /dev/null and stderr.
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    _limit_memory(memory_mb)
    _first_for_the_oom_killer()
    try:
        function = load(path, name)
    except BaseException as error:  # anything the file does on import is a configuration error
        traceback.print_exc()
        write_frame(replies, {"ready": False, "error": _describe(error)})
        return
    write_frame(replies, {"ready": True, "kind": function_kind(function, name)})
    while True:
        request = read_frame(requests)
        if request is None:
            return
        try:
            value = function(*request.get("args", ()), **request.get("kwargs", {}))
            reply = {"ok": True, "value": value}
        except BaseException as error:  # SystemExit and KeyboardInterrupt included: the worker stays
            traceback.print_exc()
            reply = {"ok": False, "error": _describe(error)}
        try:
            write_frame(replies, reply)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as error:
            write_frame(
                replies, {"ok": False, "error": f"the result cannot be sent back: {_describe(error)}"}
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--file", required=True)
    parser.add_argument("--function", required=True)
    parser.add_argument("--max-memory-mb", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        serve(args.file, args.function, args.max_memory_mb)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        end_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
