"""lightkube resources for the kinds the tests and benchmarks read with lightkube's own client.

The operator talks to the API server through its own client (grpo_operator/k8s); these are for
code that watches or lists from outside it.
"""

from __future__ import annotations

from grpo_trainer.kube import GRPOJobResource
from lightkube.generic_resource import create_namespaced_resource

__all__ = ["GRPOJobResource", "RayJobResource"]

RayJobResource = create_namespaced_resource("ray.io", "v1", "RayJob", "rayjobs")
