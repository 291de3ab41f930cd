"""How Prometheus labels what it scrapes from a ServiceMonitor's target, for the chart's tests.

The Prometheus Operator turns a ServiceMonitor endpoint into a scrape config whose targets carry
`namespace`, `service`, `pod`, `container`, `endpoint`, `job` and `instance`. Prometheus then
merges those with each scraped sample's labels: with `honor_labels: false` (the default) a
scraped label that collides with a target label is kept as `exported_<name>` and the target's
value wins; with `honor_labels: true` the scraped value wins (Prometheus' scrape_config docs).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


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
