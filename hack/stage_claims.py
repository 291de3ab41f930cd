#!/usr/bin/env python3
"""Put local folders onto PersistentVolumeClaims of the local test cluster, as a user stages weights
and data onto claims before applying a GRPOJob that reads `pvc://claim/path`.

    hack/stage_claims.py --namespace grpo-demo demo-models=/tmp/colours/models demo-data=/tmp/colours/data

Each claim is created if it does not exist (ReadWriteMany, so every pod of a job may mount it), and
once bound, the folder's content is copied into the volume. On a real cluster the copy would go
through a pod mounting the claim (`kubectl cp`); here the test cluster's provisioner backs every
claim with a host folder (hack/provisioner), which is where the copy goes. Uses $KUBECONFIG.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.core_v1 import PersistentVolumeClaimSpec, VolumeResourceRequirements
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim


def claim_folder(client: Client, namespace: str, name: str, size: str, timeout: float = 60) -> Path:
    """The host folder behind claim `name`, creating the claim first if needed."""
    try:
        client.create(
            PersistentVolumeClaim(
                metadata=ObjectMeta(name=name, namespace=namespace),
                spec=PersistentVolumeClaimSpec(
                    accessModes=["ReadWriteMany"],
                    resources=VolumeResourceRequirements(requests={"storage": size}),
                ),
            )
        )
    except ApiError as error:
        if error.status.code != 409:
            raise
    deadline = time.monotonic() + timeout
    while True:
        claim = client.get(PersistentVolumeClaim, name, namespace=namespace)
        if claim.status and claim.status.phase == "Bound" and claim.spec.volumeName:
            volume = client.get(PersistentVolume, claim.spec.volumeName)
            if volume.spec.hostPath is None:
                raise SystemExit(
                    f"claim {namespace}/{name} is not backed by a host folder: not the local cluster?"
                )
            return Path(volume.spec.hostPath.path)
        if time.monotonic() > deadline:
            raise SystemExit(f"claim {namespace}/{name} was not bound within {timeout:.0f} s")
        time.sleep(0.5)


def stage(client: Client, namespace: str, claim: str, source: Path, size: str) -> Path:
    folder = claim_folder(client, namespace, claim, size)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, folder, dirs_exist_ok=True)
    # Readable by every user, whatever the source's modes (a 0700 temporary folder, a 0600
    # weights file): the trainer reads the claim as its own non-root user in a real pod.
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--size", default="2Gi", help="requested size of a claim this creates")
    parser.add_argument("pairs", nargs="+", metavar="CLAIM=FOLDER")
    args = parser.parse_args(argv)
    client = Client()
    for pair in args.pairs:
        claim, sep, folder = pair.partition("=")
        if not sep or not Path(folder).is_dir():
            parser.error(f"{pair!r}: expected CLAIM=FOLDER with an existing folder")
        target = stage(client, args.namespace, claim, Path(folder), args.size)
        print(f"staged {folder} onto claim {args.namespace}/{claim} ({target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
