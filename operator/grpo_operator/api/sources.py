"""Data and model source URIs, shared by the operator (volumes) and the trainer (local paths).

The operator mounts pvc:// sources read-only at a path derived here; the trainer resolves every
other scheme itself (downloads go to a cache on the shared checkpoint volume). Both sides call
the same function, so the path the operator mounts is the path the trainer reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlparse

from .contract import SOURCES_ROOT

Scheme = Literal["hf", "modelscope", "pvc", "s3", "local"]


@dataclass(frozen=True)
class SourceRef:
    """A parsed source URI."""

    scheme: Scheme
    authority: str
    """hf/modelscope: the org; pvc: the claim; s3: the bucket; local: empty."""
    path: str
    """The rest, without a leading slash (for local: the absolute path)."""

    @property
    def repo_id(self) -> str:
        """`org/name` for hub sources."""
        return f"{self.authority}/{self.path}".rstrip("/")

    @property
    def mount_path(self) -> str | None:
        """Where a pvc:// claim is mounted on every trainer pod; None for other schemes."""
        if self.scheme != "pvc":
            return None
        return f"{SOURCES_ROOT}/{self.authority}"

    @property
    def local_path(self) -> str | None:
        """The path a trainer pod reads without downloading anything, when there is one."""
        if self.scheme == "pvc":
            return f"{self.mount_path}/{self.path}".rstrip("/")
        if self.scheme == "local":
            return self.path
        return None


def parse_source(uri: str) -> SourceRef:
    """Parse a source URI; raise ValueError naming what was expected."""
    if uri.startswith("/"):
        return SourceRef("local", "", uri)
    parsed = urlparse(uri)
    scheme = parsed.scheme
    if scheme not in ("hf", "modelscope", "pvc", "s3"):
        raise ValueError(
            f"unsupported source {uri!r}: expected hf://, modelscope://, pvc://, s3:// or an absolute path"
        )
    if not parsed.netloc:
        raise ValueError(f"source {uri!r} has no {'claim' if scheme == 'pvc' else 'organisation or bucket'}")
    path = parsed.path.lstrip("/")
    if scheme in ("hf", "modelscope") and not path:
        raise ValueError(f"source {uri!r} must name a repository as {scheme}://org/name")
    return SourceRef(scheme, parsed.netloc, path)  # type: ignore[arg-type]
