"""The chart as a whole: it lints, ships the generated CRDs, and names the versions we test."""

from __future__ import annotations

import json
import tomllib

import pytest
import yaml
from grpo_operator.api.crdgen import CRD_FILENAME
from support.helm import CHART, NAMESPACED, REPO, helm, kube_version, only, render


def _lint(values: dict | None) -> None:
    args = ["lint", "--strict", str(CHART), "--kube-version", kube_version()]
    if values is not None:
        args += ["--values", "-"]
    result = helm(*args, stdin=json.dumps(values) if values is not None else None)
    assert result.returncode == 0, f"helm lint failed:\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("values", [None, NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_lint_passes(values: dict | None) -> None:
    _lint(values)


def test_crds_are_the_generated_ones() -> None:
    """The chart installs exactly what `python -m grpo_operator.api.crdgen` wrote into crds/."""
    shipped = sorted(p.name for p in (CHART / "crds").iterdir())
    assert shipped == sorted(p.name for p in (REPO / "crds").glob("*.yaml"))
    assert CRD_FILENAME in shipped
    for name in shipped:
        assert (CHART / "crds" / name).read_text() == (REPO / "crds" / name).read_text(), (
            f"charts/grpo-operator/crds/{name} differs from crds/{name}: "
            "run python -m grpo_operator.api.crdgen --out crds charts/grpo-operator/crds"
        )


def test_app_version_is_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]


def test_kuberay_prerequisite_is_the_version_we_test() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    pinned = dict(
        line.split("=", 1)
        for line in (REPO / "hack" / "versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert chart["annotations"]["grpo.dev/kuberay-version"] == pinned["KUBERAY_VERSION"]
    assert "dependencies" not in chart, "KubeRay is a prerequisite, not a dependency chart"


def test_operator_image_defaults_to_the_app_version_and_a_digest_wins() -> None:
    def image(values: dict | None) -> str:
        deployment = only(render(values), "Deployment")
        return deployment["spec"]["template"]["spec"]["containers"][0]["image"]

    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert image(None) == f"ghcr.io/grpo-operator/operator:{app_version}"
    assert image({"image": {"tag": "dev"}}) == "ghcr.io/grpo-operator/operator:dev"
    digest = "sha256:" + "a" * 64
    assert image({"image": {"tag": "dev", "digest": digest}}) == f"ghcr.io/grpo-operator/operator@{digest}"


def test_every_object_but_cluster_scoped_ones_lands_in_its_namespace() -> None:
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for values in (None, NAMESPACED):
        for doc in render(values):
            namespace = doc["metadata"].get("namespace")
            if doc["kind"] in cluster_scoped:
                assert namespace is None
            else:
                assert namespace, f"{doc['kind']} {doc['metadata']['name']} has no namespace"


def test_the_readme_asks_for_the_kubernetes_version_the_chart_requires() -> None:
    import re

    import yaml

    floor = re.match(
        r">=(\d+\.\d+)", yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    ).group(1)
    readme = (CHART / "README.md").read_text()
    assert re.findall(r"Kubernetes (\d+\.\d+) or newer", readme) == [floor]


def test_the_packaged_chart_is_the_chart(tmp_path) -> None:
    """`helm package` (what a chart repository serves): everything the templates read is in it
    (.helmignore drops none of it), and the package renders what the folder renders."""
    import tarfile

    result = helm("package", str(CHART), "--destination", str(tmp_path))
    assert result.returncode == 0, result.stderr
    [package] = tmp_path.glob("grpo-operator-*.tgz")
    with tarfile.open(package) as archive:
        names = set(archive.getnames())
    for needed in (
        "grpo-operator/Chart.yaml",
        "grpo-operator/values.schema.json",
        "grpo-operator/crds/grpo.dev_grpojobs.yaml",
        "grpo-operator/dashboards/grpo-jobs.json",
        "grpo-operator/files/pre_delete.py",
        "grpo-operator/README.md",
    ):
        assert needed in names
    values = ["--set", "grafanaDashboard.enabled=true", "--set", "serviceMonitor.enabled=true"]
    args = ["template", "grpo", "--namespace", "grpo-system", "--kube-version", kube_version(), *values]
    from_folder = helm(*args[:2], str(CHART), *args[2:])
    from_package = helm(*args[:2], str(package), *args[2:])
    assert from_package.returncode == 0, from_package.stderr
    assert from_package.stdout == from_folder.stdout
