"""Prepared datasets cached by content on the shared volume, written atomically.

A retried attempt (or a second pod racing the first) must find finished files or none: each
dataset is built in a temporary folder beside its final one and renamed into place, and
`manifest.json` is written last, so a folder with a manifest is complete by construction.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
_CHUNK = 1 << 20


def content_key(files: Iterable[Path], salt: str) -> str:
    """A hash of the files' bytes (in the given order) and of how they are converted (`salt`)."""
    digest = hashlib.sha256(salt.encode())
    for file in files:
        digest.update(b"\0file\0")
        with open(file, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest  # the object `write_manifest` wrote


def materialize(final: Path, build: Callable[[Path], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """The manifest of `final`, building it with `build(tmp_folder)` unless it is already there.

    Returns (manifest, built). `build` writes its files into the folder it is given and returns the
    manifest, which is written last.
    """
    manifest = read_manifest(final)
    if manifest is not None:
        return manifest, False
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        manifest = build(tmp)
        _write_json(tmp / MANIFEST, manifest)
        if final.exists() and read_manifest(final) is None:
            # The rename below is the commit, so a crash cannot leave a half-built folder here:
            # one without a manifest is foreign (hand-made), and is replaced.
            shutil.rmtree(final)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another attempt finished the same dataset first; its copy is as good as ours.
            existing = read_manifest(final)
            if existing is None:
                raise
            return existing, False
        return manifest, True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_json(path: Path, value: dict[str, Any]) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)
