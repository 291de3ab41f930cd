"""What the API server checks of a GRPOJob before its values: the apiVersion and kind, every
field's JSON type, and that every field is one the schema knows.

The pydantic models, the schema's source, read `"16"` as 16 and `"true"` as true, and the
GRPOJob model ignores fields it does not know beside `spec`; the API server refuses all of them
(`kubectl apply` asks for strict field validation). So an offline verdict walks the generated
CRD's schema beside the manifest first, as the server does, and only a manifest of the right
shape goes on to the models (patterns, bounds) and the CEL rules. Like the server, a null
counts as absent, `metadata` is the server's own to check beyond its name, and `status` is not
the user's to write (the server drops it on create). `pruned` removes the nulls the server
removes (those of fields not marked nullable) before the models read the manifest, so a field
left empty in YAML gets its default there too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from .crdgen import build_crd
from .problem import Problem, shown
from .v1alpha1 import API_VERSION, KIND

_OWN_CHECKS = ("metadata", "status")
"""Top-level fields whose insides this walk leaves alone (see the module's docstring)."""


@cache
def _root_schema() -> dict[str, Any]:
    return dict(build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def _json_type(value: Any) -> str:
    """The JSON type of a parsed YAML or JSON value, as the schema's `type` spells it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    # Strings, and what YAML reads as a date or a time, which kubectl sends as a string.
    return "string"


def _fits(expected: str, value: Any) -> bool:
    found = _json_type(value)
    if expected == "number":
        return found in ("integer", "number")
    if expected == "integer" and found == "number":
        return float(value).is_integer()  # 8.0 is an integer to the server, as JSON has one number type
    return found == expected


def wire_problems(manifest: dict[str, Any]) -> list[Problem]:
    """What the API server would refuse in `manifest` before it reads any value: empty when its
    apiVersion, kind, field names and JSON types are all the schema's."""
    problems: list[Problem] = []
    for field, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        value = manifest.get(field)
        if value != expected:
            found = f"found {shown(value)}" if value is not None else "it is missing"
            problems.append(Problem(field, f"expected {expected}, {found}"))
    root = _root_schema()
    for name, value in manifest.items():
        node = root["properties"].get(name)
        if node is None:
            problems.append(Problem(name, "unknown field"))
        elif name in _OWN_CHECKS:
            if value is not None and not _fits("object", value):
                problems.append(_type_problem(name, "object", value))
        elif name not in ("apiVersion", "kind"):
            _walk(node, value, name, problems)
    return problems


def _type_problem(path: str, expected: str, value: Any) -> Problem:
    return Problem(path, f"must be of type {expected}, found {_json_type(value)} {shown(value)}")


def _walk(node: dict[str, Any], value: Any, path: str, problems: list[Problem]) -> None:
    if value is None:
        return
    expected = node.get("type")
    if expected and not _fits(expected, value):
        problems.append(_type_problem(path, expected, value))
        return
    if isinstance(value, dict):
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                _walk(properties[key], item, f"{path}.{key}", problems)
            elif isinstance(extra, dict):
                _walk(extra, item, f"{path}[{key}]", problems)
            elif properties is not None:
                problems.append(Problem(f"{path}.{key}", "unknown field"))
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        items = node["items"]
        for index, item in enumerate(value):
            if item is None and not items.get("nullable"):
                # The server prunes a null field of an object, but not a list's null entry: it
                # refuses it as a value of the wrong type (`overrides: [a=1, ]` in YAML).
                expected = items.get("type", "a value")
                problems.append(Problem(f"{path}[{index}]", f"must be of type {expected}, found null"))
            else:
                _walk(items, item, f"{path}[{index}]", problems)


def pruned(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` without the nulls the API server prunes before defaulting: those of fields whose
    schema does not say `nullable` (a YAML key left empty, `groupSize:`, then takes its default)."""
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        return manifest
    return {**manifest, "spec": _pruned(_root_schema()["properties"]["spec"], spec)}


def _pruned(node: dict[str, Any], value: Any) -> Any:
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        out = {}
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if child is None:
                out[key] = item
            elif item is None and not child.get("nullable"):
                continue
            else:
                out[key] = _pruned(child, item)
        return out
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_pruned(node["items"], item) for item in value]
    return value
