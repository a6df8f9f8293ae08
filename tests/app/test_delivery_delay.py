"""The providers' delivery delay (event time -> received), measured by the inspector per
provider apart from MTTD, feeds ``fleetwarden_event_delivery_delay_seconds``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from fleetwarden.adapters.metrics import ServiceMetrics
from fleetwarden.app.inspecting import Inspector, NodeDiffer
from fleetwarden.core.attribution import Attribution
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingTracker
from fleetwarden.ports.queue import Delivery

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Queue:
    def __init__(self) -> None:
        self.acked: list[str] = []

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        self.acked += [d.event.id for d in deliveries]


def delivery(i: int, provider: EventSource, pool: str, delay: float | None) -> Delivery:
    event = ChangeEvent(
        id=f"e{i}",
        source="test",
        type="t",
        provider=provider,
        operation=Operation.SCALE,
        cluster="prod",
        pool=pool,
        time=T0 if delay is not None else None,
        received_at=T0 + timedelta(seconds=delay or 0),
    )
    return Delivery(event, token=str(i))


async def test_each_event_s_delay_is_observed_under_its_provider():
    metrics = ServiceMetrics()
    seen: list[tuple[str, float]] = []

    def observe(provider: str, seconds: float) -> None:
        seen.append((provider, seconds))
        metrics.event_delivery_delay.labels(provider).observe(seconds)

    specs = [NodePoolSpec(name=p, cluster="prod") for p in ("a", "b", "c")]
    queue = Queue()
    inspector = Inspector(
        queue,  # type: ignore[arg-type]
        specs,
        NodeDiffer(specs, lambda _cluster: [], FindingTracker(), lambda _event: None),
        Attribution(),
        debounce=0.0,
        on_delivery_delay=observe,
    )
    await inspector.handle([delivery(1, EventSource.AWS, "a", 420.0)])
    await inspector.handle([delivery(2, EventSource.GCP, "b", 3.5)])
    await inspector.handle([delivery(3, EventSource.AWS, "c", None)])  # no event time
    assert queue.acked == ["e1", "e2", "e3"]
    assert seen == [("aws", 420.0), ("gcp", 3.5)]
    get = metrics.registry.get_sample_value
    name = "fleetwarden_event_delivery_delay_seconds"
    assert get(f"{name}_count", {"provider": "aws"}) == 1.0
    assert get(f"{name}_sum", {"provider": "aws"}) == 420.0
    assert get(f"{name}_bucket", {"provider": "gcp", "le": "5.0"}) == 1.0
