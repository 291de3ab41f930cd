"""The chart's values and the operator's settings model describe the same thing.

The rendered settings file must load with the operator's own loader, the defaults in values.yaml
must be the operator's defaults, and every key the values and the schema know must be a field of
the settings model (and the other way round), so neither can drift from the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_operator.config import AcceleratorProfile, Settings, load_settings
from support.helm import CHART, NAMESPACED, only, render

VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
# Set from other values or the release: namespaces from rbac, profiles from the top-level profiles
# group, the Lease's name and namespace from the release; a replica's identity is its pod's name.
DERIVED = {"namespaces", "profiles", "leaseName", "leaseNamespace", "leaderIdentity"}


def _aliases(model: type) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def _settings(values: dict | None, tmp_path: Path) -> Settings:
    text = only(render(values), "ConfigMap", "-settings")["data"]["settings.yaml"]
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return load_settings(path, environ={})


def test_default_values_are_the_operators_defaults(tmp_path: Path) -> None:
    rendered = _settings(None, tmp_path)
    # What the chart derives from the release: the Lease, and the operator's own pods as a Ray client.
    assert (rendered.lease_name, rendered.lease_namespace) == ("grpo-grpo-operator", "grpo-system")
    *clients, operator = rendered.ray_clients
    assert operator == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "grpo-system"}},
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "grpo-operator",
                "app.kubernetes.io/instance": "grpo",
                "app.kubernetes.io/component": "operator",
            }
        },
    }
    derived = {"lease_name": "grpo-operator", "lease_namespace": None, "ray_clients": clients}
    assert rendered.model_copy(update=derived) == Settings()


def test_the_operators_pods_are_the_ones_the_deployment_runs(tmp_path: Path) -> None:
    operator = _settings(None, tmp_path).ray_clients[-1]["podSelector"]["matchLabels"]
    pod = only(render(), "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert operator.items() <= pod.items()


def test_every_settings_key_is_a_settings_field() -> None:
    fields = _aliases(Settings) - DERIVED
    assert set(VALUES["settings"]) == fields
    assert set(SCHEMA["properties"]["settings"]["properties"]) == fields


def test_every_profile_key_is_a_profile_field() -> None:
    fields = _aliases(AcceleratorProfile)
    assert set(SCHEMA["definitions"]["profile"]["properties"]) == fields
    for name, profile in VALUES["profiles"].items():
        assert set(profile) <= fields, f"profiles.{name}: unknown keys {set(profile) - fields}"
    assert set(VALUES["profiles"]) == set(Settings().profiles)


def test_namespaced_mode_watches_the_listed_namespaces(tmp_path: Path) -> None:
    assert _settings(None, tmp_path).namespaces == []
    assert _settings(NAMESPACED, tmp_path).namespaces == ["team-a", "team-b"]


def test_one_key_overrides_one_key_of_a_profile(tmp_path: Path) -> None:
    image = "registry.local/trainer-ascend:0.1.0-a2-seed"
    settings = _settings({"profiles": {"ascend": {"image": image}}}, tmp_path)
    assert settings.profiles["ascend"].image == image
    defaults = Settings().profiles
    assert (
        settings.profiles["ascend"].model_copy(update={"image": defaults["ascend"].image})
        == defaults["ascend"]
    )
    assert settings.profiles["nvidia"] == defaults["nvidia"]


def test_a_new_profile_can_be_added(tmp_path: Path) -> None:
    amd: dict[str, Any] = {
        "deviceResource": "amd.com/gpu",
        "rayResource": "GPU",
        "deviceType": "cuda",
        "image": "registry.local/trainer-rocm:0.1.0",
    }
    settings = _settings({"profiles": {"amd": amd}}, tmp_path)
    assert settings.profiles["amd"].device_resource == "amd.com/gpu"
    assert set(settings.profiles) == {"nvidia", "ascend", "cpu", "amd"}


@pytest.mark.parametrize(
    ("key", "value", "attribute"),
    [
        ("logFormat", "plain", "log_format"),
        ("resyncSeconds", 15, "resync_seconds"),
        ("defaultStorageClass", "fast-rwx", "default_storage_class"),
        ("rayVersion", "2.49.1", "ray_version"),
    ],
)
def test_settings_values_reach_the_operator(tmp_path: Path, key: str, value: Any, attribute: str) -> None:
    assert getattr(_settings({"settings": {key: value}}, tmp_path), attribute) == value


def test_logs_are_json_by_default(tmp_path: Path) -> None:
    assert _settings(None, tmp_path).log_format == "json"
