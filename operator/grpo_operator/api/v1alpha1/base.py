"""Shared pieces of the v1alpha1 models: the camelCase model base and bounded field types.

Every string and list in the schema carries a bound: the API server's CEL cost estimator needs
them, and an unbounded field is an easy way to put megabytes into etcd by mistake.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .. import quantity

# The syntax Kubernetes itself checks, spelled once. A value that breaks it would pass our schema
# and be refused later, on a child (a RayJob, a pod) where nobody is watching: the job would sit
# Pending without a word. Every pattern is RE2 and Python `re` alike (no look-arounds).

QUANTITY_PATTERN = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][-+]?[0-9]{1,2})?$"
"""A Kubernetes resource quantity without a sign ("8", "500m", "64Gi", "1.5Ti", "2e9"), its exponent
of at most two digits: Kubernetes' grammar takes any, and the operator's exact arithmetic on
`1e9999999` would hold its event loop for minutes (api/quantity.py, MAX_EXPONENT)."""
MAX_QUANTITY = "1E"
"""The largest quantity a field holds (10^18, api/quantity.MAX_VALUE): past any node's CPUs or
bytes, within Kubernetes' int64, and a bound on the numbers a child is built from."""
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
NAME_PATTERN = rf"^{DNS_SUBDOMAIN}$"
"""An object name (ConfigMap, Secret, claim, class): a DNS-1123 subdomain."""
JOB_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""A GRPOJob's name: a DNS-1035 label, because KubeRay names Services after it."""
MAX_JOB_NAME = 40
"""KubeRay refuses a RayJob name over 47 characters (its RayCluster adds `-<5 characters>`, the head
Service `-head-svc`, all within 63): `<job>-<attempt>` fits with attempt numbers of up to 6 digits."""
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_KEY_PATTERN = rf"^({DNS_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?$"
"""An optional DNS-subdomain prefix and a name of at most 63 characters."""
DATA_KEY_PATTERN = r"^\.?[-_a-zA-Z0-9][-._a-zA-Z0-9]*$"
"""A key of a ConfigMap or Secret: Kubernetes refuses `.`, `..` and any key that starts with `..`
(a pod's volume would refuse the path), so it may start with at most one dot."""
PATTERN_WORDS = {
    QUANTITY_PATTERN: 'a quantity without spaces, such as "8", "500m", "64Gi" or "1.5Ti"',
    NAME_PATTERN: "a DNS-1123 name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)",
    JOB_NAME_PATTERN: "a DNS-1035 label (lower-case letters, digits and '-', starting with a letter)",
    LABEL_VALUE_PATTERN: "a label value (letters, digits, '-', '_' and '.', starting and ending with a letter or digit)",
    LABEL_KEY_PATTERN: "a label key (an optional DNS-1123 prefix and '/', then a name of at most 63 characters)",
    DATA_KEY_PATTERN: "a ConfigMap or Secret key (letters, digits, '-', '_' and '.', at most one leading dot)",
}
"""The patterns above in words, for the offline verdict's messages (grpo_operator/verdict.py)."""
INT32_MAX = 2147483647


def cel(rule: str, message: str, **extra: Any) -> dict[str, Any]:
    """One `x-kubernetes-validations` entry, attached through `json_schema_extra`."""
    return {"rule": rule, "message": message, **extra}


def _positive_quantity(value: str) -> str:
    """The schema's CEL rules `quantity(self) > 0` and `<= 1E`, for the parser (sign and syntax
    are the pattern's, so the value is read within quantity.py's bounds)."""
    mantissa = re.split(r"[A-Za-z]", value, maxsplit=1)[0]
    if not re.search(r"[1-9]", mantissa):
        raise ValueError("must be a quantity greater than zero")
    return bounded_quantity(value)


def bounded_quantity(value: str) -> str:
    """The schema's CEL rule `quantity(self) <= 1E`, for the parser."""
    if quantity.parse(value)[0] > quantity.MAX_VALUE:
        raise ValueError(MAX_QUANTITY_MESSAGE)
    return value


def unless_unbounded(value: str) -> str:
    """The CEL guard before a quantity rule reads `value`: a text the pattern refuses (an exponent
    of three digits or more) is not handed to `isQuantity`/`quantity`, which the API server parses
    exactly — 8.5 s for `1e9999999` on one request. Such a text is refused by the pattern alone."""
    return f"!{value}.matches(r'{QUANTITY_PATTERN}') || !isQuantity({value})"


MAX_QUANTITY_MESSAGE = f"must be at most {MAX_QUANTITY} (10^18)"
MAX_QUANTITY_RULE = cel(
    f"{unless_unbounded('self')} || !quantity(self).isGreaterThan(quantity('{MAX_QUANTITY}'))",
    MAX_QUANTITY_MESSAGE,
)


Quantity = Annotated[
    str,
    Field(
        pattern=QUANTITY_PATTERN,
        max_length=32,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"{unless_unbounded('self')} || quantity(self).isGreaterThan(quantity('0'))",
                    "must be a quantity greater than zero (e.g. 8, 500m, 64Gi)",
                ),
                MAX_QUANTITY_RULE,
            ]
        },
    ),
    AfterValidator(_positive_quantity),
]
ObjectName = Annotated[str, Field(pattern=NAME_PATTERN, min_length=1, max_length=253)]
ShortString = Annotated[str, Field(max_length=256)]
LabelValue = Annotated[str, Field(pattern=LABEL_VALUE_PATTERN, max_length=63)]
LabelKey = Annotated[str, Field(pattern=LABEL_KEY_PATTERN, min_length=1, max_length=253)]
DataKey = Annotated[str, Field(pattern=DATA_KEY_PATTERN, min_length=1, max_length=253)]


def labels_rule(what: str) -> dict[str, Any]:
    """CEL for a map whose keys are label keys: the schema cannot put a pattern on map keys."""
    return cel(
        f"self.all(k, k.matches(r'{LABEL_KEY_PATTERN}'))",
        f"{what} keys must be label keys: an optional DNS-subdomain prefix and '/', then at most 63 "
        "letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    )


def check_label_keys(value: dict[str, str]) -> dict[str, str]:
    """labels_rule, for the parser."""
    bad = [k for k in value if not re.match(LABEL_KEY_PATTERN, k) or len(k) > 253]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a label key")
    return value


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
