"""Sealing a batch of audit drafts into the hash chain without holding the event loop.

``core.audit.build_records`` is CPU (redaction, canonical JSON, SHA-256: ~20 us a draft); a
worker's batch of 512 in one call held every request of its process ~10 ms. ``sealed`` calls
it a slice at a time, the loop turning in between, and gives the records one call would.
(An SQLite file's appends seal on the store's appending thread instead: ``audit_sql``.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditRecord

__all__ = ["SEAL_SLICE", "sealed"]


SEAL_SLICE = 64  # drafts sealed between two turns of the event loop


async def sealed(
    drafts: Sequence[AuditDraft], at: tuple[int, str], now: datetime
) -> list[AuditRecord]:
    """``audit.build_records`` of ``drafts`` after the chain head ``at`` (seq, hash), sealed
    at ``now``, a slice at a time."""
    out: list[AuditRecord] = []
    taken: set[str] = set()
    seq, prev = at[0] + 1, at[1]
    for start in range(0, len(drafts), SEAL_SLICE):
        if start:
            await asyncio.sleep(0)
        part = audit.build_records(
            drafts[start : start + SEAL_SLICE], prev_hash=prev, next_seq=seq, now=now, taken=taken
        )
        out.extend(part)
        seq, prev = part[-1].seq + 1, part[-1].hash
    return out
