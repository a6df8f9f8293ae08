"""``ascii_int``: never raises, and reads exactly the ASCII spellings of integers."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.integers import ascii_int

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
