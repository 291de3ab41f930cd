"""How Prometheus labels what it scrapes from a ServiceMonitor's target, for the chart's tests.

The Prometheus Operator turns a ServiceMonitor endpoint into a scrape config whose targets carry
`namespace`, `service`, `pod`, `container`, `endpoint`, `job` and `instance`. Prometheus then
merges those with each scraped sample's labels: with `honor_labels: false` (the default) a
scraped label that collides with a target label is kept as `exported_<name>` and the target's
value wins; with `honor_labels: true` the scraped value wins (Prometheus' scrape_config docs).

`scrape` does that merge in Python, for the chart's unit tests. The rest of this module runs a
real Prometheus for the integration tests: the scrape config the Prometheus Operator generates
for a ServiceMonitor, its targets as Kubernetes discovery would find them, and the HTTP API.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from .cluster import Cluster

REPO = Path(__file__).resolve().parents[2]


def target_labels(namespace: str, service: str, port: str) -> dict[str, str]:
    """The labels of one ServiceMonitor target (the operator pod behind the metrics Service)."""
    return {
        "namespace": namespace,
        "service": service,
        "pod": f"{service}-0",
        "container": "operator",
        "endpoint": port,
        "job": service,
        "instance": f"10.0.0.1:{port}",
    }


def scrape(
    text: str, target: dict[str, str], *, honor_labels: bool
) -> list[tuple[str, dict[str, str], float]]:
    """The samples as stored: (name, labels, value)."""
    stored = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = dict(sample.labels)
            for key, value in target.items():
                if key in labels and not honor_labels:
                    labels[f"exported_{key}"] = labels.pop(key)
                    labels[key] = value
                elif key not in labels:
                    labels[key] = value
            stored.append((sample.name, labels, sample.value))
    return stored


# ---------------------------------------------------------------------------------------------
# A real Prometheus (Debian's package, fetched by hack/addons/prometheus.sh), for the tests that
# scrape the operator through it rather than through `scrape` above.


def _sanitized(label: str) -> str:
    """A Kubernetes label name as Prometheus' discovery meta labels spell it."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def service_monitor_scrape_config(monitor: dict[str, Any], targets_file: Path) -> list[dict[str, Any]]:
    """The scrape configs the Prometheus Operator generates for a ServiceMonitor, one per endpoint.

    The same relabelling, in the same order, as the operator's generated configuration: keep the
    Services the selector matches and the endpoint port named, then set the `namespace`,
    `service`, `pod`, `container`, `job` and `endpoint` target labels; and `honor_labels` from
    `honorLabels`. Where the operator's config discovers targets with `kubernetes_sd_configs`
    (`role: endpoints` in the monitor's namespaces), this one reads them from ``targets_file``,
    which `write_endpoints_targets` fills from the API server with the same meta labels: Debian's
    Prometheus is built without Kubernetes discovery (see hack/addons/prometheus.sh).
    """
    name, namespace = monitor["metadata"]["name"], monitor["metadata"]["namespace"]
    spec = monitor["spec"]
    selector = [
        {
            "action": "keep",
            "source_labels": [
                f"__meta_kubernetes_service_label_{_sanitized(key)}",
                f"__meta_kubernetes_service_labelpresent_{_sanitized(key)}",
            ],
            "regex": f"({value});true",
        }
        for key, value in spec["selector"].get("matchLabels", {}).items()
    ]
    if spec["selector"].get("matchExpressions"):
        raise NotImplementedError("matchExpressions: the chart's ServiceMonitor uses matchLabels only")
    target = [
        "__meta_kubernetes_endpoint_address_target_kind",
        "__meta_kubernetes_endpoint_address_target_name",
    ]
    configs = []
    for index, endpoint in enumerate(spec["endpoints"]):
        port = endpoint["port"]
        relabel = [
            {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
            *selector,
            {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": port},
            {"source_labels": target, "separator": ";", "regex": "Node;(.*)", "target_label": "node"},
            {"source_labels": target, "separator": ";", "regex": "Pod;(.*)", "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {
                "action": "drop",
                "source_labels": ["__meta_kubernetes_pod_phase"],
                "regex": "(Failed|Succeeded)",
            },
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
            {"target_label": "endpoint", "replacement": port},
        ]
        config: dict[str, Any] = {
            "job_name": f"serviceMonitor/{namespace}/{name}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
            "metrics_path": endpoint.get("path", "/metrics"),
            "relabel_configs": relabel,
        }
        for key, field in (("interval", "scrape_interval"), ("scrapeTimeout", "scrape_timeout")):
            if endpoint.get(key):
                config[field] = endpoint[key]
        configs.append(config)
    return configs


def write_endpoints_targets(cluster: Cluster, monitor: dict[str, Any], targets_file: Path) -> None:
    """The targets Prometheus' Kubernetes discovery (`role: endpoints`) finds in the monitor's
    namespaces, read from the API server, with the meta labels it gives each (address, port,
    Endpoints, the Service's name and labels, the address's target), as a file_sd file."""
    namespaces = monitor["spec"].get("namespaceSelector", {}).get("matchNames") or [
        monitor["metadata"]["namespace"]
    ]
    groups = []
    for namespace in namespaces:
        services = {s["metadata"]["name"]: s for s in cluster.get("services", namespace=namespace)["items"]}
        for endpoints in cluster.get("endpoints", namespace=namespace)["items"]:
            name = endpoints["metadata"]["name"]
            labels = {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_endpoints_name": name}
            if name in services:
                labels["__meta_kubernetes_service_name"] = name
                for key, value in (services[name]["metadata"].get("labels") or {}).items():
                    labels[f"__meta_kubernetes_service_label_{_sanitized(key)}"] = value
                    labels[f"__meta_kubernetes_service_labelpresent_{_sanitized(key)}"] = "true"
            for subset in endpoints.get("subsets") or []:
                for address in subset.get("addresses") or []:
                    for port in subset.get("ports") or []:
                        target = {
                            **labels,
                            "__meta_kubernetes_endpoint_ready": "true",
                            "__meta_kubernetes_endpoint_port_name": port.get("name", ""),
                            "__meta_kubernetes_endpoint_port_protocol": port.get("protocol", "TCP"),
                        }
                        if ref := address.get("targetRef"):
                            target["__meta_kubernetes_endpoint_address_target_kind"] = ref["kind"]
                            target["__meta_kubernetes_endpoint_address_target_name"] = ref["name"]
                        groups.append({"targets": [f"{address['ip']}:{port['port']}"], "labels": target})
    partial = targets_file.with_suffix(".partial")
    partial.write_text(json.dumps(groups))
    partial.replace(targets_file)  # file_sd must never read half a file


def pod_monitor_scrape_config(monitor: dict[str, Any], targets_file: Path) -> list[dict[str, Any]]:
    """The scrape configs the Prometheus Operator generates for a PodMonitor (`role: pod`), one per
    endpoint, with its targets from ``targets_file`` (`write_pod_targets`) as above. Only the
    selector forms the chart's PodMonitor uses (`Exists` expressions, matchLabels) are translated."""
    name, namespace = monitor["metadata"]["name"], monitor["metadata"]["namespace"]
    spec = monitor["spec"]
    keep: list[dict[str, Any]] = []
    for key, value in spec["selector"].get("matchLabels", {}).items():
        sources = [
            f"__meta_kubernetes_pod_label_{_sanitized(key)}",
            f"__meta_kubernetes_pod_labelpresent_{_sanitized(key)}",
        ]
        keep.append({"action": "keep", "source_labels": sources, "regex": f"({value});true"})
    for expression in spec["selector"].get("matchExpressions", []):
        if expression["operator"] != "Exists":
            raise NotImplementedError(
                f"matchExpressions {expression['operator']}: the chart's PodMonitor uses Exists"
            )
        present = f"__meta_kubernetes_pod_labelpresent_{_sanitized(expression['key'])}"
        keep.append({"action": "keep", "source_labels": [present], "regex": "true"})
    configs = []
    for index, endpoint in enumerate(spec["podMetricsEndpoints"]):
        port = endpoint["port"]
        relabel = [
            {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
            *keep,
            {
                "action": "drop",
                "source_labels": ["__meta_kubernetes_pod_phase"],
                "regex": "(Failed|Succeeded)",
            },
            {"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": port},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"target_label": "job", "replacement": f"{namespace}/{name}"},
            {"target_label": "endpoint", "replacement": port},
            *(
                {"source_labels": r["sourceLabels"], "target_label": r["targetLabel"]}
                for r in endpoint.get("relabelings", [])
            ),
        ]
        config: dict[str, Any] = {
            "job_name": f"podMonitor/{namespace}/{name}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
            "metrics_path": endpoint.get("path", "/metrics"),
            "relabel_configs": relabel,
        }
        if endpoint.get("interval"):
            config["scrape_interval"] = config["scrape_timeout"] = endpoint["interval"]
        configs.append(config)
    return configs


def write_pod_targets(cluster: Cluster, namespaces: list[str], targets_file: Path) -> None:
    """The targets Kubernetes discovery (`role: pod`) finds: one per container port of every pod
    with an IP, with the pod's meta labels, as a file_sd file."""
    groups = []
    for namespace in namespaces:
        for pod in cluster.get("pods", namespace=namespace)["items"]:
            ip = pod["status"].get("podIP")
            if not ip:
                continue
            labels = {
                "__meta_kubernetes_namespace": namespace,
                "__meta_kubernetes_pod_name": pod["metadata"]["name"],
                "__meta_kubernetes_pod_ip": ip,
                "__meta_kubernetes_pod_phase": pod["status"].get("phase", ""),
            }
            for key, value in (pod["metadata"].get("labels") or {}).items():
                labels[f"__meta_kubernetes_pod_label_{_sanitized(key)}"] = value
                labels[f"__meta_kubernetes_pod_labelpresent_{_sanitized(key)}"] = "true"
            for container in pod["spec"]["containers"]:
                for port in container.get("ports") or []:
                    target = {
                        **labels,
                        "__meta_kubernetes_pod_container_name": container["name"],
                        "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                        "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
                    }
                    groups.append({"targets": [f"{ip}:{port['containerPort']}"], "labels": target})
    partial = targets_file.with_suffix(".partial")
    partial.write_text(json.dumps(groups))
    partial.replace(targets_file)


def prometheus_binary() -> Path:
    """Prometheus from Debian's package, fetched and unpacked (cached) by hack/addons/prometheus.sh."""
    result = subprocess.run(
        ["bash", str(REPO / "hack" / "addons" / "prometheus.sh")], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        pytest.fail(f"hack/addons/prometheus.sh failed:\n{result.stderr[-3000:]}", pytrace=False)
    return Path(result.stdout.strip().splitlines()[-1])


class Prometheus:
    """One Prometheus server on a loopback port with its own storage, for one test."""

    def __init__(self, scrape_configs: list[dict[str, Any]], workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.log_file = workdir / "prometheus.log"
        config = workdir / "prometheus.yml"
        config.write_text(
            yaml.safe_dump({"global": {"scrape_interval": "5s"}, "scrape_configs": scrape_configs})
        )
        self._args = [
            str(prometheus_binary()),
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=debug",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Prometheus:
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                self._args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"prometheus was not ready in 60 s:\n{self.tail()}")

    def __exit__(self, *_: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def api(self, path: str, **params: str) -> Any:
        """The `data` of one HTTP API answer (/api/v1/...)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            answer = json.load(r)
        assert answer["status"] == "success", answer
        return answer["data"]

    def series(self, query: str) -> list[dict[str, str]]:
        """The label sets of an instant query's result."""
        return [item["metric"] for item in self.api("query", query=query)["result"]]

    def wait_for_series(self, query: str, timeout: float = 60) -> list[dict[str, str]]:
        """The query's series once there are any, failing with the targets' state if none come."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.series(query)
            if found:
                return found
            time.sleep(0.5)
        targets = self.api("targets")["activeTargets"]
        raise AssertionError(
            f"no series for {query} in {timeout:.0f} s; targets: "
            + json.dumps([{k: t.get(k) for k in ("labels", "health", "lastError")} for t in targets])
            + f"\nprometheus log:\n{self.tail()}"
        )

    def tail(self, lines: int = 30) -> str:
        if not self.log_file.exists():
            return ""
        return "".join(self.log_file.read_text(errors="replace").splitlines(keepends=True)[-lines:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def host_address() -> str:
    """This host's address on its default route: what an Endpoints object may name (the API
    server refuses loopback addresses there) and what a process bound to 0.0.0.0 answers on."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 1))  # UDP: picks the route, sends nothing
        return str(s.getsockname()[0])
