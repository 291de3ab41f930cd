"""Child process that decides symbolic equality with sympy, one JSON request per line.

Run as `python sympy_worker.py [--max-memory-mb N]` by `sympy_pool`. Why a separate process:
`sympy.simplify` can run for minutes, and verl calls reward functions from executor threads where
`signal.alarm` cannot interrupt it; a process can always be killed. This file is self-contained
(only sympy and the standard library) so it runs by path from wherever the package is installed.

Request:  {"a": tree, "b": tree}   (trees from `answer_parse`, as JSON lists)
Response: {"equal": true | false | null, "error": "<type>"?}
The process exits when its standard input closes, so it never outlives the process that made it.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import Any

import sympy

MAX_EXPONENT = 1000


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


def _limit_memory(megabytes: int) -> None:
    """Cap the address space so an exploding expression fails fast instead of swapping the node."""
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def serve(stdin: Any, stdout: Any) -> None:
    for line in stdin:
        try:
            request = json.loads(line)
            answer: dict[str, Any] = {"equal": equal(build(request["a"]), build(request["b"]))}
        except Exception as error:  # a bad request must not end the worker
            answer = {"equal": None, "error": type(error).__name__}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-memory-mb", type=int, default=0)
    args = parser.parse_args(argv)
    if args.max_memory_mb > 0:
        _limit_memory(args.max_memory_mb)
    serve(sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
