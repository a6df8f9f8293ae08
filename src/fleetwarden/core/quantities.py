"""Kubernetes resource quantities ("1930m", "7910Mi", "1.5Gi", "1e3") as numbers."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["format_quantity", "parse_quantity"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


@lru_cache(maxsize=65536)
def parse_quantity(text: str | int | float) -> float:
    """Parse a Kubernetes quantity into a float in base units (cores, bytes, count).

    Raises ``ValueError`` with the offending text for anything that is not a quantity.
    Cached: a fleet repeats the same few strings on thousands of nodes.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a quantity: {text!r}")
    if isinstance(text, int | float):
        return float(text)
    s = text.strip()
    if not s:
        raise ValueError("empty quantity")
    suffix = s[-2:]
    if suffix in _BINARY:
        return _number(s[:-2], text) * _BINARY[suffix]
    if s[-1] in _DECIMAL and s[-1] not in "eE":
        return _number(s[:-1], text) * float(_DECIMAL[s[-1]])
    if s[-1] == "E" and len(s) > 1:  # exa; a trailing E is never an exponent marker
        return _number(s[:-1], text) * float(_DECIMAL["E"])
    return _number(s, text)


def _number(num: str, original: str) -> float:
    try:
        value = Decimal(num)
    except InvalidOperation:
        raise ValueError(f"not a quantity: {original!r}") from None
    if not value.is_finite():
        raise ValueError(f"not a quantity: {original!r}")
    return float(value)


def format_quantity(value: float, resource: str) -> str:
    """Render a base-unit value the way people read it for that resource."""
    if resource == "cpu":
        milli = round(value * 1000)
        return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{int(value // size)}{unit}"
        return f"{round(value / 2**10)}Ki" if value >= 2**10 else f"{int(value)}"
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"
