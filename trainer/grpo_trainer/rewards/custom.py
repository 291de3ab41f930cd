"""A user's reward function from a Python file (a mounted ConfigMap), per-sample or batch.

verl 0.9 only calls per-sample functions, so the engine points verl at this module's
`compute_score` and passes the user's file through reward kwargs:

    reward.custom_reward_function.path=<this file>  .name=compute_score
    +reward.custom_reward_function.reward_kwargs.custom_path=/etc/grpo/reward/reward.py
    +reward.custom_reward_function.reward_kwargs.custom_name=compute_score_batch
    +reward.custom_reward_function.reward_kwargs.custom_kind=auto      # auto | sample | batch
    +reward.custom_reward_function.reward_kwargs.custom_on_error=zero  # zero | raise

A batch function (`(data_sources, solution_strs, ground_truths, extra_infos, **kw) -> list`) is
adapted with `adapt_batch`; engines that can batch (verl 0.7's `batch` manager) use
`compute_score_batch`. Other reward kwargs are passed on to the user's function.

Errors: a file or function that cannot be loaded raises at once with the path and the names the
file does define (a configuration error should stop the run). An exception inside the user's
function is logged and scored 0 (`custom_on_error=zero`, default), with the same keys as the
function's last dict result, because verl builds its per-key arrays from the first result and fails
on a missing key; `custom_on_error=raise` lets it propagate instead.

No classes here: verl loads this file by path without registering it in `sys.modules`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_trainer.rewards.batching import adapt_batch, as_batch, rows

__all__ = [
    "adapt_batch",
    "as_batch",
    "compute_score",
    "compute_score_batch",
    "function_kind",
    "load_batch_function",
    "load_function",
    "load_sample_function",
]

_BATCH_PARAMETERS = frozenset({"data_sources", "solution_strs", "ground_truths", "extra_infos"})
_OWN_OPTIONS = ("custom_path", "custom_name", "custom_kind", "custom_on_error")

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
    sample, _, last_keys = _resolve(kwargs)
    user_kwargs = {key: value for key, value in kwargs.items() if key not in _OWN_OPTIONS}
    try:
        result = sample(data_source, solution_str, ground_truth, extra_info, **user_kwargs)
    except Exception:
        if kwargs.get("custom_on_error", "zero") == "raise":
            raise
        log.exception("custom reward %s failed; scoring 0", kwargs.get("custom_path"))
        return _zero(last_keys)
    _remember_keys(result, last_keys)
    return result


def compute_score_batch(
    data_sources: list[Any],
    solution_strs: list[Any],
    ground_truths: list[Any],
    extra_infos: list[Any] | None = None,
    **kwargs: Any,
) -> list[Any]:
    """The batch entry: the user's batch function in one call, or their per-sample one in a loop."""
    _, batch, last_keys = _resolve(kwargs)
    user_kwargs = {key: value for key, value in kwargs.items() if key not in _OWN_OPTIONS}
    try:
        results = list(batch(data_sources, solution_strs, ground_truths, extra_infos, **user_kwargs))
    except Exception:
        if kwargs.get("custom_on_error", "zero") == "raise":
            raise
        log.exception("custom reward %s failed; scoring the batch 0", kwargs.get("custom_path"))
        return [_zero(last_keys) for _ in rows(data_sources, solution_strs, ground_truths, extra_infos)]
    for result in results:
        _remember_keys(result, last_keys)
    return results


def _resolve(options: dict[str, Any]) -> tuple[Callable[..., Any], Callable[..., list[Any]], dict[str, Any]]:
    path = options.get("custom_path")
    if not isinstance(path, str) or not path:
        raise ValueError("custom reward: reward kwarg 'custom_path' (the user's reward file) is required")
    name = str(options.get("custom_name") or "compute_score")
    kind = str(options.get("custom_kind") or "auto")
    file = Path(path.removeprefix("file://")).expanduser()
    mtime = file.stat().st_mtime_ns if file.is_file() else 0
    return _cached(path, name, kind, mtime)


@functools.lru_cache(maxsize=32)
def _cached(
    path: str, name: str, kind: str, mtime: int
) -> tuple[Callable[..., Any], Callable[..., list[Any]], dict[str, Any]]:
    """Both forms of the user's function, and the keys of its last dict result (mutable, per function)."""
    del mtime  # part of the cache key only: an edited file is loaded again
    return load_sample_function(path, name, kind), load_batch_function(path, name, kind), {}


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


def _remember_keys(result: Any, last_keys: dict[str, Any]) -> None:
    if isinstance(result, dict) and set(result) != set(last_keys):
        last_keys.clear()
        last_keys.update(dict.fromkeys(result, 0.0))


def _zero(last_keys: dict[str, Any]) -> Any:
    return {**last_keys, "score": 0.0} if last_keys else 0.0
