"""How a table fits a terminal: columns, priorities and widths in, a plan out. Pure.

``plan`` decides which columns a table shows, at which widths, and which it abbreviates or
drops; ``wrap`` breaks a cell into lines of a column's width. Both are plain functions of
numbers and strings (no terminal, no rich), so properties of them are tested with hypothesis;
``rendering`` is the thin adapter that measures cells and prints the plan with rich.

The rule is that no word is ever split: a column is never narrower than its longest word
(header included), and cells wrap at spaces and after a ``/`` (a path or a label prefix, where
a reader expects a line to break) only. When the columns do not fit the width:

1. abbreviable columns (severity ``crit``/``high``...) take their short form, lowest priority
   first;
2. columns that hold one value in every row are dropped, lowest priority first: the value is
   stated once under the table instead, so nothing is lost;
3. the one exception to the rule: a word wider than two thirds of the terminal (an image
   with its digest, a long ARN) is cut with ``…`` to that width (the column is marked
   ``TRUNCATED``, and the table says so), so that one such word does not push every other
   column out;
4. the other columns are dropped, lowest priority first (the table names them and says that
   ``--wide`` shows them), one column staying at least.

The width left over brings columns up to their natural width, the ones that lack least
first: as many columns as possible are not wrapped at all, and the longest values wrap.

``wide`` (``--wide``) keeps every column in full: the table is then as wide as its words need,
which may be wider than the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "Fit",
    "Need",
    "Placed",
    "Plan",
    "longest_piece",
    "pieces",
    "plan",
    "wrap",
]

Measure = Callable[[str], int]


class Fit(StrEnum):
    FULL = "full"  # every value as it is
    SHORT = "short"  # the column's abbreviated form
    TRUNCATED = "truncated"  # words longer than the width cut with an ellipsis


@dataclass(frozen=True)
class Need:
    """What one column needs, measured by the adapter.

    ``natural``: the widest line of the column unwrapped (header included); ``word``: its
    widest word (header included); ``short``: the widest word in its abbreviated form, or
    None when it has none; ``constant``: every row holds the same value.
    """

    priority: int  # higher is kept longer
    natural: int
    word: int
    short: int | None = None
    constant: bool = False

    def __post_init__(self) -> None:
        if self.word < 1 or self.natural < self.word:
            raise ValueError(f"need natural >= word >= 1, got {self.natural}, {self.word}")
        if self.short is not None and not 1 <= self.short <= self.word:
            raise ValueError(f"need 1 <= short <= word, got {self.short}")


@dataclass(frozen=True)
class Placed:
    index: int  # of the column in the table's declaration
    width: int
    fit: Fit


@dataclass(frozen=True)
class Plan:
    shown: tuple[Placed, ...]  # in declaration order
    dropped: tuple[int, ...]  # in declaration order
    width: int  # of the whole table, gaps and edges included

    def placed(self, index: int) -> Placed | None:
        return next((p for p in self.shown if p.index == index), None)


def plan(
    needs: Sequence[Need], width: int, *, gap: int = 3, edge: int = 0, wide: bool = False
) -> Plan:
    """The columns to show and their widths: at most ``width`` in all unless ``wide``.

    ``gap`` is what separates two columns, ``edge`` what the table adds on its outside.
    """
    if not needs:
        return Plan((), (), 0)
    cap = max(1, (width - edge) * 2 // 3)  # no word is wider, unless wide
    fits = {i: Fit.FULL for i in range(len(needs))}
    if not wide:
        fits = _reduce(needs, fits, width, gap, edge, cap)
    shown = sorted(fits)
    mins = {i: _min(needs[i], fits[i], cap) for i in shown}
    room = width - edge - gap * (len(shown) - 1)
    # an abbreviated column is as wide as its short forms need, no wider
    wants = {i: mins[i] if fits[i] is Fit.SHORT else needs[i].natural for i in shown}
    widths = _spread(needs, mins, wants, room)
    total = sum(widths.values()) + edge + gap * (len(shown) - 1)
    return Plan(
        tuple(Placed(i, widths[i], fits[i]) for i in shown),
        tuple(i for i in range(len(needs)) if i not in fits),
        total,
    )


def _min(need: Need, fit: Fit, cap: int) -> int:
    if fit is Fit.TRUNCATED:
        return min(need.word, cap)
    return need.short if fit is Fit.SHORT and need.short is not None else need.word


def _reduce(
    needs: Sequence[Need], fits: dict[int, Fit], width: int, gap: int, edge: int, cap: int
) -> dict[int, Fit]:
    def fits_in() -> bool:
        used = sum(_min(needs[i], f, cap) for i, f in fits.items())
        return used + edge + gap * (len(fits) - 1) <= width

    by_priority = sorted(range(len(needs)), key=lambda i: (needs[i].priority, -i))
    steps: list[tuple[str, int]] = [("short", i) for i in by_priority if needs[i].short]
    steps += [("drop", i) for i in by_priority if needs[i].constant]
    steps += [("cut", i) for i in by_priority if needs[i].word > cap]
    steps += [("drop", i) for i in by_priority if not needs[i].constant]
    for step, i in steps:
        if fits_in():
            return fits
        if step == "short":
            fits[i] = Fit.SHORT
        elif step == "cut":
            if i in fits:
                fits[i] = Fit.TRUNCATED
        elif len(fits) > 1 and i in fits:
            del fits[i]
    return fits


def _spread(
    needs: Sequence[Need], mins: dict[int, int], wants: dict[int, int], room: int
) -> dict[int, int]:
    """Each column at least its minimum; what is left brings columns up to their natural
    width, the ones that lack least first (higher priority first among equals): as many
    columns as possible are not wrapped at all, and the longest values wrap."""
    widths = dict(mins)
    left = room - sum(mins.values())
    for i in sorted(mins, key=lambda i: (wants[i] - mins[i], -needs[i].priority, i)):
        if left <= 0:
            break
        add = min(left, max(0, wants[i] - widths[i]))
        widths[i] += add
        left -= add
    return widths


# --------------------------------------------------------------------------- words and lines


def pieces(text: str) -> list[tuple[int, int]]:
    """The unbreakable pieces of one line of text, as ``(start, end)``: runs between spaces,
    each also broken after a ``/`` that is followed by more of the word."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == " ":
            i += 1
            continue
        j = i
        while j < n and text[j] != " ":
            j += 1
            if text[j - 1] == "/" and j < n and text[j] != " ":
                break
        out.append((i, j))
        i = j
    return out


def longest_piece(text: str, measure: Measure = len) -> int:
    """The width of the widest unbreakable piece of ``text`` (every line of it)."""
    return max(
        (measure(line[a:b]) for line in text.split("\n") for a, b in pieces(line)), default=0
    )


def wrap(text: str, width: int, measure: Measure = len) -> list[tuple[int, int]]:
    """``text`` as lines no wider than ``width``, as ``(start, end)`` ranges of ``text``,
    broken only between pieces (see ``pieces``); explicit newlines are kept. A piece wider
    than ``width`` is a line of its own (the caller cuts it: the plan says TRUNCATED)."""
    out: list[tuple[int, int]] = []
    offset = 0
    for line in text.split("\n"):
        parts = pieces(line)
        if not parts:
            out.append((offset, offset))
        start = end = -1
        for a, b in parts:
            if start < 0:
                start, end = a, b
            elif measure(line[start:b]) <= width:
                end = b
            else:
                out.append((offset + start, offset + end))
                start, end = a, b
        if start >= 0:
            out.append((offset + start, offset + end))
        offset += len(line) + 1
    return out
