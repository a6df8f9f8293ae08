"""Verifying an audit chain: re-hash every record from its stored text and name the first
record where the chain breaks and what happened there. Pure, stdlib only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fleetwarden.core.audit.hashing import GENESIS_HASH, _header, chain_hash, refs_json
from fleetwarden.core.audit.records import AuditRecord, record_body, record_from_row

__all__ = ["Breach", "ChainVerifier", "Problem", "VerifyResult", "verify_chain"]

# --------------------------------------------------------------------------- verification


class Problem(StrEnum):
    EDITED = "edited"  # its contents (or its hash) changed after it was written
    DELETED = "deleted"  # it is gone (a gap, or later records renumbered over it)
    INSERTED = "inserted"  # it was never part of the chain
    REORDERED = "reordered"  # it is not where it was written


@dataclass(frozen=True, slots=True)
class Breach:
    """The first place the chain is broken: ``seq`` and ``id`` of the bad record (``id`` is
    None when the record is gone), what happened to it and the evidence."""

    seq: int
    id: str | None
    problem: Problem
    detail: str

    def __str__(self) -> str:
        name = f"seq {self.seq}" + (f" (id {self.id})" if self.id else "")
        return f"{name}: {self.problem.value}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "id": self.id,
            "problem": self.problem.value,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class VerifyResult:
    checked: int  # records whose hash and link were verified before the breach (or all)
    last_seq: int  # seq of the last good record (0: none)
    last_hash: str  # its hash (GENESIS_HASH: none)
    breach: Breach | None = None

    @property
    def ok(self) -> bool:
        return self.breach is None

    def summary(self) -> str:
        if self.breach is None and self.checked == 0:
            return "audit chain intact: no records yet"
        if self.breach is None:
            return (
                f"audit chain intact: {self.checked} records, seq 1..{self.last_seq}, "
                f"head {self.last_hash}"
            )
        return f"audit chain broken at {self.breach}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "lastSeq": self.last_seq,
            "lastHash": self.last_hash,
            "breach": self.breach.to_json() if self.breach else None,
        }


class ChainVerifier:
    """Incremental ``verify_chain``: ``feed`` pages of records in seq order until it returns
    False (the breach is known) or the records run out, then ``finish``.

    ``anchors`` maps seqs to hashes the chain must contain (a store's own chain-head row, a
    head published earlier): a chain that ends before an anchor was cut short, one whose
    anchored record has another hash was rewritten from there on.

    After the first anomaly the verifier reads up to ``lookahead`` more records to tell a
    reorder from a deletion or an edit; it never reads further than that.
    """

    def __init__(self, *, anchors: Mapping[int, str] | None = None, lookahead: int = 64) -> None:
        self._anchors = dict(anchors or {})
        self._lookahead = lookahead
        self._next_seq = 1
        self._prev: tuple[int, str] | None = None  # seq and id of the last good record
        self._prev_hash: str = GENESIS_HASH
        self._checked = 0
        self._suspect: AuditRecord | None = None
        self._later: list[AuditRecord] = []
        self._breach: Breach | None = None

    @property
    def done(self) -> bool:
        return self._breach is not None

    def feed(self, records: Iterable[AuditRecord]) -> bool:
        """Check records (in seq order); False once the result is known."""
        if self._breach is not None:
            return False
        it = iter(records)
        if self._suspect is None and not self._check_run(it):
            return True  # all good so far: give me more
        return self._collect(it)

    def feed_rows(self, rows: Iterable[Sequence[Any]]) -> bool:
        """``feed`` for ``StoredRow`` tuples as a store reads them: the same checks without
        building records (only the rows around a breach become records, to diagnose it)."""
        if self._breach is not None:
            return False
        it = iter(rows)
        if self._suspect is None:
            bad = self._check_rows(it)
            if bad is None:
                return True
            try:
                self._suspect = record_from_row(bad)
            except (ValueError, TypeError, KeyError) as exc:
                self.reject(bad[0], bad[1], _unreadable(exc))
                return False
        for row in it:  # the lookahead, as records
            try:
                record = record_from_row(row)
            except (ValueError, TypeError, KeyError):
                break  # an unreadable row ends the lookahead: diagnose with what we have
            self._later.append(record)
            if len(self._later) >= self._lookahead:
                break
        else:
            return True  # the rows ran out: feed more, or finish
        self._breach = self._diagnose()
        return False

    def reject(self, seq: int, record_id: str | None, reason: str) -> None:
        """A stored row that cannot even be read as a record (edited into nonsense)."""
        if self._breach is not None:
            return
        if self._suspect is not None:  # diagnose with what we have; the unreadable row ends it
            self._breach = self._diagnose()
            return
        if seq > self._next_seq:
            self._breach = self._gap(seq, record_id)
            return
        self._breach = Breach(seq, record_id, Problem.EDITED, f"unreadable: {reason}")

    def finish(self) -> VerifyResult:
        if self._breach is None and self._suspect is not None:
            self._breach = self._diagnose()
        if self._breach is None:
            self._breach = self._check_anchors_reached()
        return VerifyResult(
            checked=self._checked,
            last_seq=self._next_seq - 1,
            last_hash=self._prev_hash,
            breach=self._breach,
        )

    # -- the fast path: everything in order

    def _check_run(self, it: Iterator[AuditRecord]) -> bool:
        """Consume good records; on the first anomaly keep it as suspect and return True."""
        header, sha256, anchors = _header, hashlib.sha256, self._anchors
        expected, prev_hash, prev = self._next_seq, self._prev_hash, self._prev
        checked = self._checked
        found = False
        for r in it:
            text = header(
                r.seq,
                r.id,
                r.kind,
                r.at_text,
                r.cluster,
                r.pool,
                r.actor,
                r.summary,
                refs_json(r.refs),
                r.key,
            )
            if (
                r.seq == expected
                and r.prev_hash == prev_hash
                and sha256(f"{prev_hash}\n{text}\n{r.payload_json}".encode()).hexdigest() == r.hash
                and (not anchors or anchors.get(expected, r.hash) == r.hash)
            ):
                prev, prev_hash = (r.seq, r.id), r.hash
                expected += 1
                checked += 1
                continue
            self._suspect = r
            found = True
            break
        self._next_seq, self._prev_hash, self._prev = expected, prev_hash, prev
        self._checked = checked
        return found

    def _check_rows(self, it: Iterator[Sequence[Any]]) -> Sequence[Any] | None:
        """``_check_run`` on stored rows; returns the first row that is not in order."""
        header, sha256, anchors = _header, hashlib.sha256, self._anchors
        expected, prev_hash, prev = self._next_seq, self._prev_hash, self._prev
        checked = self._checked
        bad: Sequence[Any] | None = None
        for row in it:
            seq, rid, kind, at, cluster, pool, actor, summary, refs, key, payload, prev_, h = row
            if (
                seq == expected
                and prev_ == prev_hash
                and sha256(
                    f"{prev_hash}\n"
                    f"{header(seq, rid, kind, at, cluster, pool, actor, summary, refs, key)}\n"
                    f"{payload}".encode()
                ).hexdigest()
                == h
                and (not anchors or anchors.get(expected, h) == h)
            ):
                prev, prev_hash = (seq, rid), h
                expected += 1
                checked += 1
                continue
            bad = row
            break
        self._next_seq, self._prev_hash, self._prev = expected, prev_hash, prev
        self._checked = checked
        return bad

    def _collect(self, it: Iterator[AuditRecord]) -> bool:
        for r in it:
            self._later.append(r)
            if len(self._later) >= self._lookahead:
                self._breach = self._diagnose()
                return False
        return True

    # -- the slow path: say what happened

    def _diagnose(self) -> Breach:
        r = self._suspect
        assert r is not None
        expected, prev_hash, prev = self._next_seq, self._prev_hash, self._prev
        if r.seq > expected:
            return self._gap(r.seq, r.id)
        if r.seq < expected:
            return Breach(
                r.seq,
                r.id,
                Problem.REORDERED,
                f"out of order: seq {r.seq} comes after seq {expected - 1}",
            )
        content_ok = chain_hash(r.prev_hash, record_body(r)) == r.hash
        link_ok = r.prev_hash == prev_hash
        if content_ok and link_ok:  # only the anchor disagrees
            return Breach(
                r.seq,
                r.id,
                Problem.EDITED,
                f"its hash {r.hash[:16]}… is not the {self._anchors[r.seq][:16]}… recorded "
                "for it (the chain was rewritten from here on)",
            )
        if content_ok:
            if prev is None:
                return Breach(
                    r.seq, r.id, Problem.EDITED, "the first record is not chained to genesis"
                )
            # r is intact but was chained to another predecessor: the one before it was
            # changed and re-hashed, or put there.
            return Breach(
                prev[0],
                prev[1],
                Problem.EDITED,
                f"its hash is not the one seq {r.seq} was chained to: it was changed "
                "and re-hashed (or inserted)",
            )
        if link_ok:
            return Breach(r.seq, r.id, Problem.EDITED, "its contents do not match its hash")
        # Both content and link are wrong: moved, renumbered over a deletion, or rewritten.
        written = self._written_as(r)
        moved_here = next((x for x in self._later if x.hash == r.prev_hash), None)
        if written is not None and moved_here is not None:
            return Breach(
                r.seq,
                r.id,
                Problem.REORDERED,
                f"written as seq {written}, now at seq {r.seq}; the record it was chained "
                f"after is now at seq {moved_here.seq}",
            )
        if written is not None and written > r.seq:
            gone = f"seq {r.seq}" if written == r.seq + 1 else f"seq {r.seq}..{written - 1}"
            return Breach(
                r.seq,
                None,
                Problem.DELETED,
                f"{gone} as first written, and later records renumbered: the record "
                f"now at seq {r.seq} (id {r.id}) was written as seq {written}",
            )
        if written is not None:
            return Breach(
                prev[0] if prev is not None else r.seq,
                prev[1] if prev is not None else None,
                Problem.INSERTED,
                f"not part of the chain: seq {r.seq} (id {r.id}) was written as seq "
                f"{written} and renumbered after it",
            )
        if moved_here is not None:
            return Breach(
                r.seq,
                r.id,
                Problem.REORDERED,
                f"its contents changed too; the record it was chained after is now at seq "
                f"{moved_here.seq}",
            )
        return Breach(
            r.seq,
            r.id,
            Problem.EDITED,
            "its contents do not match its hash and it is not chained to seq "
            f"{expected - 1} (records before it may have been removed too)",
        )

    def _written_as(self, r: AuditRecord, window: int = 128) -> int | None:
        """The seq the record had when it was hashed, if it is within ``window`` of now."""
        for delta in range(1, window + 1):
            for seq in (r.seq + delta, r.seq - delta):
                if seq >= 1 and chain_hash(r.prev_hash, record_body(r, seq=seq)) == r.hash:
                    return seq
        return None

    def _gap(self, seq: int, record_id: str | None) -> Breach:
        expected = self._next_seq
        gone = f"seq {expected}" if seq == expected + 1 else f"seq {expected}..{seq - 1}"
        return Breach(
            expected,
            None,
            Problem.DELETED,
            f"{gone} missing: the chain jumps from seq {expected - 1} to seq {seq}"
            + (f" (id {record_id})" if record_id else ""),
        )

    def _check_anchors_reached(self) -> Breach | None:
        last = self._next_seq - 1
        beyond = [s for s in self._anchors if s > last]
        if not beyond:
            return None
        head = max(beyond)
        gone = f"seq {last + 1}" if head == last + 1 else f"seq {last + 1}..{head}"
        return Breach(
            last + 1,
            None,
            Problem.DELETED,
            f"{gone} missing: the chain ends at seq {last} but seq {head} was written "
            f"(hash {self._anchors[head][:16]}…)",
        )


def _unreadable(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def verify_chain(
    records: Iterable[AuditRecord], *, anchors: Mapping[int, str] | None = None
) -> VerifyResult:
    """Check a whole chain given in seq order; the result names the first bad record."""
    verifier = ChainVerifier(anchors=anchors)
    verifier.feed(records)
    return verifier.finish()
