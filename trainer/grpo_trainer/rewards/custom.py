"""A user's reward function from a Python file (a mounted ConfigMap), per-sample or batch.

The verl engine points verl at this module and passes the user's file through reward kwargs:

    reward.custom_reward_function.path=<this file>  .name=compute_score (or compute_score_batch)
    +reward.custom_reward_function.reward_kwargs.custom_path=/grpo/reward/reward.py
    +reward.custom_reward_function.reward_kwargs.custom_name=compute_score_batch
    +reward.custom_reward_function.reward_kwargs.custom_kind=auto      # auto | sample | batch

Both entries take either kind of user function: `compute_score` (verl's per-sample contract)
calls a batch function with lists of one, `compute_score_batch` (what the grouped reward manager
calls, a GRPO group at a time) calls a per-sample function once per response. Other reward kwargs
are passed on to the user's function.

The user's code runs in worker processes (`sandbox`), so the trainer survives whatever it does:

| the function... | the response scores |
| --- | --- |
| raises, `SystemExit` and `KeyboardInterrupt` included | 0 |
| runs past `custom_timeout_s` (default 10 s per call; the worker is killed and replaced) | 0 |
| kills its process (`os._exit`, a segfault, out of memory) | 0 (a fresh worker takes the next call) |
| returns NaN, an infinity or a non-number as the score | 0 for that response |
| returns anything but None, booleans, numbers, strings, and lists and dicts of them, or more than 4 MiB of it | 0 (the error names the function and the type) |
| writes on a descriptor it finds (a forged reply) | 0 for that call; no other reply moves |
| returns a list of the wrong length from a batch function | 0 for the whole batch |
| returns dicts with different keys | missing keys filled with 0 (verl needs the same keys throughout) |

with one rate-limited warning per kind of failure in the log. `custom_on_error=raise` stops the
run instead, on any row of the table (RewardFunctionError, a configuration error naming the file;
the TRL engine's default). A file that cannot be imported, or lacks the function, raises at
once with the file's own error: a configuration error should stop the run.

More kwargs: `custom_workers` (4 worker processes per trainer process; a call waiting for a free
worker counts against its bound, so size it to the calls expected at once), `custom_memory_mb` (an
address-space cap per worker; 0, the default, sets none).

`load_function` and the adapters load a file in this process, for tools that trust it (tests,
notebooks); both engines call users' files only through the sandbox. No dataclasses here: verl loads this file by path, without
registering it in `sys.modules`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import logging
import math
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from grpo_operator.api import reward_source

from grpo_trainer.failures import ConfigError
from grpo_trainer.rewards.batching import adapt_batch, as_batch, rows
from grpo_trainer.rewards.equivalence import reserve_for
from grpo_trainer.rewards.options import float_option, int_option, str_option
from grpo_trainer.rewards.sandbox import DEFAULT_WORKERS, RewardLoadError, SandboxPool

__all__ = [
    "adapt_batch",
    "as_batch",
    "check_imports",
    "close_pools",
    "compute_score",
    "compute_score_batch",
    "function_kind",
    "load_batch_function",
    "load_function",
    "load_sample_function",
    "start",
]

_BATCH_PARAMETERS = frozenset({"data_sources", "solution_strs", "ground_truths", "extra_infos"})
_OWN_OPTIONS = (
    "custom_path",
    "custom_name",
    "custom_kind",
    "custom_on_error",
    "custom_timeout_s",
    "custom_workers",
    "custom_memory_mb",
    "group_wait_s",  # the grouped reward manager's, not the user's
)
DEFAULT_TIMEOUT_S = 10.0

log = logging.getLogger(__name__)


def load_function(path: str, name: str) -> Callable[..., Any]:
    """The callable `name` defined in the Python file at `path` (`file://` prefix allowed)."""
    file = Path(path.removeprefix("file://")).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"reward file {str(file)!r} does not exist")
    module = _load_module(str(file.resolve()), file.stat().st_mtime_ns)
    function = getattr(module, name, None)
    if not callable(function):
        defined = sorted(
            attr
            for attr, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module.__name__
        )
        raise AttributeError(
            f"reward file {str(file)!r} defines no function {name!r}; it defines: {', '.join(defined) or 'none'}"
        )
    return function


def check_defines(path: str, name: str) -> None:
    """Refuse a reward file that does not parse or names no top-level `name`, without running it.

    The engine checks this before it starts: the file is only parsed (its code runs in the
    sandbox's workers, never in the trainer), so a typo in `reward.custom.function` or a syntax
    error fails the job at once, with the names the file does define. The reading is the
    operator's preflight's own (grpo_operator/api/reward_source.py): a file it cannot judge (too
    large or deep for it, a star import) is left to the sandbox's import, which names the cause.
    """
    file = Path(path.removeprefix("file://")).expanduser()
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"reward.custom: cannot read the reward file {str(file)!r}: {why}") from exc
    found = reward_source.read(source, name, filename=str(file))
    if found.error:
        at = f" line {found.line}" if found.line else ""
        raise ConfigError(f"reward.custom: {file.name}{at}: {found.error}")
    if found.defined is False:
        raise ConfigError(
            f"reward.custom.function: {file.name} defines no {name!r} "
            f"(its functions: {', '.join(found.functions) or 'none'})"
        )


IMPORT_CHECK_TIMEOUT_S = 120.0
_IMPORT_CHECK = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("grpo_user_reward_check", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
"""


def check_imports(path: str, timeout_s: float = IMPORT_CHECK_TIMEOUT_S) -> None:
    """Refuse a reward file that cannot be imported (a module the image lacks, an error at import
    time), by importing it in a child process, as the sandbox's workers will.

    Before anything heavy, so the job fails as a configuration error naming the file and its
    error, instead of verl's reward workers failing on it minutes later, after Ray is up, as a
    crash that is retried. The trainer itself never runs the user's code.
    """
    file = Path(path.removeprefix("file://")).expanduser()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _IMPORT_CHECK, str(file)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=str(file.parent),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"reward.custom: importing {file.name} took over {timeout_s:.0f} s (do slow set-up on the "
            "first call, not at import)"
        ) from exc
    if done.returncode == 0:
        return
    lines = [line.strip() for line in done.stderr.strip().splitlines() if line.strip()]
    error = lines[-1] if lines else f"exit status {done.returncode}"
    marker = f'File "{file}", line '
    where = [line.removeprefix(marker).split(",")[0] for line in lines if line.startswith(marker)]
    at = f" (line {where[-1]})" if where else ""
    raise ConfigError(f"reward.custom: {file.name} cannot be imported{at}: {error[:500]}")


def function_kind(function: Callable[..., Any], name: str = "") -> str:
    """ "batch" when the function takes verl's plural arguments (or is named *_batch), else "sample"."""
    try:
        parameters = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        parameters = set()
    if parameters & _BATCH_PARAMETERS or (name or getattr(function, "__name__", "")).endswith("_batch"):
        return "batch"
    return "sample"


def load_sample_function(path: str, name: str, kind: str = "auto") -> Callable[..., Any]:
    """The user's function as verl 0.9 calls it: one response per call."""
    function = load_function(path, name)
    return adapt_batch(function) if _kind(function, name, kind) == "batch" else function


def load_batch_function(path: str, name: str, kind: str = "auto") -> Callable[..., list[Any]]:
    """The user's function as a batch engine calls it: lists in, a list out."""
    function = load_function(path, name)
    return function if _kind(function, name, kind) == "batch" else as_batch(function)


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> Any:
    """verl's per-sample entry: score one response with the user's function from `custom_path`."""
    pool, kind, options = _resolve(kwargs)
    user_kwargs = {key: value for key, value in kwargs.items() if key not in _OWN_OPTIONS}
    if kind == "batch":
        args: tuple[Any, ...] = ([data_source], [solution_str], [ground_truth], [extra_info])
    else:
        args = (data_source, solution_str, ground_truth, extra_info)
    outcome = pool.call(args, user_kwargs, _deadline(options.timeout_s))
    if not outcome.ok:
        return _failed(outcome.failure, outcome.message, 1, options)[0]
    value = outcome.value
    if kind == "batch":
        values = _as_list(value)
        if values is None or len(values) != 1:
            return _failed("shape", _shape_message(value, 1), 1, options)[0]
        value = values[0]
    return _sanitize(value, options)


def compute_score_batch(
    data_sources: list[Any],
    solution_strs: list[Any],
    ground_truths: list[Any],
    extra_infos: list[Any] | None = None,
    **kwargs: Any,
) -> list[Any]:
    """The batch entry: the user's batch function in one call, or their per-sample one per response."""
    pool, kind, options = _resolve(kwargs)
    user_kwargs = {key: value for key, value in kwargs.items() if key not in _OWN_OPTIONS}
    items = list(rows(data_sources, solution_strs, ground_truths, extra_infos))
    if not items:
        return []
    if kind == "sample":
        return [
            compute_score(source, solution, truth, info, **kwargs) for source, solution, truth, info in items
        ]
    columns = tuple(list(column) for column in zip(*items, strict=True))
    outcome = pool.call(columns, user_kwargs, _deadline(options.timeout_s))
    if not outcome.ok:
        return _failed(outcome.failure, outcome.message, len(items), options)
    values = _as_list(outcome.value)
    if values is None or len(values) != len(items):
        return _failed("shape", _shape_message(outcome.value, len(items)), len(items), options)
    return [_sanitize(value, options) for value in values]


def _deadline(timeout_s: float) -> float:
    """When to stop waiting so the call returns within `timeout_s` (see equivalence.reserve_for)."""
    return time.monotonic() + max(0.0, timeout_s - reserve_for(timeout_s))


class RewardFunctionError(ConfigError):
    """The user's function failed and `custom_on_error=raise` asks for the run to stop.

    A configuration error: another attempt would run the same file on the same kind of responses.
    """

    reason = "RewardFunctionFailed"


def start(**options: Any) -> str:
    """Start the workers for these reward kwargs now and wait for the file to load; its kind.

    For an engine that wants a file that does not import to fail the job before training, not at
    the first reward call: raises ConfigError naming the file and the file's own error.
    """
    try:
        return _resolve(options)[1]
    except RewardLoadError as error:
        raise ConfigError(f"reward.custom: {error}") from error


class _Options(NamedTuple):
    path: str
    name: str
    kind: str
    timeout_s: float
    on_error: str
    workers: int
    memory_mb: int
    keys: dict[str, Any]
    """The keys of the function's dict results so far (verl builds its per-key arrays from them)."""


def _resolve(options: dict[str, Any]) -> tuple[SandboxPool, str, _Options]:
    path = options.get("custom_path")
    if not isinstance(path, str) or not path:
        raise ValueError("custom reward: reward kwarg 'custom_path' (the user's reward file) is required")
    file = Path(path.removeprefix("file://")).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"reward file {str(file)!r} does not exist")
    name = str(options.get("custom_name") or "compute_score")
    kind = str(options.get("custom_kind") or "auto")
    if kind not in ("auto", "sample", "batch"):
        raise ValueError(f"custom reward kind must be auto, sample or batch, not {kind!r}")
    on_error = str_option(options, "custom_on_error", "zero")
    if on_error not in ("zero", "raise"):
        raise ValueError(f"custom_on_error must be zero or raise, not {on_error!r}")
    pool, keys = _pool(
        str(file.resolve()),
        name,
        file.stat().st_mtime_ns,
        max(1, int_option(options, "custom_workers", DEFAULT_WORKERS)),
        int_option(options, "custom_memory_mb", 0),
    )
    detected = pool.start()
    settings = _Options(
        path=str(file),
        name=name,
        kind=detected if kind == "auto" else kind,
        timeout_s=max(0.001, float_option(options, "custom_timeout_s", DEFAULT_TIMEOUT_S)),
        on_error=on_error,
        workers=pool.size,
        memory_mb=pool.memory_mb,
        keys=keys,
    )
    return pool, settings.kind, settings


_pools: dict[tuple[str, str, int, int], tuple[SandboxPool, dict[str, Any]]] = {}
_pools_lock = threading.Lock()


def _pool(
    path: str, name: str, mtime: int, workers: int, memory_mb: int
) -> tuple[SandboxPool, dict[str, Any]]:
    """One pool per file version and function; an edited file gets fresh workers."""
    key = (path, name, workers, memory_mb)
    with _pools_lock:
        found = _pools.get(key)
        if found is not None and found[0].mtime == mtime:  # type: ignore[attr-defined]
            return found
        if found is not None:
            found[0].close()
        pool = SandboxPool(path, name, size=workers, memory_mb=memory_mb)
        pool.mtime = mtime  # type: ignore[attr-defined]
        _pools[key] = (pool, {})
        return _pools[key]


def close_pools() -> None:
    """Stop every worker this process started (and their process groups): the end of a run."""
    with _pools_lock:
        found = [pool for pool, _ in _pools.values()]
        _pools.clear()
    for pool in found:
        pool.close()


def _as_list(value: Any) -> list[Any] | None:
    if isinstance(value, list | tuple):
        return list(value)
    tolist = getattr(value, "tolist", None)  # numpy arrays, tensors
    if callable(tolist) and getattr(value, "ndim", 0) == 1:
        return list(tolist())
    return None


def _shape_message(value: Any, expected: int) -> str:
    size = len(value) if isinstance(value, list | tuple) else None
    what = f"a list of {size}" if size is not None else f"a {type(value).__name__}"
    return f"the batch function returned {what} for {expected} responses"


def _number(value: Any) -> float | None:
    """A finite float, or None (NaN, infinities, non-numbers)."""
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _sanitize(value: Any, options: _Options) -> Any:
    """What verl can take from one result: a finite score, and the same keys as every other result.

    verl builds one array per key from the first result of a step and fails on a key another result
    lacks, and a NaN score poisons the advantages of the whole group; both are replaced by 0.
    """
    if isinstance(value, dict):
        score = _number(value.get("score"))
        if score is None:
            score = _not_a_score(f"a result's score is {_short(value.get('score'))}", options)
        result: dict[str, Any] = {}
        for key, extra in value.items():
            if key != "score":
                number = _number(extra)
                result[str(key)] = (0.0 if number is None else number) if _numeric_like(extra) else extra
        result["score"] = score
        return {**_remember_keys(result, options.keys), **result}
    score = _number(value)
    if score is None:
        score = _not_a_score(f"the function returned {_short(value)}", options)
    template = _remember_keys({}, options.keys)
    return {**template, "score": score} if template else score


def _not_a_score(what: str, options: _Options) -> float:
    """0 for a NaN, an infinity or a non-number, with a warning; or stop the run (`raise`)."""
    text = f"custom reward {options.path}::{options.name}: {what}, not a finite number"
    if options.on_error == "raise":
        raise RewardFunctionError(text)
    _report("score", text + "; scoring 0")
    return 0.0


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _numeric_like(value: Any) -> bool:
    return isinstance(value, int | float) or hasattr(value, "__float__")


MESSAGE_LIMIT = 2000
"""Characters of a failing call's own message kept in its warning (or error): a function that raises
with a 50 MB message must not put a 50 MB line in the log, nor in the job's status."""


def _failed(failure: str, message: str, count: int, options: _Options) -> list[Any]:
    """Scores for calls that produced nothing usable: 0 with the usual keys, or stop the run."""
    if len(message) > MESSAGE_LIMIT:
        message = f"{message[:MESSAGE_LIMIT]}… ({len(message) - MESSAGE_LIMIT} more characters)"
    text = f"custom reward {options.path}::{options.name}: {_FAILURES.get(failure, failure)}: {message}"
    if options.on_error == "raise":
        raise RewardFunctionError(text)
    _report(failure, text + "; scoring 0")
    template = _remember_keys({}, options.keys)
    zero: Any = {**template, "score": 0.0} if template else 0.0
    return [dict(zero) if isinstance(zero, dict) else zero for _ in range(count)]


_FAILURES = {
    "error": "the function raised",
    "result": "the function's result is not a reward's",
    "crash": "the worker process died",
    "timeout": "no result within custom_timeout_s",
    "shape": "wrong number of results",
}
_last_report: dict[str, float] = {}
_suppressed: dict[str, int] = {}
_REPORT_EVERY_S = 30.0


def _report(kind: str, text: str) -> None:
    """Log a failure, at most once per kind every 30 s (a broken function fails on every response)."""
    now = time.monotonic()
    with _pools_lock:
        if now - _last_report.get(kind, -_REPORT_EVERY_S) < _REPORT_EVERY_S:
            _suppressed[kind] = _suppressed.get(kind, 0) + 1
            return
        _last_report[kind] = now
        skipped = _suppressed.pop(kind, 0)
    log.warning("%s%s", text, f" ({skipped} more like it since the last report)" if skipped else "")


@functools.lru_cache(maxsize=32)
def _load_module(path: str, mtime: int) -> Any:
    """Import the file under a name of its own, registered in sys.modules so dataclasses and pickle work."""
    digest = hashlib.sha256(f"{path}:{mtime}".encode()).hexdigest()[:16]
    module_name = f"grpo_user_reward_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import reward file {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _kind(function: Callable[..., Any], name: str, kind: str) -> str:
    if kind in ("sample", "batch"):
        return kind
    if kind != "auto":
        raise ValueError(f"custom reward kind must be auto, sample or batch, not {kind!r}")
    return function_kind(function, name)


def _remember_keys(result: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    """Add `result`'s keys to those seen so far; returns all of them, each with 0."""
    with _pools_lock:
        for key in result:
            keys.setdefault(key, 0.0)
        return dict(keys)
