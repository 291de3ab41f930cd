"""The generated CRD: in step with the models, and acceptable to a real API server."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from grpo_operator.api import crdgen
from grpo_operator.api.crdgen import CRD_FILENAME, build_crd, render
from grpo_operator.api.rules import rule_violations
from grpo_operator.api.v1alpha1 import GRPOJobSpec
from support.operator_inputs import REPO

FORBIDDEN = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "const", "propertyNames"}


def _walk(node: Any, path: str = ""):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if key in ("properties",):
                for name, prop in value.items():
                    yield from _walk(prop, f"{path}.{name}")
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                yield from _walk(value, f"{path}[]")


def _schema() -> dict[str, Any]:
    return build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_committed_crd_matches_the_models() -> None:
    committed = (REPO / "crds" / CRD_FILENAME).read_text()
    assert committed == render(), "crds/ is stale: run python -m grpo_operator.api.crdgen"


def test_chart_copy_matches_when_present() -> None:
    chart_copy = REPO / "charts" / "grpo-operator" / "crds" / CRD_FILENAME
    if chart_copy.exists():
        assert chart_copy.read_text() == render()


def test_schema_is_structural() -> None:
    for path, node in _walk(_schema()):
        bad = FORBIDDEN & node.keys()
        assert not bad, f"{path} uses {bad}"
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        if "properties" in node:
            assert "additionalProperties" not in node, f"{path} mixes properties and additionalProperties"
        if isinstance(node.get("exclusiveMinimum"), (int, float)) and not isinstance(
            node["exclusiveMinimum"], bool
        ):
            pytest.fail(f"{path} has a numeric exclusiveMinimum")


def test_every_string_list_and_map_is_bounded() -> None:
    """The API server's CEL cost estimator needs bounds; so does etcd's sanity."""
    root = _schema()["properties"]
    for path, node in [*_walk(root["spec"], "spec"), *_walk(root["status"], "status")]:
        kind = node.get("type")
        if kind == "string":
            assert "maxLength" in node or "enum" in node, f"{path} is an unbounded string"
        elif kind == "array":
            assert "maxItems" in node, f"{path} is an unbounded list"
        elif kind == "object" and "additionalProperties" in node:
            assert "maxProperties" in node, f"{path} is an unbounded map"


# Strings where Kubernetes itself gives "" a meaning: a label's, a selector's, a toleration's and an
# environment variable's value, an annotation; and a reward's keyword argument, passed as written.
EMPTY_ALLOWED = {
    "spec.reward.kwargs[]",
    "spec.resources.nodeSelector[]",
    "spec.resources.tolerations[].value",
    "spec.env[].value",
    "spec.pods.labels[]",
    "spec.pods.annotations[]",
}


def test_no_spec_string_that_names_something_accepts_an_empty_one() -> None:
    """An empty name names nothing: `targetModules: [""]` adapted no module and `image: ""` ran the
    profile's image, both silently; `imageKey: ""` named a column no dataset has."""
    accepting = []
    for path, node in _walk(_schema()["properties"]["spec"], "spec"):
        if node.get("type") != "string" or "enum" in node or path in EMPTY_ALLOWED:
            continue
        pattern = node.get("pattern")
        if node.get("minLength", 0) < 1 and (pattern is None or re.search(pattern, "")):
            accepting.append(path)
    assert accepting == [], f"these accept an empty string: {accepting}"


def test_immutable_fields_carry_transition_rules() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    for section, field in [
        ("resources", "accelerator"),
        ("resources", "devicesPerNode"),
        ("resources", "nodes"),
        ("engine", "name"),
    ]:
        rules = spec[section]["properties"][field].get("x-kubernetes-validations", [])
        assert any(r["rule"] == "self == oldSelf" for r in rules), f"spec.{section}.{field} is mutable"


def _defaults_in(node: dict, path: str = "spec") -> dict[str, object]:
    """Every `default:` of a schema, by field path."""
    found = {path: node["default"]} if "default" in node else {}
    for name, child in (node.get("properties") or {}).items():
        found |= _defaults_in(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found |= _defaults_in(node["items"], f"{path}[]")
    return found


def test_the_server_stores_only_the_defaults_of_immutable_fields() -> None:
    # Every other default is the models' alone (the operator and the trainer read the spec
    # through them), so `kubectl describe` shows what the user wrote, not a page of defaults.
    spec = _schema()["properties"]["spec"]
    assert _defaults_in(spec) == {
        "spec.resources.devicesPerNode": 8,
        "spec.resources.nodes": 1,
        "spec.engine": {"name": "verl"},
        "spec.engine.name": "verl",
    }
    assert set(spec["required"]) == {"model", "dataset", "reward", "resources"}


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("self.engine.name == 'trl'", "self.engine.name == 'trl'"),  # stored: read as it is
        (
            "self.rollout.minP == 0.0",
            "(has(self.rollout) && has(self.rollout.minP) ? self.rollout.minP : 0.0) == 0.0",
        ),
        ("!has(self.export.gguf)", "!(has(self.export) && has(self.export.gguf))"),
        ("has(self.dataset.train)", "has(self.dataset.train)"),  # dataset is required
        (
            "self.checkpoint.resume.startsWith('/')",
            '(has(self.checkpoint) && has(self.checkpoint.resume) ? self.checkpoint.resume : "latest")'
            ".startsWith('/')",
        ),
        (
            "self.algorithm.kl.coefficient > 0.0",
            "(has(self.algorithm) && has(self.algorithm.kl) && has(self.algorithm.kl.coefficient) ? "
            "self.algorithm.kl.coefficient : 0.01) > 0.0",
        ),
        ("self.resources.nodes <= 1", "self.resources.nodes <= 1"),
    ],
)
def test_rules_read_an_absent_field_as_its_model_default(rule: str, expected: str) -> None:
    spec = copy.deepcopy(_schema()["properties"]["spec"])
    assert crdgen._absent_safe(rule, GRPOJobSpec, spec) == expected


def test_printer_columns_and_status_subresource() -> None:
    version = build_crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    names = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert names == ["Phase", "Step", "Reward", "Val", "Attempt", "Age"]


def test_rendered_yaml_round_trips() -> None:
    text = render()
    assert yaml.safe_load(text) == build_crd()


def _undescribed(node: dict[str, Any], path: str) -> list[str]:
    missing = []
    for name, prop in (node.get("properties") or {}).items():
        where = f"{path}.{name}"
        if not (prop.get("description") or "").strip():
            missing.append(where)
        missing += _undescribed(prop, where)
        for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
            if isinstance(prop.get(key), dict):
                missing += _undescribed(prop[key], where + mark)
    return missing


def test_kubectl_explain_describes_every_field() -> None:
    """Every spec and status field, at every depth, says what it is (kubectl explain shows it).

    metadata is the API server's: a CRD may constrain only its name (KubeRay names the Ray cluster's
    Services after it: a DNS-1035 label of at most 40 characters)."""
    root = _schema()
    metadata = root["properties"]["metadata"]
    assert set(metadata) == {"type", "properties"}
    assert set(metadata["properties"]) == {"name"}
    assert (
        _undescribed({"properties": {k: v for k, v in root["properties"].items() if k != "metadata"}}, "")
        == []
    )


def test_cpu_per_node_says_the_default_the_operator_uses() -> None:
    from grpo_operator.config import Settings

    description = _schema()["properties"]["spec"]["properties"]["resources"]["properties"]["cpuPerNode"][
        "description"
    ]
    settings = Settings()
    assert f"{settings.cpu_per_device} per device" in description
    assert f"plus {settings.cpu_headroom}" in description


def test_conditions_are_a_map_keyed_by_type_with_rfc3339_times() -> None:
    status = _schema()["properties"]["status"]["properties"]
    conditions = status["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in conditions["items"]["required"]
    assert conditions["items"]["properties"]["lastTransitionTime"]["format"] == "date-time"
    for field in ("startTime", "completionTime"):
        assert status[field]["format"] == "date-time"
    assert status["progress"]["properties"]["lastStepAt"]["format"] == "date-time"
    assert status["checkpoint"]["properties"]["savedAt"]["format"] == "date-time"


def test_printer_columns_show_rounded_metrics_and_the_wide_view_progress_and_eta() -> None:
    columns = {c["name"]: c for c in build_crd()["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert [n for n, c in columns.items() if not c.get("priority")] == [
        "Phase",
        "Step",
        "Reward",
        "Val",
        "Attempt",
        "Age",
    ]
    assert columns["%"]["jsonPath"] == ".status.progress.percent"
    assert columns["ETA"]["jsonPath"] == ".status.eta"
    assert columns["Healthy"]["jsonPath"] == '.status.conditions[?(@.type=="Healthy")].status'
    assert all(columns[n]["priority"] == 1 for n in ("%", "ETA", "Healthy", "Accelerator", "RayJob"))


MINIMAL = {
    "model": {"source": "hf://Qwen/Qwen3-VL-4B-Instruct"},
    "dataset": {"preset": "geo3k"},
    "reward": {"builtin": "geo3k"},
    "resources": {"accelerator": "nvidia", "devicesPerNode": 8, "nodes": 1},
    "engine": {"name": "verl"},
}


@pytest.mark.parametrize(
    ("sections", "refused"),
    [
        ({}, False),
        ({"resources": {"accelerator": "nvidia", "devicesPerNode": 3, "nodes": 1}}, True),
        ({"dataset": {"train": ["pvc://data/train.parquet"]}}, True),
        ({"rollout": {"minP": 0.1}}, True),
        ({"algorithm": {"trainBatchSize": 40}}, True),
        ({"checkpoint": {"resume": "step-3"}}, True),
        ({"export": {"gguf": {}}}, True),
        ({"engine": {"name": "trl"}}, True),
        ({"resources": {"accelerator": "nvidia", "devicesPerNode": 4, "nodes": 2}}, False),
    ],
    ids=["minimal", "3-devices", "no-validation", "min-p", "batch", "resume", "gguf", "trl", "2-nodes"],
)
def test_the_rules_judge_a_spec_as_written_as_they_judge_it_with_every_default(
    sections: dict[str, Any], refused: bool
) -> None:
    # The stored spec (what the server's rules see) against the spec with every default written
    # out (what they saw when the server stored them all): the same problems, field and words.
    written = {**copy.deepcopy(MINIMAL), **sections}
    full = GRPOJobSpec.model_validate(written).to_wire()
    problems = rule_violations(written)
    assert problems == rule_violations(full)
    assert bool(problems) is refused, problems


def test_no_rule_hands_the_api_server_a_quantity_the_pattern_refuses() -> None:
    """The API server parses a quantity in CEL exactly: `isQuantity('1e9999999')` took 8.5 s of one
    request, so a rule that reads a quantity first checks the text against the bounded pattern
    (base.unless_unbounded) and a huge exponent is refused by the pattern alone, at once."""
    reading = re.compile(r"(?<![A-Za-z])(isQuantity|quantity)\((self(\[k\])?)\)")
    unguarded = []
    for path, node in _walk(_schema()):
        for rule in (entry["rule"] for entry in node.get("x-kubernetes-validations", [])):
            for match in reading.finditer(rule):
                guard = f"!{match.group(2)}.matches(r'"
                if guard not in rule[: match.start()]:
                    unguarded.append(f"{path}: {rule}")
    assert not unguarded, "\n".join(unguarded)
