"""Model and dataset sources -> folders every trainer pod can read.

`pvc://` claims are mounted by the operator at the path `parse_source` names, absolute paths are in
the image; both are used where they are. Hub sources are downloaded once into the job's cache on
the shared volume (the operator points HF_HOME and MODELSCOPE_CACHE there), so a retried attempt
finds them without the network. The cache is always consulted first and offline; the hub is asked
only when it is missing and downloads are allowed (not HF_HUB_OFFLINE).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from grpo_operator.api.contract import under_workdir
from grpo_operator.api.sources import parse_source

from .failures import ConfigError, DataError, TransientError

Kind = Literal["model", "dataset"]
_TRUE = frozenset({"1", "true", "yes", "on"})


def hf_cache(cache_dir: str | Path) -> Path:
    """The Hugging Face hub cache on the shared volume (HF_HOME=<cache_dir>/huggingface)."""
    return Path(cache_dir) / "huggingface" / "hub"


def modelscope_cache(cache_dir: str | Path) -> Path:
    return Path(cache_dir) / "modelscope"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def resolve(
    uri: str,
    kind: Kind,
    cache_dir: str | Path,
    revision: str | None = None,
    download: bool = True,
    workdir: str | None = None,
) -> Path:
    """A local folder or file holding the source; errors say which source and what to do.

    With `download=False` only what is already there is used (for `grpo-train plan`). Outside a
    pod, `workdir` holds the pod's /grpo tree, where pvc:// claims are mounted.
    """
    try:
        ref = parse_source(uri)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if ref.scheme in ("local", "pvc"):
        path = Path(under_workdir(ref.local_path or "", workdir))
        if not path.exists():
            hint = f" (is the claim {ref.authority!r} bound and mounted?)" if ref.scheme == "pvc" else ""
            raise DataError(f"{kind} source {uri} is not at {path}{hint}")
        return path
    if ref.scheme == "hf":
        return _huggingface(ref.repo_id, kind, cache_dir, revision, uri, download)
    if ref.scheme == "modelscope":
        return _modelscope(ref.repo_id, kind, cache_dir, revision, uri, download)
    raise ConfigError(
        f"{kind} source {uri}: s3:// is not supported by the trainer yet; copy the files to a volume "
        "and use pvc://claim/path"
    )


def _huggingface(
    repo_id: str, kind: Kind, cache_dir: str | Path, revision: str | None, uri: str, download: bool
) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    cache = hf_cache(cache_dir)
    try:
        return Path(
            snapshot_download(
                repo_id, repo_type=kind, revision=revision, cache_dir=cache, local_files_only=True
            )
        )
    except LocalEntryNotFoundError:
        pass
    if offline() or not download:
        raise DataError(
            f"{kind} {uri} is not in the cache at {cache} and downloads are off (HF_HUB_OFFLINE); "
            f"download it there first or allow the trainer to reach the hub"
        )
    try:
        return Path(snapshot_download(repo_id, repo_type=kind, revision=revision, cache_dir=cache))
    except (GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError) as exc:
        raise ConfigError(
            f"{kind} {uri}: {type(exc).__name__}; check the name, revision and credentialsSecret"
        ) from exc
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as exc:
        raise TransientError(f"could not download {kind} {uri} into {cache}: {exc}") from exc


def _modelscope(
    repo_id: str, kind: Kind, cache_dir: str | Path, revision: str | None, uri: str, download: bool
) -> Path:
    cache = modelscope_cache(cache_dir)
    for candidate in (cache / f"{kind}s" / repo_id, cache / repo_id):
        if candidate.is_dir() and any(candidate.iterdir()):
            return candidate
    if not download:
        raise DataError(f"{kind} {uri} is not in the cache at {cache}")
    try:
        from modelscope import snapshot_download
    except ImportError as exc:
        raise DataError(
            f"{kind} {uri} is not in the cache at {cache} and the modelscope package is not installed"
        ) from exc
    try:
        kwargs = {"repo_type": kind} if kind == "dataset" else {}
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=str(cache), **kwargs))
    except Exception as exc:  # modelscope raises plain exceptions for network and lookup errors alike
        raise TransientError(f"could not download {kind} {uri} into {cache}: {exc}") from exc
