"""Shared pieces of the v1alpha1 models: the camelCase model base and bounded field types.

Every string and list in the schema carries a bound: the API server's CEL cost estimator needs
them, and an unbounded field is an easy way to put megabytes into etcd by mistake.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Kubernetes resource quantities ("8", "500m", "64Gi", "1Ti").
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
# DNS-1123 subdomain / label names used for object references.
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN, max_length=32)]
ObjectName = Annotated[str, Field(pattern=NAME_PATTERN, min_length=1, max_length=253)]
ShortString = Annotated[str, Field(max_length=256)]
LabelValue = Annotated[str, Field(max_length=63)]
LabelKey = Annotated[str, Field(max_length=253)]


def cel(rule: str, message: str, **extra: Any) -> dict[str, Any]:
    """One `x-kubernetes-validations` entry, attached through `json_schema_extra`."""
    return {"rule": rule, "message": message, **extra}


def immutable(what: str, why: str) -> dict[str, Any]:
    """A transition rule that refuses any change after creation."""
    return cel("self == oldSelf", f"{what} is immutable: {why}")


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server holds it: camelCase keys, unset optionals left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
