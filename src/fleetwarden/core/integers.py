"""Integers written as text, read the one way every input needs: ASCII digits only.

``str.isdigit()`` also says yes to "²", "①" and other characters that ``int()`` refuses (a
ValueError where a check said the text was fine: a traceback in the CLI, a 500 in the service),
and ``int()`` itself takes "٣" (another script's digit), "1_000", " 7 " and "+7". None of those
is a number a Kubernetes object, a Terraform file, a query string or an HTTP header means, so
none is read as one. Values only, pure.
"""

from __future__ import annotations

__all__ = ["ascii_int"]

_DIGITS = frozenset("0123456789")


def ascii_int(text: str, *, signed: bool = False, max_digits: int = 18) -> int | None:
    """The integer ``text`` spells in 1 to ``max_digits`` ASCII digits (after one ``-`` when
    ``signed``), else None. The bound keeps a 5,000-digit value from costing a conversion
    (and 18 digits fit an int64)."""
    digits = text[1:] if signed and text[:1] == "-" else text
    if not 0 < len(digits) <= max_digits or not _DIGITS.issuperset(digits):
        return None
    return int(text)
