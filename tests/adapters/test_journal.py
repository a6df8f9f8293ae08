"""The event log (``eventLog``): a JSONL file that is idempotent by event key on its own, and
cuts off a line a crash left half written."""

from __future__ import annotations

import json
from pathlib import Path

from fleetwarden.adapters.journal import EventJournal
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
