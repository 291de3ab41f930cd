"""The metrics Service reaches the operator's /metrics port; the ServiceMonitor is opt-in."""

from __future__ import annotations

from .helm import of_kind, only, render


def test_the_service_selects_the_operator_pod_and_its_metrics_port() -> None:
    docs = render({"metrics": {"service": {"port": 9090}}, "settings": {"metricsPort": 8085}})
    service = only(docs, "Service", "-metrics")
    pod = only(docs, "Deployment")["spec"]["template"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == 9090
    container_ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert container_ports[port["targetPort"]] == 8085


def test_the_service_can_be_turned_off() -> None:
    assert not of_kind(render({"metrics": {"service": {"enabled": False}}}), "Service")


def test_no_service_monitor_unless_asked() -> None:
    assert not of_kind(render(), "ServiceMonitor")


def test_the_service_monitor_scrapes_the_metrics_service() -> None:
    docs = render({"serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "prom"}}})
    monitor = only(docs, "ServiceMonitor")
    service = only(docs, "Service", "-metrics")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["interval"] == "15s"
