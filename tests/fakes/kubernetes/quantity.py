"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``) as exact fractions, as the API parses them."""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["InvalidQuantity", "parse_quantity"]

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class InvalidQuantity(ValueError):
    pass


def parse_quantity(value: object) -> Fraction:
    """The quantity's value (``"500m"`` -> 1/2); numbers pass through. Raises ``InvalidQuantity``."""
    if isinstance(value, int | float):
        return Fraction(value)
    found = _QUANTITY.match(str(value).strip())
    if found is None:
        raise InvalidQuantity(f"quantities must match the regular expression {_QUANTITY.pattern!r}")
    number, suffix = Fraction(found.group(1)), found.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
    return number * Fraction(10) ** exponent
