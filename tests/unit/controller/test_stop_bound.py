"""The planned stop's bound and the pods' grace period (api/stop_bound.py, children/rayjob.py)."""

from __future__ import annotations

from grpo_operator.api.stop_bound import MARGIN_SECONDS, SAVE_DEFAULTS, STEP_DEFAULTS, stop_bound
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import Settings
from support.examples import example_document, with_changes


def test_grace_is_save_plus_step_plus_margin_from_defaults_then_measurements() -> None:
    unmeasured = stop_bound("trl", None)
    assert unmeasured.grace_seconds == SAVE_DEFAULTS["trl"] + STEP_DEFAULTS["trl"] + MARGIN_SECONDS
    assert unmeasured.hook_seconds == unmeasured.grace_seconds - MARGIN_SECONDS
    measured = stop_bound("verl", None, measured_save_seconds=40.2, measured_step_seconds=100)
    assert (measured.save_seconds, measured.step_seconds) == (111, 150)
    assert "status.checkpoint.saveSeconds" in measured.describe()
    assert stop_bound("verl", 7, 40.2, 100).save_seconds == 7


def _pods(job: GRPOJob) -> list[dict]:
    cluster = build_rayjob(job, Settings(), 1)["spec"]["rayClusterSpec"]
    return [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]


def _job(changes: dict, status: dict | None = None) -> GRPOJob:
    document = with_changes(example_document("colours-cpu"), {"metadata.namespace": "default", **changes})
    if status is not None:
        document["status"] = status
    return GRPOJob.model_validate(document)


def test_every_ray_pod_yields_before_it_stops_unless_the_spec_says_not_to() -> None:
    measured = _job({}, {"metrics": {"stepSeconds": 4.0}, "checkpoint": {"saveSeconds": 2.0}})
    for pod in _pods(measured):
        [container] = pod["spec"]["containers"]
        # save 2 x 2 + 30 = 34 s, step 1.5 x 4 = 6 s, margin 45 s
        assert container["lifecycle"]["preStop"]["exec"]["command"] == [
            "grpo-train",
            "yield",
            "--timeout",
            "40",
        ]
        assert pod["spec"]["terminationGracePeriodSeconds"] == 40 + MARGIN_SECONDS
    for pod in _pods(_job({"spec.checkpoint.saveOnStop": {"enabled": False}})):
        assert "lifecycle" not in pod["spec"]["containers"][0]
        assert "terminationGracePeriodSeconds" not in pod["spec"]
