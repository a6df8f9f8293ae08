"""A worker's batch (up to 512 deliveries) is worked through in slices, the event loop turning
in between: the worker process also answers /healthz and the read API, and one batch in one
go held them ~30 ms (``benchmarks/distinct_clusters.py``). Fakes whose awaits never suspend,
so every turn counted is one the worker gave."""

from __future__ import annotations

from collections.abc import Sequence

from fleetwarden.app.inspecting import Inspector, NodeDiffer
from fleetwarden.app.recording import Recorder
from fleetwarden.core.attribution import Attribution
from fleetwarden.core.audit import AuditDraft
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingTracker
from fleetwarden.ports.queue import Delivery
from tests.support.loop_turns import Ticker

BATCH = 512


def event(i: int) -> ChangeEvent:
    return ChangeEvent(
        id=f"e{i}", source="test", type="t", provider=EventSource.AWS, operation=Operation.SCALE,
        cluster=f"cluster-{i}", pool="general",
    )  # fmt: skip


class InstantQueue:
    def __init__(self) -> None:
        self.acked: list[str] = []

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        self.acked += [d.event.id for d in deliveries]


class InstantStore:
    def __init__(self) -> None:
        self.drafts: list[AuditDraft] = []

    async def append_new(
        self, drafts: Sequence[AuditDraft], *, deliver_to: Sequence[str] = ()
    ) -> list[bool]:
        self.drafts += drafts
        return [True] * len(drafts)


async def test_the_inspector_lets_the_loop_turn_within_a_batch():
    queue = InstantQueue()
    spec = NodePoolSpec(name="general", cluster="prod")
    inspector = Inspector(
        queue,  # type: ignore[arg-type]
        [spec],
        NodeDiffer([spec], lambda _c: [], FindingTracker(), lambda _e: None),
        Attribution(),
    )
    with Ticker() as ticker:
        await inspector.handle([Delivery(event(i), token=str(i)) for i in range(BATCH)])
    assert queue.acked == [f"e{i}" for i in range(BATCH)]
    assert inspector.stats.processed == BATCH
    assert ticker.turns >= 3  # at least every 128 events


async def test_the_recorder_lets_the_loop_turn_while_drafting_a_batch():
    store = InstantStore()
    recorder = Recorder(audit=store)  # type: ignore[arg-type]
    with Ticker() as ticker:
        new = await recorder.record([event(i) for i in range(BATCH)])
    assert new == [True] * BATCH
    assert [d.key for d in store.drafts] == [event(i).key for i in range(BATCH)]
    assert ticker.turns >= 3
