"""The CRD's own CEL rules, evaluated here, so a check without a cluster gives the server's verdict.

`kubectl apply` runs the GRPOJob's schema and its `x-kubernetes-validations` in the API server.
The schema half needs nothing here: the pydantic models it is generated from enforce the same
types and bounds. The CEL half (one of preset/train, at most one of two batch knobs, the TRL
engine's one device...) is written only as CEL, so this module walks the generated schema
(`crdgen.build_crd`) beside a spec — with its defaults applied; the rules read an absent field
as its default, so the verdict is the server's on the spec as written — and evaluates every
rule with cel-python. A rule added to the models is checked here with no second copy to keep
in step; transition rules (those that read `oldSelf`) need an old object and are left to the
server.

cel-python is imported on first use: the operator process never calls this (the API server has
already run these rules on every object it sees).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from .crdgen import build_crd
from .problem import Problem


def _spec_schema() -> dict[str, Any]:
    version = build_crd()["spec"]["versions"][0]
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


KUBERNETES_ONLY = ("quantity(", "isQuantity(")
"""Kubernetes' own CEL libraries, which cel-python lacks. The rules that call them are the
models' too (api/v1alpha1/base.py's Quantity), so the parse has checked them already."""


def _kubernetes_only(rule: str) -> bool:
    return any(call in rule for call in KUBERNETES_ONLY)


@cache
def _compiled() -> dict[str, Any]:
    """Every creation rule of the spec schema, compiled once: rule text -> program."""
    import celpy

    env = celpy.Environment()
    programs: dict[str, Any] = {}

    def visit(node: dict[str, Any]) -> None:
        for entry in node.get("x-kubernetes-validations", []):
            rule = entry["rule"]
            if "oldSelf" not in rule and not _kubernetes_only(rule) and rule not in programs:
                programs[rule] = env.program(env.compile(rule))
        for child in (node.get("properties") or {}).values():
            visit(child)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                visit(node[key])

    visit(_spec_schema())
    return programs


def rule_violations(spec: dict[str, Any]) -> list[Problem]:
    """The CEL rules `spec` (wire form, defaults applied) breaks, outermost first.

    Like the API server, a rule runs only where its field is present, and the rules of an object
    run before those of its fields.
    """
    import celpy

    programs = _compiled()
    found: list[Problem] = []

    def visit(node: dict[str, Any], value: Any, path: str) -> None:
        if value is None:
            return
        for entry in node.get("x-kubernetes-validations", []):
            program = programs.get(entry["rule"])
            if program is None:
                continue
            # The field the server names: the rule's fieldPath, below the node it sits on.
            where = path + entry.get("fieldPath", "")
            try:
                verdict = program.evaluate({"self": celpy.json_to_cel(value)})
            except Exception as error:  # an evaluation error is a refusal, as in the API server
                found.append(Problem(where, f"{entry['message']} ({error})"))
                continue
            if verdict is not True and not (isinstance(verdict, celpy.celtypes.BoolType) and bool(verdict)):
                found.append(Problem(where, entry["message"]))
        if isinstance(value, dict):
            for name, child in (node.get("properties") or {}).items():
                visit(child, value.get(name), f"{path}.{name}")
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                for key, item in value.items():
                    visit(extra, item, f"{path}[{key}]")
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            for index, item in enumerate(value):
                visit(node["items"], item, f"{path}[{index}]")

    visit(_spec_schema(), spec, "spec")
    return found
