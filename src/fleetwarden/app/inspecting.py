"""From queued change events to targeted inspections.

Workers take deliveries from the durable queue (at-least-once), pass each batch through the
durable sinks (``record``: ``app/recording.py``, each sink idempotent by event key on its own),
record each event for attribution, and inspect the pool it names: the first event for a pool
is inspected at once (leading edge); further events for that pool within the debounce window
are coalesced into one trailing inspection. A delivery is acknowledged only after the
inspection that covers it has run. Inspecting is asking a ``PoolDiffer`` to re-diff the pool:
the live watcher of the cluster where there is one, else the latest node dump
(``app/serving.py``; ``NodeDiffer`` here for the nodes an ``ObservedSource`` gives), through the one
"nodes -> diff -> track" step (``app/rediffing.diff_and_track``).

The next batch is leased while one is being recorded and inspected (the lease runs on the
queue's own thread): a worker behind a busy gateway waits for the queue's write lock once a
batch, not twice.

Duplicates are what the sinks say they already held (a redelivery after a crash, or an event
sent again by its source): counted, acknowledged, not inspected again. Without ``record``
(tests) a bounded in-memory set of keys decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from fleetwarden.app.recording import Checkpoint, no_checkpoint
from fleetwarden.app.rediffing import diff_and_track
from fleetwarden.core import eventrules
from fleetwarden.core.attribution import Attribution
from fleetwarden.core.diffing import PoolIndex
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.fleet import assign_pools
from fleetwarden.core.nodes import POOL_LABELS, pool_of
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.subjects import NodePoolRef
from fleetwarden.core.tracking import FindingEvent, FindingTracker
from fleetwarden.logs import get_logger, is_debug
from fleetwarden.ports.queue import Delivery, EventQueue, QueueUnavailable
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock, ObservedSource

__all__ = ["InspectionStats", "Inspector", "NodeDiffer", "PoolDiffer"]

YIELD_EVERY = 128  # events recorded and routed between two turns of the event loop

log = get_logger("fleetwarden.inspecting")
_std = logging.getLogger("fleetwarden.inspecting")  # for the hot path's level check


class PoolDiffer(Protocol):
    def knows(self, cluster: str) -> bool:
        """Whether the cluster's nodes are known (a synced watcher, a node dump)."""
        ...

    async def rediff(self, cluster: str, scope: str) -> int:
        """Diff the desired pool ``scope`` of ``cluster`` now, track and emit what changed;
        the number of finding events emitted."""
        ...


class NodeDiffer:
    """Re-diffs from the nodes an ``ObservedSource`` gives (node dumps; tests)."""

    def __init__(
        self,
        specs: Sequence[NodePoolSpec],
        nodes: ObservedSource,
        tracker: FindingTracker,
        emit: Callable[[FindingEvent], None],
        *,
        options: DiffOptions = DiffOptions(),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.nodes, self.tracker, self.emit = nodes, tracker, emit
        self.options, self.clock = options, clock
        self.indexes = _indexes(specs)
        self._pool_labels = options.pool_labels or POOL_LABELS

    def knows(self, cluster: str) -> bool:
        return self.nodes(cluster) is not None

    async def rediff(self, cluster: str, scope: str) -> int:
        index = self.indexes.get(cluster)
        spec = index.specs.get(scope) if index is not None else None
        if index is None or spec is None:
            return 0
        members = [
            n
            for n in self.nodes(cluster) or ()
            if index.spec_for(pool_of(n, pool_labels=self._pool_labels)) is spec
        ]
        events = diff_and_track(
            self.tracker,
            cluster,
            {scope: (spec, members)},
            options=self.options,
            now=self.clock.now(),
        )
        for ev in events:
            self.emit(ev)
        return len(events)


def _indexes(specs: Sequence[NodePoolSpec]) -> dict[str, PoolIndex]:
    """Each cluster's pools as a scan assigns them: a name defined twice is compared in
    neither definition (``fleet.assign_pools``), not in whichever came last."""
    by_cluster: dict[str, list[NodePoolSpec]] = {}
    for spec in specs:
        if spec.cluster:
            by_cluster.setdefault(spec.cluster, []).append(spec)
    return {c: assign_pools(s, [c]).index(c) for c, s in by_cluster.items()}


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
        differ: PoolDiffer,
        attribution: Attribution,
        *,
        debounce: float = 2.0,
        batch: int = 512,
        record: Callable[[Sequence[ChangeEvent]], Awaitable[Sequence[bool]]] | None = None,
        on_latency: Callable[[float], None] | None = None,
        on_count: Callable[[str, int], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        checkpoint: Checkpoint = no_checkpoint,
        on_delivery_delay: Callable[[str, float], None] | None = None,
    ) -> None:
        self.queue, self.differ, self.attribution = queue, differ, attribution
        self.debounce, self.batch = debounce, batch
        self.record, self.on_latency, self.clock = record, on_latency, clock
        self.on_count = on_count or (lambda _name, _n: None)
        # the provider's delay (event time -> received), by provider: apart from MTTD
        self.on_delivery_delay = on_delivery_delay
        self.checkpoint = checkpoint  # "before-ack"; a no-op outside the crash-point tests
        self.indexes = _indexes(specs)
        self.seen = _SeenKeys()
        self.stats = InspectionStats()
        self._last_run: dict[NodePoolRef, float] = {}
        self._pending: dict[NodePoolRef, list[Delivery]] = {}
        self._timers: dict[NodePoolRef, asyncio.Task[None]] = {}
        self._acking: set[asyncio.Task[None]] = set()  # trailing inspections being acked

    async def run(self) -> None:
        ahead: asyncio.Task[list[Delivery]] | None = None
        try:
            while True:
                if ahead is None:
                    ahead = asyncio.ensure_future(self.queue.get_batch(self.batch, timeout=0.5))
                try:
                    deliveries = await ahead
                except QueueUnavailable:
                    ahead = None
                    await asyncio.sleep(1.0)
                    continue
                ahead = None
                if deliveries:
                    # the next lease runs on the queue's thread while this batch is recorded
                    ahead = asyncio.ensure_future(self.queue.get_batch(self.batch, timeout=0.5))
                    await self.handle(deliveries)
        finally:
            if ahead is not None:
                await self._hand_back(ahead)
            for task in [*self._timers.values(), *self._acking]:
                task.cancel()

    async def _hand_back(self, ahead: asyncio.Task[list[Delivery]]) -> None:
        """On the way out: a lease taken ahead and not worked on goes back to the queue at
        once (a NATS consumer would otherwise wait out its ack_wait for it); one still being
        taken is cancelled (the queue redelivers whatever it leased)."""
        if not ahead.done():
            ahead.cancel()
            return
        if ahead.cancelled() or ahead.exception() is not None or not ahead.result():
            return
        with contextlib.suppress(Exception):  # the queue may be closing: leases expire then
            await self.queue.nack(ahead.result())

    async def handle(self, deliveries: Sequence[Delivery]) -> None:
        now_dt = self.clock.now()
        ack_now: list[Delivery] = []
        leading: dict[NodePoolRef, list[Delivery]] = {}
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
            except Exception as exc:  # the store is down: retry the batch later, keep the loop
                self.stats.record_failures += 1
                log.warning(
                    "events not recorded: retried later",
                    error=str(exc) or type(exc).__name__,
                    count=len(fresh),
                    event_keys=[d.event.key for d in fresh[:20]],
                )
                with contextlib.suppress(QueueUnavailable):
                    await self.queue.nack(fresh, delay=1.0)
                    if ack_now:
                        await self.queue.ack(ack_now)
                return
            for d, is_new in zip(fresh, new, strict=True):
                if not is_new:
                    self._duplicate(d, ack_now)
            fresh = [d for d, is_new in zip(fresh, new, strict=True) if is_new]
        debug = is_debug(_std)  # the hot path: no work for lines not shown
        for n, d in enumerate(fresh):
            if n and n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # the process's requests between slices of a batch
            event = d.event
            self.seen.add(event.key)
            self.stats.processed += 1
            self.attribution.record(event, now=now_dt)
            key = eventrules.coalesce_key(event)
            if debug:
                log.debug(
                    "event recorded",
                    event_key=event.key,
                    source=event.source,
                    cluster=key.cluster if key else None,
                    pool=key.pool if key else None,
                    attempt=d.attempt,
                )
            if key is None or key.cluster not in self.indexes:
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
            await self._inspect(key, group)
            ack_now.extend(group)
        if ack_now:  # one acknowledgement for the whole batch, after every inspection ran
            self.checkpoint("before-ack")
            with contextlib.suppress(QueueUnavailable):
                await self.queue.ack(ack_now)

    def _duplicate(self, d: Delivery, ack_now: list[Delivery]) -> None:
        self.stats.duplicates += 1
        self.on_count("duplicate", 1)
        ack_now.append(d)

    async def _trailing(self, key: NodePoolRef, delay: float) -> None:
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
                await self._inspect(key, group)
                self.checkpoint("before-ack")
                with contextlib.suppress(QueueUnavailable):
                    await self.queue.ack(group)
        finally:
            if self._timers.get(key) is me:
                del self._timers[key]
            if me is not None:
                self._acking.discard(me)

    async def _inspect(self, key: NodePoolRef, group: list[Delivery]) -> None:
        """Diff the pool (or the whole cluster) now; the caller acknowledges ``group``."""
        # every line of this inspection (the findings it emits, the healer's hand-off) names
        # the event that caused it, and the pool
        bound = structlog.contextvars.bind_contextvars(
            event_key=group[0].event.key, cluster=key.cluster, pool=key.pool
        )
        try:
            await self._inspect_bound(key, group)
        finally:
            structlog.contextvars.reset_contextvars(**bound)

    async def _inspect_bound(self, key: NodePoolRef, group: list[Delivery]) -> None:
        cluster, pool = key.cluster, key.pool
        self._last_run[key] = self.clock.time()
        emitted = 0
        index = self.indexes[cluster]
        known = self.differ.knows(cluster)
        if not known:
            self.stats.no_data += 1
            self.on_count("no_data", 1)
        else:
            specs = [index.spec_for(pool)] if pool is not None else list(index.specs.values())
            for spec in specs:
                if spec is None:
                    # an unknown pool (flagged on the event already), or one defined twice in
                    # its cluster: compared in neither definition (fleet.assign_pools)
                    continue
                emitted += await self.differ.rediff(cluster, spec.name)
            self.stats.inspections += 1
            self.on_count("inspected", 1)
        done = self.clock.time()
        log.debug(
            "pool inspected",
            nodes_known=known,
            finding_events=emitted,
            coalesced_keys=[d.event.key for d in group[1:20]],
        )
        for d in group:
            delay = d.event.delivery_delay
            if delay is not None and self.on_delivery_delay is not None:
                self.on_delivery_delay(d.event.provider.value, delay)
            if d.event.received_at is not None:
                latency = done - d.event.received_at.timestamp()
                self.stats.latency_count += 1
                self.stats.latency_seconds += latency
                if self.on_latency is not None:
                    self.on_latency(latency)
