"""A worker pod's memory is the profile's memory per device times its devices, as Kubernetes counts."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from grpo_operator.api import quantity
from grpo_operator.api.crdgen import render
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.api.v1alpha1.base import QUANTITY_PATTERN
from grpo_operator.config import AcceleratorProfile
from pydantic import ValidationError
from support.operator_inputs import minimal_body


@pytest.mark.parametrize(
    ("per_device", "devices", "per_node"),
    [
        ("96Gi", 8, "768Gi"),
        ("512M", 4, "2048M"),  # string slicing made this 2042M
        ("1.5Ti", 4, "6Ti"),  # and crashed on this
        ("1.5Gi", 3, "4608Mi"),
        ("64Gi", 1, "64Gi"),
        ("1e9", 2, "2000000000"),
        ("1000", 3, "3000"),
        ("0.5k", 3, "1500"),
    ],
)
def test_multiply(per_device: str, devices: int, per_node: str) -> None:
    assert quantity.multiply(per_device, devices) == per_node
    assert quantity.parse(per_node)[0] == quantity.parse(per_device)[0] * devices


def test_parse_reads_both_families_exactly() -> None:
    assert quantity.parse("1Ki") == (1024, "Ki")
    assert quantity.parse("1k") == (1000, "k")
    assert quantity.parse("1.5Ti")[0] == Fraction(3, 2) * 2**40
    assert quantity.parse("100m")[0] == Fraction(1, 10)


@pytest.mark.parametrize("text", ["", "Gi", "96GB", "96 Gi", "1.5.Gi", "ninety"])
def test_what_is_not_a_quantity_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(quantity.QuantityError, match="is not a Kubernetes quantity"):
        quantity.parse(text)


def test_a_fraction_of_a_byte_is_refused() -> None:
    with pytest.raises(quantity.QuantityError, match="whole number of bytes"):
        quantity.multiply("0.3", 1)


def test_the_settings_refuse_a_profile_memory_that_is_not_a_quantity() -> None:
    fields = {"device_resource": "nvidia.com/gpu", "device_type": "cuda", "image": "trainer:1"}
    assert AcceleratorProfile(**fields, memory_per_device="1.5Ti").memory_per_device == "1.5Ti"
    with pytest.raises(ValidationError, match=r"memory_per_device|memoryPerDevice"):
        AcceleratorProfile(**fields, memory_per_device="96GB")


@pytest.mark.parametrize("text", ["1e9999999", "1e400", "1e100", "1e-100", "5E+123456789"])
def test_an_exponent_out_of_range_is_refused_before_any_power_is_taken(text: str) -> None:
    """Issue 58: the exact 10**9999999 held the operator's event loop for minutes."""
    start = time.perf_counter()
    with pytest.raises(quantity.QuantityError, match=r"exponent of at most ±99"):
        quantity.parse(text)
    assert time.perf_counter() - start < 0.01


def test_a_text_too_long_to_be_a_field_is_refused_unread() -> None:
    with pytest.raises(quantity.QuantityError, match="too long"):
        quantity.parse("1" * 100_000)


def test_the_exponents_within_range_and_every_fractional_suffix_are_read() -> None:
    assert quantity.parse("1e99")[0] == 10**99
    assert quantity.parse("2e-99")[0] == Fraction(2, 10**99)
    assert quantity.parse("5n")[0] == Fraction(5, 10**9)  # the CRD's pattern admits n and u
    assert quantity.parse("5u")[0] == Fraction(5, 10**6)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("rollout.memoryBudget", "1e9999999", "pattern"),
        ("resources.cpuPerNode", "1e400", "pattern"),
        ("resources.memoryPerNode", "2E", "at most 1E"),
        ("rollout.memoryBudget", "1e99", "at most 1E"),
        ("checkpoint.size", "9Ei", "at most 1E"),
    ],
)
def test_the_models_refuse_a_quantity_beyond_the_bounds_naming_the_field(
    field: str, value: str, words: str
) -> None:
    body = minimal_body()
    section, name = field.split(".")
    body["spec"].setdefault(section, {})[name] = value
    with pytest.raises(ValidationError) as raised:
        GRPOJob.model_validate(body)
    [error] = raised.value.errors()
    assert ".".join(map(str, error["loc"])) == f"spec.{field}"
    assert words in str(error["msg"]) or words in str(error.get("ctx"))


def test_the_crd_bounds_every_quantity_field_like_the_models() -> None:
    """The generated CRD carries the same bound: the pattern's two-digit exponent, CEL's 1E."""
    text = render()
    assert text.count(QUANTITY_PATTERN) >= 6
    assert "[eE][-+]?[0-9]+" not in text
    assert text.count("!quantity(self).isGreaterThan(quantity(''1E''))") >= 6
