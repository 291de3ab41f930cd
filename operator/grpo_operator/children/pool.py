"""The taints of a job's node pool that its pods tolerate: what the Ray pods carry, what the
operator records on the job's checkpoint claim, and what the plugin's reader pod tolerates."""

from __future__ import annotations

from typing import Any

from ..api.v1alpha1 import GRPOJob
from ..config import AcceleratorProfile


def pool_tolerations(job: GRPOJob, profile: AcceleratorProfile | None) -> list[dict[str, Any]]:
    """The accelerator profile's tolerations, then the job's own."""
    own = [dict(t) for t in profile.tolerations] if profile else []
    return own + [t.to_wire() for t in job.spec.resources.tolerations]
