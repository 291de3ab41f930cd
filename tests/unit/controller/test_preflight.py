"""Preflight: what a job names, and the verdict on what the reconciler found (waits and failures)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from grpo_operator.api import reward_source
from grpo_operator.api.problem import Problem
from grpo_operator.lifecycle import plan
from grpo_operator.preflight import UNREADABLE, judge, references
from support.operator_inputs import job_from, minimal_body

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
REWARD = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n"


def _everything() -> Any:
    return job_from(
        minimal_body(),
        **{
            "model.source": "pvc://models/qwen3-vl",
            "model.credentialsSecret": "hub",
            "dataset.preset": None,
            "dataset.train": ["pvc://data/train.parquet"],
            "dataset.validation": ["pvc://data/val.parquet"],
            "reward.builtin": None,
            "reward.custom": {"configMap": "my-reward", "key": "reward.py"},
            "logging.wandb": {"project": "p", "secretName": "wandb"},
            "env": [
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "a"}}},
                {
                    "name": "B",
                    "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "b", "optional": True}},
                },
            ],
        },
    )


def _all_there() -> dict[tuple[str, str], Any]:
    return {
        ("PersistentVolumeClaim", "models"): {"status": {"phase": "Bound"}},
        ("PersistentVolumeClaim", "data"): {"status": {"phase": "Pending"}},  # provisioned at first use
        ("Secret", "hub"): {"data": {"HF_TOKEN": "eA=="}},
        ("ConfigMap", "my-reward"): {"data": {"reward.py": REWARD}},
        ("Secret", "wandb"): {"data": {"WANDB_API_KEY": "eA=="}},
        ("Secret", "tokens"): {"data": {"a": "eA=="}},
        ("ConfigMap", "cfg"): None,  # optional
    }


def test_every_object_a_job_names_is_listed_with_its_field() -> None:
    found = {(r.kind, r.name, r.field, r.key) for r in references(_everything())}
    assert found == {
        ("PersistentVolumeClaim", "models", "spec.model.source", None),
        ("PersistentVolumeClaim", "data", "spec.dataset.train[0]", None),
        ("PersistentVolumeClaim", "data", "spec.dataset.validation[0]", None),
        ("ConfigMap", "my-reward", "spec.reward.custom", "reward.py"),
        ("Secret", "hub", "spec.model.credentialsSecret", None),
        ("Secret", "wandb", "spec.logging.wandb", "WANDB_API_KEY"),
        ("Secret", "tokens", "spec.env[0].valueFrom.secretKeyRef", "a"),
        ("ConfigMap", "cfg", "spec.env[1].valueFrom.configMapKeyRef", "b"),
    }


def test_when_everything_is_there_nothing_waits_or_fails() -> None:
    verdict = judge(_everything(), _all_there())
    assert (verdict.problems, verdict.waiting) == ([], [])


def test_a_missing_object_is_a_wait_that_names_it_and_the_field() -> None:
    found = {**_all_there(), ("PersistentVolumeClaim", "models"): None, ("Secret", "wandb"): None}
    verdict = judge(_everything(), found)
    assert verdict.problems == []
    assert verdict.message == (
        "waiting for PersistentVolumeClaim 'models' (spec.model.source); Secret 'wandb' (spec.logging.wandb) "
        "to exist in the job's namespace"
    )


def test_a_missing_key_fails_naming_the_field_and_what_is_there() -> None:
    found = {**_all_there(), ("Secret", "wandb"): {"data": {"api-key": "eA=="}}}
    [problem] = judge(_everything(), found).problems
    assert problem.field == "spec.logging.wandb"
    assert problem.message == "Secret 'wandb' has no key 'WANDB_API_KEY' (it holds api-key)"


def test_objects_the_operator_may_not_read_are_not_judged() -> None:
    found = {**_all_there(), ("Secret", "wandb"): UNREADABLE, ("Secret", "hub"): UNREADABLE}
    verdict = judge(_everything(), found)
    assert (verdict.problems, verdict.waiting) == ([], [])


def test_a_reward_file_that_does_not_parse_fails_naming_the_file_and_line() -> None:
    found = {**_all_there(), ("ConfigMap", "my-reward"): {"data": {"reward.py": "def compute_score(:\n"}}}
    [problem] = judge(_everything(), found).problems
    assert problem.field == "spec.reward.custom"
    assert problem.message.startswith("my-reward/reward.py is not valid Python: ")
    assert problem.message.endswith("at line 1")


def test_a_reward_file_without_the_function_fails_naming_what_it_defines() -> None:
    source = "import math\n\ndef score(a, b, c):\n    return 0.0\n"
    found = {**_all_there(), ("ConfigMap", "my-reward"): {"data": {"reward.py": source}}}
    [problem] = judge(_everything(), found).problems
    assert problem.field == "spec.reward.custom.function"
    assert problem.message == "my-reward/reward.py defines no 'compute_score' (its functions: score)"


def test_a_function_bound_by_assignment_or_import_counts() -> None:
    for source in ("from mylib import compute_score\n", "compute_score = lambda *a: 0.0\n"):
        found = {**_all_there(), ("ConfigMap", "my-reward"): {"data": {"reward.py": source}}}
        assert judge(_everything(), found).problems == [], source


def test_a_waiting_job_stays_pending_with_a_condition_and_one_warning() -> None:
    job = _everything()
    message = "waiting for Secret 'wandb' (spec.logging.wandb) to exist in the job's namespace"
    result = plan(job, None, [], NOW, message)
    assert result.create_attempt is None
    assert result.status["phase"] == "Pending"
    [created] = result.status["conditions"]
    assert (created["type"], created["status"], created["reason"]) == ("Created", "False", "WaitingForInputs")
    assert created["message"] == message
    assert result.events == [("Warning", "WaitingForInputs", message)]
    body = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["status"] = result.status
    waited = job_from(body)
    assert plan(waited, None, [], NOW, message).events == [], "one Warning, not one per reconcile"
    go = plan(waited, None, [], NOW, "")
    assert go.create_attempt == 1


def _verdict_on(source: str) -> list[Problem]:
    found = {**_all_there(), ("ConfigMap", "my-reward"): {"data": {"reward.py": source}}}
    return judge(_everything(), found).problems


DEEP = "x = " + "1+" * 200_000 + "1\n"
"""A 400 KB file of one deep expression: ast.parse ends it in RecursionError (MemoryError for a
chain of unary minus), which failed every reconcile, leaving the job no phase, condition or Event."""


@pytest.mark.parametrize(
    "source",
    [
        DEEP,
        DEEP[: reward_source.MAX_SOURCE_CHARS - 2] + "1\n",  # within the size read: the parser gives up
        "x = " + "-" * 60_000 + "1\n",
    ],
    ids=["400KB", "deep-within-limit", "unary-chain"],
)
def test_a_file_the_parser_gives_up_on_is_not_judged_and_never_raises(source: str) -> None:
    start = time.perf_counter()
    assert _verdict_on(source) == []  # the trainer's import, in its sandbox, says what Python makes of it
    assert time.perf_counter() - start < 1.0  # bounded (the reconcile budget itself is checked in CI timing)


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    from fastlib import compute_score\nexcept ImportError:\n"
        "    def compute_score(*args):\n        return 0.0\n",
        "import sys\nif sys.version_info >= (3, 12):\n    def compute_score(*a):\n        return 1.0\n"
        "else:\n    def compute_score(*a):\n        return 0.0\n",
        "if False:\n    pass\nelse:\n    compute_score = print\n",
        "try:\n    import fastlib\nexcept ImportError:\n    fastlib = None\n"
        "finally:\n    async def compute_score(*a):\n        return 1.0\n",
    ],
    ids=["try-except", "if-else", "else-assignment", "finally-async"],
)
def test_a_function_defined_under_a_module_level_if_or_try_counts(source: str) -> None:
    assert _verdict_on(source) == []


def test_a_star_import_gives_no_verdict_but_a_definition_in_a_function_body_is_not_one() -> None:
    assert _verdict_on("from mylib.rewards import *\n") == []
    [problem] = _verdict_on("def outer():\n    def compute_score():\n        return 1.0\n")
    assert problem.message == "my-reward/reward.py defines no 'compute_score' (its functions: outer)"
