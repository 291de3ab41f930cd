"""`grpo-operator run` started wrongly: one line naming what to change, exit 2, no traceback."""

from __future__ import annotations

import pytest
from grpo_operator.cli import main


def test_a_mistyped_setting_is_one_line(tmp_path, capsys):
    settings = tmp_path / "settings.yaml"
    settings.write_text("cpuPerDevise: 3\n")
    assert main(["run", "--config", str(settings)]) == 2
    err = capsys.readouterr().err
    assert err == f"grpo-operator: settings in {settings}: cpuPerDevise: unknown setting\n"


def test_a_wrong_type_in_a_profile_names_its_path(tmp_path, capsys):
    settings = tmp_path / "settings.yaml"
    settings.write_text("profiles: {nvidia: {image: 3}}\n")
    assert main(["run", "--config", str(settings)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grpo-operator: settings in ")
    assert "profiles.nvidia.image:" in err
    assert err.count("\n") == 1


def test_no_kubeconfig_is_one_line(tmp_path, capsys, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("GRPO_OPERATOR_CONFIG", raising=False)
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grpo-operator: no Kubernetes credentials: ")
    assert str(tmp_path / "missing") in err
    assert err.count("\n") == 1


def test_a_setting_out_of_bounds_says_the_bound_and_the_value(tmp_path, capsys):
    settings = tmp_path / "settings.yaml"
    settings.write_text("leaseDurationSeconds: 0\n")
    assert main(["run", "--config", str(settings)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"grpo-operator: settings in {settings}: leaseDurationSeconds: must be greater than 0, found 0\n"
    )
