"""The metrics Service reaches the operator's /metrics port; the ServiceMonitor is opt-in."""

from __future__ import annotations

from support.helm import of_kind, only, render


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


def test_no_dashboard_unless_asked() -> None:
    assert not [d for d in of_kind(render(), "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]


def test_the_dashboard_is_a_configmap_for_grafanas_sidecar_and_plots_the_operators_metrics() -> None:
    import json
    import re

    from grpo_operator.metrics import Metrics
    from prometheus_client import generate_latest

    docs = render({"grafanaDashboard": {"enabled": True, "namespace": "monitoring"}})
    config_map = only(docs, "ConfigMap", "-dashboard")
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["grpo-jobs.json"])
    assert dashboard["uid"] == "grpo-jobs"
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    metrics = Metrics()
    metrics.observe(
        {
            "metadata": {"name": "j", "namespace": "n"},
            "status": {
                "phase": "Running",
                "attempt": 1,
                "progress": {"step": 1, "totalSteps": 2},
                "metrics": {
                    k: 1.0
                    for k in (
                        "reward",
                        "valScore",
                        "responseLength",
                        "entropy",
                        "stepSeconds",
                        "tokensPerSecondPerDevice",
                    )
                },
                "conditions": [{"type": "Healthy", "status": "True"}],
            },
        }
    )
    metrics.handler_seconds.labels("job", "ok").observe(0.1)
    served = set(re.findall(r"^([a-z_]+)(?:\{| )", generate_latest(metrics.registry).decode(), re.MULTILINE))
    for expr in exprs:
        for name in re.findall(r"\b((?:grpo|process)_[a-z_]+)\b", expr):
            assert name in served, f"the dashboard plots {name}, which the operator does not serve"
    titles = {p["title"] for p in dashboard["panels"]}
    assert {"Reward", "Validation score", "Tokens per second per device", "Unhealthy jobs"} <= titles
