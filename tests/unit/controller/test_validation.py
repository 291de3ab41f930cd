"""Each semantic rule fires with a message that names the field and the numbers."""

from __future__ import annotations

import pytest
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.config import load_settings
from grpo_operator.validation import describe, validate
from support.operator_inputs import job_from, minimal_body

SETTINGS = load_settings(environ={})


def _problems(**changes: object) -> dict[str, str]:
    job = job_from(minimal_body(), **changes)
    return {p.field: p.message for p in validate(job, SETTINGS)}


def test_minimal_job_is_valid() -> None:
    assert _problems() == {}


def test_train_batch_must_divide_over_devices() -> None:
    problems = _problems(
        **{"algorithm.trainBatchSize": 3, "algorithm.miniBatchSize": 3, "algorithm.groupSize": 3}
    )
    assert "3 × 3 = 9 responses" in problems["spec.algorithm.trainBatchSize"]
    assert "8 devices per node × 1 node(s) = 8" in problems["spec.algorithm.trainBatchSize"]


def test_dynamic_batch_size_lifts_the_train_batch_rule_only() -> None:
    problems = _problems(
        **{
            "algorithm.trainBatchSize": 3,
            "algorithm.miniBatchSize": 1,
            "algorithm.groupSize": 8,
            "algorithm.tokensPerDevice": 16384,
        }
    )
    assert "spec.algorithm.trainBatchSize" not in problems


def test_mini_batch_must_divide_over_devices() -> None:
    problems = _problems(
        **{"algorithm.miniBatchSize": 1, "algorithm.trainBatchSize": 64, "algorithm.groupSize": 4}
    )
    assert "miniBatchSize × groupSize = 4 responses" in problems["spec.algorithm.miniBatchSize"]


def test_micro_batch_must_divide_the_per_device_mini_batch() -> None:
    problems = _problems(**{"algorithm.microBatchSizePerDevice": 3})
    assert "each device gets 8 responses" in problems["spec.algorithm.microBatchSizePerDevice"]


def test_train_batch_must_be_a_multiple_of_mini_batch() -> None:
    problems = _problems(**{"algorithm.trainBatchSize": 48, "algorithm.miniBatchSize": 32})
    assert (
        "trainBatchSize=48 must be a multiple of miniBatchSize=32" in problems["spec.algorithm.miniBatchSize"]
    )


def test_tensor_parallel_size_must_divide_devices() -> None:
    problems = _problems(**{"rollout.tensorParallelSize": 3})
    assert (
        problems["spec.rollout.tensorParallelSize"]
        == "tensorParallelSize=3 must divide resources.devicesPerNode=8"
    )


def test_trl_engine_is_one_device() -> None:
    problems = _problems(**{"engine.name": "trl", "engine.lora": {"rank": 8}})
    assert "trains on one device; resources ask for 8" in problems["spec.engine.name"]


def test_several_nodes_need_a_shared_volume() -> None:
    problems = _problems(**{"resources.nodes": 2, "checkpoint.accessMode": "ReadWriteOnce"})
    assert "2 nodes write checkpoint shards at once" in problems["spec.checkpoint.accessMode"]
    assert _problems(**{"resources.nodes": 2}) == {}, (
        "the default access mode for several nodes is ReadWriteMany"
    )


def test_existing_claim_must_be_read_write_many_for_several_nodes() -> None:
    job = job_from(minimal_body(), **{"resources.nodes": 2, "checkpoint.claimName": "shared"})
    problems = validate(job, SETTINGS, claim_access_modes=["ReadWriteOnce"])
    assert problems[0].field == "spec.checkpoint.claimName"
    assert "must be ReadWriteMany (it is ReadWriteOnce)" in problems[0].message
    assert validate(job, SETTINGS, claim_access_modes=[])[0].message.endswith("(it is not found)")
    assert validate(job, SETTINGS, claim_access_modes=["ReadWriteMany"]) == []


def test_unknown_accelerator_profile() -> None:
    settings = load_settings(environ={}).model_copy(update={"profiles": {}})
    problems = validate(job_from(minimal_body()), settings)
    assert problems[0].field == "spec.resources.accelerator"
    assert "no accelerator profile 'nvidia'" in problems[0].message


def test_long_names_are_refused() -> None:
    body = minimal_body()
    body["metadata"]["name"] = "x" * 41
    problems = validate(GRPOJob.model_validate(body), SETTINGS)
    assert problems[0].field == "metadata.name"
    assert "at most 40 characters" in problems[0].message


def test_validation_needs_validation_data() -> None:
    problems = _problems(**{"dataset.preset": None, "dataset.train": ["pvc://data/train.parquet"]})
    assert "needs dataset.validation" in problems["spec.evaluation.interval"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"rollout.tensorParallelSize": 3}, "spec.rollout.tensorParallelSize"),
        ({"algorithm.microBatchSizePerDevice": 3}, "spec.algorithm.microBatchSizePerDevice"),
    ],
)
def test_describe_names_the_field(changes: dict, field: str) -> None:
    job = job_from(minimal_body(), **changes)
    assert describe(validate(job, SETTINGS)).startswith(field + ": ")


@pytest.mark.parametrize("name", ["1demo", "demo.v2", "Demo", "demo-"])
def test_a_name_kuberay_would_refuse_is_named(name: str) -> None:
    body = minimal_body()
    body["metadata"]["name"] = name
    problems = {p.field: p.message for p in validate(GRPOJob.model_validate(body), SETTINGS)}
    assert "must be a DNS-1035 label" in problems["metadata.name"]


def test_a_priority_class_that_does_not_exist_is_named() -> None:
    job = job_from(minimal_body(), **{"resources.priorityClassName": "urgent"})
    assert validate(job, SETTINGS, priority_class_exists=None) == []  # not known: not held against it
    [problem] = validate(job, SETTINGS, priority_class_exists=False)
    assert (problem.field, problem.message) == (
        "spec.resources.priorityClassName",
        "no PriorityClass 'urgent' in the cluster",
    )


def test_extra_resources_may_not_name_the_profiles_own_device() -> None:
    """A profile of the operator's settings may use a device resource the schema does not know."""
    base = load_settings(environ={})
    profile = base.profiles["nvidia"].model_copy(update={"device_resource": "example.com/gpu"})
    settings = base.model_copy(update={"profiles": {**base.profiles, "nvidia": profile}})
    job = job_from(minimal_body(), **{"resources.extraResources": {"example.com/gpu": "1"}})
    [problem] = validate(job, settings)
    assert problem.field == "spec.resources.extraResources"
    assert problem.message.startswith(
        "example.com/gpu is the nvidia pool's device, which resources.devicesPerNode"
    )
    fine = job_from(minimal_body(), **{"resources.extraResources": {"rdma/hca_shared_devices_a": "1"}})
    assert validate(fine, settings) == []
