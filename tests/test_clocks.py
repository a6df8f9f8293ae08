"""The one clock (issue 12): every injectable source of the current time in ``app/`` and
``adapters/`` is a parameter named ``clock`` of type ``ports.sources.Clock``; ``now`` is only
ever an instant (a value). ``FixedClock`` and ``SystemClock`` read one instant three ways:
``now()`` (aware UTC), ``time()`` (Unix seconds) and ``monotonic()`` (never backwards)."""

from __future__ import annotations

import ast
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fleetwarden
from fleetwarden.ports.sources import SYSTEM_CLOCK, FixedClock, SystemClock

SRC = Path(fleetwarden.__file__).resolve().parent
PURE = "core"  # takes instants as values; every other layer is handed a clock
TIME_NAMES = frozenset({"now", "clock", "wall", "monotonic"})
MICROSECOND = timedelta(microseconds=1)

# --------------------------------------------------------------------------- the naming rule


def _public(name: str) -> bool:
    return name == "__init__" or not name.startswith("_")


def _annotation(node: ast.expr | None) -> str:
    return "" if node is None else ast.unparse(node)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def clock_parameter_problems(source: str, path: str) -> list[str]:
    """Each public function's or constructor's parameter (a dataclass's field included) that
    takes the time as a callable (``now: Callable[[], datetime]``), or is named ``clock``
    without being a ``Clock``: "path:line: name(param: annotation)"."""
    problems: list[str] = []

    def check(where: str, line: int, name: str, annotation: ast.expr | None) -> None:
        text = _annotation(annotation)
        callable_time = name in TIME_NAMES and "Callable" in text
        if callable_time or (name == "clock" and text not in ("Clock", "Clock | None")):
            problems.append(f"{path}:{line}: {where}({name}: {text or 'no annotation'})")

    def check_function(fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: str = "") -> None:
        if not _public(fn.name):
            return
        a = fn.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            check(f"{owner}{fn.name}", arg.lineno, arg.arg, arg.annotation)

    for node in ast.parse(source, path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            check_function(node)
        elif isinstance(node, ast.ClassDef) and _public(node.name):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    check_function(item, f"{node.name}.")
                elif (
                    _is_dataclass(node)
                    and isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                ):
                    check(node.name, item.lineno, item.target.id, item.annotation)
    return problems


def test_app_and_adapters_take_the_time_only_as_a_clock() -> None:
    """No public function, constructor or dataclass field in app/, adapters/ (or any layer
    but the pure core) takes ``now``/``clock``/``wall``/``monotonic`` as a bare callable, and
    a ``clock`` is a ``Clock``."""
    problems: list[str] = []
    files = sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != PURE)
    layers = {p.relative_to(SRC).parts[0] for p in files}
    assert {"app", "adapters", "entrypoints"} <= layers, layers  # the walk found them
    for path in files:
        rel = str(path.relative_to(SRC.parent))
        problems += clock_parameter_problems(path.read_text(encoding="utf-8"), rel)
    assert problems == [], "take `clock: Clock = SYSTEM_CLOCK` instead:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("def f(*, now: Callable[[], datetime]): ...", "f(now: Callable[[], datetime])"),
        ("async def f(clock: Callable[[], float] = time.time): ...", "f(clock: Callable"),
        ("class A:\n    def __init__(self, wall: Callable[[], datetime]): ...", "A.__init__(wall"),
        ("@dataclass\nclass A:\n    monotonic: Callable[[], float] = time.monotonic", "A(mono"),
        ("def f(clock: float): ...", "f(clock: float)"),
        ("def f(clock=None): ...", "f(clock: no annotation)"),
    ],
)
def test_the_rule_refuses_a_callable_clock_or_a_clock_that_is_not_a_clock(
    source: str, where: str
) -> None:
    (problem,) = clock_parameter_problems(source, "m.py")
    assert problem.startswith("m.py:") and where in problem


@pytest.mark.parametrize(
    "source",
    [
        "def f(*, clock: Clock = SYSTEM_CLOCK): ...",
        "def f(findings: list[Finding], now: datetime): ...",  # an instant is a value
        "def _private(now: Callable[[], datetime]): ...",  # inside a module: not its API
        "class _Hidden:\n    def __init__(self, clock: Callable[[], float]): ...",
        "class A:\n    monotonic: Callable[[], float]",  # not a dataclass: no constructor field
    ],
)
def test_the_rule_accepts_a_clock_values_and_private_helpers(source: str) -> None:
    assert clock_parameter_problems(source, "m.py") == []


# --------------------------------------------------------------------------- the clocks

instants = st.datetimes(
    min_value=datetime(1971, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.builds(
        timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
    ),
)
steps = st.one_of(
    st.floats(min_value=0, max_value=10 * 365 * 86400, allow_nan=False),
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650)),
)


@given(at=instants, ticks=st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_a_fixed_clock_reads_one_instant_as_utc_and_as_unix_seconds(
    at: datetime, ticks: float
) -> None:
    clock = FixedClock(at, ticks)
    now = clock.now()
    assert now.tzinfo is UTC and now == at  # the same instant, told in UTC
    assert now.timestamp() == clock.time()
    assert abs(datetime.fromtimestamp(clock.time(), UTC) - now) <= MICROSECOND
    assert clock.monotonic() == ticks


@given(at=instants, moves=st.lists(steps, max_size=20))
def test_advancing_moves_wall_and_monotonic_time_alike_and_never_back(
    at: datetime, moves: list[float | timedelta]
) -> None:
    clock = FixedClock(at)
    for step in moves:
        before = (clock.now(), clock.time(), clock.monotonic())
        returned = clock.advance(step)
        delta = step if isinstance(step, timedelta) else timedelta(seconds=step)
        assert returned == clock.now() == before[0] + delta
        assert clock.monotonic() >= before[2]
        assert clock.monotonic() - before[2] == pytest.approx(delta.total_seconds(), abs=1e-5)
        assert clock.time() - before[1] == pytest.approx(delta.total_seconds(), abs=1e-5)


@given(at=instants, back=st.floats(min_value=1e-6, max_value=1e6))
def test_a_fixed_clock_refuses_to_run_backwards(at: datetime, back: float) -> None:
    clock = FixedClock(at, 5.0)
    with pytest.raises(ValueError, match="negative"):
        clock.advance(-back)
    with pytest.raises(ValueError, match="negative"):
        clock.advance(seconds=1, minutes=-1)
    assert (clock.now(), clock.monotonic()) == (at, 5.0)  # untouched


def test_a_fixed_clock_steps_in_units_and_its_wall_may_be_set_alone() -> None:
    clock = FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
    assert clock.advance(minutes=1, seconds=30) == datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)
    assert clock.monotonic() == 90.0
    clock.at = datetime(2025, 12, 31, tzinfo=UTC)  # the wall clock stepped back (NTP)
    assert clock.monotonic() == 90.0  # durations do not see it


def test_a_fixed_clock_refuses_a_naive_instant() -> None:
    with pytest.raises(ValueError, match="no timezone"):
        FixedClock(datetime(2026, 1, 1))


@given(st.integers(min_value=2, max_value=50))
def test_the_system_clock_reads_one_instant_and_its_monotonic_never_decreases(n: int) -> None:
    clock = SystemClock()
    assert isinstance(SYSTEM_CLOCK, SystemClock)
    readings = []
    for _ in range(n):
        before = clock.time()
        now = clock.now()
        after = clock.time()
        assert now.tzinfo is UTC
        # the same instant as Unix seconds: between the readings around it, to the
        # microsecond a datetime keeps (floored) and the quarter microsecond a float keeps here
        assert before - 2e-6 <= now.timestamp() <= after + 2e-6
        readings.append(clock.monotonic())
    assert readings == sorted(readings)
    assert abs(clock.monotonic() - time.monotonic()) < 1.0  # the machine's monotonic clock
