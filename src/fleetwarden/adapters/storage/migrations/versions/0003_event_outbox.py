"""Audit store: the event outbox, what event notifications are still to be sent.

Revision ID: 0003_event_outbox
Revises: 0002_kind_at
Create Date: 2026-12-01

A change event stored for the first time (its ``event`` record appended) gets one row here per
notification sink that follows events, written in the same transaction as the record: the
event is then either stored *and* due to every such sink, or neither.  The sender
(``app/relaying.py``) reads the due rows of its sink in record order, sends them, and deletes
them.  A replayed event finds its record stored, so it adds no row: a sink hears of each event
once (or again only when the process died between the receiver's answer and the delete).

Not part of the hash chain: the rows say what is left to do, not what happened.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_event_outbox"
down_revision: str | None = "0002_kind_at"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "event_outbox",
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),  # the event's key (and its record's)
        sa.Column("seq", sa.BigInteger(), nullable=False),  # its record in audit_records
        sa.PrimaryKeyConstraint("sink", "key", name="pk_event_outbox"),
    )
    op.create_index("ix_event_outbox_due", "event_outbox", ["sink", "seq"])


def downgrade() -> None:
    op.drop_table("event_outbox")
