"""A user's reward function in processes of its own: what `sandbox` runs, one keeper per worker.

    python -P -u sandbox_worker.py --file /grpo/reward/reward.py --function compute_score

Why processes: the trainer must survive whatever the function does. Inside verl's reward worker a
function that calls `sys.exit`, loops forever, segfaults or calls `os._exit` would stop the step or
hang it (verl calls rewards from executor threads, which cannot be interrupted); here the parent
answers a timeout or a crash and starts another worker.

Two processes, so that the user's code never holds the channel to the trainer:
- the keeper (this script's process) owns the pipes to the trainer, runs no user code, and is not
  dumpable (another process of the same user can neither open its descriptors through /proc nor
  read its memory). It is a child subreaper: whatever the user's code starts, even a process that
  calls `setsid` or forks twice, stays among its descendants, and every way the keeper ends
  (its input closing, the trainer gone, a catchable signal) kills all of them first.
- the runner, forked by the keeper, imports the user's file and calls the function. It talks to
  the keeper over a socket pair of its own and never sees what authenticates a reply.

Protocol with the trainer, on the standard input and output the keeper starts with: frames of a
4-byte big-endian length and a body of at most `MAX_FRAME_BYTES`.
    in, first     a 16-byte key, read once the runner is forked (so the runner never holds it)
    in            the request's nonce + the pickled request {"args": [...], "kwargs": {...}}
    out           the nonce it answers + a JSON object:
        first     {"ready": true, "kind": "batch" | "sample"}  or  {"ready": false, "error": str}
        reply     {"ok": true, "value": ...}  or  {"ok": false, "error": str, "failure": "error" | "result"}
Nonces are `nonce(key, n)`: n = 0 for the first frame, then 1, 2, ... for the requests. A request
without the next nonce was not written by the trainer (something else wrote on this worker's
input: a forged frame another worker's reward wrote through the trainer's descriptors) and is
dropped unread, so it neither runs nor shifts the replies; a reply without its request's nonce
is not the keeper's and the trainer skips it. Requests are pickled (the trainer's own data); replies are data only (`plain`): a
reward returns None, booleans, numbers, strings, and lists and dicts (string keys) of them, to a
depth of `MAX_DEPTH` and `MAX_REPLY_BYTES` encoded; numpy and torch scalars and arrays become
numbers and lists. Anything else is the function's error ("result"), naming the type.

Self-contained (standard library only), run by path from wherever the package is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import hmac
import importlib.util
import inspect
import json
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

_USER_MODULE = "grpo_user_reward_"
_BATCH_PARAMETERS = frozenset({"data_sources", "solution_strs", "ground_truths", "extra_infos"})
HEADER = struct.Struct(">I")
SEQUENCE = struct.Struct(">Q")
NONCE_BYTES = 16
MAX_REPLY_BYTES = 4 << 20
"""The largest reply a reward may give, JSON-encoded: a GRPO group's scores and named extras take
kilobytes; a bound keeps a runaway result from costing the trainer seconds to receive and read."""
MAX_FRAME_BYTES = MAX_REPLY_BYTES + 4096
MAX_DEPTH = 32
MAX_REQUEST_BYTES = 1 << 30
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_ENDING_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU")


def nonce(key: bytes, sequence: int) -> bytes:
    """What frame `sequence` of a worker keyed `key` carries (see the module's docstring)."""
    return hmac.new(key, SEQUENCE.pack(sequence), hashlib.sha256).digest()[:NONCE_BYTES]


# --- replies are data ----------------------------------------------------------------------------


class NotPlainError(ValueError):
    """The function's result is not one a reward can return (its type, size or depth)."""


def plain(value: Any) -> Any:
    """`value` as JSON-ready data, or NotPlainError saying what and where is not.

    numpy and torch values (scalars, arrays, tensors) become numbers and lists; nothing else is
    converted, so no method of the user's objects runs here beyond those two libraries' `tolist`.
    """
    budget = [MAX_REPLY_BYTES]
    return _plain(value, "", 0, budget)


def _plain(value: Any, where: str, depth: int, budget: list[int]) -> Any:
    if depth > MAX_DEPTH:
        raise NotPlainError(f"a result nested deeper than {MAX_DEPTH} levels (at {where or 'the top'})")
    budget[0] -= 16
    if budget[0] < 0:
        raise NotPlainError(f"a result over the {MAX_REPLY_BYTES >> 20} MiB limit on a reply")
    if value is None or isinstance(value, bool | str | int | float):  # numpy.float64 is a float
        return _scalar(value, where, budget)
    if isinstance(value, list | tuple):
        return [_plain(item, f"{where}[{i}]", depth + 1, budget) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotPlainError(f"a dict key of type {type(key).__name__} (at {where or 'the top'})")
            budget[0] -= len(key)
            out[str.__str__(key)] = _plain(item, f"{where}[{key!r}]", depth + 1, budget)
        return out
    kind = type(value)
    module = (kind.__module__ or "").split(".")[0]
    if module in ("numpy", "torch") and callable(getattr(value, "tolist", None)):
        count = value.numel() if module == "torch" else getattr(value, "size", 0)
        if isinstance(count, int) and count * 8 > MAX_REPLY_BYTES:
            raise NotPlainError(f"a result over the {MAX_REPLY_BYTES >> 20} MiB limit on a reply")
        return _plain(value.tolist(), where, depth, budget)
    own = kind.__module__.startswith(_USER_MODULE) or kind.__module__ == "builtins"
    what = kind.__qualname__ if own else f"{kind.__module__}.{kind.__qualname__}"
    raise NotPlainError(f"an object of type {what} (at {where or 'the top'})")


def _scalar(value: Any, where: str, budget: list[int]) -> Any:
    """None, a bool, str, int or float as exactly that type (not a subclass of it)."""
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, str):
        budget[0] -= len(value)
        if budget[0] < 0:
            raise NotPlainError(f"a result over the {MAX_REPLY_BYTES >> 20} MiB limit on a reply")
        return str.__str__(value)
    if isinstance(value, int):
        if value.bit_length() > 1000:
            raise NotPlainError(f"an integer of {value.bit_length()} bits (at {where or 'the top'})")
        return int.__index__(value)
    return float.__float__(value)


def encode_reply(value: Any, name: str) -> bytes:
    """The JSON of a successful call's reply, or of the error saying why the result cannot be sent."""
    try:
        body = json.dumps({"ok": True, "value": plain(value)}, allow_nan=True, separators=(",", ":"))
        if len(body) > MAX_REPLY_BYTES:
            raise NotPlainError(f"a result of {len(body)} bytes, over the {MAX_REPLY_BYTES >> 20} MiB limit")
    except (NotPlainError, RecursionError, ValueError) as error:
        text = (
            f"{name} returned {error}; a reward returns numbers, strings, None, and lists and dicts "
            "(string keys) of them"
        )
        body = json.dumps({"ok": False, "failure": "result", "error": text})
    return body.encode()


def encode_error(error: BaseException) -> bytes:
    return json.dumps({"ok": False, "failure": "error", "error": _describe(error)}).encode()


# --- framing -------------------------------------------------------------------------------------


def write_frame(fd: int, body: bytes) -> None:
    data = HEADER.pack(len(body)) + body
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_frame(fd: int, limit: int) -> bytes | None:
    """One frame's body, or None at end of input or for a frame over `limit` bytes."""
    header = _read_exactly(fd, HEADER.size)
    if header is None:
        return None
    size = HEADER.unpack(header)[0]
    if size > limit:
        return None
    return _read_exactly(fd, size)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        try:
            chunk = os.read(fd, min(size - len(chunks), 1 << 20))
        except InterruptedError:
            continue
        if not chunk:
            return None
        chunks.extend(chunk)
    return bytes(chunks)


# --- the user's function -------------------------------------------------------------------------


def function_kind(function: Any, name: str) -> str:
    """ "batch" when the function takes verl's plural arguments (or is named *_batch), else "sample"."""
    try:
        parameters = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        parameters = set()
    return "batch" if parameters & _BATCH_PARAMETERS or name.endswith("_batch") else "sample"


def load(path: str, name: str) -> Any:
    """The function `name` of the file at `path`, imported under a name of its own."""
    module_name = _USER_MODULE + hashlib.sha256(path.encode()).hexdigest()[:16]
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


# --- processes -----------------------------------------------------------------------------------


def _prctl(option: int, value: int) -> bool:
    """Linux's prctl(2); False where it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Every live process below `root`, found through /proc: a process that left the session or
    the process group of its parent is still a descendant."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(root: int, reap: bool, rounds: int = 50) -> None:
    """SIGKILL every descendant of `root` until none is left (a forking one is caught next round).

    With `reap` (`root` is this process, their subreaper), the dead are waited for as well.
    """
    for _ in range(rounds):
        found = descendants(root)
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if reap:
            _reap_children()
        if not found:
            return
        time.sleep(0.001)


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


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
    """When the pod runs out of memory, the kernel kills the worker before the trainer.

    A reward that allocates without bound then costs one call (the sandbox sees a crash), not
    the training process; raising one's own score needs no privilege.
    """
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as adj:
            adj.write("1000")
    except OSError:
        pass


# --- the runner: the user's code -----------------------------------------------------------------


def run_user_code(channel: int, path: str, name: str, memory_mb: int) -> None:
    """The forked runner: load the function, then answer the keeper's requests on `channel`."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # the function's prints go to standard error
    _limit_memory(memory_mb)
    try:
        function = load(path, name)
    except BaseException as error:  # anything the file does on import is a configuration error
        traceback.print_exc()
        write_frame(
            channel, SEQUENCE.pack(0) + json.dumps({"ready": False, "error": _describe(error)}).encode()
        )
        return
    hello = {"ready": True, "kind": function_kind(function, name)}
    write_frame(channel, SEQUENCE.pack(0) + json.dumps(hello).encode())
    while True:
        body = read_frame(channel, MAX_REQUEST_BYTES)
        if body is None:
            return
        sequence = body[: SEQUENCE.size]
        try:
            request = pickle.loads(body[SEQUENCE.size :])
            value = function(*request.get("args", ()), **request.get("kwargs", {}))
            reply = encode_reply(value, name)
        except BaseException as error:  # SystemExit and KeyboardInterrupt included: the worker stays
            traceback.print_exc()
            reply = encode_error(error)
        write_frame(channel, sequence + reply)


# --- the keeper ----------------------------------------------------------------------------------


class _WorkerEndedError(Exception):
    """The keeper's work is over: its input closed, or the runner misbehaved or died."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Keeper:
    """Relays the trainer's requests to the runner and its replies back, authenticated."""

    def __init__(self, requests: int, replies: int, channel: int, runner: int) -> None:
        self.requests, self.replies, self.channel, self.runner = requests, replies, channel, runner
        self.sequence = 0

    def relay(self, key: bytes) -> None:
        """The runner's first frame (ready or not) to the trainer, then one reply per request."""
        self._forward(nonce(key, 0), self._from_runner())
        while True:
            self._idle_until_request()
            body = read_frame(self.requests, MAX_REQUEST_BYTES + NONCE_BYTES)
            if body is None or len(body) < NONCE_BYTES:
                raise _WorkerEndedError(0)
            expected = nonce(key, self.sequence + 1)
            if not hmac.compare_digest(body[:NONCE_BYTES], expected):
                print("reward sandbox: dropped a request the trainer did not write", file=sys.stderr)
                continue
            self.sequence += 1
            write_frame(self.channel, SEQUENCE.pack(self.sequence) + body[NONCE_BYTES:])
            self._forward(expected, self._from_runner())

    def _idle_until_request(self) -> None:
        """Between calls the runner has nothing to say: a frame from it now is a forgery."""
        ready, _, _ = select.select([self.requests, self.channel], [], [])
        if self.channel in ready:
            died = not os.read(self.channel, 1)
            raise _WorkerEndedError(self._runner_code(unsolicited=not died))

    def _from_runner(self) -> bytes:
        body = read_frame(self.channel, MAX_FRAME_BYTES)
        if body is None or body[: SEQUENCE.size] != SEQUENCE.pack(self.sequence):
            raise _WorkerEndedError(self._runner_code(unsolicited=body is not None))
        return body[SEQUENCE.size :]

    def _forward(self, nonce: bytes, reply: bytes) -> None:
        try:
            write_frame(self.replies, nonce + reply)
        except OSError:
            raise _WorkerEndedError(0) from None

    def _runner_code(self, unsolicited: bool) -> int:
        """The exit code to leave with: the runner's own, or 70 (EX_SOFTWARE) for a forged frame."""
        if unsolicited:
            print("reward sandbox: a frame the keeper did not ask for; ending the worker", file=sys.stderr)
            return 70
        with contextlib.suppress(OSError):
            for _ in range(100):
                pid, status = os.waitpid(self.runner, os.WNOHANG)
                if pid:
                    code = os.waitstatus_to_exitcode(status)
                    return code if code >= 0 else 128 - code
                time.sleep(0.01)
        return 70


def end_worker(code: int) -> None:
    """Kill every descendant (this process is their subreaper), then leave: nothing outlives it."""
    kill_descendants(os.getpid(), reap=True)
    if os.getpgrp() == os.getpid():
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(code)


def _watch_parent(parent: int) -> None:
    """Leave when the trainer process is gone, even in the middle of the user's function."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            end_worker(0)


def _on_signal(signum: int, frame: Any) -> None:
    end_worker(128 + signum)


def _start_runner(path: str, name: str, memory_mb: int, keep: Iterator[int]) -> tuple[int, int]:
    """Fork the runner; (its pid, the keeper's end of their socket pair)."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            keeper = os.getppid()
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != keeper:
                os._exit(0)
            for fd in keep:
                os.close(fd)
            ours.close()
            for name_ in _ENDING_SIGNALS:
                signal.signal(getattr(signal, name_), signal.SIG_DFL)
            run_user_code(theirs.detach(), path, name, memory_mb)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    theirs.close()
    return pid, ours.detach()


def serve(path: str, name: str, memory_mb: int) -> int:
    """The keeper: start the runner, relay, and end every process below this one."""
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _first_for_the_oom_killer()
    for name_ in _ENDING_SIGNALS:
        signal.signal(getattr(signal, name_), _on_signal)
    # The channel to the trainer moves to descriptors the runner never inherits; 0 and 1 become
    # /dev/null and standard error, in this process and so in the runner.
    requests = os.dup(0)
    replies = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    runner, channel = _start_runner(path, name, memory_mb, iter((requests, replies)))
    key = read_frame(requests, NONCE_BYTES)
    if key is None or len(key) != NONCE_BYTES:
        return 0
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    try:
        Keeper(requests, replies, channel, runner).relay(key)
    except _WorkerEndedError as ended:
        return ended.code
    except OSError:
        return 70
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--file", required=True)
    parser.add_argument("--function", required=True)
    parser.add_argument("--max-memory-mb", type=int, default=0)
    args = parser.parse_args(argv)
    code = 70
    try:
        code = serve(args.file, args.function, args.max_memory_mb)
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        end_worker(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
