"""From queued change events to targeted inspections.

Workers take deliveries from the durable queue (at-least-once), pass each batch through the
durable sinks (``record``: ``app/recording.py``, each sink idempotent by event key on its own),
record each event for attribution, and inspect the pool it names: the first event for a pool
is inspected at once (leading edge); further events for that pool within the debounce window
are coalesced into one trailing inspection. A delivery is acknowledged only after the
inspection that covers it has run.

Duplicates are what the sinks say they already held (a redelivery after a crash, or an event
sent again by its source): counted, acknowledged, not inspected again. Without ``record``
(tests) a bounded in-memory set of keys decides.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from fleetwarden.app.recording import Checkpoint, no_checkpoint
from fleetwarden.core import eventrules
from fleetwarden.core.attribution import Attribution
from fleetwarden.core.diffing import PoolIndex, diff_pool
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.nodes import POOL_LABELS, ObservedNode, pool_of
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.tracking import FindingEvent, FindingTracker
from fleetwarden.ports.queue import Delivery, EventQueue, QueueUnavailable
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["InspectionStats", "Inspector", "NodeSource", "snapshot_source"]

NodeSource = Callable[[str], Sequence[ObservedNode] | None]  # cluster -> nodes, None: unknown


@dataclass
class InspectionStats:
    processed: int = 0
    duplicates: int = 0
    coalesced: int = 0
    inspections: int = 0
    no_data: int = 0
    record_failures: int = 0
    # event receipt -> finding: a count and a sum only (bounded); the distribution is the
    # Prometheus histogram that ``on_latency`` feeds
    latency_count: int = 0
    latency_seconds: float = 0.0


class _SeenKeys:
    """Keys of processed events (bounded LRU): redeliveries after a crash have no effect."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._keys: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def add(self, key: str) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)
        if len(self._keys) > self.capacity:
            self._keys.popitem(last=False)


class Inspector:
    def __init__(
        self,
        queue: EventQueue,
        specs: Sequence[NodePoolSpec],
        nodes: NodeSource,
        tracker: FindingTracker,
        attribution: Attribution,
        emit: Callable[[FindingEvent], None],
        *,
        options: DiffOptions = DiffOptions(),
        debounce: float = 2.0,
        batch: int = 512,
        record: Callable[[Sequence[ChangeEvent]], Awaitable[Sequence[bool]]] | None = None,
        on_latency: Callable[[float], None] | None = None,
        on_count: Callable[[str, int], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        checkpoint: Checkpoint = no_checkpoint,
    ) -> None:
        self.queue, self.nodes, self.tracker, self.attribution = queue, nodes, tracker, attribution
        self.emit, self.options, self.debounce, self.batch = emit, options, debounce, batch
        self.record, self.on_latency, self.clock = record, on_latency, clock
        self.on_count = on_count or (lambda _name, _n: None)
        self.checkpoint = checkpoint  # "before-ack"; a no-op outside the crash-point tests
        self.indexes: dict[str, PoolIndex] = {}
        by_cluster: dict[str, list[NodePoolSpec]] = {}
        for spec in specs:
            if spec.cluster:
                by_cluster.setdefault(spec.cluster, []).append(spec)
        self.indexes = {c: PoolIndex(s) for c, s in by_cluster.items()}
        self.seen = _SeenKeys()
        self.stats = InspectionStats()
        self._last_run: dict[tuple[str, str | None], float] = {}
        self._pending: dict[tuple[str, str | None], list[Delivery]] = {}
        self._timers: dict[tuple[str, str | None], asyncio.Task[None]] = {}
        self._acking: set[asyncio.Task[None]] = set()  # trailing inspections being acked
        self._pool_labels = options.pool_labels or POOL_LABELS

    async def run(self) -> None:
        try:
            while True:
                try:
                    deliveries = await self.queue.get_batch(self.batch, timeout=0.5)
                except QueueUnavailable:
                    await asyncio.sleep(1.0)
                    continue
                if deliveries:
                    await self.handle(deliveries)
        finally:
            for task in [*self._timers.values(), *self._acking]:
                task.cancel()

    async def handle(self, deliveries: Sequence[Delivery]) -> None:
        now_dt = self.clock.now()
        ack_now: list[Delivery] = []
        leading: dict[tuple[str, str | None], list[Delivery]] = {}
        fresh: list[Delivery] = []
        batch_keys: set[str] = set()
        for d in deliveries:
            known = self.record is None and d.event.key in self.seen
            if known or d.event.key in batch_keys:
                self._duplicate(d, ack_now)
            else:
                batch_keys.add(d.event.key)
                fresh.append(d)
        if fresh and self.record is not None:
            # the effects are durable before anything is acknowledged; a crash at any point
            # redelivers, and each sink then adds only what it lacks
            try:
                new = await self.record([d.event for d in fresh])
            except Exception:  # the store is down: retry the batch later, keep the loop alive
                self.stats.record_failures += 1
                with contextlib.suppress(QueueUnavailable):
                    await self.queue.nack(fresh, delay=1.0)
                    if ack_now:
                        await self.queue.ack(ack_now)
                return
            for d, is_new in zip(fresh, new, strict=True):
                if not is_new:
                    self._duplicate(d, ack_now)
            fresh = [d for d, is_new in zip(fresh, new, strict=True) if is_new]
        for d in fresh:
            event = d.event
            self.seen.add(event.key)
            self.stats.processed += 1
            self.attribution.record(event, now=now_dt)
            key = eventrules.coalesce_key(event)
            if key is None or key[0] not in self.indexes:
                ack_now.append(d)  # nothing to inspect: recorded, done
                continue
            last = self._last_run.get(key)
            if key in leading:
                leading[key].append(d)
            elif last is None or self.clock.time() - last >= self.debounce:
                leading[key] = [d]
            else:
                self.stats.coalesced += 1
                self.on_count("coalesced", 1)
                self._pending.setdefault(key, []).append(d)
                if key not in self._timers:
                    delay = max(0.0, last + self.debounce - self.clock.time())
                    self._timers[key] = asyncio.create_task(self._trailing(key, delay))
        for key, group in leading.items():
            self.stats.coalesced += len(group) - 1
            if len(group) > 1:
                self.on_count("coalesced", len(group) - 1)
            self._inspect(key, group)
            ack_now.extend(group)
        if ack_now:  # one acknowledgement for the whole batch, after every inspection ran
            self.checkpoint("before-ack")
            with contextlib.suppress(QueueUnavailable):
                await self.queue.ack(ack_now)

    def _duplicate(self, d: Delivery, ack_now: list[Delivery]) -> None:
        self.stats.duplicates += 1
        self.on_count("duplicate", 1)
        ack_now.append(d)

    async def _trailing(self, key: tuple[str, str | None], delay: float) -> None:
        me = asyncio.current_task()
        try:
            await asyncio.sleep(delay)
            group = self._pending.pop(key, [])
            # events from now on need a trailing inspection of their own: without this, one
            # arriving while the ack below is awaited would wait for its lease to run out
            del self._timers[key]
            if me is not None:
                self._acking.add(me)  # still ours (run() cancels it) while it acknowledges
            if group:
                self._inspect(key, group)
                self.checkpoint("before-ack")
                with contextlib.suppress(QueueUnavailable):
                    await self.queue.ack(group)
        finally:
            if self._timers.get(key) is me:
                del self._timers[key]
            if me is not None:
                self._acking.discard(me)

    def _inspect(self, key: tuple[str, str | None], group: list[Delivery]) -> None:
        """Diff the pool (or the whole cluster) now; the caller acknowledges ``group``."""
        cluster, pool = key
        self._last_run[key] = self.clock.time()
        index = self.indexes[cluster]
        nodes = self.nodes(cluster)
        now_dt = self.clock.now()
        if nodes is None:
            self.stats.no_data += 1
            self.on_count("no_data", 1)
        else:
            specs = [index.spec_for(pool)] if pool is not None else list(index.specs.values())
            for spec in specs:
                if spec is None:
                    continue  # an unknown pool: flagged on the event already
                members = [
                    n
                    for n in nodes
                    if index.spec_for(pool_of(n, pool_labels=self._pool_labels)) is spec
                ]
                findings = diff_pool(spec, members, cluster=cluster, options=self.options)
                for ev in self.tracker.update((cluster, spec.name), findings, now=now_dt):
                    self.emit(ev)
            self.stats.inspections += 1
            self.on_count("inspected", 1)
        done = self.clock.time()
        for d in group:
            if d.event.received_at is not None:
                latency = done - d.event.received_at.timestamp()
                self.stats.latency_count += 1
                self.stats.latency_seconds += latency
                if self.on_latency is not None:
                    self.on_latency(latency)


def snapshot_source(snapshot: Mapping[str, Sequence[ObservedNode]]) -> NodeSource:
    """The latest known state from node dumps, for clusters without a live connection."""
    return lambda cluster: snapshot.get(cluster)
