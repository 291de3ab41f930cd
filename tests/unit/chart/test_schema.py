"""values.schema.json turns a wrong value into an install error that names it."""

from __future__ import annotations

import pytest
from support.helm import rejection, render


@pytest.mark.parametrize(
    ("values", "sets", "named"),
    [
        # The replica knob is replicaCount, 1 to 5.
        ({"replicaCount": 0}, (), "replicaCount"),
        ({"replicaCount": "two"}, (), "replicaCount"),
        ({"replicas": 2}, (), "replicas"),
        ({"settings": {"leaseDurationSeconds": 0}}, (), "leaseDurationSeconds"),
        ({"settings": {"logFormat": "xml"}}, (), "logFormat"),
        ({"settings": {"namespaces": ["team-a"]}}, (), "namespaces"),
        ({"settings": {"metricsPort": 0}}, (), "metricsPort"),
        ({"settings": {"cpuPerDevice": "six"}}, (), "cpuPerDevice"),
        ({"profiles": {"nvidia": {"deviceType": "tpu"}}}, (), "deviceType"),
        ({"profiles": {"nvidia": {"gpuType": "H100"}}}, (), "gpuType"),
        ({"profiles": {"nvidia": {"tolerations": [{"key": "x", "operator": "Maybe"}]}}}, (), "operator"),
        ({"rbac": {"clusterWide": False}}, (), "namespaces"),
        ({"rbac": {"clusterWide": False, "namespaces": []}}, (), "namespaces"),
        ({"rbac": {"clusterWide": True, "namespaces": ["team-a"]}}, (), "namespaces"),
        ({"rbac": {"clusterWide": False, "namespaces": ["Team_A"]}}, (), "namespaces"),
        ({"podSecurityContext": {"privileged": True}}, (), "privileged"),
        ({"podSecurityContext": {"runAsUser": 0}}, (), "runAsUser"),
        ({"securityContext": {"readOnlyRootFilesystem": False}}, (), "securityContext"),
        ({"image": {"digest": "latest"}}, (), "digest"),
        ({"image": {"pullPolicy": "Sometimes"}}, (), "pullPolicy"),
        ({"serviceMonitor": {"interval": "often"}}, (), "interval"),
        ({"cleanup": {"timeoutSeconds": 1}}, (), "timeoutSeconds"),
    ],
)
def test_rejects(values: dict | None, sets: tuple[str, ...], named: str) -> None:
    assert named in rejection(values, *sets)


def test_a_service_monitor_needs_the_metrics_service() -> None:
    error = rejection({"serviceMonitor": {"enabled": True}, "metrics": {"service": {"enabled": False}}})
    assert "metrics.service.enabled" in error


def test_accepts_the_documented_overrides() -> None:
    render(
        {
            "image": {"repository": "registry.local/grpo-operator", "tag": "dev", "pullPolicy": "Always"},
            "rbac": {"clusterWide": False, "namespaces": ["ml-team"]},
            "settings": {"defaultStorageClass": "cephfs", "logFormat": "plain"},
            "profiles": {"nvidia": {"nodeSelector": {"pool": "h100"}, "env": {"NCCL_DEBUG": "INFO"}}},
            "podSecurityContext": {"runAsUser": None, "runAsGroup": None},
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
            "cleanup": {"timeoutSeconds": 900},
        }
    )
