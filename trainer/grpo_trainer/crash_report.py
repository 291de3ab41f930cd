"""What an engine's log says about why it crashed: the root exception, where it was raised, its signature.

A verl crash reaches the trainer as the tail of main_ppo's output: Ray prints the worker's
traceback with every line prefixed by the actor (`(TaskRunnerV1 pid=3053) ...`), wraps it in
`ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_update_actor() ...`,
and main_ppo's own traceback follows. The exception a person needs is the innermost one that is
not Ray's wrapper: its type, its message, the engine function it was raised in, and the Ray task
that ran it. `exited with code 1` says none of that.

The signature is a short hash of the exception type, its message with numbers blanked, and the
place: the same fault in two attempts has the same one (sizes and ids in the message differ from
run to run; the code that fails does not), so the operator can stop retrying a crash that a
retry will only repeat.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from grpo_operator.api.contract import SIGNATURE_LENGTH

MESSAGE_LIMIT = 300
"""Characters of the exception's message kept in the failure line (the rest is in the log)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAY_PREFIX = re.compile(r"^\((?:[\w.:-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s?")
_STAMP = re.compile(r"^\[\s*[\d.]+s\] ")
_EXCEPTION = re.compile(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure))"
    r"(?:\((?P<wrapped>\w+)\))?: (?P<message>.*)$"
)
_FRAME = re.compile(r'^File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>[\w<>.]+)')
_RAY_TASK = re.compile(r"ray::(?P<task>[\w.]+)\(\)")
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class RootCause:
    exception: str
    """The exception's type, without its module (RuntimeError)."""
    message: str
    function: str | None = None
    """The innermost frame in the engine's own code (or the innermost frame at all)."""
    location: str | None = None
    """That frame's file, from the engine package's folder down, and line."""
    task: str | None = None
    """The Ray task or actor method that raised it (WorkerDict.actor_rollout_update_actor)."""

    def describe(self) -> str:
        """One line for a person: the exception, then where it was raised."""
        text = f"{self.exception}: {_cut(self.message, MESSAGE_LIMIT)}"
        where = [
            f"in {self.function}" if self.function else "",
            f"({self.location})" if self.location else "",
        ]
        if self.task:
            where.append(f"in Ray task {self.task}")
        place = " ".join(w for w in where if w)
        return f"{text} {place}".strip()

    def signature(self) -> str:
        """Hex characters that stay the same when the same code fails the same way again."""
        normalised = _NUMBER.sub("N", self.message)[:120]
        key = "\0".join([self.exception, normalised, self.function or "", self.task or ""])
        return hashlib.sha256(key.encode()).hexdigest()[:SIGNATURE_LENGTH]


def _clean(line: str) -> str:
    line = _STAMP.sub("", _ANSI.sub("", line.rstrip("\n")))
    return _RAY_PREFIX.sub("", line).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def root_cause(log_tail: str, engine_package: str = "verl") -> RootCause | None:
    """The innermost non-Ray exception in the log's last traceback, with where it was raised.

    Returns None when the tail holds no exception line (a process killed from outside, a crash
    in native code that printed only a signal name).
    """
    lines = [_clean(raw) for raw in log_tail.splitlines()]
    chosen: int | None = None
    task = None
    for index, line in enumerate(lines):
        match = _EXCEPTION.match(line)
        if not match:
            continue
        if match.group("type").startswith("ray.exceptions.") or match.group("wrapped"):
            found = _RAY_TASK.search(match.group("message"))
            task = found.group("task") if found else task
            continue
        chosen = index
    if chosen is None:
        return None
    match = _EXCEPTION.match(lines[chosen])
    assert match is not None
    frames = _frames_before(lines, chosen)
    own = [f for f in frames if f"/{engine_package}/" in f[0]] or frames
    function = location = None
    if own:
        path, line_number, function = own[-1]
        short = path.split(f"/{engine_package}/", 1)
        location = (
            f"{engine_package}/{short[1]}:{line_number}" if len(short) == 2 else f"{path}:{line_number}"
        )
    exception = match.group("type").rpartition(".")[2]
    return RootCause(exception, match.group("message").strip(), function, location, task)


def _frames_before(lines: list[str], index: int) -> list[tuple[str, str, str]]:
    """The frames of the traceback that ends at `index`: from its last "Traceback" line on."""
    start = max(
        (i for i in range(index) if lines[i].startswith("Traceback (most recent call last)")), default=0
    )
    frames = []
    for line in lines[start:index]:
        match = _FRAME.match(line)
        if match:
            frames.append((match.group("path"), match.group("line"), match.group("function")))
    return frames
