"""What the Python client accepts, checked before anything is sent.

A notebook passes whatever it has at hand: a number where a name belongs, a dict whose
`metadata` is a list, a value JSON cannot carry. Each is refused here with a `GRPOClientError`
of one line naming the argument or the manifest's field and what was found, rather than a
`TypeError` from `pathlib` or `ValueError` from the HTTP layer several calls down.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_operator.api.v1alpha1 import GROUP, KIND, VERSION

from .client_errors import GRPOClientError

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
"""An object name (RFC 1123 subdomain), as the API server checks it: anything else in a URL path
would address some other object or none."""
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A namespace name (RFC 1123 label)."""


def shown(value: Any) -> str:
    """A found value for a message: its type and a short repr."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise GRPOClientError(f"{what}: expected an object name (a string), got {shown(value)}")
    if not _NAME.fullmatch(value):
        raise GRPOClientError(
            f"{what}: {value!r} is not an object name (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253)"
        )
    return value


def namespace(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _NAMESPACE.fullmatch(value):
        raise GRPOClientError(
            f"namespace: expected a namespace name (lower-case letters, digits and '-', at most 63), "
            f"got {shown(value)}"
        )
    return value


def text(value: Any, what: str, *, optional: bool = False) -> str | None:
    """A non-empty string (or None where `optional`)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise GRPOClientError(f"{what}: expected a non-empty string, got {shown(value)}")
    return value


def path(value: Any, what: str) -> Path:
    """A file system path: a string or an os.PathLike (a `bytes` path is refused: it has no
    encoding to name it by in a message)."""
    if isinstance(value, bool) or not isinstance(value, str | os.PathLike):
        raise GRPOClientError(f"{what}: expected a file path (str or pathlib.Path), got {shown(value)}")
    found = Path(value)
    if not str(found) or "\x00" in str(found):
        raise GRPOClientError(f"{what}: {str(found)!r} is not a usable path")
    return found


def folder(value: Any, what: str) -> str | None:
    """An existing folder (a copy of a job's volume), or None."""
    if value is None:
        return None
    found = path(value, what)
    if not found.is_dir():
        raise GRPOClientError(f"{what}: {found} is not a folder (it should hold the pods' grpo/ tree)")
    return str(found)


def seconds(value: Any, what: str, *, positive: bool = False) -> float:
    """A finite number of seconds, not negative (`positive`: above zero, for a polling interval)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GRPOClientError(f"{what}: expected a number of seconds, got {shown(value)}")
    if value < 0 or (positive and value == 0):
        raise GRPOClientError(
            f"{what}: expected {'more than' if positive else 'at least'} 0 s, got {value:g}"
        )
    return float(value)


def number(value: Any, what: str) -> float | None:
    """An optional finite number (a plot's baseline)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GRPOClientError(f"{what}: expected a finite number, got {shown(value)}")
    return float(value)


def attempt(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GRPOClientError(f"attempt: expected an attempt number (1, 2, ...), got {shown(value)}")
    return value


def json_value(value: Any, where: str) -> None:
    """Refuses what JSON cannot carry (a set, a date, bytes, NaN, a key that is no string),
    naming where in the document it is."""
    problem = _json_problem(value, where)
    if problem:
        raise GRPOClientError(problem)


def _json_problem(value: Any, where: str) -> str | None:
    at = f"{where}: " if where else ""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{at}{value} is not a JSON number"
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{at}the key {shown(key)} is not a string"
            if problem := _json_problem(item, f"{where}.{key}" if where else key):
                return problem
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if problem := _json_problem(item, f"{where}[{index}]"):
                return problem
        return None
    return f"{at}{shown(value)} is not a JSON value"


def manifest(document: Any, source: str) -> dict[str, Any]:
    """A GRPOJob manifest as a dict: a mapping whose apiVersion and kind, if given, are the
    GRPOJob's, whose metadata and spec are mappings, and whose every value is JSON."""
    if not isinstance(document, Mapping):
        raise GRPOClientError(f"{source}: expected a GRPOJob manifest (a mapping), got {shown(document)}")
    found = {key: item for key, item in document.items() if key != "status"}
    if problem := _json_problem(found, ""):
        raise GRPOClientError(f"{source}: {problem}")
    api_version = f"{GROUP}/{VERSION}"
    if found.get("apiVersion", api_version) != api_version:
        raise GRPOClientError(f"{source}: apiVersion {found['apiVersion']!r}: expected {api_version}")
    if found.get("kind", KIND) != KIND:
        raise GRPOClientError(f"{source}: kind {found['kind']!r}: expected {KIND}")
    for field in ("metadata", "spec"):
        if found.get(field) is not None and not isinstance(found[field], Mapping):
            raise GRPOClientError(f"{source}: {field}: expected a mapping, got {shown(found[field])}")
    return found
