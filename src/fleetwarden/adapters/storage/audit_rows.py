"""The audit store's tables, and how a batch of drafts becomes rows (``audit_sql``).

The tables mirror ``migrations/versions`` (the migrations own the schema; these are for
building queries). ``new_drafts``, ``outbox_rows`` and ``results`` are the batch logic both
append paths share: which drafts make new records (the dedupe by key), what each sink is due,
what each draft's record is. ``append_in_one_transaction`` is an SQLite file's whole append
on the store's appending thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditKind, AuditRecord

__all__ = [
    "COLUMNS",
    "NAMES",
    "PARAMS_PER_STATEMENT",
    "append_in_one_transaction",
    "head",
    "metadata",
    "new_drafts",
    "outbox",
    "outbox_rows",
    "record_of",
    "records",
    "results",
    "row_of",
]

PARAMS_PER_STATEMENT = 500  # keys per IN (...) lookup, below SQLite's parameter limit

metadata = sa.MetaData()
records = sa.Table(
    "audit_records",
    metadata,
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("id", sa.String(128), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("at", sa.String(32), nullable=False),
    sa.Column("cluster", sa.String(255)),
    sa.Column("pool", sa.String(255)),
    sa.Column("actor", sa.Text()),
    sa.Column("summary", sa.Text(), nullable=False),
    sa.Column("refs", sa.Text(), nullable=False),
    sa.Column("key", sa.String(255)),
    sa.Column("payload", sa.Text(), nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)
outbox = sa.Table(
    "event_outbox",
    metadata,
    sa.Column("sink", sa.String(128), primary_key=True),
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("seq", sa.BigInteger()),
)
head = sa.Table(
    "audit_head",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("seq", sa.BigInteger(), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)
COLUMNS = (
    records.c.seq,
    records.c.id,
    records.c.kind,
    records.c.at,
    records.c.cluster,
    records.c.pool,
    records.c.actor,
    records.c.summary,
    records.c.refs,
    records.c.key,
    records.c.payload,
    records.c.prev_hash,
    records.c.hash,
)

NAMES = tuple(c.name for c in COLUMNS)


# ``append_in_one_transaction``'s statements, built once
_HEAD = sa.select(head.c.seq, head.c.hash).where(head.c.id == 1)
_BY_KEYS = sa.select(*COLUMNS).where(records.c.key.in_(sa.bindparam("keys", expanding=True)))
_INSERT = records.insert()
_MOVE_HEAD = (
    head.update()
    .where(head.c.id == 1)
    .values(seq=sa.bindparam("to_seq"), hash=sa.bindparam("to_hash"))
)
_DUE = outbox.insert()


def new_drafts(
    drafts: Sequence[AuditDraft], stored: Mapping[str, AuditRecord]
) -> tuple[list[int], dict[str, int]]:
    """The indices of the drafts that become new records (no key, or a key neither stored
    nor earlier in the batch), and each key's first draft."""
    fresh: list[int] = []
    first: dict[str, int] = {}
    for i, d in enumerate(drafts):
        if d.key is None:
            fresh.append(i)
        elif d.key not in stored and d.key not in first:
            first[d.key] = i
            fresh.append(i)
    return fresh, first


def outbox_rows(new: Sequence[AuditRecord], deliver_to: Sequence[str]) -> list[dict[str, Any]]:
    """What each sink is due: the new event records (``append_new``'s outbox)."""
    return [
        {"sink": sink, "key": r.key, "seq": r.seq}
        for r in new
        if r.key is not None and r.kind is AuditKind.EVENT
        for sink in deliver_to
    ]


def results(
    drafts: Sequence[AuditDraft],
    fresh: Sequence[int],
    new: Sequence[AuditRecord],
    stored: Mapping[str, AuditRecord],
    first: Mapping[str, int],
) -> tuple[list[AuditRecord], list[bool]]:
    """Each draft's record (new, stored before, or an earlier one of the batch), and which
    drafts made a new one."""
    out: list[AuditRecord | None] = [None] * len(drafts)
    for i, r in zip(fresh, new, strict=True):
        out[i] = r
    result: list[AuditRecord] = []
    for i, d in enumerate(drafts):
        rec = out[i]
        if rec is None:  # a key stored before, or earlier in this batch
            assert d.key is not None
            rec = stored.get(d.key) or out[first[d.key]]
            assert rec is not None
        result.append(rec)
    return result, [rec is not None for rec in out]


def row_of(r: AuditRecord) -> dict[str, Any]:
    return dict(zip(NAMES, audit.record_row(r), strict=True))


def record_of(row: Any) -> AuditRecord:
    return audit.record_from_row(tuple(row))


def append_in_one_transaction(
    conn: sa.Connection, drafts: Sequence[AuditDraft], deliver_to: Sequence[str], now: datetime
) -> tuple[list[AuditRecord], list[bool]]:
    """An SQLite file's append on its appending thread (``audit_sql``): what the async path
    does over many awaits (head locked by ``BEGIN IMMEDIATE``, keys looked up, the new drafts
    sealed, rows inserted, head moved, the outbox filled) as one transaction of ``conn``."""
    with conn.begin():
        row = conn.execute(_HEAD).one()
        at = (int(row.seq), str(row.hash))
        keys = list(dict.fromkeys(d.key for d in drafts if d.key is not None))
        stored: dict[str, AuditRecord] = {}
        for i in range(0, len(keys), PARAMS_PER_STATEMENT):
            chunk = keys[i : i + PARAMS_PER_STATEMENT]
            for found in conn.execute(_BY_KEYS, {"keys": chunk}):
                rec = record_of(found)
                if rec.key is not None:
                    stored[rec.key] = rec
        fresh, first = new_drafts(drafts, stored)
        new = audit.build_records(
            [drafts[i] for i in fresh], prev_hash=at[1], next_seq=at[0] + 1, now=now
        )
        if new:
            conn.execute(_INSERT, [row_of(r) for r in new])
            conn.execute(_MOVE_HEAD, {"to_seq": new[-1].seq, "to_hash": new[-1].hash})
        due = outbox_rows(new, deliver_to)
        if due:
            conn.execute(_DUE, due)
    return results(drafts, fresh, new, stored, first)
