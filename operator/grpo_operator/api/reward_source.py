"""Does a custom reward file define the function a job names? Read from its syntax, never run.

The operator's preflight (preflight.py) and the trainer's check before it starts
(grpo_trainer/rewards/custom.py) ask the same question of the same file, so they share this one
answer. It must never raise and never say what is not so:

- it reads at most MAX_SOURCE_CHARS: a bigger file is not judged (the operator parses on its only
  event loop, and a ConfigMap holds at most 1 MiB anyway);
- a file Python refuses (a syntax error, a null byte) is a problem, in the parser's words;
- a file the parser gives up on (too deep to build a tree of: RecursionError, MemoryError) is not
  judged: the limit is the checker's, and the trainer's import says what Python makes of it;
- a name bound at module level counts wherever it is bound there: a definition, an assignment or
  an import, also inside a module-level `if`/`else`, `try`/`except`/`else`/`finally` or `with`
  (the usual `try: import fast` / `except ImportError: def f(...)`);
- a `from module import *` may bring any name: without the name bound elsewhere, not judged.

Standard library only, like the contract: the trainer reads it without the operator's dependencies.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_SOURCE_CHARS = 64 * 1024
"""The largest file judged. Reward files are a few KiB. The parser's time grows with the file, and
the worst case is a deep expression (`1+1+...`, which ends in RecursionError): about 60 ms at 64
KiB on a busy 2-core machine, 130 ms at 200 KiB, against the 100 ms a reconcile may hold the
operator's event loop for."""


@dataclass(frozen=True)
class Reading:
    """What the file's syntax says about the function."""

    defined: bool | None
    """True: bound at module level; False: certainly not; None: cannot tell (not judged)."""
    error: str = ""
    """Why Python refuses the file, one line (`defined` is then False)."""
    line: int | None = None
    """The line of `error`, when the parser gave one."""
    functions: tuple[str, ...] = ()
    """The module-level functions it does define, for the message that says it lacks one."""
    why_unjudged: str = ""
    """Why `defined` is None, one line."""


def read(source: str, name: str, filename: str = "<reward>") -> Reading:
    """Whether `source` binds `name` at module level (see the module's docstring); never raises."""
    if len(source) > MAX_SOURCE_CHARS:
        return Reading(None, why_unjudged=f"larger than the {MAX_SOURCE_CHARS // 1024} KiB the checker reads")
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        return Reading(False, error=_one_line(error.msg), line=error.lineno)
    except ValueError as error:  # a null byte, on the Python versions that say so with ValueError
        return Reading(False, error=_one_line(str(error)))
    except (RecursionError, MemoryError):
        return Reading(None, why_unjudged="too deeply nested for the checker to read")
    bound: set[str] = set()
    functions: list[str] = []
    star = False
    for node in _module_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(node.name)
            bound.add(node.name)
        elif isinstance(node, ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            star |= any(alias.name == "*" for alias in node.names)
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    functions = list(dict.fromkeys(functions))
    if name in bound:
        return Reading(True, functions=tuple(functions))
    if star:
        return Reading(None, functions=tuple(functions), why_unjudged="it imports * from a module")
    return Reading(False, functions=tuple(functions))


def _module_level(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run at import, with those inside module-level `if`, `try` and `with`
    (a function's or class's body is not module level)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _module_level([*node.body, *node.orelse])
        elif isinstance(node, ast.Try | ast.TryStar):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            yield from _module_level([*node.body, *handlers, *node.orelse, *node.finalbody])
        elif isinstance(node, ast.With | ast.AsyncWith):
            yield from _module_level(node.body)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:256]
