"""The operator's metrics, and Ray's pods, through a real Prometheus, discovered and relabelled as
the chart's ServiceMonitor and PodMonitor tell a Prometheus Operator to.

Prometheus is Debian's package (hack/addons/prometheus.sh). Its targets are the metrics Service's
endpoints as the real API server holds them, with the meta labels Kubernetes discovery gives them
(Debian builds Prometheus without that discovery, so the test reads the Endpoints and hands them
over as a file); relabelling, `honor_labels`, the scrape of the running operator, storage and the
query are Prometheus' own. The operator runs as a process on this host, not as a pod, so the
chart's Service is created without its pod selector and with an Endpoints object naming the
process's address.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from support.cluster import Cluster
from support.helm import only, render_in
from support.jobs import apply_job, example, phase_is
from support.namespaces import create_namespace, delete_namespace
from support.operator_process import OperatorProcess
from support.prometheus import (
    Prometheus,
    host_address,
    pod_monitor_scrape_config,
    service_monitor_scrape_config,
    write_endpoints_targets,
    write_pod_targets,
)


def _expose(cluster: Cluster, service: dict[str, Any], operator: OperatorProcess) -> None:
    """The chart's metrics Service in front of the operator process (see the module docstring)."""
    service = copy.deepcopy(service)
    del service["spec"]["selector"]  # a selector would have the endpoints controller empty it
    (port,) = service["spec"]["ports"]
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": service["metadata"]["name"], "namespace": service["metadata"]["namespace"]},
        "subsets": [
            {
                "addresses": [{"ip": host_address()}],
                "ports": [{"name": port["name"], "port": operator.metrics_port, "protocol": "TCP"}],
            }
        ],
    }
    cluster.apply([service, endpoints])


def _prometheus(cluster: Cluster, monitor: dict[str, Any], workdir: Path) -> Prometheus:
    workdir.mkdir(parents=True)
    targets = workdir / "targets.json"
    write_endpoints_targets(cluster, monitor, targets)
    return Prometheus(service_monitor_scrape_config(monitor, targets), workdir)


def _job_series(prometheus: Prometheus, job: str) -> dict[str, str]:
    [series] = prometheus.wait_for_series(f'grpo_job_phase{{name="{job}",phase="Running"}}')
    return series


def test_a_real_prometheus_keeps_each_jobs_namespace(
    operator: OperatorProcess, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="phase Running")
    # The release lives apart from the job: were they one namespace, a renamed label would look right.
    release = create_namespace(cluster, "release")
    try:
        docs = render_in(
            release, {"serviceMonitor": {"enabled": True, "interval": "1s", "scrapeTimeout": "1s"}}
        )
        service, monitor = only(docs, "Service", "-metrics"), only(docs, "ServiceMonitor")
        _expose(cluster, service, operator)

        with _prometheus(cluster, monitor, tmp_path / "chart") as prom:
            series = _job_series(prom, job)
            # The operator's own series take the target's labels: the release's namespace, the
            # Service's name as job and service, the endpoint's port name.
            [process] = prom.wait_for_series("process_resident_memory_bytes")
        assert (series["namespace"], series["name"]) == (namespace, job), series
        assert "exported_namespace" not in series, series
        assert series["job"] == series["service"] == service["metadata"]["name"], series
        assert series["endpoint"] == monitor["spec"]["endpoints"][0]["port"], series
        assert process["namespace"] == release, process

        # The same monitor without honorLabels, as the chart had it before: Prometheus renames the
        # job's namespace and files the job under the release, which the assertions above refuse.
        without = copy.deepcopy(monitor)
        without["spec"]["endpoints"][0]["honorLabels"] = False
        with _prometheus(cluster, without, tmp_path / "without") as prom:
            renamed = _job_series(prom, job)
        assert (renamed["namespace"], renamed.get("exported_namespace")) == (release, namespace), renamed
    finally:
        delete_namespace(cluster, release)


def test_the_ray_pod_monitor_finds_every_ray_pod_of_a_job_under_the_jobs_name(
    operator: OperatorProcess, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The chart's PodMonitor, as the Prometheus Operator turns it into a scrape config, over the
    pods of a job the operator runs: one target per Ray pod, on Ray's metrics port, labelled with
    the job's name, its namespace and the pod's role, so Ray's own series join the operator's.

    The scrape itself cannot succeed here: KWOK pods have addresses but nothing behind them (and
    the real Ray head this cluster runs is a host process, not behind any pod's address), so each
    target is down and only `up` is stored; that is what the test reads its labels from.
    """
    job = apply_job(cluster, namespace, example("geo3k-ascend-910b"))
    cluster.wait_for("grpojob", job, namespace, phase_is("Running"), timeout=120, what="phase Running")
    monitor = only(
        render_in("grpo-system", {"rayPodMonitor": {"enabled": True, "interval": "1s"}}), "PodMonitor"
    )
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    pods = cluster.get("pods", namespace=namespace)["items"]
    roles = {p["metadata"]["name"]: p["metadata"]["labels"]["grpo.dev/component"] for p in pods}
    assert sorted(roles.values()) == ["head", "worker"], roles
    targets = tmp_path / "targets.json"
    tmp_path.joinpath("ray").mkdir()
    write_pod_targets(cluster, [namespace], targets)
    with Prometheus(pod_monitor_scrape_config(monitor, targets), tmp_path / "ray") as prom:
        deadline = time.monotonic() + 60
        while len(found := prom.series(f'up{{name="{job}"}}')) < len(roles) and time.monotonic() < deadline:
            time.sleep(0.5)
        active = prom.api("targets")["activeTargets"]
    assert {s["pod"]: s["component"] for s in found} == roles, found
    for series in found:
        assert (series["namespace"], series["job"]) == (namespace, "grpo-system/grpo-grpo-operator-ray"), (
            series
        )
        assert series["endpoint"] == "metrics"
    # Ray's metrics port, on each pod's address.
    ports = {t["labels"]["pod"]: t["scrapeUrl"] for t in active}
    for pod in pods:
        assert ports[pod["metadata"]["name"]] == f"http://{pod['status']['podIP']}:8080/metrics"
