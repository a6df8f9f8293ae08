"""Audit store: guard claims, unique names a worker replica takes once for good.

Revision ID: 0004_guard_claims
Revises: 0003_event_outbox
Create Date: 2026-12-01

Several worker replicas share one policy history (``ports/guards.py``): they decide under the
store's policy lock, from the decisions every replica recorded.  An approval must also run
once whichever replica it reaches: the replica that approves a request first takes the claim
``approve:<decision id>`` (``INSERT ... ON CONFLICT DO NOTHING``) in the same transaction as
its approval note; the others find the claim and answer who holds it.  A worker killed before
its commit leaves neither the claim nor the note.

Not part of the hash chain: the approval note that goes with a claim is the record; the row
says who may act.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_guard_claims"
down_revision: str | None = "0003_event_outbox"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "guard_claims",
        sa.Column("name", sa.String(255), nullable=False),  # approve:<decision id>
        sa.Column("holder", sa.String(255), nullable=False),  # the replica (host:pid, pod)
        sa.Column("at", sa.String(32), nullable=False),  # UTC, the audit records' format
        sa.PrimaryKeyConstraint("name", name="pk_guard_claims"),
    )


def downgrade() -> None:
    op.drop_table("guard_claims")
