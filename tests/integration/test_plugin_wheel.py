"""`grpo-kubectl` as users install it: built as a wheel, installed from it, run against the API server.

Both wheels are built from this checkout (`grpo-operator` from the root, `grpo-kubectl` from
kubectl/), installed with pip into a folder of their own, and the installed `kubectl-grpo` runs
with the interpreter's site machinery off and the heavy libraries made unimportable: what it
imports is what the wheels hold plus their declared dependencies. The named extras' commands say
which extra to install instead of failing with a traceback.
"""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml
from support.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
# What the plugin must not need: the trainer's libraries, the plot's, the offline rules', the operator's.
HEAVY = [
    "matplotlib",
    "pyarrow",
    "PIL",
    "sympy",
    "hydra",
    "huggingface_hub",
    "celpy",
    "torch",
    "kopf",
    "aiohttp",
]
BLOCKER = f"""
import importlib.abc, runpy, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=source,
        check=True,
        timeout=300,
    )
    return next(out.glob(f"{source.name.replace('-', '_')}*.whl"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the sources (building writes build/ and egg-info beside them), both wheels, one install."""
    work = tmp_path_factory.mktemp("wheels")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    root = work / "grpo-operator"
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    for folder in ("operator", "trainer"):
        shutil.copytree(REPO / folder, root / folder, ignore=ignore)
    plugin = shutil.copytree(REPO / "kubectl", work / "grpo-kubectl", ignore=ignore)
    wheels = work / "dist"
    operator_wheel = _wheel(root, wheels)
    plugin_wheel = _wheel(plugin, wheels)
    target = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            operator_wheel,
            plugin_wheel,
        ],
        check=True,
        timeout=300,
    )
    return {"operator": operator_wheel, "plugin": plugin_wheel, "site": target}


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    return metadata.get_all("Requires-Dist") or []


def test_the_plugin_wheel_holds_the_plugin_and_needs_only_the_api(installed):
    with zipfile.ZipFile(installed["plugin"]) as archive:
        packages = {n.split("/")[0] for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"grpo_kubectl"}
    required = _requires(installed["plugin"])
    assert [r for r in required if "extra ==" not in r] == ["grpo-operator==0.1.0"]
    assert any(r.startswith("matplotlib") and 'extra == "plot"' in r for r in required)
    assert any(r.startswith("cel-python") and 'extra == "validate"' in r for r in required)
    base = sorted(
        r.split(">")[0].split("<")[0] for r in _requires(installed["operator"]) if "extra ==" not in r
    )
    assert base == ["lightkube", "pydantic", "pyyaml"]
    with zipfile.ZipFile(installed["operator"]) as archive:
        assert not [n for n in archive.namelist() if n.startswith("grpo_kubectl/")]


def _run(cluster: Cluster, installed: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    script = installed["site"] / "bin" / "kubectl-grpo"
    site_packages = sysconfig.get_paths()["purelib"]  # the declared dependencies (pydantic, lightkube...)
    env = {**cluster.env, "PYTHONPATH": os.pathsep.join([str(installed["site"]), site_packages])}
    return subprocess.run(
        [sys.executable, "-S", "-c", BLOCKER, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_installed_plugin_lists_jobs_without_the_heavy_libraries(
    cluster: Cluster, namespace: str, installed, tmp_path: Path
):
    cluster.install_crds()
    manifest = yaml.safe_load((REPO / "examples" / "lora-single-gpu.yaml").read_text())
    cluster.apply({**manifest, "metadata": {"name": "wheel", "namespace": namespace}})

    version = _run(cluster, installed, "--version")
    assert version.stdout == "kubectl-grpo 0.1.0 (GRPOJob API grpo.dev/v1alpha1)\n", version.stderr
    listed = _run(cluster, installed, "-n", namespace, "list", "-o", "yaml")
    assert listed.returncode == 0, listed.stderr
    assert [i["metadata"]["name"] for i in yaml.safe_load(listed.stdout)["items"]] == ["wheel"]
    status = _run(cluster, installed, "status", "wheel", "-n", namespace)
    assert status.stdout.startswith(f"{namespace}/wheel: not reconciled yet"), status.stderr

    # The named extras: one line saying which to install.
    steps = tmp_path / "attempt-1.jsonl"
    steps.write_text('{"step": 1, "data": {"critic/score/mean": 0.5, "training/global_step": 1}}\n')
    png = tmp_path / "curves.png"
    plot = _run(cluster, installed, "plot", "--metrics-file", str(steps), "--png", str(png), "--no-terminal")
    assert (
        plot.stderr
        == "error: `kubectl grpo plot` needs grpo-kubectl[plot] (pip install 'grpo-kubectl[plot]')\n"
    )
    example = str(REPO / "examples" / "lora-single-gpu.yaml")
    offline = _run(cluster, installed, "validate", "--offline", "-f", example)
    assert offline.stderr == (
        "error: `kubectl grpo validate` needs grpo-kubectl[validate] (pip install 'grpo-kubectl[validate]')\n"
    )
    assert (plot.returncode, offline.returncode) == (1, 1)
    assert not png.exists()
