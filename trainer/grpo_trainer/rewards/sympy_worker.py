"""sympy behind a process boundary: a zygote that imports sympy once and forks workers on demand.

Run by `sympy_pool` as `python sympy_worker.py --socket PATH [--max-memory-mb N]`. Why:
- `sympy.simplify` can run for minutes, and verl calls reward functions from executor threads where
  `signal.alarm` cannot interrupt them; a separate process can always be stopped.
- importing sympy takes most of a second; forking a process that already has it takes milliseconds,
  so a worker that had to be killed is replaced at once. The zygote is single-threaded, so forking
  it is safe (forking the threaded trainer process would not be).

Protocol. The zygote listens on a Unix socket; each connection gets its own forked worker, which
first writes its pid on a line, then answers JSON lines:
    request  {"a": tree, "b": tree, "budget_s": 1.5}   (trees from `answer_parse`, as lists)
    response {"equal": true | false | null, "error": "<type>"?}
or, for verl's own geo3k grading (mathruler's `grade_answer`, which the geo3k Ascend recipe used):
    request  {"op": "mathruler", "response": str, "truth": str, "use_boxed": true, "budget_s": 1.5}
    response {"equal": true | false | null, "error": "<type>"?}
A worker stops itself after `budget_s` (a timer signal: it is the main thread of its own process)
and answers null, staying usable. The signal repeats every few milliseconds after the budget:
mathruler swallows every exception (bare `except:`) around its sympy calls, so one interruption
would only end the current attempt; the repeats end them all, and a request whose budget ran out
answers null whatever the swallowed interruptions left behind. Should a worker not answer at all
(a long C-level operation), the parent asks the zygote on its standard input to kill it:
`kill <pid>`. The zygote only kills its own live children, and exits, with them, when its
standard input closes, so nothing outlives the trainer process.

Self-contained (sympy, mathruler where installed, and the standard library) so it runs by path
from wherever the package is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import select
import signal
import socket
import sys
from typing import Any

import sympy

try:  # imported once by the zygote, so forked workers have it; geo3k needs it, other rewards do not
    from mathruler.grader import extract_boxed_content, grade_answer
except ImportError:
    extract_boxed_content = grade_answer = None

MAX_EXPONENT = 1000
REPEAT_S = 0.005
_expired = False


class BudgetExceededError(Exception):
    """The request's budget ran out inside sympy."""


@functools.cache
def _functions() -> dict[str, Any]:
    return {
        "sin": sympy.sin,
        "cos": sympy.cos,
        "tan": sympy.tan,
        "cot": sympy.cot,
        "sec": sympy.sec,
        "csc": sympy.csc,
        "arcsin": sympy.asin,
        "arccos": sympy.acos,
        "arctan": sympy.atan,
        "ln": sympy.log,
        "log": sympy.log,
        "exp": sympy.exp,
    }


def build(node: list[Any]) -> Any:
    """Rebuild a parsed tree as a sympy expression, exactly (decimals become rationals)."""
    kind = node[0]
    if kind == "num":
        return sympy.Rational(str(node[1]))
    if kind == "sym":
        return sympy.Symbol(str(node[1]))
    if kind == "pi":
        return sympy.pi
    if kind == "neg":
        return -build(node[1])
    if kind == "sqrt":
        return sympy.sqrt(build(node[1]))
    if kind == "root":
        return sympy.root(build(node[2]), build(node[1]))
    if kind == "fn":
        return _functions()[str(node[1])](build(node[2]))
    left, right = build(node[1]), build(node[2])
    if kind == "add":
        return left + right
    if kind == "sub":
        return left - right
    if kind == "mul":
        return left * right
    if kind == "div":
        return left / right
    if kind == "pow":
        if right.is_Number and abs(right) > MAX_EXPONENT:
            raise ValueError("exponent too large")
        return left**right
    raise ValueError(f"unknown node {kind!r}")


def equal(a: Any, b: Any) -> bool:
    """True when sympy proves `a - b` is zero."""
    difference = sympy.simplify(a - b)
    if difference == 0:
        return True
    return bool(difference.equals(0))


def mathruler_equal(response: str, truth: str, use_boxed: bool = True) -> bool:
    """verl's geo3k `acc_reward`, to the letter: mathruler's grade on the last box (or the whole text)."""
    if grade_answer is None or extract_boxed_content is None:
        raise ImportError("mathruler is not installed")
    given = extract_boxed_content(response) if use_boxed else response
    return bool(grade_answer(given, truth))


def _dispatch(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") == "mathruler":
        response, truth = request["response"], request["truth"]
        if not isinstance(response, str) or not isinstance(truth, str):
            raise TypeError("response and truth must be strings")
        return {"equal": mathruler_equal(response, truth, bool(request.get("use_boxed", True)))}
    return {"equal": equal(build(request["a"]), build(request["b"]))}


def answer(request: Any) -> dict[str, Any]:
    """One request, within its budget; never raises."""
    global _expired
    _expired = False
    try:
        budget = float(request.get("budget_s") or 0.0)
        if budget > 0:
            signal.setitimer(signal.ITIMER_REAL, budget, REPEAT_S)
        try:
            reply = _dispatch(request)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BudgetExceededError:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return {"equal": None, "error": "timeout"}
    except Exception as error:  # a bad request must not end the worker
        signal.setitimer(signal.ITIMER_REAL, 0)
        return {"equal": None, "error": type(error).__name__}
    if _expired:  # the budget ran out inside code that swallowed the interruption
        return {"equal": None, "error": "timeout"}
    return reply


def _on_alarm(signum: int, frame: Any) -> None:
    global _expired
    _expired = True
    raise BudgetExceededError


def serve(connection: socket.socket) -> None:
    """A forked worker: answer the requests on one connection until it closes."""
    signal.signal(signal.SIGALRM, _on_alarm)
    connection.sendall(f"{os.getpid()}\n".encode())
    reader = connection.makefile("rb")
    for line in reader:
        try:
            reply = answer(json.loads(line))
        except (ValueError, BudgetExceededError):
            reply = {"equal": None, "error": "bad request"}
        if not isinstance(reply, dict):
            reply = {"equal": None, "error": "bad request"}
        connection.sendall(json.dumps(reply).encode() + b"\n")


def _limit_memory(megabytes: int) -> None:
    """Cap a worker's address space so an exploding expression fails fast instead of swapping."""
    if megabytes <= 0:
        return
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def _reap(children: set[int]) -> None:
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)


def _kill(children: set[int], pid: int) -> None:
    """Kill a child that is still ours: its pid cannot be reused before we reap it."""
    if pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        children.discard(pid)


def zygote(socket_path: str, memory_mb: int) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract = socket_path.startswith("@")  # Linux abstract namespace: no file to create or remove
    listener.bind("\0" + socket_path[1:] if abstract else socket_path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    children: set[int] = set()
    control = b""
    try:
        while True:
            ready, _, _ = select.select([listener.fileno(), 0], [], [], 1.0)
            _reap(children)
            if 0 in ready:
                chunk = os.read(0, 4096)
                if not chunk:
                    return  # the trainer process is gone
                control += chunk
                while b"\n" in control:
                    line, _, control = control.partition(b"\n")
                    command, _, argument = line.decode(errors="replace").partition(" ")
                    if command == "kill" and argument.strip().isdigit():
                        _kill(children, int(argument))
            if listener.fileno() in ready:
                connection, _ = listener.accept()
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    os.close(0)
                    _limit_memory(memory_mb)
                    try:
                        serve(connection)
                    finally:
                        os._exit(0)
                children.add(pid)
                connection.close()
    finally:
        for pid in list(children):
            _kill(children, pid)
        listener.close()
        if not abstract:
            with contextlib.suppress(OSError):
                os.unlink(socket_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--max-memory-mb", type=int, default=0)
    args = parser.parse_args(argv)
    zygote(args.socket, args.max_memory_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
