"""The gateway's ingest path assembled: ``app.ingesting.Ingest`` (authenticate, parse, flag,
queue durably) over the queue, the event parsers and the service's Prometheus counters
(``adapters.metrics.IngestMetrics``), with the gateway's settings (credentials per source,
replay window, batch and queue limits, the known pools) and the ring of recent events that
``/api/events`` lists.

No HTTP here (reading the body, writing the answer: ``entrypoints/gateway.py``) and no
decision (``app/ingesting.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from fleetwarden.adapters.metrics import IngestMetrics, ServiceMetrics
from fleetwarden.app.ingesting import Ingest, Parser
from fleetwarden.app.service_config import GatewayConfig
from fleetwarden.formats.events import Reply
from fleetwarden.ports.queue import EventQueue
from fleetwarden.ports.sources import Clock

__all__ = ["build_ingest"]


def build_ingest(
    config: GatewayConfig,
    queue: EventQueue,
    parsers: Mapping[str, Parser],
    metrics: ServiceMetrics,
    *,
    on_reply: Callable[[str, Reply], None] | None,
    clock: Clock,
) -> tuple[Ingest, IngestMetrics]:
    """The ingest use case and its counters (the gateway counts refusals of its own there)."""
    counters = IngestMetrics(metrics, parsers)
    ingest = Ingest(
        queue,
        parsers,
        counters,
        auth=config.auth,
        replay_window=config.replay_window,
        batch_events=config.batch_events,
        retry_after=config.retry_after,
        known_pools=config.known_pools,
        on_reply=on_reply,
        recent=deque(maxlen=config.recent_events),
        clock=clock,
    )
    return ingest, counters
