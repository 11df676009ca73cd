"""Kubernetes quantities and the downward API's rounding (slurmpod_host.cluster.quantity)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from slurmpod import quantity
from slurmpod.errors import BadInput


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Fraction(1)),
        ("500m", Fraction(1, 2)),
        ("0.5", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("250m", Fraction(1, 4)),
        ("1Ki", Fraction(1024)),
        ("512Mi", Fraction(512 * 2**20)),
        ("1Gi", Fraction(2**30)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1M", Fraction(10**6)),
        ("2G", Fraction(2 * 10**9)),
        ("1k", Fraction(1000)),
        ("100n", Fraction(1, 10**7)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("2E", Fraction(2 * 10**18)),  # exa, not an exponent
        ("+1", Fraction(1)),
        (".5", Fraction(1, 2)),
        (2, Fraction(2)),
        (0.25, Fraction(1, 4)),
    ],
    ids=str,
)
def test_parse(text: str | int | float, expected: Fraction) -> None:
    assert quantity.parse("f", text) == expected


@pytest.mark.parametrize("text", ["", "1.5Q", "Gi", "1 Gi", "1gi", "0x10", "1e", True, "1Mi2"], ids=repr)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(BadInput, match=r"limits\.cpu"):
        quantity.parse("limits.cpu", text)


@pytest.mark.parametrize(
    ("value", "divisor", "expected"),
    [
        ("1", "1m", 1000),  # SLURMPOD_CPU_LIMIT for cpu: "1"
        ("500m", "1m", 500),
        ("500m", "1", 1),  # kubelet rounds up: 0.5 CPU reads as 1
        ("1Gi", "1Mi", 1024),
        ("1G", "1Mi", 954),  # 10^9 / 2^20 = 953.67 -> 954
        ("1", "1", 1),
        ("0", "1m", 0),
    ],
    ids=str,
)
def test_divide_ceil(value: str, divisor: str, expected: int) -> None:
    assert quantity.divide_ceil(quantity.parse("v", value), quantity.parse("d", divisor)) == expected


def test_divide_ceil_rejects_zero_divisor() -> None:
    with pytest.raises(BadInput, match="divisor"):
        quantity.divide_ceil(Fraction(1), Fraction(0))
