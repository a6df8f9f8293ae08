"""Audit store: hash-chained records, the chain-head row, append-only triggers.

Revision ID: 0001_audit
Revises:
Create Date: 2026-11-30

``audit_head`` holds the chain head (seq, hash) in one row (id = 1): appenders lock it
(``SELECT ... FOR UPDATE`` in PostgreSQL, ``BEGIN IMMEDIATE`` in SQLite) so two replicas
cannot fork the chain, and verification uses it to see records deleted from the end.
Triggers refuse UPDATE and DELETE on records (and moving the head backwards): a mistake or a
careless script cannot rewrite history; a database owner still can, which is what
``fleetwarden audit verify`` is for.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_audit"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS_HASH = "0" * 64  # frozen copy of core.audit.GENESIS_HASH

_PG_TRIGGERS = [
    """
    CREATE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'audit records are append-only (% refused)', TG_OP;
    END $$
    """,
    """
    CREATE TRIGGER audit_records_append_only BEFORE UPDATE OR DELETE ON audit_records
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()
    """,
    """
    CREATE TRIGGER audit_records_no_truncate BEFORE TRUNCATE ON audit_records
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change()
    """,
    """
    CREATE FUNCTION audit_head_forward() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.seq < OLD.seq THEN
            RAISE EXCEPTION 'the audit chain head only moves forward';
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER audit_head_forward BEFORE UPDATE ON audit_head
    FOR EACH ROW EXECUTE FUNCTION audit_head_forward()
    """,
]

_SQLITE_TRIGGERS = [
    """
    CREATE TRIGGER audit_records_no_update BEFORE UPDATE ON audit_records
    BEGIN SELECT RAISE(ABORT, 'audit records are append-only (UPDATE refused)'); END
    """,
    """
    CREATE TRIGGER audit_records_no_delete BEFORE DELETE ON audit_records
    BEGIN SELECT RAISE(ABORT, 'audit records are append-only (DELETE refused)'); END
    """,
    """
    CREATE TRIGGER audit_head_forward BEFORE UPDATE ON audit_head WHEN NEW.seq < OLD.seq
    BEGIN SELECT RAISE(ABORT, 'the audit chain head only moves forward'); END
    """,
]


def upgrade() -> None:
    # INTEGER PRIMARY KEY is SQLite's rowid: seq order is the table's own order there.
    seq_type = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "audit_records",
        sa.Column("seq", seq_type, primary_key=True, autoincrement=False),
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("at", sa.String(32), nullable=False),  # core.audit.format_time text
        sa.Column("cluster", sa.String(255), nullable=True),
        sa.Column("pool", sa.String(255), nullable=True),
        sa.Column("actor", sa.Text(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("refs", sa.Text(), nullable=False),  # canonical JSON list of record ids
        sa.Column("key", sa.String(255), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),  # canonical JSON, exactly as hashed
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("id", name="uq_audit_records_id"),
        sa.UniqueConstraint("key", name="uq_audit_records_key"),
    )
    op.create_index("ix_audit_records_cluster", "audit_records", ["cluster", "pool", "seq"])
    op.create_index("ix_audit_records_pool", "audit_records", ["pool", "seq"])
    op.create_index("ix_audit_records_actor", "audit_records", ["actor", "seq"])
    op.create_index("ix_audit_records_kind", "audit_records", ["kind", "seq"])
    op.create_index("ix_audit_records_at", "audit_records", ["at"])
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.CheckConstraint("id = 1", name="ck_audit_head_one_row"),
    )
    op.bulk_insert(head, [{"id": 1, "seq": 0, "hash": GENESIS_HASH}])
    dialect = op.get_bind().dialect.name
    for statement in _PG_TRIGGERS if dialect == "postgresql" else _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.drop_table("audit_head")
    op.drop_table("audit_records")  # drops its triggers and indexes
    if dialect == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS audit_refuse_change()")
        op.execute("DROP FUNCTION IF EXISTS audit_head_forward()")
