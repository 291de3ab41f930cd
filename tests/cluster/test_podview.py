"""The parts of the real Ray backend's pod view that need no cluster (hack/rayjobapi/podview.py).

What the kubelet does that the view copies: ``$(VAR)`` expansion, downward-API fields, volume files
with ``items`` and modes, nested mounts in order. The whole view is exercised by test_real_ray.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lightkube.models.core_v1 import Container, KeyToPath, VolumeMount

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hack"))
from rayjobapi import podview


def test_expand_follows_the_kubelet() -> None:
    env = {"A": "1", "EMPTY": ""}
    assert podview.expand("$(A)-$(EMPTY)-$(B)-$$(A)-$$-$", env) == "1--$(B)-$(A)-$-$"


def test_field_value_reads_the_pod_and_refuses_what_it_cannot_mirror() -> None:
    pod = {"metadata": {"name": "rc-head-x", "namespace": "team-a", "labels": {"ray.io/node-type": "head"}}}
    assert podview.field_value("metadata.name", pod) == "rc-head-x"
    assert podview.field_value("metadata.labels['ray.io/node-type']", pod) == "head"
    assert podview.field_value("spec.serviceAccountName", pod) == "default"
    with pytest.raises(podview.PodViewError, match=r"status\.podIPs"):
        podview.field_value("status.podIPs", pod)


def test_cluster_of_reads_the_head_service_name() -> None:
    assert podview.cluster_of("job-1-abcde-head-svc.team-a.svc.cluster.local:8265") == "job-1-abcde"
    assert podview.cluster_of("dashboard.team-a.svc.cluster.local:8265") is None


def test_write_keys_writes_items_at_their_paths_with_their_modes(tmp_path: Path) -> None:
    data = {"job.json": b"{}", "other": b"x"}
    podview.write_keys(tmp_path / "all", data, None, None)
    podview.write_keys(
        tmp_path / "some", data, [KeyToPath(key="job.json", path="spec/job.json", mode=0o600)], 0o644
    )

    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["job.json", "other"]
    assert (tmp_path / "all/other").stat().st_mode & 0o777 == 0o644
    assert [p.relative_to(tmp_path / "some").as_posix() for p in (tmp_path / "some").rglob("*.json")] == [
        "spec/job.json"
    ]
    assert (tmp_path / "some/spec/job.json").stat().st_mode & 0o777 == 0o600
    with pytest.raises(KeyError):
        podview.write_keys(tmp_path / "missing", data, [KeyToPath(key="absent", path="a")], None)


def test_mounts_are_made_outer_first() -> None:
    container = Container(
        name="ray-head",
        volumeMounts=[
            VolumeMount(name="inner", mountPath="/data/cache/hf"),
            VolumeMount(name="outer", mountPath="/data/"),
            VolumeMount(name="shm", mountPath="/dev/shm"),
        ],
    )
    assert [m.name for m in podview.mount_order(container)] == ["outer", "shm", "inner"]
