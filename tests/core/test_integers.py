"""``ascii_int``: never raises, and reads exactly the ASCII spellings of integers."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.integers import ascii_int, go_int

SIGNED = re.compile(r"-?[0-9]{1,18}")
UNSIGNED = re.compile(r"[0-9]{1,18}")


@pytest.mark.parametrize(
    "text", ["²", "①", "٣", "1_000", " 7", "7 ", "+7", "", "-", "--1", "0x1f", "1e3", "7²"]
)
def test_what_isdigit_or_int_would_take_but_no_input_means_is_refused(text: str):
    assert ascii_int(text) is None
    assert ascii_int(text, signed=True) is None


def test_the_ascii_spellings_are_read():
    assert ascii_int("0") == 0 and ascii_int("0042") == 42
    assert ascii_int("-3") is None and ascii_int("-3", signed=True) == -3
    assert ascii_int("9" * 18) == int("9" * 18) and ascii_int("9" * 19) is None
    assert ascii_int("9" * 19, max_digits=19) == int("9" * 19)


@given(st.text(max_size=25) | st.from_regex(SIGNED, fullmatch=True))
def test_any_text_is_an_int_exactly_when_it_is_ascii_digits(text: str):
    for signed, shape in ((False, UNSIGNED), (True, SIGNED)):
        got = ascii_int(text, signed=signed)
        if shape.fullmatch(text):
            assert got == int(text)
        else:
            assert got is None


# ``go_int``: Go's strconv.ParseInt(text, 0, 32), what spf13/pflag's Int32Var (the kubelet's
# --max-pods) reads


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("58", 58),
        ("010", 8),  # a leading 0 is octal
        ("0", 0),
        ("00", 0),
        ("0x3a", 58),
        ("0X3A", 58),
        ("0o72", 58),
        ("0b111010", 58),
        ("5_8", 58),
        ("0_72", 58),
        ("0x_3a", 58),
        ("+58", 58),
        ("-58", -58),
        ("2147483647", 2**31 - 1),
        ("-2147483648", -(2**31)),
    ],
)
def test_go_int_reads_what_strconv_parseint_base_0_reads(text: str, value: int):
    assert go_int(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "058",  # octal: 8 is not a digit
        " 58",
        "58 ",
        "5 8",
        "",
        "+",
        "0x",
        "_58",
        "58_",
        "5__8",
        "0x3a_",
        "2147483648",
        "-2147483649",
        "٣",
        "5²",
        "1e3",
        "+-5",
        "0b2",
    ],
)
def test_go_int_refuses_what_strconv_parseint_base_0_refuses(text: str):
    assert go_int(text) is None


_SPELLINGS = [
    lambda n: str(n),
    lambda n: f"0x{n:x}",
    lambda n: f"0X{n:X}",
    lambda n: f"0o{n:o}",
    lambda n: f"0{n:o}",
    lambda n: f"0b{n:b}",
]


@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(_SPELLINGS),
    st.sampled_from(["", "+", "-"]),
    st.data(),
)
def test_every_go_spelling_of_an_int32_is_read_as_its_value(n, spell, sign, data):
    body = spell(n)
    # "_" may go between two digits, or between a base prefix and a digit
    first = 2 if len(body) > 2 and body[1] in "xXoObB" else 1
    if first < len(body) and data.draw(st.booleans()):
        at = data.draw(st.integers(first, len(body) - 1))
        body = body[:at] + "_" + body[at:]
    assert go_int(sign + body) == (-n if sign == "-" else n)


@given(st.text(max_size=12), st.sampled_from([" ", "\t", "\n", "\xa0"]), st.integers(0, 12))
def test_no_text_with_a_space_is_an_int(text: str, space: str, at: int):
    assert go_int(text[:at] + space + text[at:]) is None


@given(st.integers(2**31, 2**40) | st.integers(-(2**40), -(2**31) - 1))
def test_values_beyond_int32_are_refused(n: int):
    assert go_int(str(n)) is None and go_int(hex(n)) is None
