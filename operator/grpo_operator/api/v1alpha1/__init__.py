"""grpo.dev/v1alpha1: the GRPOJob resource."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from .base import ApiModel
from .resolved import JobPaths, ResolvedAccelerator, ResolvedJob
from .spec import GRPOJobSpec
from .status import Condition, GRPOJobStatus

GROUP = "grpo.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "GRPOJob"
PLURAL = "grpojobs"
SINGULAR = "grpojob"
SHORT_NAMES = ("gj",)


class GRPOJob(ApiModel):
    """A GRPO post-training job for a vision-language model, run on a KubeRay cluster."""

    model_config = ConfigDict(extra="ignore")

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: GRPOJobSpec
    status: GRPOJobStatus = Field(default_factory=GRPOJobStatus)

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    @property
    def namespace(self) -> str:
        return str(self.metadata["namespace"])

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid", ""))


__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
    "Condition",
    "GRPOJob",
    "GRPOJobSpec",
    "GRPOJobStatus",
    "JobPaths",
    "ResolvedAccelerator",
    "ResolvedJob",
]
