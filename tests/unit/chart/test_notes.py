"""NOTES.txt: how to run a first job, and how to free a job that stays Terminating."""

from __future__ import annotations

from pathlib import Path

import yaml
from support.helm import NAMESPACED, REPO, render_notes

EXAMPLE = REPO / "examples" / "lora-single-gpu.yaml"


def test_the_first_job_commands_name_a_real_example(notes_copy: Path) -> None:
    notes = render_notes(notes_copy)
    name = yaml.safe_load(EXAMPLE.read_text())["metadata"]["name"]
    assert f"kubectl apply -n default -f examples/{EXAMPLE.name}" in notes
    assert "kubectl get grpojobs -n default -w" in notes
    assert f"kubectl wait -n default --for=condition=Succeeded grpojob/{name}" in notes


def test_namespaced_installs_point_at_a_watched_namespace(notes_copy: Path) -> None:
    notes = render_notes(notes_copy, NAMESPACED)
    assert "watches team-a, team-b." in notes
    assert f"kubectl apply -n team-a -f examples/{EXAMPLE.name}" in notes


def test_the_namespace_kuberay_must_run_in_is_named(notes_copy: Path) -> None:
    assert "lets KubeRay in from namespace kuberay-system (settings.rayClients)" in render_notes(notes_copy)
    notes = render_notes(notes_copy, {"settings": {"rayClients": []}})
    assert "settings.rayClients is empty" in notes
    notes = render_notes(notes_copy, {"settings": {"networkPolicy": False}})
    assert "rayClients" not in notes


def test_stuck_finalizers_are_explained(notes_copy: Path) -> None:
    notes = render_notes(notes_copy)
    assert "puts no finalizer on GRPOJobs" in notes
    assert "ray.io/rayjob-finalizer" in notes
    assert (
        """kubectl patch rayjob <name> -n <namespace> --type=merge -p '{"metadata":{"finalizers":null}}'"""
        in notes
    )
    assert "last resort" in notes


def test_uninstall_order(notes_copy: Path) -> None:
    assert "logs job/grpo-grpo-operator-cleanup" in render_notes(notes_copy)
    manual = render_notes(notes_copy, {**NAMESPACED, "cleanup": {"enabled": False}})
    assert "kubectl delete grpojobs --all -n team-a --wait" in manual
    assert "kubectl delete grpojobs --all -n team-b --wait" in manual


def test_a_cleanup_longer_than_helms_hook_wait_gives_the_uninstall_command_that_waits(
    notes_copy: Path,
) -> None:
    assert "helm uninstall grpo" not in render_notes(notes_copy)
    assert "helm uninstall grpo" not in render_notes(notes_copy, {"cleanup": {"timeoutSeconds": 240}})
    notes = render_notes(notes_copy, {"cleanup": {"timeoutSeconds": 600}})
    assert "this one may take cleanup.timeoutSeconds\n   (600s)" in notes
    assert "helm uninstall grpo -n grpo-system --timeout 660s" in notes
    assert "helm uninstall grpo" not in render_notes(
        notes_copy, {"cleanup": {"enabled": False, "timeoutSeconds": 600}}
    )
