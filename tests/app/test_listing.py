"""Listing events and decisions from a real SQLite audit store: newest first, pages that
follow on without gaps or repeats, filters checked on the payload, and a decision shown with the
status its approval gave it -- all from the store, nothing from memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store
from fleetwarden.app import listing
from fleetwarden.app.healing import Healer
from fleetwarden.app.recording import Recorder
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Mode
from fleetwarden.core.tracking import FindingEvent, FindingEventType


def event(i: int, **fields: object) -> ChangeEvent:
    values: dict = {
        "id": f"e{i}",
        "source": "aws.eks",
        "type": "aws.eks.UpdateNodegroupConfig",
        "provider": EventSource.AWS,
        "operation": Operation.SCALE,
        "cluster": "prod-eu-1" if i % 2 else "prod-us-1",
        "pool": "general",
        "actor": f"arn:aws:iam::1:user/{'alice' if i % 3 else 'bob'}",
    }
    values.update(fields)
    route = values.pop("route", "aws")
    return ChangeEvent(**values).via(route)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlAuditStore]:
    s = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    yield s
    await s.close()


async def every_page(store: SqlAuditStore, limit: int, **filters: object) -> list[str]:
    ids: list[str] = []
    before = None
    while True:
        page = await listing.list_events(store, limit=limit, before=before, **filters)
        ids += [e["id"] for e in page.items]
        if page.cursor is None:
            return ids
        before = page.cursor


async def test_pages_list_every_event_once_newest_first(store: SqlAuditStore):
    recorder = Recorder(audit=store)
    await recorder.record([event(i) for i in range(10)])
    await recorder.record([event(3), event(4)])  # redelivered: still one record each
    assert await every_page(store, 3) == [f"e{i}" for i in reversed(range(10))]
    first = await listing.list_events(store, limit=3)
    assert [e["id"] for e in first.items] == ["e9", "e8", "e7"] and first.cursor is not None


async def test_filters_by_cluster_actor_source_and_route(store: SqlAuditStore):
    await Recorder(audit=store).record(
        [
            *(event(i) for i in range(6)),
            event(6, source="other", detail={"source": "aws.eks"}),  # the text, elsewhere
            event(7, route="cloudevents", provider=EventSource.CLOUDEVENTS),
        ]
    )
    assert await every_page(store, 2, cluster="prod-eu-1") == ["e7", "e5", "e3", "e1"]
    assert await every_page(store, 2, actor="*/bob") == ["e6", "e3", "e0"]
    assert "e6" not in await every_page(store, 2, source="aws.eks")
    assert await every_page(store, 2, route="cloudevents") == ["e7"]
    assert await every_page(store, 2, source="nothing") == []


async def test_a_rare_match_is_found_across_pages_that_stop_at_the_scan_budget(
    store: SqlAuditStore,
):
    await Recorder(audit=store).record([event(0, cluster="rare")])
    await Recorder(audit=store).record([event(i, cluster="common") for i in range(1, 40)])
    page = await listing.list_events(store, limit=5, cluster="rare", scan=10)
    assert [e["id"] for e in page.items] == ["e0"], "cluster is a column: no scanning"
    page = await listing.list_events(store, limit=5, source="aws.eks", route="x", scan=10)
    assert page.items == [] and page.cursor is not None, "stopped at the budget, with a cursor"


async def test_a_decision_is_listed_with_the_status_its_approval_gave_it(store: SqlAuditStore):
    healer = Healer(
        ownership=OwnershipMap(), remediator=Remediator(), audit=store, mode=Mode.APPROVAL
    )
    drift = Finding(
        "prod", "general", Layer.L1, "labels.team", "platform", "x", Severity.CRITICAL,
        nodes=("n-1",),
    )  # fmt: skip
    (request,) = await healer.process(
        [FindingEvent(FindingEventType.APPEARED, drift, datetime.now(UTC))]
    )
    page = await listing.list_decisions(store, status="pending-approval")
    assert [d["id"] for d in page.items] == [request.id]
    await healer.approve(request.id)
    assert (await listing.list_decisions(store, status="pending-approval")).items == []
    (listed,) = (await listing.list_decisions(store)).items
    assert (listed["id"], listed["status"]) == (request.id, "execute")
    assert (await listing.list_decisions(store, cluster="elsewhere")).items == []


_NAMES = st.sampled_from(["limit", "cursor", "source", "route", "cluster", "actor", "other"])
_VALUES = st.one_of(
    st.text(max_size=1100),
    st.integers(-5, 2**64).map(str),
    st.sampled_from(["", "²", "٣", "1000", "1001", "0", "a" * 1024, "a" * 1025]),
)


@given(st.dictionaries(_NAMES, _VALUES))
def test_a_page_query_takes_only_valid_values_and_names_the_first_bad_one(params):
    """``page_query`` (the read API's parameters): valid values come back as they were
    given (limit 100 when absent); anything else is a BadParameter naming the parameter."""
    try:
        q = listing.page_query(params, listing.EVENT_FILTERS)
    except listing.BadParameter as exc:
        name = str(exc).split()[0]
        assert name in params and name in ("limit", "cursor", *listing.EVENT_FILTERS)
        return
    assert q.limit == int(params.get("limit", 100))
    assert 1 <= q.limit <= listing.MAX_LIMIT
    assert q.before == (int(params["cursor"]) if "cursor" in params else None)
    assert q.filters == {name: params.get(name) for name in listing.EVENT_FILTERS}
    assert all(v is None or 1 <= len(v) <= 1024 for v in q.filters.values())


def test_a_page_query_refuses_digits_int_would_read_differently():
    for raw in ("²", "٣", "1_0", " 5"):
        with pytest.raises(listing.BadParameter, match=r"^limit must be an integer from 1 to"):
            listing.page_query({"limit": raw}, ())


def test_the_next_page_headers_keep_the_query_and_replace_the_cursor():
    params = [("cluster", "prod-*"), ("cursor", "90"), ("actor", "a&b"), ("cluster", "x")]
    headers = listing.next_page_headers("/api/events", params, 42)
    assert headers == {
        "Link": '</api/events?cluster=prod-%2A&actor=a%26b&cluster=x&cursor=42>; rel="next"',
        "X-Next-Cursor": "42",
    }
    assert listing.next_page_headers("/api/events", params, None) == {}  # nothing older
