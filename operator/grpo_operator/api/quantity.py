"""Kubernetes resource quantities: parsed, multiplied and written back exactly.

A worker pod asks for the profile's memory per device times the devices on the node. Slicing the
string ("512M" -> "51" and "2M") gave 2042M for 512M × 4 and crashed on "1.5Ti"; the API server's
own grammar has decimal (k, M, G, T, P, E) and binary (Ki … Ei) suffixes, decimal exponents
(1e3) and fractions. This module reads that grammar into an exact number of bytes (a Fraction,
never a float) and writes a product in the largest suffix of the operand's family that keeps it a
whole number, so 1.5Ti × 4 reads 6Ti and 512M × 4 reads 2048M. Standard library only.

Bounded work: a quantity is read only when it is short and its exponent within ±MAX_EXPONENT,
checked on the text before any power is taken. `1e9999999` is a valid quantity to the API
server's grammar, and an exact 10**9999999 took the operator's one event loop for minutes.
"""

from __future__ import annotations

import re
from fractions import Fraction

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
SUBUNITS = {"m": 10**3, "u": 10**6, "n": 10**9}
"""Kubernetes' fractional suffixes (milli, micro, nano): a value divided by these."""
MAX_EXPONENT = 99
"""The largest decimal exponent read (1e99, 1e-99): far past any real size (MAX_VALUE is 1e18)."""
MAX_LENGTH = 64
"""The longest text read: twice the schema's bound on a quantity field (32 characters)."""
MAX_VALUE = 10**18
"""The largest quantity a spec field may hold, the schema's `1E`: every real CPU count or byte size
is far below it, and Kubernetes keeps quantities in an int64 (about 9.2E)."""
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPE]|[mun])|[eE](?P<exponent>[+-]?\d+))?$"
)
PATTERN = r"^([+]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPE]|[eE][+-]?\d{1,2})?)$"
"""The same grammar for a JSON schema (no milli-units, no sign: a memory size; exponents of at
most two digits, within MAX_EXPONENT)."""


class QuantityError(ValueError):
    """Not a Kubernetes quantity, or one too large to read."""


def parse(text: str) -> tuple[Fraction, str]:
    """The quantity's exact value and its suffix ("" for none, an exponent or a fractional suffix).

    QuantityError, in one line, for what is not a quantity, and for a text over MAX_LENGTH or an
    exponent over MAX_EXPONENT: both refused before any number is built from them.
    """
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"a quantity of {len(text)} characters is too long (at most {MAX_LENGTH})")
    match = _QUANTITY.match(text.strip())
    if not match:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity (e.g. 96Gi, 512M, 1.5Ti)")
    number = Fraction(match.group("number"))
    suffix = match.group("suffix") or ""
    if match.group("exponent"):
        exponent = int(match.group("exponent"))  # at most MAX_LENGTH digits: cheap
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(f"{text!r}: an exponent of at most ±{MAX_EXPONENT} is read (e.g. 2e9)")
        return number * Fraction(10) ** exponent, ""
    if suffix in SUBUNITS:
        return number / SUBUNITS[suffix], ""
    return number * (BINARY.get(suffix) or DECIMAL.get(suffix) or 1), suffix


def multiply(text: str, factor: int) -> str:
    """`text` × `factor`, in the operand's suffix family (binary stays binary)."""
    value, suffix = parse(text)
    total = value * factor
    if total.denominator != 1:
        raise QuantityError(f"{text} × {factor} is not a whole number of bytes")
    family = BINARY if suffix in BINARY else DECIMAL if suffix in DECIMAL else {}
    for unit, size in sorted(family.items(), key=lambda item: -item[1]):
        if total % size == 0 and total >= size:
            return f"{total // size}{unit}"
    return str(total.numerator)
