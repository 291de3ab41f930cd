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
    },
    {
        "rule": "self.engine.name == 'trl' || self.rollout.generation == 'auto'",
        "message": "rollout.generation chooses the trl engine's generation path; verl generates with "
        "rollout.engine (leave rollout.generation at auto)",
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
    # Empty and object defaults are left out here; _object_defaults writes each section's
    # whole default object, which is what the API server's CEL checks need.
    if key == "default" and (value is None or value == [] or isinstance(value, dict)):
        return False
    # additionalProperties: false is extra="forbid" in the models; the API server prunes unknown
    # fields instead.
    return not (key == "additionalProperties" and value is False)


def _object_defaults(schema: dict[str, Any], model: type[Any]) -> None:
    """Give sub-sections that have a default factory their full default object, recursively.

    The API server checks a default against the section's CEL rules as it stands, before nested
    defaults apply, so an empty `{}` would fail rules like miniBatchSize <= trainBatchSize.
    """
    for name, field in model.model_fields.items():
        prop = schema.get("properties", {}).get(field.alias or name)
        annotation = field.annotation
        if prop is None or prop.get("type") != "object" or "properties" not in prop:
            continue
        if field.default_factory is not None:
            default = field.default_factory()
            if isinstance(default, BaseModel):
                prop["default"] = default.model_dump(by_alias=True, exclude_none=True, mode="json")
        sub = next(
            (
                a
                for a in (annotation, *get_args(annotation))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
        if sub is not None:
            _object_defaults(prop, sub)


def schema_for(model: type[Any]) -> dict[str, Any]:
    """Structural schema of one pydantic model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    schema = _structural(raw, defs)
    _object_defaults(schema, model)
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
    spec_schema["x-kubernetes-validations"] = spec_schema.get("x-kubernetes-validations", []) + SPEC_RULES
    status_schema = schema_for(GRPOJobStatus)
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
