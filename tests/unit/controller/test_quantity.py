"""A worker pod's memory is the profile's memory per device times its devices, as Kubernetes counts."""

from __future__ import annotations

from fractions import Fraction

import pytest
from grpo_operator.api import quantity
from grpo_operator.config import AcceleratorProfile
from pydantic import ValidationError


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
