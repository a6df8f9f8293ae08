"""Who changed what: the latest change event per pool, to name the cause of new drift.

When a finding appears in a pool shortly after a change event for that pool (or its cluster),
that event — its id, type, source and actor — is attached to the finding as its ``cause``.

Bounded, at O(1) per event: each provider (``aws``, ``azure``, ... -- a fixed set) keeps at
most ``max_scopes_per_source`` scopes in an insertion-ordered dict; recording a scope moves it
to the end and, over the cap, drops the one recorded longest ago; entries older than the
window are dropped from the front as new ones arrive. A sender that names 100,000 invented
clusters therefore pushes out only its own provider's oldest entries, and no event ever scans
the others.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Any

from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.subjects import NodePoolRef

__all__ = ["Attribution"]


class Attribution:
    def __init__(
        self,
        *,
        window: timedelta = timedelta(minutes=15),
        max_scopes_per_source: int = 10_000,
    ) -> None:
        self.window, self.max_scopes_per_source = window, max_scopes_per_source
        self._by_source: dict[str, OrderedDict[NodePoolRef, tuple[datetime, ChangeEvent]]] = {}

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_source.values())

    def record(self, event: ChangeEvent, *, now: datetime) -> None:
        if event.cluster is None:
            return
        scopes = self._by_source.setdefault(event.provider.value, OrderedDict())
        scope = NodePoolRef(event.cluster, event.pool)
        scopes[scope] = (now, event)
        scopes.move_to_end(scope)
        if len(scopes) > self.max_scopes_per_source:
            scopes.popitem(last=False)
        # expired entries at the front (recorded in time order; stops at the first fresh one)
        while scopes:
            oldest = next(iter(scopes.values()))[0]
            if now - oldest <= self.window:
                break
            scopes.popitem(last=False)

    def latest(self, cluster: str, pool: str | None, *, now: datetime) -> ChangeEvent | None:
        """The newest change event of the pool (else of its cluster) within the window."""
        for scope in (NodePoolRef(cluster, pool), NodePoolRef(cluster, None)):
            hit: tuple[datetime, ChangeEvent] | None = None
            for scopes in self._by_source.values():
                found = scopes.get(scope)
                if found is not None and (hit is None or found[0] > hit[0]):
                    hit = found
            if hit is not None and now - hit[0] <= self.window:
                return hit[1]
        return None

    def cause_for(self, cluster: str, pool: str | None, *, now: datetime) -> dict[str, Any] | None:
        e = self.latest(cluster, pool, now=now)
        if e is None:
            return None
        return {
            "eventId": e.id,
            "key": e.key,  # the event's audit record is record_id(EVENT, key)
            "type": e.type,
            "source": e.source,
            "provider": e.provider.value,
            "operation": e.operation.value,
            "actor": e.actor,
            "time": e.to_json()["time"],
        }
