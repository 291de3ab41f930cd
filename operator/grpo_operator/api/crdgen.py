"""Generate the GRPOJob CustomResourceDefinition from the pydantic models.

Pydantic writes JSON Schema (draft 2020-12); the API server wants a *structural* OpenAPI v3
schema: no `$ref`, no `anyOf` with a null branch, boolean `exclusiveMinimum`, no `title` or
`propertyNames`. This module does that translation, and nothing else, so the models stay the one
definition of the API. `python -m grpo_operator.api.crdgen` rewrites `crds/` and the chart's copy; a unit test fails
when the committed file drifts.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel

from .batch import CEL_RULES as BATCH_RULES
from .v1alpha1 import GROUP, KIND, PLURAL, SHORT_NAMES, SINGULAR, VERSION, GRPOJobSpec, GRPOJobStatus
from .v1alpha1.base import JOB_NAME_PATTERN, MAX_JOB_NAME

CRD_FILENAME = f"{GROUP}_{PLURAL}.yaml"
# Keys that JSON Schema allows and a structural schema does not.
_DROP = {"title", "propertyNames", "$defs", "discriminator"}

# A printer column cannot format a value, so the trainer writes what the columns show: metrics
# rounded to four significant digits (report.SIGNIFICANT_DIGITS); the operator writes the ETA as a
# duration string, only while the job trains (status.current_eta_seconds).
PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Step", "type": "string", "jsonPath": ".status.progress.steps", "description": "step/total"},
    {
        "name": "Reward",
        "type": "number",
        "jsonPath": ".status.metrics.reward",
        "description": "mean reward of the newest step",
    },
    {
        "name": "Val",
        "type": "number",
        "jsonPath": ".status.metrics.valScore",
        "description": "the newest validation score",
    },
    {"name": "Attempt", "type": "integer", "jsonPath": ".status.attempt"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "%",
        "type": "number",
        "jsonPath": ".status.progress.percent",
        "description": "training progress, percent",
        "priority": 1,
    },
    {
        "name": "ETA",
        "type": "string",
        "jsonPath": ".status.eta",
        "description": "time left at the recent pace, while the job trains",
        "priority": 1,
    },
    {
        "name": "Healthy",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Healthy")].status',
        "description": "False while the run is sick (NaN, entropy collapse, stalled)",
        "priority": 1,
    },
    {"name": "Accelerator", "type": "string", "jsonPath": ".spec.resources.accelerator", "priority": 1},
    {"name": "RayJob", "type": "string", "jsonPath": ".status.rayJobName", "priority": 1},
]

# Rules that span several spec sections. Per-section rules live on the models themselves, the batch
# arithmetic's in api/batch.py. The last two are validation.py's data and volume rules, word for word.
SPEC_RULES: list[dict[str, str]] = [
    *BATCH_RULES,
    {
        "rule": "!has(self.dataset.train) || has(self.dataset.validation) || self.evaluation.interval == 0",
        "message": "validation needs dataset.validation (or set evaluation.interval=0)",
        "messageExpression": "'validation every %d steps needs dataset.validation (or set "
        "evaluation.interval=0)'.format([self.evaluation.interval])",
        "fieldPath": ".evaluation.interval",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "self.resources.nodes <= 1 || has(self.checkpoint.claimName) || "
        "!has(self.checkpoint.accessMode) || self.checkpoint.accessMode == 'ReadWriteMany'",
        "message": "several nodes write checkpoint shards at once: use ReadWriteMany",
        "messageExpression": "'%d nodes write checkpoint shards at once: use ReadWriteMany'.format("
        "[self.resources.nodes])",
        "fieldPath": ".checkpoint.accessMode",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "self.engine.name != 'trl' || (self.resources.devicesPerNode == 1 && self.resources.nodes == 1)",
        "message": "engine.name=trl trains on one device: set resources.devicesPerNode=1 and resources.nodes=1",
        "fieldPath": ".engine.name",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "self.engine.name != 'trl' || has(self.engine.lora)",
        "message": "engine.name=trl trains LoRA adapters: set engine.lora",
        "fieldPath": ".engine.lora",
        "reason": "FieldValueRequired",
    },
    {
        "rule": "self.engine.name == 'trl' || !has(self.export.gguf)",
        "message": "export.gguf is written by the trl engine; verl exports a Hugging Face model only "
        "(convert export/model with llama.cpp, or use engine.name=trl)",
        "fieldPath": ".export.gguf",
        "reason": "FieldValueForbidden",
    },
    {
        "rule": "self.engine.name == 'trl' || self.rollout.generation == 'auto'",
        "message": "rollout.generation chooses the trl engine's generation path; verl generates with "
        "rollout.engine (leave rollout.generation at auto)",
        "fieldPath": ".rollout.generation",
        "reason": "FieldValueForbidden",
    },
    {
        "rule": "self.engine.name == 'trl' || self.rollout.minP == 0.0",
        "message": "rollout.minP is the trl engine's: verl passes no min-p to its vLLM rollouts "
        "(leave rollout.minP at 0, or use rollout.topP / rollout.topK)",
        "fieldPath": ".rollout.minP",
        "reason": "FieldValueForbidden",
    },
    {
        "rule": "self.engine.name == 'trl' || !has(self.rollout.memoryBudget)",
        "message": "rollout.memoryBudget sizes the trl engine's process; verl sizes vLLM with "
        "rollout.gpuMemoryUtilization",
        "fieldPath": ".rollout.memoryBudget",
        "reason": "FieldValueForbidden",
    },
]


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    """Translate one JSON Schema node (recursively) into its structural OpenAPI form."""
    if isinstance(node, list):
        return [_structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "$ref" in node:
        return _structural(_resolved_ref(node, defs), defs)
    if "anyOf" in node:
        return _structural(_optional(node), defs)
    _key_rules(node)
    _openapi_bounds(node)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if not _kept(key, value):
            continue
        if key == "properties":
            value = {name: _structural(prop, defs) for name, prop in value.items()}
        elif key in ("items", "additionalProperties"):
            value = _structural(value, defs)
        out[key] = value
    if "properties" in out:
        out.setdefault("type", "object")
    return out


def _resolved_ref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A `$ref` node as the definition it names, with the property's own description and rules."""
    target: dict[str, Any] = copy.deepcopy(defs[node.pop("$ref").rsplit("/", 1)[-1]])
    # The property's own description beats the class docstring.
    target.update({k: v for k, v in node.items() if k in ("description", "default")})
    target.setdefault("x-kubernetes-validations", [])
    target["x-kubernetes-validations"] = target["x-kubernetes-validations"] + node.get(
        "x-kubernetes-validations", []
    )
    if not target["x-kubernetes-validations"]:
        del target["x-kubernetes-validations"]
    return target


def _optional(node: dict[str, Any]) -> dict[str, Any]:
    """`Optional[X]` (anyOf X, null) as X with `nullable`."""
    branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
    if len(branches) != 1:
        raise ValueError(f"only Optional[X] unions are supported, got {branches}")
    return {**branches[0], **node, "nullable": True}


def _key_rules(node: dict[str, Any]) -> None:
    """Map key constraints, which a structural schema cannot state, as CEL rules on the map."""
    if "patternProperties" in node:
        # A map with patterned keys: the value schema becomes additionalProperties and the key
        # pattern a CEL rule on the map (unless one of the model's own rules checks it already, as
        # base.labels_rule does), so the API server checks what the models check.
        [(pattern, values)] = node.pop("patternProperties").items()
        node["additionalProperties"] = values
        rules = node.setdefault("x-kubernetes-validations", [])
        if not any(pattern in rule["rule"] for rule in rules):
            rules.append(
                {
                    "rule": f"self.all(k, k.matches(r'{pattern}'))",
                    "message": f"every key must match {pattern}",
                }
            )
    if "propertyNames" in node:
        names = node.pop("propertyNames")
        if "maxLength" in names:
            node.setdefault("x-kubernetes-validations", []).append(
                {
                    "rule": f"self.all(k, size(k) <= {names['maxLength']})",
                    "message": f"every key must be at most {names['maxLength']} characters",
                }
            )


def _openapi_bounds(node: dict[str, Any]) -> None:
    """JSON Schema's `const` and numeric exclusive bounds in OpenAPI v3.0's words."""
    if "const" in node:
        node["enum"] = [node.pop("const")]
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node and not isinstance(node[bound], bool):
            node[limit] = node.pop(bound)
            node[bound] = True


def _kept(key: str, value: Any) -> bool:
    """Whether a schema keyword goes into the CRD."""
    if key in _DROP:
        return False
    # Empty and object defaults are left out here; _stored_defaults writes the few a section
    # must hold.
    if key == "default" and (value is None or value == [] or isinstance(value, dict)):
        return False
    # additionalProperties: false is extra="forbid" in the models; the API server prunes unknown
    # fields instead.
    return not (key == "additionalProperties" and value is False)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (directly, or as `Optional[Model]`), if any."""
    return next(
        (a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)),
        None,
    )


def _item_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a list's items (`list[Model]`, also inside Annotated or Optional), if any."""
    for arg in (annotation, *get_args(annotation)):
        for inner in get_args(arg) or ():
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
            found = _model_of(inner) if get_args(inner) else None
            if found is not None:
                return found
    return None


def _stored(prop: dict[str, Any]) -> bool:
    """Whether the API server must store this field's default: a transition rule (`oldSelf`) runs
    only where the old and the new object both hold the field, so a field that is immutable must
    be there even when the user left it out (else leaving it out, then setting it, would pass)."""
    return any("oldSelf" in rule["rule"] for rule in prop.get("x-kubernetes-validations", []))


def _stored_defaults(schema: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """Keep in the CRD only the defaults the API server must store; return the section's default.

    Every other default lives in the models alone: the operator and the trainer read the spec
    through them, so a field the user left out means its model default without the server writing
    it into the object (`kubectl describe` then shows what the user wrote, not a page of
    defaults). A section keeps a default object only for the fields that must be stored (the
    engine's immutable name); the CEL rules read absent fields through `_absent_safe`.
    """
    stored: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        alias = field.alias or name
        prop = schema.get("properties", {}).get(alias)
        if prop is None:
            continue
        sub = _model_of(field.annotation)
        if sub is not None and prop.get("type") == "object" and "properties" in prop:
            inner = _stored_defaults(prop, sub)
            prop.pop("default", None)
            if inner and field.default_factory is not None:
                prop["default"] = inner
                stored[alias] = inner
        elif (item := _item_model(field.annotation)) is not None and isinstance(prop.get("items"), dict):
            _stored_defaults(prop["items"], item)
        elif "default" in prop:
            if _stored(prop):
                stored[alias] = prop["default"]
            else:
                # Not in the schema, so said in words: `kubectl explain` still tells it.
                said = json.dumps(value) if isinstance(value := prop.pop("default"), bool) else value
                prop["description"] = f"{prop.get('description', '').rstrip()} Default: {said}.".lstrip()
    return stored


# --- CEL rules over fields the server may not store ------------------------------------------

_ACCESS = re.compile(r"has\(self((?:\.[A-Za-z_]\w*)+)\)|\bself((?:\.[A-Za-z_]\w*)+)")


def _cel_literal(value: Any) -> str | None:
    """A model default as a CEL literal, or None where it has none that a rule could compare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)
    return None


def _walk(model: type[BaseModel], schema: dict[str, Any], names: list[str]) -> tuple[int, list[int], Any]:
    """How far `names` (a path below `self`) runs through the model's fields: the count of field
    names, the indexes of those the server may leave out, and the last field's model default as
    a CEL literal (None where it has none, or where the server stores it)."""
    optional: list[int] = []
    literal: str | None = None
    current: type[BaseModel] | None = model
    node = schema
    for index, name in enumerate(names):
        field = next(
            (f for n, f in (current.model_fields.items() if current else ()) if (f.alias or n) == name), None
        )
        prop = (node.get("properties") or {}).get(name)
        if field is None or prop is None:
            return index, optional, literal
        if not field.is_required() and "default" not in prop:
            optional.append(index)
        default = (
            None if field.is_required() or "default" in prop else field.get_default(call_default_factory=True)
        )
        literal = _cel_literal(default)
        current, node = _model_of(field.annotation), prop
    return len(names), optional, literal


def _absent_safe(rule: str, model: type[BaseModel], schema: dict[str, Any]) -> str:
    """`rule` written as if every default were stored, made to hold where the server stores none.

    `self.a.b` (a field with a model default) reads `(has(self.a) && has(self.a.b) ? self.a.b :
    <default>)`, and `has(self.a.b)` first asks whether `a` is there: CEL refuses to read a field
    of an absent object. The defaults come from the models, so a rule never states one itself.
    """

    def replace(match: re.Match[str]) -> str:
        is_has = match.group(1) is not None
        names = (match.group(1) or match.group(2)).lstrip(".").split(".")
        count, optional, literal = _walk(model, schema, names)
        if count == 0:
            return match.group(0)
        path = ["self" + "".join("." + n for n in names[: i + 1]) for i in range(count)]
        rest = "".join("." + n for n in names[count:])
        if is_has:
            if rest or not optional:
                return match.group(0)
            guards = [f"has({path[i]})" for i in optional if i < count - 1] + [f"has({path[-1]})"]
            return guards[0] if len(guards) == 1 else "(" + " && ".join(guards) + ")"
        if not optional or literal is None or optional[-1] != count - 1:
            return match.group(0)
        present = " && ".join(f"has({path[i]})" for i in optional)
        return f"({present} ? {path[-1]} : {literal}){rest}"

    return _ACCESS.sub(replace, rule)


def _rules_absent_safe(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """`_absent_safe` on every rule (and message expression) of a model's schema, recursively."""
    for entry in schema.get("x-kubernetes-validations", []):
        for key in ("rule", "messageExpression"):
            if key in entry:
                entry[key] = _absent_safe(entry[key], model, schema)
    for name, field in model.model_fields.items():
        prop = (schema.get("properties") or {}).get(field.alias or name)
        if prop is None:
            continue
        sub = _model_of(field.annotation)
        if sub is not None and "properties" in prop:
            _rules_absent_safe(prop, sub)
        item = _item_model(field.annotation)
        if item is not None and isinstance(prop.get("items"), dict):
            _rules_absent_safe(prop["items"], item)


def schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """Structural schema of one pydantic model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema: dict[str, Any] = _structural(raw, raw.get("$defs", {}))
    return schema


FINISHED_RULE = {
    "rule": "!has(oldSelf.status) || !has(oldSelf.status.phase) || "
    "!(oldSelf.status.phase in ['Succeeded', 'Failed']) || self.spec == oldSelf.spec",
    "message": "the job has finished (status.phase is Succeeded or Failed), so its spec can no longer "
    "change: its status describes the run that ended; to train again, apply the job under a new "
    "name (or delete it first)",
    "fieldPath": ".spec",
    "reason": "FieldValueForbidden",
}
"""A finished job's spec is frozen (metadata, such as labels, may still change). The operator
never starts a finished job again, so an edit it accepted would only make the status lie."""


def build_crd() -> dict[str, Any]:
    """The complete CustomResourceDefinition object."""
    spec_schema = schema_for(GRPOJobSpec)
    spec_schema["x-kubernetes-validations"] = spec_schema.get("x-kubernetes-validations", []) + copy.deepcopy(
        SPEC_RULES
    )
    _stored_defaults(spec_schema, GRPOJobSpec)
    _rules_absent_safe(spec_schema, GRPOJobSpec)
    status_schema = schema_for(GRPOJobStatus)
    # The status is written by the operator and the trainer and read through the models too: the
    # server fills in none of its defaults (a healthy verdict's absent reason is TrainingHealthy).
    _stored_defaults(status_schema, GRPOJobStatus)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "annotations": {"grpo.dev/generated-by": "python -m grpo_operator.api.crdgen"},
            "labels": {"app.kubernetes.io/name": "grpo-operator", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": ["all", "grpo"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A GRPO post-training job for a vision-language model, run on KubeRay.",
                            "required": ["spec"],
                            "x-kubernetes-validations": [FINISHED_RULE],
                            "properties": {
                                "apiVersion": {
                                    "type": "string",
                                    "description": f"{GROUP}/{VERSION}: the schema this object follows.",
                                },
                                "kind": {"type": "string", "description": f"{KIND}."},
                                # The one part of metadata a CRD may constrain: KubeRay names the Ray
                                # cluster and its Services after the job (api/v1alpha1/base.py).
                                "metadata": {
                                    "type": "object",
                                    "properties": {
                                        "name": {
                                            "type": "string",
                                            "maxLength": MAX_JOB_NAME,
                                            "pattern": JOB_NAME_PATTERN,
                                        }
                                    },
                                },
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def render() -> str:
    """The CRD as the YAML committed to `crds/`."""
    header = "# Generated from the pydantic models in operator/grpo_operator/api. Do not edit.\n"
    header += "# Regenerate: python -m grpo_operator.api.crdgen\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        nargs="*",
        default=[Path("crds"), Path("charts/grpo-operator/crds")],
        help="folders to write into (default: crds/ and the chart's copy)",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file differs")
    args = parser.parse_args(argv)
    text = render()
    status = 0
    for folder in args.out:
        target = folder / CRD_FILENAME
        if args.check:
            if not target.exists() or target.read_text() != text:
                print(f"{target} is out of date: run python -m grpo_operator.api.crdgen", file=sys.stderr)
                status = 1
            continue
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
