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
        # What the API server would refuse later, in a rendered object: refused at install instead.
        ({"resources": {"limits": {"memory": "2 GB"}}}, (), "/resources/limits/memory"),
        ({"resources": {"requests": {"cpu": -1}}}, (), "/resources/requests/cpu"),
        ({"settings": {"headCpu": "four"}}, (), "headCpu"),
        ({"podLabels": {"bad key!": "x"}}, (), "bad key!"),
        ({"podAnnotations": {"-bad": "x"}}, (), "-bad"),
        # The chart's selector labels: a second value would break the Deployment's selector.
        ({"podLabels": {"app.kubernetes.io/component": "x"}}, (), "app.kubernetes.io/component"),
        ({"profiles": {"nvidia": {"nodeSelector": {"bad key": "x"}}}}, (), "bad key"),
        ({"serviceAccount": {"name": "Bad_Name"}}, (), "/serviceAccount/name"),
        ({"fullnameOverride": "Bad_Name"}, (), "fullnameOverride"),
        ({"priorityClassName": "Bad Name"}, (), "priorityClassName"),
        ({"settings": {"defaultStorageClass": "Bad_Class"}}, (), "defaultStorageClass"),
        ({"image": {"tag": "v1 :x"}}, (), "/image/tag"),
        ({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, (), "/tolerations/0/value"),
        (
            {"tolerations": [{"key": "a", "value": "x", "effect": "NoSchedule", "tolerationSeconds": 30}]},
            (),
            "/tolerations/0/effect",
        ),
        # Kubernetes drops an unknown affinity field with a warning: the operator would run anywhere.
        ({"affinity": {"nodeAfinity": {}}}, (), "nodeAfinity"),
        (
            {
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"key": "pool"}]}
                }
            },
            (),
            "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
        ),
        (
            {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]
                    }
                }
            },
            (),
            "topologyKey",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0}]}
                }
            },
            (),
            "/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/0",
        ),
        # A profile of a new name has no built-in one under it: what the operator cannot default.
        ({"profiles": {"amd": {"image": "registry.local/trainer:1"}}}, (), "deviceType"),
        # --set KEY=null removes the key, and the templates read these groups without a fallback.
        (None, ("settings=null",), "missing property 'settings'"),
        (None, ("image=null",), "missing property 'image'"),
        # Relations between values, which the templates check.
        (
            {"settings": {"healthPort": 8080, "metricsPort": 8080}},
            (),
            "settings.healthPort and settings.metricsPort",
        ),
        (
            {"settings": {"leaseRenewDeadlineSeconds": 20}},
            (),
            "settings.leaseRenewDeadlineSeconds (20) must be below",
        ),
        # A request above its limit: the pods would be refused after the install "succeeded".
        (
            {"resources": {"requests": {"cpu": 2}}},
            (),
            "resources.requests.cpu (2) is above resources.limits.cpu (1)",
        ),
        ({"resources": {"requests": {"memory": "513Mi"}}}, (), "resources.requests.memory (513Mi) is above"),
        ({"resources": {"requests": {"memory": "6e8"}}}, (), "resources.requests.memory (6e8) is above"),
        (
            {"cleanup": {"resources": {"requests": {"cpu": "501m"}}}},
            (),
            "cleanup.resources.requests.cpu (501m) is above cleanup.resources.limits.cpu (500m)",
        ),
    ],
)
def test_rejects(values: dict | None, sets: tuple[str, ...], named: str) -> None:
    assert named in rejection(values, *sets)


def test_a_service_monitor_needs_the_metrics_service() -> None:
    error = rejection({"serviceMonitor": {"enabled": True}, "metrics": {"service": {"enabled": False}}})
    assert "metrics.service.enabled" in error


def test_a_namespace_list_with_a_cluster_wide_install_says_which_value_to_change() -> None:
    error = rejection({"rbac": {"clusterWide": True, "namespaces": ["team-a"]}})
    assert "set rbac.clusterWide=false with it" in error


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


def test_a_request_may_equal_its_limit_in_another_unit() -> None:
    render(
        {
            "resources": {
                "requests": {"cpu": "1000m", "memory": "1Gi"},
                "limits": {"cpu": 1, "memory": "1024Mi"},
            },
            "cleanup": {"resources": {"requests": {"cpu": 0.5, "memory": "5e7"}, "limits": {"memory": None}}},
        }
    )


def test_an_affinity_of_every_kind_renders_into_both_pods() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["cpu"]}]}
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]
                    },
                }
            ],
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "grpo-operator"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        },
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", "namespaces": ["x"]}]
        },
    }
    rendered = render({"affinity": affinity})
    pods = [d["spec"]["template"]["spec"] for d in rendered if d["kind"] in ("Deployment", "Job")]
    assert len(pods) == 2
    assert all(pod["affinity"] == affinity for pod in pods)
