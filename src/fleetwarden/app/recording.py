"""The workers' durable effect: each change event into every configured sink, once per sink.

``Recorder.record(events)`` runs before the queue deliveries are acknowledged. Sinks, in order:

1. the event log (``eventLog``), when configured: a JSONL journal that skips keys it holds;
2. the audit store: one ``event`` record per key, the key's uniqueness checked and the record
   written in one transaction, which also makes each *new* event due to the notification sinks
   that follow events (the outbox, sent by ``app/relaying.py``).

Each sink is idempotent on the event key by itself, never because another sink has the key:
after a crash at any step the queue redelivers, the replay passes every event through every
sink again, and each sink adds exactly what it lacks. Nothing here is held in memory across
deliveries, so a store that is new or restored from a backup gets every redelivered event.

``checkpoint(step)`` is called after each step (``after-log``, ``after-audit``); it does
nothing unless a test installs a fault there (the crash-point tests kill the process in it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from fleetwarden.core.audit import AuditDraft, event_draft
from fleetwarden.core.events import ChangeEvent
from fleetwarden.ports.audit import AuditStore

__all__ = ["Checkpoint", "EventLog", "Recorder", "no_checkpoint"]

Checkpoint = Callable[[str], None]


def no_checkpoint(step: str) -> None:
    """The production checkpoint: nothing happens at any step."""


class EventLog(Protocol):
    """An append-only event sink that is idempotent by key (``adapters/journal.py``)."""

    async def record(self, events: Sequence[ChangeEvent]) -> list[bool]:
        """Store the events it lacks, durably; per event, whether it was new here."""
        ...


class Recorder:
    def __init__(
        self,
        *,
        log: EventLog | None = None,
        audit: AuditStore | None = None,
        deliver_to: Sequence[str] = (),
        on_stored: Callable[[], None] | None = None,
        checkpoint: Checkpoint = no_checkpoint,
    ) -> None:
        self.log, self.audit, self.deliver_to = log, audit, tuple(deliver_to)
        self.on_stored, self.checkpoint = on_stored, checkpoint

    async def record(self, events: Sequence[ChangeEvent]) -> list[bool]:
        """Every sink, in order; per event, whether it is new to the store of record (the
        audit store; the event log when there is none): False means a redelivery."""
        new: list[bool] | None = None
        if self.log is not None:
            new = await self.log.record(events)
        self.checkpoint("after-log")
        if self.audit is not None:
            new = await self.audit.append_new(await _drafts(events), deliver_to=self.deliver_to)
            if self.deliver_to and any(new) and self.on_stored is not None:
                self.on_stored()  # the relay has work now, not at its next poll
        self.checkpoint("after-audit")
        return new if new is not None else [True] * len(events)


DRAFT_SLICE = 128  # events drafted between two turns of the event loop


async def _drafts(events: Sequence[ChangeEvent]) -> list[AuditDraft]:
    """The audit drafts of ``events``, a slice at a time with the event loop let run in
    between (~10 us an event: a batch of 512 would hold the process's requests ~5 ms)."""
    out: list[AuditDraft] = []
    for start in range(0, len(events), DRAFT_SLICE):
        if start:
            await asyncio.sleep(0)
        out.extend(event_draft(e) for e in events[start : start + DRAFT_SLICE])
    return out
