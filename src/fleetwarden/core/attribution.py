"""Who changed what: the latest change event per pool, to name the cause of new drift.

When a finding appears in a pool shortly after a change event for that pool (or its cluster),
that event — its id, type, source and actor — is attached to the finding as its ``cause``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fleetwarden.core.events import ChangeEvent

__all__ = ["Attribution"]


class Attribution:
    def __init__(
        self, *, window: timedelta = timedelta(minutes=15), max_scopes: int = 100_000
    ) -> None:
        self.window, self.max_scopes = window, max_scopes
        self._latest: dict[tuple[str, str | None], tuple[datetime, ChangeEvent]] = {}

    def record(self, event: ChangeEvent, *, now: datetime) -> None:
        if event.cluster is None:
            return
        if len(self._latest) >= self.max_scopes:
            oldest = min(self._latest, key=lambda k: self._latest[k][0])
            del self._latest[oldest]
        self._latest[(event.cluster, event.pool)] = (now, event)

    def cause_for(self, cluster: str, pool: str | None, *, now: datetime) -> dict[str, Any] | None:
        for scope in ((cluster, pool), (cluster, None)):
            hit = self._latest.get(scope)
            if hit is not None and now - hit[0] <= self.window:
                e = hit[1]
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
        return None
