"""The chaos suite (seed 000, ch. 26-30): each test injects one kind of fault into a real
service and measures what it did to the events it was given.

Every test records its figures through the ``figures`` fixture: the faults injected, events
acknowledged, lost (must be 0), processed twice (must be 0) and the time to recover. They are
printed at the end of the run and, when ``FW_CHAOS_REPORT`` names a file, appended to it as
JSON lines (``benchmarks/chaos_suite.py`` reruns the suite that way and prints the table of
RELIABILITY.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

__all__ = ["Figures"]


@dataclass(frozen=True)
class Figures:
    test: str
    faults: str  # what was injected, and how often
    acknowledged: int  # events (or decisions, or writes) the system said it had
    lost: int
    twice: int
    recover_s: float | None  # time to recover, seconds (None: nothing to recover from)
    notes: str = ""


_RUN: list[Figures] = []


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Callable[..., Figures]:
    """``figures(faults=..., acknowledged=..., lost=..., twice=..., recover_s=..., notes=...)``
    records this test's figures (call it before the assertions on them, so a failing run
    still reports what it measured)."""

    def record(**kw: object) -> Figures:
        fig = Figures(test=request.node.name, **kw)  # type: ignore[arg-type]
        _RUN.append(fig)
        target = os.environ.get("FW_CHAOS_REPORT")
        if target:
            with Path(target).open("a", encoding="utf-8") as out:
                out.write(json.dumps(asdict(fig)) + "\n")
        return fig

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RUN:
        return
    terminalreporter.section("chaos figures")
    for f in _RUN:
        recover = "-" if f.recover_s is None else f"{f.recover_s:.2f}s"
        terminalreporter.write_line(
            f"{f.test}: faults {f.faults}; acknowledged {f.acknowledged}; lost {f.lost}; "
            f"twice {f.twice}; recover {recover}" + (f"; {f.notes}" if f.notes else "")
        )
