"""Kubernetes resource quantities ("500m", "1Gi", "1e3") and the downward API's rounding: the emulator gives
pods what kubelet would, and the cluster spec reads a nodeset's container limits with the same rules.

Ref: https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from slurmpod.errors import BadInput

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# <signedNumber><suffix>; the exponent form is tried before the "E" (exa) suffix.
_QUANTITY = re.compile(
    r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?"
)


def parse(field: str, text: str | int | float) -> Fraction:
    """The exact value of a quantity; BadInput names ``field`` when it is not one."""
    if isinstance(text, bool):
        raise BadInput.one(field, text, "not a Kubernetes quantity")
    if isinstance(text, int | float):  # YAML `cpu: 1` or `cpu: 0.5`
        return Fraction(str(text))
    m = _QUANTITY.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise BadInput.one(field, text, "not a Kubernetes quantity (e.g. 500m, 2, 1Gi, 512M)")
    value = Fraction(m["num"])
    suffix = m["suffix"] or ""
    if suffix[:1] in {"e", "E"} and len(suffix) > 1:
        return value * Fraction(10) ** int(suffix[1:])
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    return value * _DECIMAL[suffix]


def divide_ceil(value: Fraction, divisor: Fraction) -> int:
    """What kubelet puts in a resourceFieldRef env var: ceil(value / divisor).

    Ref: https://github.com/kubernetes/kubernetes/blob/master/pkg/api/v1/resource/helpers.go
    (convertResourceCPUToString / convertResourceMemoryToString: math.Ceil of the quotient).
    """
    if divisor <= 0:
        raise BadInput.one("divisor", str(divisor), "must be positive")
    return math.ceil(value / divisor)
