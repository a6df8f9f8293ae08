"""rendering.Grid, the rich adapter of the table layout: whatever the cells and the width, no
printed line is wider than the console, and no word is split (only cut with ``…`` when the
table says so)."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from fleetwarden.presenting.rendering import Col, Grid
from fleetwarden.presenting.table_layout import pieces

word = st.text(alphabet="abcxyz-.:界", min_size=1, max_size=30)
cell = st.lists(word, min_size=1, max_size=5).map(" ".join) | st.lists(word, max_size=6)


def render(grid: Grid, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(grid)
    return buf.getvalue()


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, 9), min_size=n, max_size=n),
            st.lists(st.lists(cell, min_size=n, max_size=n), min_size=1, max_size=4),
        )
    ),
    st.integers(20, 160),
)
def test_no_line_is_wider_than_the_console_and_no_word_is_split(table, width):
    priorities, rows = table
    grid = Grid(*(Col(f"col{i}", p) for i, p in enumerate(priorities)))
    for row in rows:
        grid.add_row(*row)
    out = render(grid, width)
    assert max(cell_len(x) for x in out.splitlines()) <= width
    known = {f"col{i}{end}" for i in range(len(priorities)) for end in ("", ",")}
    for row in rows:
        for c in row:
            items = c if isinstance(c, list) else [c]
            for text in items:
                known.update(text.split(" "))
                known.update(f"{x}," for x in text.split(" "))
    said = "long words cut" in " ".join(out.split())
    for token in out.split():
        if set(token) <= set("─") or token.startswith("+") or token.strip("();") in {
            "every", "row:", "not", "shown:", "long", "words", "cut", "--wide", "shows",
            "column", "in", "full", "more", "…", "—",
        }:  # fmt: skip
            continue
        bare = token.rstrip(";")
        if bare in known or any(token[a:b] in known for a, b in pieces(token)):
            continue
        assert said and token.endswith("…"), (token, out)


def test_a_constant_column_is_stated_once_under_the_table_when_it_does_not_fit():
    grid = Grid(Col("cluster", 1), Col("field", 9), Col("value", 8))
    for i in range(3):
        grid.add_row("prod-eu-1-a-rather-long-cluster-name", f"labels.team-{i}", "x" * 30)
    out = " ".join(render(grid, 60).split())
    assert "every row: cluster prod-eu-1-a-rather-long-cluster-name" in out
    assert out.startswith("field value")


def test_headers_and_styles_survive_wrapping():
    grid = Grid(Col("value / expression / reason", 1))
    grid.add_row("one two three four five six seven")
    out = render(grid, 20)
    assert out.splitlines()[0].split() == ["value", "/", "expression", "/"]
