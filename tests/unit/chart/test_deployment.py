"""The operator's pods: one acting replica (a Lease decides), hardened, probed, and reading the
settings the chart renders."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml
from support.helm import NAMESPACED, only, rejection, render


def _deployment(values: dict | None = None, *sets: str) -> dict[str, Any]:
    return only(render(values, *sets), "Deployment")


def _pods(values: dict | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Every pod spec the chart renders: the operator's and the cleanup hook's."""
    docs = render(values)
    return [
        ("operator", only(docs, "Deployment")["spec"]["template"]["spec"]),
        ("cleanup", only(docs, "Job")["spec"]["template"]["spec"]),
    ]


def test_one_replica_by_default_rolled_without_overlap() -> None:
    spec = _deployment()["spec"]
    assert spec["replicas"] == 1
    # With leader election the new pod waits as a candidate: surge one, never go below.
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


def test_several_replicas_with_leader_election() -> None:
    docs = render({"replicaCount": 2})
    assert only(docs, "Deployment")["spec"]["replicas"] == 2
    settings = yaml.safe_load(only(docs, "ConfigMap", "-settings")["data"]["settings.yaml"])
    assert settings["leaderElection"] is True
    assert settings["leaseName"] == "grpo-grpo-operator"
    assert settings["leaseNamespace"] == "grpo-system"


def test_several_replicas_without_leader_election_are_refused() -> None:
    error = rejection({"replicaCount": 2, "settings": {"leaderElection": False}})
    assert "replicaCount > 1 needs settings.leaderElection" in error


def test_without_leader_election_one_pod_is_replaced_not_rolled() -> None:
    spec = _deployment({"settings": {"leaderElection": False}})["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_pods_are_hardened(values: dict | None) -> None:
    for name, pod in _pods(values):
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True, name
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert security.get("runAsUser", 1) != 0, name
        for host_namespace in ("hostNetwork", "hostPID", "hostIPC"):
            assert not pod.get(host_namespace), name
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["runAsNonRoot"] is True, name
            assert sc["privileged"] is False, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, name
            # The root filesystem is read-only: /tmp is a small emptyDir.
            tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
            volume = next(v for v in pod["volumes"] if v["name"] == tmp["name"])
            assert "emptyDir" in volume, name
            resources = container["resources"]
            assert {"cpu", "memory"} <= resources["requests"].keys(), name
            assert {"cpu", "memory"} <= resources["limits"].keys(), name


def test_the_hardening_cannot_be_switched_off_from_values() -> None:
    pod = _deployment({"podSecurityContext": {"runAsUser": None, "runAsGroup": None}})["spec"]["template"][
        "spec"
    ]
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def test_liveness_probe_is_kopfs_health_endpoint() -> None:
    for port in (8081, 9000):
        container = _deployment({"settings": {"healthPort": port}})["spec"]["template"]["spec"]["containers"][
            0
        ]
        probe = container["livenessProbe"]["httpGet"]
        assert probe["path"] == "/healthz"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports[probe["port"]] == port


def test_readiness_waits_for_the_operator_to_have_started() -> None:
    container = _deployment({"settings": {"healthPort": 9000}})["spec"]["template"]["spec"]["containers"][0]
    probe = container["readinessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "health"}
    assert probe["periodSeconds"] <= container["livenessProbe"]["periodSeconds"]


def test_metrics_port_follows_the_settings() -> None:
    container = _deployment({"settings": {"metricsPort": 9100}})["spec"]["template"]["spec"]["containers"][0]
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"] == 9100


def test_the_operator_reads_the_rendered_settings_file() -> None:
    docs = render()
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["grpo-operator"]
    assert container["args"] == ["run"]
    path = PurePosixPath(next(e["value"] for e in container["env"] if e["name"] == "GRPO_OPERATOR_CONFIG"))
    mount = next(m for m in container["volumeMounts"] if PurePosixPath(m["mountPath"]) == path.parent)
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    settings = only(docs, "ConfigMap", "-settings")
    assert volume["configMap"]["name"] == settings["metadata"]["name"]
    assert path.name in settings["data"]


def test_a_settings_change_restarts_the_operator() -> None:
    def checksum(values: dict | None) -> str:
        return _deployment(values)["spec"]["template"]["metadata"]["annotations"]["checksum/settings"]

    assert checksum(None) == checksum({"metrics": {"service": {"port": 9999}}})
    assert checksum(None) != checksum({"profiles": {"nvidia": {"image": "registry.local/trainer-cuda:dev"}}})


def test_verbose_turns_on_debug_logging() -> None:
    container = _deployment({"verbose": True})["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["run", "--verbose"]


def test_scheduling_values_reach_both_pods() -> None:
    values = {
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "system", "operator": "Exists", "effect": "NoSchedule"}],
        "imagePullSecrets": [{"name": "regcred"}],
    }
    for name, pod in _pods(values):
        assert pod["nodeSelector"] == {"pool": "system"}, name
        assert pod["tolerations"] == values["tolerations"], name
        assert pod["imagePullSecrets"] == [{"name": "regcred"}], name
