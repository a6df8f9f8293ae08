"""Audit store: an index on (kind, at), for reading one kind of record since a time.

Revision ID: 0002_kind_at
Revises: 0001_audit
Create Date: 2026-12-07

``fleetwarden serve`` rebuilds the policy guards' history at start-up from the decision
records and approval notes of the last hour or so (``app/healing.py`` ``Healer.restore``:
``kind IN ('decision', 'note') AND at >= ? ORDER BY seq DESC``).  With only
``(kind, seq)`` and ``(at)`` SQLite takes the kind index and checks the time of every
decision ever stored (about 0.1 s per million records, more as the log grows, at every
start); with ``(kind, at)`` it reads the window alone (5 ms for the same store).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002_kind_at"
down_revision: str | None = "0001_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_audit_records_kind_at", "audit_records", ["kind", "at"])


def downgrade() -> None:
    op.drop_index("ix_audit_records_kind_at", table_name="audit_records")
