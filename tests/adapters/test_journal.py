"""The event log (``eventLog``): a JSONL file that is idempotent by event key on its own, and
cuts off a line a crash left half written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetwarden.adapters.journal import EventJournal, _line
from fleetwarden.core.events import ChangeEvent, EventSource, Operation


def event(i: int, route: str = "aws") -> ChangeEvent:
    return ChangeEvent(
        id=f"e{i}",
        source="aws.eks",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="prod-eu-1",
        pool="general",
    ).via(route)


def ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


async def test_an_event_it_holds_is_not_written_again_even_after_a_reopen(tmp_path: Path):
    path = tmp_path / "events.jsonl"
    journal = EventJournal(path)
    assert await journal.record([event(1), event(2), event(1)]) == [True, True, False]
    journal.close()
    journal = EventJournal(path)
    assert await journal.record([event(2), event(3)]) == [False, True]
    assert await journal.record([event(3, route="cloudevents")]) == [True], "another route"
    journal.close()
    assert ids(path) == ["e1", "e2", "e3", "e3"]


async def test_a_torn_last_line_is_cut_off_and_its_event_written_whole_again(tmp_path: Path):
    path = tmp_path / "events.jsonl"
    journal = EventJournal(path)
    await journal.record([event(1)])
    journal.close()
    whole = event(2).to_bytes() + b"\n"
    with path.open("ab") as fh:
        fh.write(whole[: len(whole) // 2])  # kill -9 in the middle of a write
    journal = EventJournal(path)
    assert event(2).key not in journal and event(1).key in journal
    assert await journal.record([event(2)]) == [True]
    journal.close()
    assert ids(path) == ["e1", "e2"]


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
)


@settings(max_examples=300, deadline=None)
@example(actor=None, pool=None, detail={"\x7f": None})  # DEL: json escapes it, orjson does not
@given(
    actor=st.none() | _TEXT,
    pool=st.none() | _TEXT,
    detail=st.dictionaries(_TEXT, _VALUE, max_size=4),
)
def test_a_line_is_the_event_s_document_ascii_and_byte_identical_without_floats(
    actor: str | None, pool: str | None, detail: dict[str, object]
):
    """The fast writer (orjson) and ``to_bytes`` (json) write the same document; the line is
    ASCII whatever the text (every other character escaped, as ``to_bytes`` does), and byte
    for byte ``to_bytes``' unless a float is spelled differently."""
    e = ChangeEvent(
        id="e1",
        source="aws.eks",
        type="t",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="c",
        pool=pool,
        actor=actor,
        detail=detail,
        received_at=datetime(2026, 12, 2, 16, 0, 0, 123456, tzinfo=UTC),
    ).via("aws")
    line = _line(e)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.isascii()
    assert json.loads(line) == json.loads(e.to_bytes()) == e.to_json()
    if not any(isinstance(v, float) for v in detail.values()):
        assert line == e.to_bytes() + b"\n"
