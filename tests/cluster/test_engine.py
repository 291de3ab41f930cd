"""hack/engine/runc-without-sys-resource: the engine's default runtime on machines that withhold
CAP_SYS_RESOURCE. It must take that capability out of what runc is asked to grant (containers and
execs alike) and leave everything else, the other capabilities and the arguments, as they were."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "hack" / "engine" / "runc-without-sys-resource"
ALL = ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]


def _runc(tmp_path: Path, *args: str) -> list[str]:
    """Run the wrapper with a stand-in runc that records the arguments it was given."""
    recorded = tmp_path / "args"
    fake = tmp_path / "runc"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {recorded}\n')
    fake.chmod(0o755)
    env = {**os.environ, "GRPO_RUNC": str(fake)}
    subprocess.run([str(WRAPPER), *args], check=True, env=env, capture_output=True, text=True)
    return recorded.read_text().splitlines()


def test_a_privileged_container_gets_every_capability_but_sys_resource(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    sets = {kind: list(ALL) for kind in ("bounding", "effective", "permitted", "inheritable", "ambient")}
    (bundle / "config.json").write_text(
        json.dumps({"ociVersion": "1.0.2", "process": {"capabilities": sets}})
    )
    args = ["--root", "/run/runc", "create", "--bundle", str(bundle), "--pid-file", "/p", "c1"]
    assert _runc(tmp_path, *args) == args
    config = json.loads((bundle / "config.json").read_text())
    assert config["ociVersion"] == "1.0.2"
    for kind, caps in config["process"]["capabilities"].items():
        assert caps == ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"], kind


def test_a_privileged_exec_loses_it_too(tmp_path: Path) -> None:
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["kubeadm", "init"], "capabilities": {"bounding": ALL}}))
    _runc(tmp_path, "--root", "/run/runc", "exec", "--process", str(process), "--detach", "c1")
    edited = json.loads(process.read_text())
    assert edited["capabilities"]["bounding"] == ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"]
    assert edited["args"] == ["kubeadm", "init"]


def test_other_commands_pass_through_untouched(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    text = json.dumps({"process": {"capabilities": {"bounding": ALL}}})
    (bundle / "config.json").write_text(text)
    args = ["--root", "/r", "delete", "--force", "c1"]
    assert _runc(tmp_path, *args) == args
    assert (bundle / "config.json").read_text() == text
