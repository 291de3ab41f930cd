"""The manifest's shape, checked as the API server checks it before any value: apiVersion, kind,
field names and JSON types, walked from the generated CRD (api/wire.py)."""

from __future__ import annotations

from grpo_operator.api.wire import pruned, wire_problems
from grpo_operator.verdict import manifest_problems, parse
from support.examples import with_changes
from support.verdict_cases import BASE


def problems(changes: dict) -> list[str]:
    return [str(p) for p in wire_problems(with_changes(BASE, changes))]


def test_a_valid_manifest_has_the_servers_shape():
    assert problems({}) == []


def test_the_api_version_and_kind_are_the_crds():
    assert problems({"apiVersion": "grpo.dev/v9"}) == [
        "apiVersion: expected grpo.dev/v1alpha1, found 'grpo.dev/v9'"
    ]
    assert problems({"kind": None}) == ["kind: expected GRPOJob, it is missing"]


def test_quoted_numbers_and_booleans_are_refused_where_the_models_would_coerce_them():
    assert problems({"spec.algorithm.groupSize": "4"}) == [
        "spec.algorithm.groupSize: must be of type integer, found string '4'"
    ]
    assert problems({"spec.engine": {"lora": {"rank": "16"}, "gradientCheckpointing": "yes"}}) == [
        "spec.engine.lora.rank: must be of type integer, found string '16'",
        "spec.engine.gradientCheckpointing: must be of type boolean, found string 'yes'",
    ]
    assert problems({"spec.algorithm.learningRate": "1e-6"}) == [
        "spec.algorithm.learningRate: must be of type number, found string '1e-6'"
    ]


def test_what_the_server_accepts_passes():
    # JSON has one number type: 8.0 is an integer to the server, and 1 a number.
    assert problems({"spec.algorithm.groupSize": 4.0, "spec.algorithm.learningRate": 1}) == []
    # A null is absent; metadata beyond its name is the server's own; status is not the user's.
    assert problems({"spec.algorithm.miniBatchSize": None}) == []
    assert problems({"metadata": {"labels": {"team": "a"}, "annotations": {"x": "y"}}}) == []
    assert problems({"status": {"anything": 1}}) == []


def test_a_null_list_entry_is_a_value_of_the_wrong_type_not_an_absent_field():
    assert problems({"spec.engine": {"overrides": ["a=1", None], "lora": {"targetModules": [None]}}}) == [
        "spec.engine.overrides[1]: must be of type string, found null",
        "spec.engine.lora.targetModules[0]: must be of type string, found null",
    ]
    assert problems({"spec.resources.tolerations": [None]}) == [
        "spec.resources.tolerations[0]: must be of type object, found null"
    ]


def test_unknown_fields_are_named_at_every_level():
    assert problems({"sepc": {}}) == ["sepc: unknown field"]
    assert problems({"spec.algorithm.groupSise": 8}) == ["spec.algorithm.groupSise: unknown field"]


def test_map_values_and_list_items_are_typed_too():
    assert problems({"spec.reward": {"kwargs": {"threshold": 1}}}) == [
        "spec.reward.kwargs[threshold]: must be of type string, found integer 1"
    ]
    assert problems({"spec.engine": {"overrides": ["a=1", 2]}}) == [
        "spec.engine.overrides[1]: must be of type string, found integer 2"
    ]
    assert problems({"spec.dataset": {"preset": None, "train": "pvc://data/t.parquet"}}) == [
        "spec.dataset.train: must be of type array, found string 'pvc://data/t.parquet'"
    ]


def test_a_pattern_is_said_in_words():
    def verdict(changes: dict) -> list[str]:
        return [str(p) for p in manifest_problems(with_changes(BASE, changes))]

    assert verdict({"spec.resources.memoryPerNode": "16 GB"}) == [
        'spec.resources.memoryPerNode: expected a quantity without spaces, such as "8", "500m", "64Gi" or '
        "\"1.5Ti\", found '16 GB'"
    ]
    assert verdict({"spec.model.source": "ftp://x"}) == [
        "spec.model.source: expected hf://org/name, modelscope://org/name, pvc://claim/path, s3://bucket/prefix, "
        "or an absolute path inside the trainer image, found 'ftp://x'"
    ]
    assert verdict({"spec.engine": {"overrides": ["max_grad_norm"]}}) == [
        "spec.engine.overrides[0]: expected key=value (or +key=value, ++key=value, ~key=value), found 'max_grad_norm'"
    ]


def test_an_empty_field_takes_its_default_as_on_the_server():
    """The server prunes a null of a field not marked nullable, then defaults it."""
    manifest = with_changes(BASE, {"spec.algorithm.groupSize": None})
    manifest["spec"]["algorithm"]["groupSize"] = None
    manifest["spec"]["checkpoint"] = {"storageClassName": None}  # nullable: kept, and read as unset
    assert pruned(manifest)["spec"]["algorithm"] == {"trainBatchSize": 64, "miniBatchSize": 16}
    assert pruned(manifest)["spec"]["checkpoint"] == {"storageClassName": None}
    job, problems = parse(manifest)
    assert problems == []
    assert job is not None
    assert job.spec.algorithm.group_size == 5
