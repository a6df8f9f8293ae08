"""Audit records: the append-only, hash-chained history of what fleetwarden saw, decided and did.

Every change event (with its actor), finding, decision, action and outcome becomes one
``AuditRecord``.  Records link to each other by id (``refs``: the event a finding was caused
by, the finding a decision is about, the decision an action executes, the action an outcome
reports) and to their predecessor by hash: ``hash = chain_hash(prev_hash, canonical body)``,
``prev_hash`` of the first record is ``GENESIS_HASH``.  Editing, deleting, inserting or
reordering any stored record therefore breaks the chain at that record, and ``verify_chain``
names the first record where it breaks and what happened there.

The hashed body
    ``canonical_body`` is the record's *header* -- the canonical JSON (sorted keys, no
    whitespace, UTF-8, times as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``) of ``{actor, at, cluster,
    id, key, kind, pool, refs, seq, summary}`` -- a newline, and the payload's canonical JSON
    (JSON text holds no raw newline, so the split is unambiguous).  Stores keep exactly that
    payload text, so a verifier re-hashes a record without parsing or re-escaping its payload
    (that is what makes a million records verify in seconds).
    ``chain_hash(prev, body) = sha256(prev + "\\n" + body)`` as lowercase hex.

Secrets
    ``build_records`` passes every payload through ``redact`` and every free-text field
    through ``scrub_text`` *before* hashing: values under secret-looking keys are masked, and
    bearer/basic credentials, JWTs, AWS keys, private-key blocks, URL passwords and
    ``password=...``-style pairs are masked wherever they appear.  No secret reaches a store.

Pure: no I/O, no clock (``now`` is passed in), stdlib only.
"""

from __future__ import annotations

from fleetwarden.core.audit.hashing import (
    GENESIS_HASH,
    canonical_body,
    canonical_json,
    chain_hash,
    format_time,
    parse_time,
    refs_json,
)
from fleetwarden.core.audit.records import (
    AuditDraft,
    AuditKind,
    AuditRecord,
    StoredRow,
    build_records,
    event_draft,
    finding_draft,
    record_body,
    record_from_row,
    record_id,
    record_row,
)
from fleetwarden.core.audit.redaction import REDACTED, redact, redacted_json, scrub_text
from fleetwarden.core.audit.verification import (
    Breach,
    ChainVerifier,
    Problem,
    VerifyResult,
    verify_chain,
)

__all__ = [
    "GENESIS_HASH",
    "REDACTED",
    "AuditDraft",
    "AuditKind",
    "AuditRecord",
    "Breach",
    "ChainVerifier",
    "Problem",
    "StoredRow",
    "VerifyResult",
    "build_records",
    "canonical_body",
    "canonical_json",
    "chain_hash",
    "event_draft",
    "finding_draft",
    "format_time",
    "parse_time",
    "record_body",
    "record_from_row",
    "record_id",
    "record_row",
    "redact",
    "redacted_json",
    "refs_json",
    "scrub_text",
    "verify_chain",
]
