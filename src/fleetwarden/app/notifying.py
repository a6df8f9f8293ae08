"""Sending notifications: finding events in, messages to the configured sinks out.

``Notifier.handle(event)`` queues a finding event (bounded queue; lifecycle events are ignored,
so it can be the watcher's ``emit``). ``run()`` drains the queue in batches, lets
``core.notifying`` decide what to say, sends each sink its batches — sinks concurrently, one
sink's batches in order (a resolve never overtakes its firing), each send under a timeout —
and folds every outcome back into the state, so a failed delivery is retried. Outcomes are
returned and passed to ``on_outcome`` (the audit store's hook).

The ``Sink`` protocol and ``NotifyError`` (``ports/notify.py``) are the seam the adapters
(``adapters/notify``) implement; sink errors never carry URLs or tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwarden.core import notifying
from fleetwarden.core.notifying import Batch, NotifierState, SinkPolicy
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.logs import get_logger
from fleetwarden.ports.notify import NotifyError, Sink
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["BatchResult", "Notifier", "NotifierStats"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class BatchResult:
    """How one batch of notifications went at one sink: for the audit store and metrics.
    (A remediation's result is ``ports.remediation.Outcome``.)"""

    sink: str
    batch: Batch
    ok: bool
    at: datetime
    duration: float  # seconds
    error: str | None = None
    status: int | None = None
    attempts: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sink": self.sink,
            "delivery": self.batch.key,
            "ok": self.ok,
            "at": notifying.timestamp(self.at),
            "duration_ms": round(self.duration * 1000, 1),
            "error": self.error,
            "status": self.status,
            "attempts": self.attempts,
            "notifications": [
                {"id": n.id, "key": n.key, "status": n.status.value, "trigger": n.trigger.value}
                for n in self.batch.notifications
            ],
        }


@dataclass
class NotifierStats:
    events: int = 0
    dropped: int = 0  # the queue was full
    notifications: int = 0
    delivered: int = 0  # batches
    failed: int = 0  # batches
    outcome_hook_failures: int = 0


OnBatchResult = Callable[[BatchResult], Awaitable[None] | None]
_Item = tuple[FindingEvent, Mapping[str, Any] | None]


class Notifier:
    """Owns the notification state; does not own the sinks (the caller closes them)."""

    def __init__(
        self,
        sinks: Iterable[tuple[SinkPolicy, Sink]],
        *,
        clock: Clock = SYSTEM_CLOCK,
        queue_size: int = 10_000,
        send_timeout: float = 30.0,
        tick_every: float = 30.0,
        max_batch: int = 1_000,
        on_outcome: OnBatchResult | None = None,
        state: NotifierState | None = None,
    ) -> None:
        pairs = list(sinks)
        names = [policy.name for policy, _ in pairs]
        if len(set(names)) != len(names):
            raise ValueError(f"sink names must be unique, got {names}")
        for policy, sink in pairs:
            if sink.name != policy.name:
                raise ValueError(f"sink {sink.name!r} is paired with policy {policy.name!r}")
        self.policies: tuple[SinkPolicy, ...] = tuple(policy for policy, _ in pairs)
        self._sinks: dict[str, Sink] = {policy.name: sink for policy, sink in pairs}
        self.send_timeout, self.tick_every, self.max_batch = send_timeout, tick_every, max_batch
        self.clock = clock
        self.on_outcome = on_outcome
        self.state = state or NotifierState()
        self.stats = NotifierStats()
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=queue_size)

    # --- input ---------------------------------------------------------------------------

    def handle(self, event: object, decision: Mapping[str, Any] | None = None) -> None:
        """Queue a finding event; anything else (lifecycle events) is ignored, so this can be
        the watcher's or the inspector's ``emit``. Never blocks: when the queue is full the
        event is dropped, counted in ``stats.dropped`` and logged."""
        if not isinstance(event, FindingEvent):
            return
        try:
            self._queue.put_nowait((event, decision))
        except asyncio.QueueFull:
            self.stats.dropped += 1
            log.warning(
                "notification queue full: event dropped",
                type=event.type.value,
                cluster=event.finding.cluster,
                pool=event.finding.pool,
                finding=event.finding.id,
            )
            return
        self.stats.events += 1

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    # --- one round -----------------------------------------------------------------------

    async def process(
        self,
        events: Sequence[FindingEvent],
        decisions: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[BatchResult]:
        """Decide on ``events`` and send what they call for."""
        result = notifying.plan(
            self.state, events, now=self.clock.now(), sinks=self.policies, decisions=decisions
        )
        self.state = result.state
        return await self._send(result.notifications)

    async def tick(self) -> list[BatchResult]:
        """Send the repeats and retries that are due."""
        result = notifying.plan_due(self.state, now=self.clock.now(), sinks=self.policies)
        self.state = result.state
        return await self._send(result.notifications)

    async def _send(self, notes: Sequence[notifying.Notification]) -> list[BatchResult]:
        if not notes:
            return []
        self.stats.notifications += len(notes)
        per_sink: dict[str, list[Batch]] = {}
        for batch in notifying.batches(notes, self.policies):
            per_sink.setdefault(batch.sink, []).append(batch)
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(self._send_in_order(self._sinks[name], group))
                for name, group in per_sink.items()
            ]
        outcomes = [o for t in tasks for o in t.result()]
        for o in outcomes:
            self.state = notifying.record_delivery(
                self.state, o.batch, ok=o.ok, now=self.clock.now(), sinks=self.policies
            )
            if o.ok:
                self.stats.delivered += 1
            else:
                self.stats.failed += 1
            await self._report(o)
        return outcomes

    async def _send_in_order(self, sink: Sink, group: list[Batch]) -> list[BatchResult]:
        """One sink's batches one after another; after a failure the rest of this round is
        not tried (the sink is down: don't wait out a timeout per batch) and retried later."""
        out: list[BatchResult] = []
        failed: BatchResult | None = None
        for batch in group:
            if failed is not None:
                out.append(
                    BatchResult(
                        sink.name,
                        batch,
                        ok=False,
                        at=self.clock.now(),
                        duration=0.0,
                        error=f"not sent: an earlier message to this sink failed ({failed.error})",
                    )
                )
                continue
            outcome = await self._send_one(sink, batch)
            out.append(outcome)
            if not outcome.ok:
                failed = outcome
        return out

    async def _send_one(self, sink: Sink, batch: Batch) -> BatchResult:
        at, started = self.clock.now(), time.monotonic()
        error: str | None = None
        status: int | None = None
        attempts: int | None = None
        try:
            async with asyncio.timeout(self.send_timeout):
                await sink.send(batch)
        except NotifyError as exc:
            error, status, attempts = str(exc), exc.status, exc.attempts
        except TimeoutError:
            error = f"notify {sink.name}: no answer within {self.send_timeout:g} s"
        except Exception as exc:  # a bug in a sink must not stop the notifier
            log.exception("notification sink failed", sink=sink.name)
            error = f"notify {sink.name}: internal error: {type(exc).__name__}"
        duration = time.monotonic() - started
        if error is None:
            log.info(
                "notification sent",
                sink=sink.name,
                delivery=batch.key,
                count=len(batch.notifications),
            )
            return BatchResult(sink.name, batch, ok=True, at=at, duration=duration)
        log.warning(
            "notification failed",
            sink=sink.name,
            delivery=batch.key,
            count=len(batch.notifications),
            error=error,
        )
        return BatchResult(
            sink.name,
            batch,
            ok=False,
            at=at,
            duration=duration,
            error=error,
            status=status,
            attempts=attempts,
        )

    async def _report(self, outcome: BatchResult) -> None:
        if self.on_outcome is None:
            return
        try:
            result = self.on_outcome(outcome)
            if inspect.isawaitable(result):
                await result
        except Exception:  # the audit hook failing must not lose the state update
            self.stats.outcome_hook_failures += 1
            log.exception("notification outcome hook failed", sink=outcome.sink)

    # --- background ----------------------------------------------------------------------

    async def run(self) -> None:
        """Drain the queue and send, and send due repeats every ``tick_every`` seconds, until
        cancelled."""
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + self.tick_every
        while True:
            items: list[_Item] = []
            wait = max(0.0, next_tick - loop.time())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    items.append(await self._queue.get())
            while items and len(items) < self.max_batch:
                try:
                    items.append(self._queue.get_nowait())
                except asyncio.QueueEmpty:
                    break
            if items:
                decisions = {e.finding.id: d for e, d in items if d is not None}
                await self.process([e for e, _ in items], decisions)
                for _ in items:
                    self._queue.task_done()
            if loop.time() >= next_tick:
                await self.tick()
                next_tick = loop.time() + self.tick_every

    async def drain(self) -> None:
        """Wait until every queued event has been processed (for an orderly shutdown)."""
        await self._queue.join()
