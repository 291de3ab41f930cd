"""Every pod the operator has KubeRay make passes the `restricted` Pod Security level.

The checks are the level's own (kubernetes.io/docs/concepts/security/pod-security-standards);
tests/integration/test_security.py runs the same pods through the real API server's PodSecurity
admission in a namespace that enforces the level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.config import Settings, load_settings
from support.operator_inputs import EXAMPLES, example_body, job_from

SETTINGS = load_settings(environ={})
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    spec = pod["spec"]
    pod_security = spec.get("securityContext") or {}
    found = []
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            found.append(flag)
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {kinds}")
    if pod_security.get("runAsUser") == 0:
        found.append("pod runAsUser 0")
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        found += _container_violations(container, pod_security)
    return found


def _container_violations(container: dict[str, Any], pod_security: dict[str, Any]) -> list[str]:
    sc = container.get("securityContext") or {}
    name = container["name"]
    pod_seccomp = (pod_security.get("seccompProfile") or {}).get("type")
    found = []
    if sc.get("privileged"):
        found.append(f"{name}: privileged")
    if sc.get("allowPrivilegeEscalation") is not False:
        found.append(f"{name}: allowPrivilegeEscalation is not false")
    caps = sc.get("capabilities") or {}
    if "ALL" not in caps.get("drop", []):
        found.append(f"{name}: capabilities not dropped")
    if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
        found.append(f"{name}: capabilities added")
    if not (sc.get("runAsNonRoot") or pod_security.get("runAsNonRoot")):
        found.append(f"{name}: runAsNonRoot unset")
    if sc.get("runAsUser") == 0:
        found.append(f"{name}: runAsUser 0")
    if (sc.get("seccompProfile") or {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
        found.append(f"{name}: no seccomp profile")
    if any(port.get("hostPort") for port in container.get("ports", [])):
        found.append(f"{name}: hostPort")
    return found


def _pods(rayjob: dict[str, Any]) -> list[dict[str, Any]]:
    spec = rayjob["spec"]
    cluster = spec["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    if "submitterPodTemplate" in spec:
        pods.append(spec["submitterPodTemplate"])
    return pods


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("mode", ["HTTPMode", "K8sJobMode", "SidecarMode"])
def test_every_ray_pod_is_restricted_compatible(path: Path, mode: str) -> None:
    settings = SETTINGS.model_copy(update={"submission_mode": mode})
    rayjob = build_rayjob(job_from(example_body(path)), settings, 1)
    pods = _pods(rayjob)
    assert len(pods) == (3 if mode == "K8sJobMode" else 2)
    for pod in pods:
        assert restricted_violations(pod) == []
        security = pod["spec"]["securityContext"]
        assert security["runAsUser"] == 1000
        assert security["fsGroup"] == 1000


def test_the_k8s_job_mode_submitter_is_one_of_the_jobs_pods() -> None:
    settings = SETTINGS.model_copy(update={"submission_mode": "K8sJobMode"})
    job = job_from(example_body(EXAMPLES[0]))
    submitter = build_rayjob(job, settings, 2)["spec"]["submitterPodTemplate"]
    assert submitter["metadata"]["labels"]["grpo.dev/job"] == job.name
    assert submitter["metadata"]["labels"]["grpo.dev/attempt"] == "2"


def test_the_device_group_is_added_when_a_profile_names_it() -> None:
    settings = Settings.model_validate(
        {
            "profiles": {
                **{k: p.model_dump(by_alias=True) for k, p in SETTINGS.profiles.items()},
                "ascend": {
                    **SETTINGS.profiles["ascend"].model_dump(by_alias=True),
                    "supplementalGroups": [1001],
                },
            }
        }
    )
    ascend = next(p for p in EXAMPLES if "ascend" in p.stem)
    rayjob = build_rayjob(job_from(example_body(ascend)), settings, 1)
    for pod in _pods(rayjob):
        assert pod["spec"]["securityContext"]["supplementalGroups"] == [1001]


def test_a_root_profile_is_refused_by_the_settings() -> None:
    with pytest.raises(ValueError, match="runAsUser"):
        Settings.model_validate(
            {
                "profiles": {
                    "nvidia": {**SETTINGS.profiles["nvidia"].model_dump(by_alias=True), "runAsUser": 0}
                }
            }
        )
