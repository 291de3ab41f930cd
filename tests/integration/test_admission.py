"""The API server's admission and the operator's checks agree: the same specs go to both.

Rules live twice where the schema cannot hold them as a pattern: CEL in the CRD (what `kubectl
apply` answers) and Python (validation.validate(), the models' validators, and the CRD's own CEL
evaluated offline by api/rules.py: what `grpo-train plan` and `kubectl grpo validate` run). Each spec here is sent to the real API server as a server-side dry run
and checked by the Python side; both must accept it, or both refuse it naming the same fields with
the same sentence.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.configmap import build_spec_configmap
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import load_settings
from grpo_operator.verdict import job_problems
from lightkube import ApiError, Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.types import PatchType
from pydantic import ValidationError
from support.cluster import Cluster
from support.jobs import example

from .test_reporter import crds  # noqa: F401  (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]
SETTINGS = load_settings(environ={})


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Client:
    return Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="grpo-tests")


Answer = dict[str, list[str]]
"""The messages given for each refused field; empty when the spec is accepted."""


def server_answer(client: Client, namespace: str, body: dict[str, Any]) -> Answer:
    """What the API server says, as a server-side dry run of creating `body`."""
    try:
        client.create(codecs.from_dict(body), namespace=namespace, dry_run=True)
    except ApiError as error:
        status = error.status
        causes = (status.details.causes if status.details else None) or []
        answer: Answer = {}
        for cause in causes:
            if cause.field and cause.field != "<nil>":  # "some rules were not checked" names none
                answer.setdefault(cause.field, []).append(cause.message or "")
        if not answer:
            answer["(no field)"] = [status.message or ""]
        return answer
    return {}


def python_answer(body: dict[str, Any], namespace: str) -> Answer:
    """What the models' parser and validate() say about `body`."""
    body = {**body, "metadata": {**body["metadata"], "namespace": namespace, "uid": "u"}}
    answer: Answer = {}
    try:
        job = GRPOJob.model_validate(body)
    except ValidationError as error:
        for e in error.errors():
            where = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-"))
            answer.setdefault(where, []).append(e["msg"])
        return answer
    # The CRD's CEL rules evaluated offline, then the operator's checks: every judge but the server.
    for problem in job_problems(job, SETTINGS):
        answer.setdefault(problem.field, []).append(problem.message)
    return answer


def _batch_spec(rng: random.Random) -> dict[str, Any]:
    """A job whose sizes are drawn so that each arithmetic rule both holds and breaks often."""
    engine = rng.choice(["verl", "verl", "verl", "trl"])
    body = copy.deepcopy(example("lora-single-gpu" if engine == "trl" else "geo3k-ascend-910b"))
    spec = body["spec"]
    res = spec["resources"]
    if engine == "verl":
        res["devicesPerNode"] = rng.choice([1, 2, 4, 6, 8])
        res["nodes"] = rng.choice([1, 1, 2, 3])
        spec["checkpoint"] = {"accessMode": rng.choice(["ReadWriteOnce", "ReadWriteMany"])}
        spec["rollout"] = {"tensorParallelSize": rng.choice([1, 2, 3, 4, 8])}
    algorithm = spec.setdefault("algorithm", {})
    for key in ("microBatchSizePerDevice", "tokensPerDevice"):
        algorithm.pop(key, None)
    algorithm["groupSize"] = rng.choice([2, 3, 4, 5, 8])
    algorithm["miniBatchSize"] = rng.choice([1, 2, 3, 4, 8, 16])
    algorithm["trainBatchSize"] = algorithm["miniBatchSize"] * rng.choice([1, 2, 3]) + rng.choice(
        [0, 0, 0, 1]
    )
    pick = rng.random()
    if pick < 0.35:
        algorithm["microBatchSizePerDevice"] = rng.choice([1, 2, 3, 4])
    elif pick < 0.55:
        algorithm["tokensPerDevice"] = rng.choice([1024, 4096, 8192, 16384])
    spec["dataset"] = (
        {"preset": "geo3k"}
        if rng.random() < 0.5
        else {
            "train": ["pvc://data/train.parquet"],
            **({"validation": ["pvc://data/val.parquet"]} if rng.random() < 0.5 else {}),
        }
    )
    spec["dataset"]["maxPromptLength"] = rng.choice([1024, 2048, 4096])
    spec["dataset"]["maxResponseLength"] = rng.choice([1024, 2048, 8192])
    spec["evaluation"] = {"interval": rng.choice([0, 10])}
    return body


def test_the_api_server_and_validate_agree_on_the_arithmetic(client: Client, namespace: str) -> None:
    rng = random.Random(14)
    refused = accepted = 0
    for index in range(240):
        body = _batch_spec(rng)
        body["metadata"] = {"name": f"arith-{index}"}
        server = server_answer(client, namespace, body)
        python = python_answer(body, namespace)
        assert set(server) == set(python), f"spec {index}: server {server} / python {python}\n{body['spec']}"
        for field, messages in python.items():
            for message in messages:
                assert any(message in said for said in server[field]), (
                    f"spec {index}, {field}: the API server said {server[field]}, Python {message!r}"
                )
        refused += bool(server)
        accepted += not server
    # The draw must exercise both sides of the rules, or the agreement says nothing.
    assert refused > 30
    assert accepted > 30


FIELD_CASES: list[tuple[str, Any, bool]] = [
    # (dotted spec path or metadata.name, value, accepted)
    ("metadata.name", "demo-v2", True),
    ("metadata.name", "1demo", False),
    ("metadata.name", "demo.v2", False),
    ("metadata.name", "a" * 40, True),
    ("metadata.name", "a" * 41, False),
    ("resources.memoryPerNode", "64Gi", True),
    ("resources.memoryPerNode", "1.5Ti", True),
    ("resources.memoryPerNode", "1.2.3Gi", False),
    ("resources.memoryPerNode", "-64Gi", False),
    ("resources.memoryPerNode", "0", False),
    ("resources.sharedMemory", "0.0Gi", False),
    ("resources.cpuPerNode", "500m", True),
    ("resources.cpuPerNode", "12e", False),
    ("checkpoint.size", "2e12", True),
    ("resources.queueName", "team-a.gpu_queue", True),
    ("resources.queueName", "my queue", False),
    ("resources.queueName", "-a", False),
    ("resources.product", "NVIDIA-H100-80GB-HBM3", True),
    ("resources.product", "H100 80GB", False),
    ("resources.nodeSelector", {"example.com/pool": "a"}, True),
    ("resources.nodeSelector", {"pool": "b-c"}, True),
    ("resources.nodeSelector", {"my pool": "a"}, False),
    ("resources.nodeSelector", {"example.com/": "a"}, False),
    ("resources.nodeSelector", {"Example.com/pool": "a"}, False),
    ("resources.nodeSelector", {"pool": "a b"}, False),
    ("resources.tolerations", [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}], True),
    ("resources.tolerations", [{"operator": "Exists"}], True),
    ("resources.tolerations", [{"operator": "Equal", "value": "x"}], False),
    ("resources.tolerations", [{"key": "gpu", "operator": "Exists", "value": "x"}], False),
    ("resources.tolerations", [{"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 30}], False),
    ("resources.tolerations", [{"key": "gpu", "effect": "NoExecute", "tolerationSeconds": 30}], True),
    ("resources.tolerations", [{"key": "bad key", "operator": "Exists"}], False),
    ("runPolicy.ttlSecondsAfterFinished", 2147483647, True),
    ("runPolicy.ttlSecondsAfterFinished", 2147483648, False),
    ("runPolicy.activeDeadlineSeconds", 2147483648, False),
    ("checkpoint.claimName", "data.v2", True),
    ("checkpoint.claimName", "data..v2", False),
    ("checkpoint.claimName", "Data", False),
    ("logging.wandb", {"project": "p", "secretName": "wandb", "secretKey": "api key"}, False),
    ("logging.wandb", {"project": "p", "secretName": "wandb", "secretKey": "WANDB_API_KEY"}, True),
    ("engine.overrides", ["actor_rollout_ref.actor.ppo_epochs=2"], True),
    ("engine.overrides", ["+trainer.val_only=true", "~trainer.logger=x"], True),
    ("engine.overrides", ["trainer.total_epochs"], False),
    ("engine.overrides", ["=2"], False),
    ("engine.overrides", ["a b=2"], False),
    ("model.source", "hf://Qwen/Qwen3-VL-4B-Instruct", True),
    ("model.source", "modelscope://Qwen/Qwen3-VL-4B-Instruct", True),
    ("model.source", "hf://Qwen/Qwen3-VL-4B-Instruct/extra", False),
    ("model.source", "hf://Qwen", False),
    ("model.source", "hf://Qwen/Qwen3--VL", False),
    ("model.source", "hf://Qwen/-Qwen3", False),
    ("model.source", "hf://Qwen/Qwen3 VL", False),
    ("model.source", "pvc://models/qwen3", True),
    ("model.source", "pvc://Models/qwen3", False),
    ("model.source", "s3://bucket-1/prefix", True),
    ("model.source", "s3://B/prefix", False),
    ("model.source", "/opt/models/qwen", True),
    ("env", [{"name": "HF_HUB_OFFLINE", "value": "1"}], True),
    ("env", [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "token"}}}], True),
    (
        "env",
        [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a", "optional": True}}}],
        True,
    ),
    ("env", [{"name": "A", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}], False),
    ("env", [{"name": "A", "valueFrom": {}}], False),
    (
        "env",
        [
            {
                "name": "A",
                "valueFrom": {
                    "secretKeyRef": {"name": "s", "key": "k"},
                    "configMapKeyRef": {"name": "c", "key": "k"},
                },
            }
        ],
        False,
    ),
    ("env", [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "bad key"}}}], False),
    ("env", [{"name": "GRPO_ATTEMPT", "value": "9"}], False),
    ("reward.kwargs", {"timeout_s": "3", "_private": "x"}, True),
    ("reward.kwargs", {"timeout-s": "3"}, False),
    ("reward.kwargs", {"a" * 64: "x"}, False),
    ("checkpoint.resume", "/grpo/checkpoints/x/global_step_20", True),
    ("checkpoint.resume", "global_step_20", False),
    # What Kubernetes itself would refuse later, on a pod nobody watches: refused here instead.
    ("resources.extraResources", {"rdma/hca_shared_devices_a": "1"}, True),
    ("resources.extraResources", {"rdma/hca_shared_devices_a": "2k"}, True),
    ("resources.extraResources", {"hugepages-2Mi": "1Gi", "ephemeral-storage": "100Gi"}, True),
    ("resources.extraResources", {"huawei.com/Ascend910": "1"}, False),
    ("resources.extraResources", {"nvidia.com/gpu": "1"}, False),
    ("resources.extraResources", {"rdma/hca_shared_devices_a": "0.5"}, False),
    ("resources.extraResources", {"rdma/hca_shared_devices_a": "500m"}, False),
    ("resources.extraResources", {"fpga": "1"}, False),
    ("reward", {"custom": {"configMap": "my-reward", "key": ".reward.py"}}, True),
    ("reward", {"custom": {"configMap": "my-reward", "key": "..reward.py"}}, False),
    ("logging.wandb", {"project": "p", "secretName": "wandb", "secretKey": "..data"}, False),
    ("logging.wandb", {"project": "p", "secretName": "wandb", "secretKey": "."}, False),
    ("env", [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "..k"}}}], False),
    ("model.source", "hf://Qwen/Qwen3-VL-4B-Instruct.git", False),
    ("model.source", "modelscope://Qwen/Qwen3-VL-4B-Instruct.git", False),
    ("model.source", "hf://Qwen/Qwen3-VL-4B-Instruct.gitx", True),
    # Rollout sampling: ranges, and what verl cannot honour (its rollouts take no min-p, and
    # rollout.memoryBudget sizes the trl engine's process) refused rather than ignored.
    ("rollout.topP", 0.9, True),
    ("rollout.topP", 0.0, False),
    ("rollout.topP", 1.5, False),
    ("rollout.topK", 40, True),
    ("rollout.topK", -1, False),
    ("rollout.minP", 0.1, False),
    ("rollout.memoryBudget", "16G", False),
    # Bounded quantities (issue 58): an exponent of at most two digits, a value of at most 1E, so
    # no admitted spec asks the operator's exact arithmetic for 10**9999999.
    ("resources.cpuPerNode", "1e2", True),
    ("resources.cpuPerNode", "1e400", False),
    ("resources.memoryPerNode", "1E", True),
    ("resources.memoryPerNode", "1e99", False),
    ("resources.memoryPerNode", "2E", False),
    ("resources.sharedMemory", "1e9999999", False),
    ("resources.extraResources", {"rdma/hca_shared_devices_a": "1e400"}, False),
]

TRL_FIELD_CASES: list[tuple[str, Any, bool]] = [
    # The same for the trl engine (the single-GPU LoRA example), which honours both.
    ("rollout.minP", 0.1, True),
    ("rollout.minP", 1.5, False),
    ("rollout.topK", 20, True),
    ("rollout.memoryBudget", "16G", True),
    ("rollout.memoryBudget", "14.5Gi", True),
    ("rollout.memoryBudget", "512Mi", False),
    ("rollout.memoryBudget", "16 GB", False),
    ("rollout.memoryBudget", "0", False),
    ("rollout.memoryBudget", "1e12", True),
    ("rollout.memoryBudget", "1e9999999", False),
    ("rollout.memoryBudget", "9Ei", False),
]


@pytest.mark.parametrize(
    ("stem", "path", "value"),
    [
        ("lora-single-gpu", "rollout.memoryBudget", "1e9999999"),
        ("geo3k-ascend-910b", "resources.cpuPerNode", "1e400"),
    ],
)
def test_a_quantity_with_a_huge_exponent_is_refused_at_admission_naming_the_field(
    client: Client, namespace: str, stem: str, path: str, value: str
) -> None:
    """Issue 58: Kubernetes' quantity grammar and CEL took these (the API server compares them on a
    bounded scale), and the operator's exact parse of 10**9999999 held its event loop for minutes."""
    body = copy.deepcopy(example(stem))
    body["metadata"] = {"name": "huge-exponent"}
    section, name = path.split(".")
    body["spec"].setdefault(section, {})[name] = value
    answer = server_answer(client, namespace, body)
    assert list(answer) == [f"spec.{path}"], answer


@pytest.mark.parametrize(("path", "value", "accepted"), FIELD_CASES, ids=lambda v: str(v)[:40])
def test_field_syntax_is_checked_alike_by_both(
    client: Client, namespace: str, path: str, value: Any, accepted: bool
) -> None:
    _check_field_case(client, namespace, "geo3k-ascend-910b", path, value, accepted)


@pytest.mark.parametrize(("path", "value", "accepted"), TRL_FIELD_CASES, ids=lambda v: str(v)[:40])
def test_trl_fields_are_checked_alike_by_both(
    client: Client, namespace: str, path: str, value: Any, accepted: bool
) -> None:
    _check_field_case(client, namespace, "lora-single-gpu", path, value, accepted)


def _check_field_case(
    client: Client, namespace: str, stem: str, path: str, value: Any, accepted: bool
) -> None:
    body = copy.deepcopy(example(stem))
    body["metadata"] = {"name": "field-case"}
    if path == "metadata.name":
        body["metadata"]["name"] = value
    else:
        node = body["spec"]
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    if path == "checkpoint.size":
        body["spec"]["checkpoint"].pop("claimName", None)
    server = server_answer(client, namespace, body)
    python = python_answer(body, namespace)
    assert (not server) is accepted, f"the API server: {server}"
    assert (not python) is accepted, f"the Python side: {python}"
    prefix = path if path == "metadata.name" else f"spec.{path}"
    # The field named is the one changed, or the section holding it (a rule across its fields).
    for answer in (server, python):
        assert all(field.startswith(prefix) or prefix.startswith(field) for field in answer), answer


def test_verl_refuses_what_only_the_trl_engine_honours_in_one_sentence_each(
    client: Client, namespace: str
) -> None:
    body = copy.deepcopy(example("geo3k-ascend-910b"))
    body["metadata"] = {"name": "verl-min-p"}
    body["spec"].setdefault("rollout", {}).update(minP=0.1, memoryBudget="16G")
    server = server_answer(client, namespace, body)
    python = python_answer(body, namespace)
    assert set(server) == set(python) == {"spec.rollout.minP", "spec.rollout.memoryBudget"}
    for field, messages in python.items():
        assert any(message in said for message in messages for said in server[field]), (field, server, python)
    assert "verl passes no min-p to its vLLM rollouts" in python["spec.rollout.minP"][0]


MINIMAL_SPEC: dict[str, Any] = {
    "model": {"source": "hf://Qwen/Qwen3-VL-4B-Instruct"},
    "dataset": {"preset": "geo3k"},
    "reward": {"builtin": "geo3k"},
    "resources": {"accelerator": "nvidia"},
}
"""A job that writes only the required sections: every other one is the models' default."""


def _minimal(name: str, **sections: Any) -> dict[str, Any]:
    spec = copy.deepcopy(MINIMAL_SPEC)
    for key, value in sections.items():
        spec[key] = {**spec.get(key, {}), **value}
    return {"apiVersion": "grpo.dev/v1alpha1", "kind": "GRPOJob", "metadata": {"name": name}, "spec": spec}


def test_a_spec_that_omits_its_sections_is_stored_as_written_and_read_with_every_default(
    client: Client, namespace: str
) -> None:
    body = _minimal("omitted-sections")
    stored = client.create(codecs.from_dict(body), namespace=namespace, dry_run=True).to_dict()
    # The server adds only the immutable fields' defaults (a transition rule needs them stored).
    assert stored["spec"] == {
        **MINIMAL_SPEC,
        "resources": {"accelerator": "nvidia", "devicesPerNode": 8, "nodes": 1},
        "engine": {"name": "verl"},
    }
    # What the operator reads of it is the job with every default written out, and what it
    # renders from it (the RayJob, the trainer's resolved job) is the same.
    full = GRPOJob.model_validate({**body, "metadata": {"name": "x", "namespace": namespace, "uid": "u"}})
    read = GRPOJob.model_validate({**stored, "metadata": full.metadata})
    assert read.spec == full.spec
    assert build_rayjob(read, SETTINGS, attempt=1) == build_rayjob(full, SETTINGS, attempt=1)
    assert build_spec_configmap(read, SETTINGS)["data"] == build_spec_configmap(full, SETTINGS)["data"]
    written_out = {**body, "spec": full.spec.to_wire()}
    assert server_answer(client, namespace, written_out) == {} == python_answer(written_out, namespace)


@pytest.mark.parametrize(
    ("sections", "field", "words"),
    [
        # The default batch (512 prompts × 5 responses) does not split over 3 devices.
        ({"resources": {"devicesPerNode": 3}}, "spec.algorithm.trainBatchSize", "must be divisible"),
        # Validation every 10 steps (the default) needs a validation set.
        (
            {"dataset": {"preset": None, "train": ["pvc://data/train.parquet"]}},
            "spec.evaluation.interval",
            "10",
        ),
        # verl's rollouts take no min-p; the section written, its other fields left out.
        ({"rollout": {"minP": 0.1}}, "spec.rollout.minP", "min-p"),
        # The trl engine needs its LoRA section: a rule across a section left out.
        ({"engine": {"name": "trl"}, "resources": {"devicesPerNode": 1}}, "spec.engine.lora", "engine.lora"),
    ],
    ids=["default-batch", "default-evaluation", "rollout-partial", "trl-without-lora"],
)
def test_rules_read_an_omitted_section_as_its_defaults(
    client: Client, namespace: str, sections: dict[str, Any], field: str, words: str
) -> None:
    body = _minimal("omitted-rules", **sections)
    body["spec"]["dataset"] = {k: v for k, v in body["spec"]["dataset"].items() if v is not None}
    server = server_answer(client, namespace, body)
    python = python_answer(body, namespace)
    assert field in server, server
    assert set(server) == set(python), (server, python)
    assert any(words in said for said in server[field]), server[field]
    for name, messages in python.items():
        assert all(any(m in said for said in server[name]) for m in messages), (name, server, python)


def test_an_omitted_immutable_field_stays_immutable(client: Client, namespace: str) -> None:
    created = client.create(codecs.from_dict(_minimal("omitted-immutable")), namespace=namespace)
    try:
        for patch in ({"engine": {"name": "trl"}}, {"resources": {"nodes": 2}}):
            with pytest.raises(ApiError) as refused:
                client.patch(
                    type(created),
                    "omitted-immutable",
                    {"spec": patch},
                    namespace=namespace,
                    patch_type=PatchType.MERGE,
                )
            assert "is immutable" in str(refused.value.status.message), refused.value.status.message
    finally:
        client.delete(type(created), "omitted-immutable", namespace=namespace)
