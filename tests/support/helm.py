"""Render the chart with the helm binary the local cluster build provides (hack/lib.sh BIN_DIR).

No cluster is involved: `helm lint` and `helm template` only. A missing binary fails the test
with the command that builds it; it never skips.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.hack_env import lib_variable

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "grpo-operator"
RELEASE = "grpo"
NAMESPACE = "grpo-system"


def helm_binary() -> Path:
    helm = Path(lib_variable("BIN_DIR")) / "helm"
    if not helm.is_file():
        pytest.fail(f"no helm binary at {helm}: build it with `make cluster-up` (hack/build-binaries.sh)")
    return helm


def kube_version() -> str:
    """The Kubernetes version the local cluster runs, so kubeVersion checks see a real one."""
    return lib_variable("KUBERNETES_VERSION")


def helm(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm_binary()), *args], input=stdin, capture_output=True, text=True, check=False
    )


@functools.cache
def _template(
    values_json: str, sets: tuple[str, ...], namespace: str = NAMESPACE
) -> subprocess.CompletedProcess[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, "--kube-version", kube_version()]
    if values_json:
        args += ["--values", "-"]  # JSON is YAML
    for item in sets:
        args += ["--set", item]
    return helm(*args, stdin=values_json or None)


def template_result(values: dict[str, Any] | None = None, *sets: str) -> subprocess.CompletedProcess[str]:
    """`helm template` with values (as a values file) and `--set` items; cached per arguments."""
    return _template(json.dumps(values, sort_keys=True) if values is not None else "", tuple(sets))


def render_text(values: dict[str, Any] | None = None, *sets: str) -> str:
    result = template_result(values, *sets)
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return result.stdout


def render(values: dict[str, Any] | None = None, *sets: str) -> list[dict[str, Any]]:
    """The rendered manifests as objects, in helm's order."""
    return [doc for doc in yaml.safe_load_all(render_text(values, *sets)) if doc]


def render_in(namespace: str, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The manifests of a release in ``namespace`` (`helm template --namespace`), for tests that
    create some of them in a test namespace of the cluster."""
    result = _template(json.dumps(values, sort_keys=True) if values is not None else "", (), namespace)
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def rejection(values: dict[str, Any] | None = None, *sets: str) -> str:
    """helm's error for values that must not render; fails the test if they do."""
    result = template_result(values, *sets)
    assert result.returncode != 0, f"helm template accepted values it must reject: {values} {sets}"
    return result.stderr


def only(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} named *{name_suffix}, found {len(found)}"
    return found[0]


def of_kind(docs: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in kinds]


NAMESPACED = {"rbac": {"clusterWide": False, "namespaces": ["team-a", "team-b"]}}


def notes_chart(into: Path) -> Path:
    """A copy of the chart whose NOTES.txt renders through `helm template` (which skips NOTES).

    `helm install --dry-run` would render NOTES but asks a cluster for its version first; here the
    copy renders the same text with `tpl` into a ConfigMap.
    """
    copy = into / CHART.name
    shutil.copytree(CHART, copy)
    (copy / "templates" / "NOTES.txt").rename(copy / "files" / "notes.txt")
    (copy / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n"
        '  notes: {{ tpl (.Files.Get "files/notes.txt") . | toJson }}\n'
    )
    return copy


def render_notes(chart: Path, values: dict[str, Any] | None = None) -> str:
    args = ["template", RELEASE, str(chart), "--namespace", NAMESPACE, "--kube-version", kube_version()]
    args += ["--show-only", "templates/notes.yaml"]
    if values is not None:
        args += ["--values", "-"]
    result = helm(*args, stdin=json.dumps(values) if values is not None else None)
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return yaml.safe_load(result.stdout)["data"]["notes"]
