"""Integers written as text, read the one way every input needs: ASCII digits only.

``str.isdigit()`` also says yes to "²", "①" and other characters that ``int()`` refuses (a
ValueError where a check said the text was fine: a traceback in the CLI, a 500 in the service),
and ``int()`` itself takes "٣" (another script's digit), "1_000", " 7 " and "+7". None of those
is a number a Kubernetes object, a Terraform file, a query string or an HTTP header means, so
none is read as one. Values only, pure.
"""

from __future__ import annotations

__all__ = ["ascii_int", "go_int"]

_DIGITS = frozenset("0123456789")


def ascii_int(text: str, *, signed: bool = False, max_digits: int = 18) -> int | None:
    """The integer ``text`` spells in 1 to ``max_digits`` ASCII digits (after one ``-`` when
    ``signed``), else None. The bound keeps a 5,000-digit value from costing a conversion
    (and 18 digits fit an int64)."""
    digits = text[1:] if signed and text[:1] == "-" else text
    if not 0 < len(digits) <= max_digits or not _DIGITS.issuperset(digits):
        return None
    return int(text)


_BASES = {"b": 2, "o": 8, "x": 16}


def go_int(text: str, *, bits: int = 32) -> int | None:
    """The integer Go's ``strconv.ParseInt(text, 0, bits)`` reads, else None (its error).

    Base 0 is what spf13/pflag's int flags use (``int32Value.Set``; the kubelet's
    ``--max-pods`` is an ``Int32Var``): an optional sign, then ``0x``/``0o``/``0b`` or a
    leading ``0`` (octal: ``010`` is 8, ``08`` an error), digits with ``_`` allowed only
    between digits or after a prefix; no space anywhere; beyond the signed ``bits`` range an
    error. Go's ``strconv/atoi.go`` (ParseUint, ParseInt, underscoreOK) is the reference."""
    body, negative = text, False
    if body[:1] in ("+", "-"):
        body, negative = body[1:], body[:1] == "-"
    if not body:
        return None
    limit = 1 << (bits - 1)
    base, digits = 10, body
    if body[0] == "0":
        prefix = body[1:2].lower()
        if len(body) >= 3 and prefix in _BASES:
            base, digits = _BASES[prefix], body[2:]
        else:
            base, digits = 8, body[1:]
    value = 0
    for char in digits:
        if char == "_":
            continue
        lower = char.lower()
        if "0" <= char <= "9":
            digit = ord(char) - ord("0")
        elif "a" <= lower <= "z" and char.isascii():
            digit = ord(lower) - ord("a") + 10
        else:
            return None
        if digit >= base:
            return None
        value = value * base + digit
        if value > limit:  # out of range: an error whatever follows (and no long loop)
            return None
    if "_" in body and not _underscores_ok(body, hex_=base == 16 and body[1:2].lower() == "x"):
        return None
    if value > limit or (value == limit and not negative):
        return None
    return -value if negative else value


def _underscores_ok(body: str, *, hex_: bool) -> bool:
    """Go's underscoreOK (sign already removed): ``_`` only between digits, or between a base
    prefix and a digit, never last."""
    saw, i = "^", 0  # ^ start, 0 a digit or prefix, _ an underscore, ! anything else
    if len(body) >= 2 and body[0] == "0" and body[1].lower() in _BASES:
        saw, i = "0", 2
    for char in body[i:]:
        if "0" <= char <= "9" or (hex_ and "a" <= char.lower() <= "f"):
            saw = "0"
        elif char == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"
