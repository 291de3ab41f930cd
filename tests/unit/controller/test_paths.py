"""A job's folder on the checkpoint volume belongs to that job, not to its name."""

from __future__ import annotations

from grpo_operator.api import contract
from grpo_operator.children.paths import job_paths
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import load_settings
from support.operator_inputs import job_from, minimal_body

SETTINGS = load_settings(environ={})


def _job(uid: str):
    body = minimal_body()
    body["metadata"]["uid"] = uid
    return job_from(body)


def test_a_recreated_job_of_the_same_name_gets_a_folder_of_its_own() -> None:
    old = job_paths(_job("3f2a9c1b-0000-4000-8000-000000000001"))
    new = job_paths(_job("77d0e5aa-0000-4000-8000-000000000002"))
    assert old.job_dir == "/grpo/checkpoints/demo-3f2a9c1b"
    assert new.job_dir == "/grpo/checkpoints/demo-77d0e5aa"
    # Checkpoints, metrics, data, caches and the export: nothing of the old job is found.
    for field in contract.JOB_SUBDIRS:
        assert getattr(old, field) != getattr(new, field)
        assert getattr(new, field).startswith(new.job_dir + "/")


def test_every_attempt_of_one_job_shares_its_folder() -> None:
    job = _job("3f2a9c1b-0000-4000-8000-000000000001")
    for attempt in (1, 2, 7):
        container = build_rayjob(job, SETTINGS, attempt)["spec"]["rayClusterSpec"]["headGroupSpec"][
            "template"
        ]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["GRPO_METRICS_FILE"] == f"/grpo/checkpoints/demo-3f2a9c1b/metrics/attempt-{attempt}.jsonl"


def test_without_a_uid_the_folder_is_the_name() -> None:
    assert contract.job_dir("demo") == "/grpo/checkpoints/demo"
