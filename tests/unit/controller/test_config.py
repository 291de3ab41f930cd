"""Operator settings: defaults, the file the chart renders, environment overrides."""

from __future__ import annotations

from pathlib import Path

from grpo_operator.config import load_settings


def test_defaults_have_both_profiles() -> None:
    settings = load_settings(environ={})
    assert settings.profile("nvidia").device_resource == "nvidia.com/gpu"
    assert settings.profile("ascend").env["VERL_PLATFORM"] == "huawei"
    assert settings.profile("tpu") is None


def test_file_overrides_merge_per_key(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("profiles:\n  nvidia:\n    image: registry.local/trainer:1\nresyncSeconds: 30\n")
    settings = load_settings(path, environ={})
    assert settings.profile("nvidia").image == "registry.local/trainer:1"
    assert settings.profile("nvidia").device_resource == "nvidia.com/gpu", "the rest of the profile stays"
    assert settings.resync_seconds == 30


def test_environment_wins_over_a_file_that_sets_the_same_key(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("metricsPort: 8080\nnamespaces: [a]\n")
    settings = load_settings(path, environ={"GRPO_METRICS_PORT": "9999", "GRPO_NAMESPACES": "team-a, team-b"})
    assert settings.metrics_port == 9999
    assert settings.namespaces == ["team-a", "team-b"]


def test_the_bound_on_passes_comes_from_the_chart_or_the_environment(tmp_path: Path) -> None:
    import pytest
    from pydantic import ValidationError

    assert load_settings(environ={}).max_concurrent_reconciles == 64
    path = tmp_path / "settings.yaml"
    path.write_text("maxConcurrentReconciles: 8\n")
    assert load_settings(path, environ={}).max_concurrent_reconciles == 8
    assert (
        load_settings(path, environ={"GRPO_MAX_CONCURRENT_RECONCILES": "200"}).max_concurrent_reconciles
        == 200
    )
    path.write_text("maxConcurrentReconciles: 0\n")
    with pytest.raises(ValidationError, match=r"max_concurrent_reconciles|maxConcurrentReconciles"):
        load_settings(path, environ={})
