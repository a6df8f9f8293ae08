"""Audit records and drafts: what is recorded (``AuditKind``), how a draft becomes a chained,
redacted ``AuditRecord``, and the row form stores keep. Pure: ``now`` is passed in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any, Final

from fleetwarden.core.audit.hashing import (
    _LINE_ENCODER,
    _header,
    canonical_body,
    canonical_json,
    chain_hash,
    format_time,
    parse_time,
    refs_json,
)
from fleetwarden.core.audit.redaction import _clean, redacted_json, scrub_text
from fleetwarden.core.describing import describe_drift
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.findings import Finding

__all__ = [
    "AuditDraft",
    "AuditKind",
    "AuditRecord",
    "StoredRow",
    "build_records",
    "event_draft",
    "finding_draft",
    "record_body",
    "record_from_row",
    "record_id",
    "record_row",
]


class AuditKind(StrEnum):
    EVENT = "event"  # a change event, as received (key: the event's dedupe key)
    FINDING = "finding"  # a drift finding, refs: the event(s) that caused it
    DECISION = "decision"  # what policy decided about a finding, refs: the finding(s)
    ACTION = "action"  # a remediation carried out, refs: the decision it executes
    OUTCOME = "outcome"  # how an action ended, refs: the action
    NOTE = "note"  # anything else worth keeping (approvals, operator notes)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class AuditDraft:
    """A record to append; the store assigns ``seq``, ``at``, the hashes and (by default) ``id``.

    ``key`` makes the append idempotent: a draft whose key is already stored is not stored
    again, the existing record is returned instead (an event's key is ``ChangeEvent.key``).
    ``id`` may be given so that drafts of one batch can reference each other; otherwise it is
    ``record_id(kind, key)`` for keyed drafts and derived from the chain position for others.
    """

    kind: AuditKind
    summary: str = ""
    cluster: str | None = None
    pool: str | None = None
    actor: str | None = None
    refs: tuple[str, ...] = ()
    payload: Mapping[str, Any] = field(default_factory=dict, hash=False)
    key: str | None = None
    id: str | None = None


@dataclass(frozen=True, init=False)
class AuditRecord:
    """One stored, chained record.

    ``payload_json`` is the payload's canonical JSON text, exactly as hashed and stored;
    ``payload`` is that text parsed (once, on first use).  ``at_text`` is the time as hashed:
    a store passes the text it holds (so a record whose time text was edited fails to
    verify even when it names the same instant).
    """

    seq: int
    id: str
    kind: AuditKind
    at: datetime
    cluster: str | None
    pool: str | None
    actor: str | None
    summary: str
    refs: tuple[str, ...]
    payload_json: str
    key: str | None
    prev_hash: str
    hash: str

    def __init__(
        self,
        seq: int,
        id: str,
        kind: AuditKind,
        at: datetime,
        cluster: str | None,
        pool: str | None,
        actor: str | None,
        summary: str,
        refs: tuple[str, ...],
        payload_json: str,
        key: str | None,
        prev_hash: str,
        hash: str,
        *,
        at_text: str | None = None,
    ) -> None:
        # Written by hand: a generated frozen __init__ costs 3.6 us per record (one
        # object.__setattr__ per field), a fifth of the budget for verifying a record.
        d = self.__dict__
        d["seq"] = seq
        d["id"] = id
        d["kind"] = kind
        d["at"] = at
        d["cluster"] = cluster
        d["pool"] = pool
        d["actor"] = actor
        d["summary"] = summary
        d["refs"] = refs
        d["payload_json"] = payload_json
        d["key"] = key
        d["prev_hash"] = prev_hash
        d["hash"] = hash
        if at_text is not None:
            d["at_text"] = at_text

    @cached_property
    def payload(self) -> dict[str, Any]:
        value = json.loads(self.payload_json)
        return value if isinstance(value, dict) else {"value": value}

    @cached_property
    def at_text(self) -> str:
        return format_time(self.at)

    def to_json(self) -> dict[str, Any]:
        """The export shape (one JSONL line): payload as an object, hashes included."""
        return {**self.to_json_fields(), "payload": self.payload}

    def to_json_line(self) -> str:
        """``to_json()`` as one line of JSON (with its newline), the payload spliced in as
        stored rather than parsed and written again: an export of millions of records."""
        fields = self.to_json_fields()
        return f'{_LINE_ENCODER.encode(fields)[:-1]},"payload":{self.payload_json}}}\n'

    def to_json_fields(self) -> dict[str, Any]:
        """``to_json()`` without the payload."""
        return {
            "seq": self.seq,
            "id": self.id,
            "kind": self.kind.value,
            "at": self.at_text,
            "cluster": self.cluster,
            "pool": self.pool,
            "actor": self.actor,
            "summary": self.summary,
            "refs": list(self.refs),
            "key": self.key,
            "prevHash": self.prev_hash,
            "hash": self.hash,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditRecord:
        """Read an exported line back; the payload is re-serialised canonically.

        Raises ValueError (or KeyError/TypeError) for a line that is not an exported record.
        """
        return cls(
            seq=int(data["seq"]),
            id=str(data["id"]),
            kind=AuditKind(data["kind"]),
            at=parse_time(str(data["at"])),
            cluster=data.get("cluster"),
            pool=data.get("pool"),
            actor=data.get("actor"),
            summary=str(data.get("summary") or ""),
            refs=tuple(str(r) for r in data.get("refs") or ()),
            payload_json=canonical_json(data.get("payload") or {}),
            key=data.get("key"),
            prev_hash=str(data["prevHash"]),
            hash=str(data["hash"]),
        )


def record_body(record: AuditRecord, *, seq: int | None = None) -> str:
    """``canonical_body`` of a stored record (``seq`` overrides its seq: used to diagnose)."""
    header = _header(
        record.seq if seq is None else seq,
        record.id,
        record.kind,  # a StrEnum: escaped as its value
        record.at_text,
        record.cluster,
        record.pool,
        record.actor,
        record.summary,
        refs_json(record.refs),
        record.key,
    )
    return f"{header}\n{record.payload_json}"


StoredRow = tuple[
    int, str, str, str, str | None, str | None, str | None, str, str, str | None, str, str, str
]
"""A record as stores keep it: ``(seq, id, kind, at text, cluster, pool, actor, summary,
refs JSON, key, payload JSON, prev_hash, hash)`` -- what ``ChainVerifier.feed_rows`` checks
without building records."""

_KINDS: Final = {k.value: k for k in AuditKind}


def record_row(record: AuditRecord) -> StoredRow:
    """The row a store keeps for a record (the inverse of ``record_from_row``)."""
    return (
        record.seq,
        record.id,
        record.kind.value,
        record.at_text,
        record.cluster,
        record.pool,
        record.actor,
        record.summary,
        refs_json(record.refs),
        record.key,
        record.payload_json,
        record.prev_hash,
        record.hash,
    )


def record_from_row(row: Sequence[Any]) -> AuditRecord:
    """A stored row as a record.

    Raises ValueError, TypeError or KeyError when a field was edited into something that is
    not a record any more (an unknown kind, a time that is not one, refs that are no list).
    """
    seq, rid, kind, at, cluster, pool, actor, summary, refs, key, payload, prev, digest = row
    if refs == "[]":
        ids: tuple[str, ...] = ()
    else:
        parsed = json.loads(refs)
        if not isinstance(parsed, list) or not all(isinstance(x, str) for x in parsed):
            raise ValueError(f"refs is not a list of ids: {str(refs)[:80]!r}")
        ids = tuple(parsed)
    # fromisoformat alone: the stored text is format_time's (always "Z"), and a row edited
    # to a time without an offset does not verify anyway.
    return AuditRecord(
        seq,
        rid,
        _KINDS[kind],
        datetime.fromisoformat(at),
        cluster,
        pool,
        actor,
        summary,
        ids,
        payload,
        key,
        prev,
        digest,
        at_text=at,
    )


def record_id(kind: AuditKind, key: str) -> str:
    """The id a keyed draft gets: known before the append, so others can reference it."""
    return f"{kind.value}-{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def _positional_id(kind: AuditKind, prev_hash: str, seq: int) -> str:
    return f"{kind.value}-{hashlib.sha256(f'{prev_hash}:{seq}'.encode()).hexdigest()[:24]}"


def build_records(
    drafts: Iterable[AuditDraft],
    *,
    prev_hash: str,
    next_seq: int,
    now: datetime,
    taken: set[str] | None = None,
) -> list[AuditRecord]:
    """Seal drafts into chained records after the chain head ``(next_seq - 1, prev_hash)``.

    Payloads are redacted and free text scrubbed first, so the hash covers what is stored.
    Raises ValueError for two drafts with the same explicit id, TypeError for a payload value
    that has no JSON form. ``taken``: the ids of the batch sealed so far, when a batch is
    sealed in slices (the ids given here are added to it).
    """
    at = format_time(now)
    stamp = parse_time(at)  # the record holds exactly what is stored (microseconds, UTC)
    out: list[AuditRecord] = []
    seen: set[str] = taken if taken is not None else set()
    seq = next_seq
    for draft in drafts:
        kind = AuditKind(draft.kind)
        key = _clean(draft.key) if draft.key is not None else None
        if draft.id is not None:
            rid = _clean(draft.id)
        elif key is not None:
            rid = record_id(kind, key)
        else:
            rid = _positional_id(kind, prev_hash, seq)
        if rid in seen:
            raise ValueError(f"two audit drafts in one batch have the id {rid!r}")
        seen.add(rid)
        payload_json = redacted_json(draft.payload)
        cluster = _opt_text(draft.cluster)
        pool = _opt_text(draft.pool)
        actor = _opt_text(draft.actor)
        summary = scrub_text(_clean(draft.summary))
        refs = tuple(_clean(r) for r in draft.refs)
        body = canonical_body(
            seq=seq,
            id=rid,
            kind=kind.value,
            at=at,
            cluster=cluster,
            pool=pool,
            actor=actor,
            summary=summary,
            refs=refs,
            key=key,
            payload_json=payload_json,
        )
        digest = chain_hash(prev_hash, body)
        out.append(
            AuditRecord(
                seq=seq,
                id=rid,
                kind=kind,
                at=stamp,
                cluster=cluster,
                pool=pool,
                actor=actor,
                summary=summary,
                refs=refs,
                payload_json=payload_json,
                key=key,
                prev_hash=prev_hash,
                hash=digest,
                at_text=at,
            )
        )
        prev_hash = digest
        seq += 1
    return out


def _opt_text(value: str | None) -> str | None:
    return None if value is None else scrub_text(_clean(value))


def event_draft(event: ChangeEvent, *, summary: str | None = None) -> AuditDraft:
    """The audit draft of a change event: keyed by ``event.key`` (re-appends are no-ops)."""
    what = event.subject or event.pool or event.cluster or event.source
    return AuditDraft(
        kind=AuditKind.EVENT,
        summary=summary or f"{event.operation.value} {event.type} ({what})",
        cluster=event.cluster,
        pool=event.pool,
        actor=event.actor,
        payload={"event": event.to_json()},
        key=event.key,
    )


def finding_draft(
    finding: Finding, *, refs: Sequence[str] = (), key: str | None = None
) -> AuditDraft:
    """The audit draft of a finding; ``refs``: the records (usually events) behind it."""
    return AuditDraft(
        kind=AuditKind.FINDING,
        summary=finding.message
        or f"{finding.layer.value} {finding.field}: "
        f"{describe_drift(finding.expected, finding.actual, finding.nodes)}",
        cluster=finding.cluster,
        pool=finding.pool,
        refs=tuple(refs),
        payload={"finding": finding.to_json()},
        key=key,
    )
