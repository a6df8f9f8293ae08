"""The table layout (presenting/table_layout.py): which columns fit, at which widths, and
where a cell may break. Pure functions, pinned by properties over arbitrary tables."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.presenting.table_layout import Fit, Need, longest_piece, pieces, plan, wrap

GAP = 3


@st.composite
def needs(draw: st.DrawFn) -> list[Need]:
    out = []
    for _ in range(draw(st.integers(1, 9))):
        word = draw(st.integers(1, 60))
        natural = word + draw(st.integers(0, 120))
        short = draw(st.none() | st.integers(1, word))
        out.append(
            Need(draw(st.integers(0, 10)), natural, word, short, constant=draw(st.booleans()))
        )
    return out


def _used(result, cols):
    return sum(p.width for p in result.shown) + GAP * (len(result.shown) - 1)


@given(needs(), st.integers(20, 300))
def test_a_plan_is_never_wider_than_the_terminal(cols, width):
    result = plan(cols, width, gap=GAP)
    assert result.width == _used(result, cols) <= width


@given(needs(), st.integers(20, 300))
def test_a_column_is_never_narrower_than_its_longest_word_unless_marked_truncated(cols, width):
    result = plan(cols, width, gap=GAP)
    for p in result.shown:
        need = cols[p.index]
        if p.fit is Fit.FULL:
            assert p.width >= need.word
        elif p.fit is Fit.SHORT:
            assert need.short is not None and p.width >= need.short
        else:  # a word wider than half the table, cut to that half
            assert need.word > width * 2 // 3 and p.width >= width * 2 // 3


@given(needs(), st.integers(20, 300))
def test_every_column_is_shown_or_dropped_once_and_one_column_always_stays(cols, width):
    result = plan(cols, width, gap=GAP)
    shown = [p.index for p in result.shown]
    assert shown == sorted(shown) and result.shown
    assert sorted(shown + list(result.dropped)) == list(range(len(cols)))


@given(needs(), st.integers(20, 300))
def test_columns_are_dropped_lowest_priority_first_constant_ones_before_the_others(cols, width):
    result = plan(cols, width, gap=GAP)
    if not result.dropped:
        return
    for p in result.shown:
        for d in result.dropped:
            if cols[d].constant == cols[p.index].constant:
                assert cols[d].priority <= cols[p.index].priority
            if not cols[d].constant:  # an informative column goes after every constant one
                assert not cols[p.index].constant


@given(needs(), st.integers(20, 300))
def test_a_table_that_fits_in_full_is_shown_in_full(cols, width):
    natural = sum(c.natural for c in cols) + GAP * (len(cols) - 1)
    result = plan(cols, width, gap=GAP)
    if natural <= width:
        assert not result.dropped
        assert [(p.width, p.fit) for p in result.shown] == [(c.natural, Fit.FULL) for c in cols]


@given(needs(), st.integers(20, 300))
def test_an_abbreviated_column_is_no_wider_than_its_short_form(cols, width):
    for p in plan(cols, width, gap=GAP).shown:
        if p.fit is Fit.SHORT:
            assert p.width == cols[p.index].short


@given(needs(), st.integers(20, 200), st.integers(1, 100))
def test_more_width_never_shows_fewer_columns(cols, width, more):
    narrow, wide = plan(cols, width, gap=GAP), plan(cols, width + more, gap=GAP)
    assert {p.index for p in narrow.shown} <= {p.index for p in wide.shown}


@given(needs(), st.integers(20, 300))
def test_wide_keeps_every_column_in_full_at_least_at_its_longest_word(cols, width):
    result = plan(cols, width, gap=GAP, wide=True)
    assert not result.dropped
    assert all(p.fit is Fit.FULL and p.width >= cols[p.index].word for p in result.shown)
    minimum = sum(c.word for c in cols) + GAP * (len(cols) - 1)
    assert result.width <= max(width, minimum)


def test_severity_is_abbreviated_before_any_column_is_dropped():
    cols = [Need(10, 8, 8, short=4), Need(9, 40, 40), Need(1, 30, 30)]
    result = plan(cols, 8 + 40 + 30 + 2 * GAP - 4, gap=GAP)
    assert [(p.index, p.fit) for p in result.shown] == [
        (0, Fit.SHORT),
        (1, Fit.FULL),
        (2, Fit.FULL),
    ]


def test_a_constant_column_goes_before_a_lower_priority_informative_one():
    cols = [Need(9, 20, 20), Need(5, 10, 10, constant=True), Need(1, 10, 10)]
    result = plan(cols, 20 + 10 + GAP, gap=GAP)
    assert result.dropped == (1,)


# --------------------------------------------------------------------------- words and lines

text = st.text(alphabet="ab/ ,-\n", max_size=60)


@given(text, st.integers(1, 40))
def test_wrapped_lines_fit_unless_one_piece_alone_is_wider(value, width):
    for a, b in wrap(value, width):
        line = value[a:b]
        assert len(line) <= width or pieces(line) == [(0, len(line))]


@given(text, st.integers(1, 40))
def test_wrapping_breaks_only_between_pieces_and_loses_no_piece(value, width):
    words = [
        value.split("\n")[i][a:b]
        for i, line in enumerate(value.split("\n"))
        for a, b in pieces(line)
    ]
    out = [
        p for a, b in wrap(value, width) for p in (value[a:b][x:y] for x, y in pieces(value[a:b]))
    ]
    assert out == words


@given(text)
def test_pieces_break_at_spaces_and_after_a_slash_only(value):
    for line in value.split("\n"):
        for a, b in pieces(line):
            piece = line[a:b]
            assert piece and " " not in piece
            assert "/" not in piece[:-1]  # a slash ends a piece
            assert b == len(line) or line[b] == " " or line[b - 1] == "/"


def test_a_label_key_breaks_after_its_prefix_and_nowhere_else():
    assert [(a, b) for a, b in wrap("labels.alpha.eksctl.io/nodegroup-name", 25)] == [
        (0, 23),
        (23, 37),
    ]
    assert longest_piece("severity critical") == 8
    assert longest_piece("ip-10-0-1-2, ip-10-0-1-3 +41 more") == len("ip-10-0-1-2,")


def test_a_word_wider_than_the_column_is_one_line_never_split():
    assert wrap("x supercalifragilistic y", 5) == [(0, 1), (2, 22), (23, 24)]
    assert re.fullmatch(r"\w+", "supercalifragilistic")
