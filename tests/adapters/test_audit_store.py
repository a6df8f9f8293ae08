"""The SQL audit store on SQLite and on a real PostgreSQL (scripts/pg-test-env).

Each test gets a fresh, empty database of each backend.  Tampering is done the way someone
with database access would do it: raw SQL, after switching off the append-only triggers
(the triggers stop mistakes, not the database's owner; ``verify`` is what catches the owner).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from fleetwarden.adapters.storage import audit_sql, sealing
from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store, store_url
from fleetwarden.core import audit
from fleetwarden.core.audit import GENESIS_HASH, AuditDraft, AuditKind, Problem
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.ports.audit import (
    AuditConflict,
    AuditSchemaError,
    AuditStore,
    AuditUnavailable,
)
from tests.support import pg_env
from tests.support.clocks import TickingClock
from tests.support.loop_turns import Ticker

_files = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One private PostgreSQL for the session; each test uses a database of its own."""
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


@dataclass
class Backend:
    name: str
    url: str  # a fresh, empty database
    opened: list[SqlAuditStore]

    async def open(self, **options: object) -> SqlAuditStore:
        options.setdefault("clock", TickingClock(datetime(2026, 11, 29, 10, 0, tzinfo=UTC)))
        store = await open_audit_store(self.url, **options)
        self.opened.append(store)
        return store

    async def sql(self, *statements: str, bypass: bool = True) -> list[list[tuple]]:
        """Run raw SQL as the database owner; ``bypass`` switches the append-only triggers
        off first (for this connection / transaction only where the database allows)."""
        engine = create_async_engine(store_url(self.url))
        results: list[list[tuple]] = []
        try:
            async with engine.begin() as conn:
                if bypass and self.name == "postgresql":
                    await conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
                elif bypass:
                    for trigger in ("audit_records_no_update", "audit_records_no_delete"):
                        await conn.execute(sa.text(f"DROP TRIGGER IF EXISTS {trigger}"))
                for statement in statements:
                    result = await conn.execute(sa.text(statement))
                    results.append([tuple(r) for r in result] if result.returns_rows else [])
        finally:
            await engine.dispose()
        return results


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.live)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audit-{next(_files)}.db"
    else:
        url = await pg_env.fresh_database_async(request.getfixturevalue("pg_server"))
    b = Backend(request.param, url, [])
    try:
        yield b
    finally:
        for store in b.opened:
            await store.close()


def event(i: int, **fields: object) -> ChangeEvent:
    values: dict = {
        "id": f"evt-{i}",
        "source": "aws.eks/eu-west-1/123456789012",
        "type": "aws.eks.UpdateNodegroupConfig",
        "provider": EventSource.AWS,
        "operation": Operation.UPDATE,
        "cluster": "prod-eu-1",
        "pool": "general",
        "actor": "arn:aws:sts::123456789012:assumed-role/platform-oncall/alice",
        "detail": {"instanceTypes": ["t3.medium"]},
    }
    values.update(fields)
    return ChangeEvent(**values)


def incident(i: int, **event_fields: object) -> list[AuditDraft]:
    """event -> finding -> decision -> action -> outcome, linked by refs."""
    ev = event(i, **event_fields)
    finding = Finding(ev.cluster or "", ev.pool, Layer.SPEC, "instanceType", "m5.large",
                      "t3.medium", Severity.CRITICAL)  # fmt: skip
    ev_id = audit.record_id(AuditKind.EVENT, ev.key)
    return [
        audit.event_draft(ev),
        audit.finding_draft(finding, refs=(ev_id,), key=f"{ev.key}:f"),
        AuditDraft(AuditKind.DECISION, "revert", cluster=ev.cluster, pool=ev.pool,
                   actor="fleetwarden/policy", key=f"{ev.key}:d",
                   refs=(audit.record_id(AuditKind.FINDING, f"{ev.key}:f"),)),
        AuditDraft(AuditKind.ACTION, "update nodegroup", cluster=ev.cluster, pool=ev.pool,
                   actor="fleetwarden/remediator", key=f"{ev.key}:a",
                   refs=(audit.record_id(AuditKind.DECISION, f"{ev.key}:d"),)),
        AuditDraft(AuditKind.OUTCOME, "succeeded", cluster=ev.cluster, pool=ev.pool,
                   actor="fleetwarden/remediator", key=f"{ev.key}:o",
                   refs=(audit.record_id(AuditKind.ACTION, f"{ev.key}:a"),),
                   payload={"status": "succeeded"}),
    ]  # fmt: skip


# --------------------------------------------------------------------------- schema


async def test_opening_an_empty_database_migrates_it_to_head(backend: Backend):
    store = await backend.open()
    assert isinstance(store, AuditStore)  # the port, structurally
    [[version], [head]] = await backend.sql(
        "SELECT version_num FROM alembic_version", "SELECT seq, hash FROM audit_head",
        bypass=False,
    )  # fmt: skip
    assert version == ("0004_guard_claims",)
    assert head == (0, GENESIS_HASH)
    assert await store.last() is None
    assert (await store.verify()).ok
    await audit_sql.upgrade_async(backend.url)  # again: a no-op
    again = await backend.open()
    assert await again.last() is None


async def test_a_store_of_the_first_schema_is_upgraded_on_open_and_keeps_its_records(
    backend: Backend,
):
    """0002 adds the (kind, at) index that the start-up replay of decisions reads through,
    0003 the event outbox."""
    from alembic import command

    async def indexes() -> set[str]:
        engine = create_async_engine(store_url(backend.url))
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(
                    lambda c: {i["name"] for i in sa.inspect(c).get_indexes("audit_records")}
                )
        finally:
            await engine.dispose()

    first = await backend.open()
    await first.append_many(incident(1))
    await first.close()
    cfg = audit_sql.alembic_config(backend.url)
    await asyncio.to_thread(command.downgrade, cfg, "0001_audit")  # a store of 0001's time
    assert "ix_audit_records_kind_at" not in await indexes()
    store = await backend.open()  # migrates
    [[version], rows] = await backend.sql(
        "SELECT version_num FROM alembic_version",
        "SELECT kind FROM audit_records ORDER BY seq",
        bypass=False,
    )
    assert version == ("0004_guard_claims",)
    assert rows == [(d.kind.value,) for d in incident(1)]
    assert (await store.verify()).ok
    assert "ix_audit_records_kind_at" in await indexes()


async def test_a_schema_newer_than_the_code_is_refused_with_a_clear_message(backend: Backend):
    await backend.open()
    await backend.sql("UPDATE alembic_version SET version_num = '0099_future'", bypass=False)
    with pytest.raises(AuditSchemaError, match="newer than this fleetwarden"):
        await open_audit_store(backend.url)


async def test_records_are_append_only_for_ordinary_sql(backend: Backend):
    store = await backend.open()
    await store.append_many(incident(1))
    for statement in (
        "UPDATE audit_records SET summary = 'x' WHERE seq = 1",
        "DELETE FROM audit_records WHERE seq = 1",
        "UPDATE audit_head SET seq = 0",
    ):
        with pytest.raises(sa.exc.DBAPIError, match=r"append-only|only moves forward"):
            await backend.sql(statement, bypass=False)
    assert (await store.verify()).ok


# --------------------------------------------------------------------------- append / read


async def test_append_query_and_iterate_a_linked_incident(backend: Backend):
    store = await backend.open()
    records = await store.append_many(incident(1) + incident(2, cluster="prod-us-1", pool="gpu"))
    assert [r.seq for r in records] == list(range(1, 11))
    ev, finding, decision, action, outcome = records[:5]
    assert finding.refs == (ev.id,) and decision.refs == (finding.id,)
    assert action.refs == (decision.id,) and outcome.refs == (action.id,)
    assert ev.actor == "arn:aws:sts::123456789012:assumed-role/platform-oncall/alice"
    assert await store.last() == (10, records[-1].hash)

    assert [r.seq async for r in store.iterate()] == list(range(1, 11))
    assert [r.seq async for r in store.iterate(after_seq=7)] == [8, 9, 10]

    def seqs(found: list) -> list[int]:
        return [r.seq for r in found]

    assert seqs(await store.query(cluster="prod-us-1")) == [10, 9, 8, 7, 6]
    assert seqs(await store.query(cluster="prod-*", pool="gpu", kind=AuditKind.EVENT)) == [6]
    assert seqs(await store.query(kind=[AuditKind.ACTION, AuditKind.OUTCOME])) == [10, 9, 5, 4]
    assert seqs(await store.query(actor="*alice")) == [6, 1]
    assert seqs(await store.query(actor="fleetwarden/policy", limit=1)) == [8]
    assert seqs(await store.query(ref=finding.id)) == [3]
    assert seqs(await store.query(before_seq=3)) == [2, 1]
    assert seqs(await store.query(cluster="nope")) == []
    # times: each batch is one clock tick (a second) apart
    more = await store.append_many([AuditDraft(AuditKind.NOTE, "later")])
    assert seqs(await store.query(since=more[0].at)) == [11]
    assert seqs(await store.query(until=more[0].at, kind=AuditKind.EVENT)) == [6, 1]
    assert (await store.verify()).ok


async def test_the_same_event_appended_again_is_the_stored_record(backend: Backend):
    store = await backend.open()
    first = await store.append_many(incident(1))
    again = await store.append_many(incident(1))  # an at-least-once worker retrying
    assert again == first
    twice_in_a_batch = await store.append_many(
        [audit.event_draft(event(2)), audit.event_draft(event(2))]
    )
    assert twice_in_a_batch[0] == twice_in_a_batch[1] and twice_in_a_batch[0].seq == 6
    mixed = await store.append_many([audit.event_draft(event(1)), AuditDraft(AuditKind.NOTE)])
    assert mixed[0] == first[0] and mixed[1].seq == 7
    assert await store.last() == (7, mixed[1].hash)
    assert (await store.verify()).checked == 7


async def test_append_new_says_which_drafts_became_records(backend: Backend):
    """The key is the dedupe mark, checked and written in the record's own transaction: the
    worker learns which events are redeliveries from the append itself."""
    store = await backend.open()
    assert await store.append_new([audit.event_draft(event(1)), audit.event_draft(event(2))]) == [
        True,
        True,
    ]
    again = [audit.event_draft(event(2)), audit.event_draft(event(3)), audit.event_draft(event(3))]
    assert await store.append_new(again) == [False, True, False]
    assert (await store.verify()).checked == 3


async def test_a_new_event_is_due_to_each_following_sink_once_until_marked_sent(
    backend: Backend,
):
    """The outbox rows are written with the event record: a replayed event (already stored)
    is not due again, so a sink hears of it once."""
    store = await backend.open()
    drafts = [audit.event_draft(event(i)) for i in range(3)]
    await store.append_new(drafts[:2], deliver_to=("feed", "other"))
    await store.append_new([drafts[1], drafts[2]], deliver_to=("feed", "other"))  # a replay
    await store.append_new([AuditDraft(AuditKind.NOTE, key="n")], deliver_to=("feed",))
    due = await store.fetch_due("feed")
    assert [r.key for r in due] == [d.key for d in drafts]
    assert due[0].payload["event"]["id"] == "evt-0"
    assert [r.key for r in await store.fetch_due("feed", limit=1)] == [drafts[0].key]
    await store.mark_sent("feed", [drafts[0].key, drafts[1].key])
    assert [r.key for r in await store.fetch_due("feed")] == [drafts[2].key]
    assert len(await store.fetch_due("other")) == 3, "each sink on its own"
    await store.append_new(drafts, deliver_to=("feed",))  # replayed after the send
    assert [r.key for r in await store.fetch_due("feed")] == [drafts[2].key]
    assert await store.fetch_due("nobody") == []


async def test_one_process_at_a_time_sends_a_sinks_due_events(backend: Backend):
    one, two = await backend.open(), await backend.open()
    async with (
        one.sender_lock("feed") as first,
        two.sender_lock("feed") as second,
        two.sender_lock("other") as other,
    ):
        assert (first, second, other) == (True, False, True)
    async with two.sender_lock("feed") as again:
        assert again, "released at the end of the block"


async def test_payload_contains_finds_records_by_their_payload_text(backend: Backend):
    store = await backend.open()
    await store.append_many([audit.event_draft(event(1)), audit.event_draft(event(2, id="x%_"))])
    assert [r.payload["event"]["id"] for r in await store.query(payload_contains='"id":"x%_"')] == [
        "x%_"
    ]
    assert len(await store.query(payload_contains='"source":"aws.eks/eu-west-1/')) == 2
    assert await store.query(payload_contains='"id":"evt-3"') == []


async def test_an_explicit_id_that_is_taken_is_a_conflict_and_nothing_is_stored(backend: Backend):
    store = await backend.open()
    await store.append_many([AuditDraft(AuditKind.NOTE, id="n-1")])
    with pytest.raises(AuditConflict):
        await store.append_many([AuditDraft(AuditKind.NOTE), AuditDraft(AuditKind.NOTE, id="n-1")])
    assert await store.last() == (1, (await store.query())[0].hash)
    assert (await store.verify()).ok
    # the store appends on after a refused append (SQLite: its appending connection anew)
    (after,) = await store.append_many([AuditDraft(AuditKind.NOTE, id="n-2")])
    assert after.seq == 2 and await store.last() == (2, after.hash)
    assert (await store.verify()).checked == 2


async def test_no_secret_reaches_the_database(backend: Backend):
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLXNpZw"
    store = await backend.open()
    await store.append_many(
        [
            audit.event_draft(event(1, detail={"token": "tok-123456", "note": f"Bearer {jwt}"})),
            AuditDraft(
                AuditKind.ACTION,
                "called with password=hunter2",
                actor="svc AKIAIOSFODNN7EXAMPLE",
                payload={"url": "postgresql://fw:s3cr3tpw@db/x", "headers": {"X-Api-Key": "k"}},
            ),
        ]
    )
    [rows] = await backend.sql("SELECT * FROM audit_records", bypass=False)
    text = repr(rows)
    for secret in ("tok-123456", jwt, "hunter2", "AKIAIOSFODNN7EXAMPLE", "s3cr3tpw", "'k'"):
        assert secret not in text
    assert audit.REDACTED in text
    assert (await store.verify()).ok


async def test_concurrent_appenders_on_one_database_never_fork_the_chain(backend: Backend):
    """Two store objects (two replicas: separate engines and connections) and several tasks
    each append at once; the chain stays one chain and every record is in it once."""
    a, b = await backend.open(), await backend.open()
    batches = [incident(i) for i in range(40)]

    async def append(store: SqlAuditStore, mine: list[list[AuditDraft]]) -> None:
        for batch in mine:
            await store.append_many(batch)

    await asyncio.gather(
        append(a, batches[0::4]), append(b, batches[1::4]),
        append(a, batches[2::4]), append(b, batches[3::4]),
    )  # fmt: skip
    result = await a.verify()
    assert result.ok, result.summary()
    assert result.checked == 200 and await b.last() == (200, result.last_hash)
    assert len({r.id async for r in a.iterate()}) == 200


# --------------------------------------------------------------------------- tampering


async def filled(backend: Backend, incidents: int = 6, **options: object) -> SqlAuditStore:
    store = await backend.open(**options)
    for i in range(incidents):
        await store.append_many(incident(i))
    return store


async def test_an_edited_payload_is_named_by_seq_and_id(backend: Backend):
    store = await filled(backend)
    target = (await store.query(before_seq=13, limit=1))[0]  # seq 12, a finding
    await backend.sql(
        "UPDATE audit_records SET payload = replace(payload, 'm5.large', 'x') WHERE seq = 12"
    )
    result = await store.verify()
    assert not result.ok
    assert (result.breach.problem, result.breach.seq) == (Problem.EDITED, 12)
    assert result.breach.id == target.id
    assert result.checked == 11


async def test_a_deleted_row_is_named(backend: Backend):
    store = await filled(backend)
    await backend.sql("DELETE FROM audit_records WHERE seq = 17")
    result = await store.verify()
    assert (result.breach.problem, result.breach.seq) == (Problem.DELETED, 17)
    assert "seq 17 missing" in result.breach.detail


async def test_rows_deleted_from_the_end_are_seen_through_the_chain_head(backend: Backend):
    store = await filled(backend)
    await backend.sql("DELETE FROM audit_records WHERE seq > 27")
    result = await store.verify()
    assert (result.breach.problem, result.breach.seq) == (Problem.DELETED, 28)
    assert "seq 28..30" in result.breach.detail


async def test_two_rows_with_swapped_seqs_are_named_as_reordered(backend: Backend):
    store = await filled(backend)
    moved = (await store.query(before_seq=10, limit=1))[0]  # seq 9
    await backend.sql(
        "UPDATE audit_records SET seq = -1 WHERE seq = 8",
        "UPDATE audit_records SET seq = 8 WHERE seq = 9",
        "UPDATE audit_records SET seq = 9 WHERE seq = -1",
    )
    result = await store.verify()
    assert (result.breach.problem, result.breach.seq) == (Problem.REORDERED, 8)
    assert result.breach.id == moved.id
    assert "written as seq 9" in result.breach.detail


async def test_an_unreadable_row_is_named(backend: Backend):
    store = await filled(backend)
    await backend.sql("UPDATE audit_records SET at = 'last tuesday' WHERE seq = 5")
    result = await store.verify()
    assert (result.breach.problem, result.breach.seq) == (Problem.EDITED, 5)
    assert "unreadable" in result.breach.detail


async def test_tampering_on_a_later_page_is_found_across_pages(backend: Backend):
    store = await filled(backend, incidents=12, page_size=7)
    await backend.sql("UPDATE audit_records SET actor = 'someone else' WHERE seq = 50")
    result = await store.verify()
    assert (result.breach.problem, result.breach.seq, result.checked) == (Problem.EDITED, 50, 49)
    assert [r.seq async for r in store.iterate(after_seq=55)] == [56, 57, 58, 59, 60]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/db", "unsupported audit store 'mysql'"),
        ("not a url", "not a database URL"),
        ("postgresql://fw:pw@127.0.0.1:1/x", "postgresql://fw:\\*\\*\\*@127.0.0.1:1/x"),
    ],
)
async def test_bad_or_unreachable_stores_are_one_error_that_never_shows_a_password(url, message):
    with pytest.raises(AuditUnavailable, match=message) as info:
        await open_audit_store(url, connect_timeout=5)
    assert ":pw@" not in str(info.value)


async def test_a_missing_sqlite_file_is_not_created_by_readers(tmp_path: Path):
    with pytest.raises(AuditUnavailable, match="no audit store at"):
        await open_audit_store(f"sqlite:///{tmp_path}/missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(AuditUnavailable, match="does not exist"):
        await open_audit_store(f"sqlite:///{tmp_path}/no/such/dir/a.db")


# --------------------------------------------------------------------------- big batches


async def test_a_big_batch_is_sealed_in_slices_with_the_loop_turning_between_them(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
):
    """A worker's batch of 512 never holds the event loop while it is sealed, other requests
    are served meanwhile, and the chain is the one sealing the whole batch at once gives. On
    PostgreSQL the loop seals it a slice at a time, turning in between; on an SQLite file the
    whole append (sealing included) runs on the store's appending thread."""
    store = await backend.open()
    sealed: list[tuple[int, int, int]] = []  # (drafts in the call, loop turns before, thread)
    real = audit.build_records
    ticker = Ticker()
    loop_thread = threading.get_ident()

    def spy(drafts, **kw):  # type: ignore[no-untyped-def]
        drafts = list(drafts)
        sealed.append((len(drafts), ticker.turns, threading.get_ident()))
        return real(drafts, **kw)

    monkeypatch.setattr(sealing.audit, "build_records", spy)
    drafts = [audit.event_draft(event(i)) for i in range(400)]
    drafts += [AuditDraft(AuditKind.NOTE, f"note {i}") for i in range(112)]
    with ticker:
        before = ticker.turns
        records = await store.append_many(drafts)
        during = ticker.turns - before
    sizes = [n for n, _, _ in sealed]
    assert sum(sizes) == 512
    if backend.name == "sqlite":
        assert all(thread != loop_thread for _, _, thread in sealed)
        assert during > 0  # the loop went on while the thread appended
    else:
        assert max(sizes) <= sealing.SEAL_SLICE and len(sizes) >= 8
        turns = [t for _, t, _ in sealed]
        assert all(b > a for a, b in itertools.pairwise(turns)), turns
    assert [r.seq for r in records] == list(range(1, 513))
    at_once = real(drafts, prev_hash=GENESIS_HASH, next_seq=1, now=records[0].at)
    assert [r.hash for r in records] == [r.hash for r in at_once]
    assert (await store.verify()).checked == 512


async def test_an_explicit_id_twice_in_a_batch_is_refused_across_slices(backend: Backend):
    store = await backend.open()
    drafts = [AuditDraft(AuditKind.NOTE, id="n-1")]
    drafts += [AuditDraft(AuditKind.NOTE) for _ in range(sealing.SEAL_SLICE + 3)]
    drafts += [AuditDraft(AuditKind.NOTE, id="n-1")]
    with pytest.raises(ValueError, match="the id"):
        await store.append_many(drafts)
    assert await store.last() is None
