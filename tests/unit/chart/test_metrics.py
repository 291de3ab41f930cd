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
                "attempt": 2,
                "failedAttempts": [{"attempt": 1, "reason": "OutOfMemory", "retryable": True}],
                "rayClusterName": "j-2-rc",
                "dashboardURL": "j-2-rc-head-svc.n.svc.cluster.local:8265",
                "progress": {"step": 1, "totalSteps": 2, "etaSeconds": 60, "attempt": 2},
                "metrics": {
                    k: 1.0
                    for k in (
                        "reward",
                        "valScore",
                        "entropy",
                        "kl",
                        "stepSeconds",
                        "tokensPerSecondPerDevice",
                    )
                },
                "history": {"steps": "1", "responseLength": "512"},
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
    assert {"KL divergence", "Failed attempts by reason, per hour", "Time left", "Ray dashboards"} <= titles
    # Each job's row links to its Ray dashboard, at the address the operator serves as a label.
    [table] = [p for p in dashboard["panels"] if p["title"] == "Ray dashboards"]
    links = [
        link["url"]
        for override in table["fieldConfig"]["overrides"]
        for prop in override["properties"]
        if prop["id"] == "links"
        for link in prop["value"]
    ]
    assert "http://${__data.fields.dashboard_url}" in links
    assert (
        'dashboard_url="j-2-rc-head-svc.n.svc.cluster.local:8265"'
        in generate_latest(metrics.registry).decode()
    )
    # Panels do not overlap.
    cells = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine


def test_prometheus_keeps_each_jobs_namespace_as_the_dashboard_selects_it() -> None:
    """Scrape the operator's real /metrics text the way Prometheus labels a ServiceMonitor target:
    the job's `namespace` must survive (honorLabels), not become `exported_namespace`."""
    from grpo_operator.metrics import Metrics
    from prometheus_client import generate_latest
    from support.prometheus import scrape, target_labels

    docs = render({"serviceMonitor": {"enabled": True}})
    (endpoint,) = only(docs, "ServiceMonitor")["spec"]["endpoints"]
    service = only(docs, "Service", "-metrics")
    metrics = Metrics()
    metrics.observe(
        {"metadata": {"name": "geo3k", "namespace": "team-a"}, "status": {"progress": {"step": 7}}}
    )
    text = generate_latest(metrics.registry).decode()
    target = target_labels(service["metadata"]["namespace"], service["metadata"]["name"], endpoint["port"])

    stored = scrape(text, target, honor_labels=endpoint.get("honorLabels", False))
    [(_, labels, value)] = [s for s in stored if s[0] == "grpo_job_step"]
    assert (labels["namespace"], labels["name"], value) == ("team-a", "geo3k", 7.0)
    assert "exported_namespace" not in labels
    # The operator's own series have no namespace of their own: they take the target's.
    [(_, process, _)] = [s for s in stored if s[0] == "process_resident_memory_bytes"]
    assert process["namespace"] == service["metadata"]["namespace"]
    # What a ServiceMonitor without honorLabels would have stored: the bug this guards against.
    [(_, renamed, _)] = [s for s in scrape(text, target, honor_labels=False) if s[0] == "grpo_job_step"]
    assert (renamed["namespace"], renamed["exported_namespace"]) == (
        service["metadata"]["namespace"],
        "team-a",
    )


def test_ray_pods_are_scraped_only_when_asked_and_the_job_policy_lets_the_scraper_in() -> None:
    import yaml
    from grpo_operator.api.v1alpha1 import GRPOJob
    from grpo_operator.children.networkpolicy import build_network_policy
    from grpo_operator.config import Settings
    from support.jobs import example

    assert not of_kind(render(), "PodMonitor")
    prometheus = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
    }
    docs = render(
        {
            "rayPodMonitor": {"enabled": True, "labels": {"release": "prom"}},
            "settings": {"metricsScrapers": [prometheus]},
        }
    )
    monitor = only(docs, "PodMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    assert monitor["spec"]["selector"]["matchExpressions"] == [{"key": "grpo.dev/job", "operator": "Exists"}]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics"
    namespaced = render(
        {"rayPodMonitor": {"enabled": True}, "rbac": {"clusterWide": False, "namespaces": ["team-a"]}}
    )
    assert only(namespaced, "PodMonitor")["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}

    # The settings the chart renders open Ray's metrics port of each job's pods to that peer only.
    text = only(docs, "ConfigMap", "-settings")["data"]["settings.yaml"]
    settings = Settings.model_validate(yaml.safe_load(text))
    assert settings.metrics_scrapers == [prometheus]
    job = GRPOJob.model_validate(
        {**example("lora-single-gpu"), "metadata": {"name": "j", "namespace": "team-a"}}
    )
    rules = build_network_policy(job, settings)["spec"]["ingress"]
    [scrape] = [rule for rule in rules if rule.get("ports") == [{"protocol": "TCP", "port": 8080}]]
    assert scrape["from"] == [prometheus]
