"""A tiny volume provisioner for the KWOK test cluster.

KWOK nodes mount nothing, but the scheduler still refuses pods whose PersistentVolumeClaims are
unbound. This process plays the part of a CSI external provisioner for the default StorageClass
`standard` (provisioner `grpo.dev/fake-local`): it binds every pending claim of that class to a
new PersistentVolume of the requested size and access modes (ReadWriteMany included, which the
in-tree host-path provisioner cannot offer), and deletes released volumes it made, with their
host folders. That keeps the real PV controller, binding and `Retain`/`Delete` semantics in play.

A second class, `real-node`, makes local volumes of the real node (hack/node-up.sh): their
folders exist on that host only, so their PersistentVolumes require that node (nodeAffinity), as
local-path-provisioner's do, and the scheduler places every pod of such a claim there. Jobs on
the real node use it (`make demo`, the real-pod tests); `standard` volumes stay reachable from
every node, KWOK's included.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import time
from pathlib import Path

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.core_v1 import (
    HostPathVolumeSource,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectReference,
    PersistentVolumeSpec,
    VolumeNodeAffinity,
)
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim

PROVISIONER = "grpo.dev/fake-local"
STORAGE_CLASS = "standard"
NODE_CLASS = "real-node"
# Nothing mounts these folders under KWOK; the real Ray backend (hack/rayjobapi/podview.py) creates
# one when a job's pod view links to its claim.
VOLUMES_ROOT = Path("/tmp/grpo-fake-volumes")
log = logging.getLogger("provisioner")


def _volume_for(claim: PersistentVolumeClaim, node: str | None) -> PersistentVolume:
    """`node`: the one node the volume's folder is on (class `real-node`), or None for anywhere."""
    meta = claim.metadata
    name = f"pv-{meta.uid}"
    return PersistentVolume(
        metadata=ObjectMeta(
            name=name,
            annotations={"pv.kubernetes.io/provisioned-by": PROVISIONER},
            labels={"grpo.dev/fake-volume": "true"},
        ),
        spec=PersistentVolumeSpec(
            capacity={"storage": claim.spec.resources.requests["storage"]},
            accessModes=list(claim.spec.accessModes or ["ReadWriteOnce"]),
            persistentVolumeReclaimPolicy="Delete",
            storageClassName=claim.spec.storageClassName,
            volumeMode=claim.spec.volumeMode or "Filesystem",
            hostPath=HostPathVolumeSource(path=str(VOLUMES_ROOT / name)),
            nodeAffinity=_only_on(node) if node else None,
            claimRef=ObjectReference(
                apiVersion="v1",
                kind="PersistentVolumeClaim",
                namespace=meta.namespace,
                name=meta.name,
                uid=meta.uid,
            ),
        ),
    )


def _only_on(node: str) -> VolumeNodeAffinity:
    on_node = NodeSelectorRequirement(key="kubernetes.io/hostname", operator="In", values=[node])
    return VolumeNodeAffinity(
        required=NodeSelector(nodeSelectorTerms=[NodeSelectorTerm(matchExpressions=[on_node])])
    )


def reconcile_once(client: Client, real_node: str) -> None:
    """Provision pending claims of our classes; delete released volumes we made."""
    classes = {STORAGE_CLASS: None, NODE_CLASS: real_node}
    for claim in client.list(PersistentVolumeClaim, namespace="*"):
        if claim.spec.storageClassName not in classes or claim.spec.volumeName:
            continue
        if claim.status and claim.status.phase != "Pending":
            continue
        try:
            volume = _volume_for(claim, classes[claim.spec.storageClassName])
            # The folder exists before any pod mounts it, writable by every user, as
            # local-path-provisioner makes its folders: on the real node (hack/node-up.sh) the
            # container runtime would otherwise create it owned by root, and the trainer runs as
            # a non-root user.
            folder = Path(volume.spec.hostPath.path)
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o777)
            client.create(volume)
            log.info("provisioned %s/%s", claim.metadata.namespace, claim.metadata.name)
        except ApiError as error:
            if error.status.code != 409:
                raise
    for volume in client.list(PersistentVolume, labels={"grpo.dev/fake-volume": "true"}):
        if volume.status and volume.status.phase == "Released":
            try:
                client.delete(PersistentVolume, volume.metadata.name)
                log.info("deleted released %s", volume.metadata.name)
            except ApiError as error:
                if error.status.code != 404:
                    raise
            # Reclaim policy Delete: the data goes with the volume (only inside our own folder).
            folder = Path(volume.spec.hostPath.path) if volume.spec.hostPath else None
            if folder is not None and folder.parent == VOLUMES_ROOT:
                shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between passes")
    parser.add_argument("--real-node", default="real-cpu-0", help=f"the node of class {NODE_CLASS}'s volumes")
    args = parser.parse_args()
    # WARNING for the libraries: the HTTP client logs every request at INFO.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    log.setLevel(logging.INFO)
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    client = Client()
    while running:
        try:
            reconcile_once(client, args.real_node)
        except Exception:  # keep serving: one failed pass must not take the cluster's storage down
            log.exception("provisioning pass failed")
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
