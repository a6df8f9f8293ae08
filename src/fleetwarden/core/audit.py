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

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum, StrEnum
from functools import cached_property, lru_cache
from json.encoder import encode_basestring
from typing import Any, Final

from fleetwarden.core.describing import describe_drift
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.findings import Finding

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

GENESIS_HASH: Final = "0" * 64
REDACTED: Final = "[REDACTED]"


class AuditKind(StrEnum):
    EVENT = "event"  # a change event, as received (key: the event's dedupe key)
    FINDING = "finding"  # a drift finding, refs: the event(s) that caused it
    DECISION = "decision"  # what policy decided about a finding, refs: the finding(s)
    ACTION = "action"  # a remediation carried out, refs: the decision it executes
    OUTCOME = "outcome"  # how an action ended, refs: the action
    NOTE = "note"  # anything else worth keeping (approvals, operator notes)


# --------------------------------------------------------------------------- canonical JSON

_ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


_LINE_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 (not ``\\u`` escapes), no NaN: one text per value."""
    return _ENCODER.encode(value)


def format_time(at: datetime) -> str:
    """Fixed-width UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``: sorts as text in time order.

    A naive datetime is taken as UTC.
    """
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    elif at.utcoffset():
        at = at.astimezone(UTC)
    return at.isoformat(timespec="microseconds")[:26] + "Z"


def parse_time(text: str) -> datetime:
    """The inverse of ``format_time`` (any ISO 8601 text with an offset or ``Z``).

    Raises ValueError for text that is not a time.
    """
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def chain_hash(prev_hash: str, body: str) -> str:
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()


def canonical_body(
    *,
    seq: int,
    id: str,
    kind: str,
    at: str,
    cluster: str | None,
    pool: str | None,
    actor: str | None,
    summary: str,
    refs: Sequence[str],
    key: str | None,
    payload_json: str,
) -> str:
    """The text that is hashed (see the module docstring); ``at`` is ``format_time`` text.

    The header is byte for byte ``canonical_json`` of the dict of its fields (a test pins
    that), written out by hand with the json module's own string escaping: about twice as
    fast, and verification does this once per stored record.
    """
    header = _header(seq, id, kind, at, cluster, pool, actor, summary, refs_json(refs), key)
    return f"{header}\n{payload_json}"


# json's own escaping for ensure_ascii=False (its C version where available)
_json_str: Final[Callable[[str], str]] = encode_basestring


def _header(
    seq: int,
    id: str,
    kind: str,
    at: str,
    cluster: str | None,
    pool: str | None,
    actor: str | None,
    summary: str,
    refs_json: str,
    key: str | None,
) -> str:
    s = _json_str
    return (
        f'{{"actor":{"null" if actor is None else s(actor)},"at":{s(at)},'
        f'"cluster":{"null" if cluster is None else s(cluster)},"id":{s(id)},'
        f'"key":{"null" if key is None else s(key)},"kind":{s(kind)},'
        f'"pool":{"null" if pool is None else s(pool)},'
        f'"refs":{refs_json},"seq":{int(seq)},"summary":{s(summary)}}}'
    )


def refs_json(refs: Iterable[str]) -> str:
    """``canonical_json`` of a list of record ids (how stores keep ``refs``)."""
    return f"[{','.join(map(_json_str, refs))}]"


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
    drafts: Iterable[AuditDraft], *, prev_hash: str, next_seq: int, now: datetime
) -> list[AuditRecord]:
    """Seal drafts into chained records after the chain head ``(next_seq - 1, prev_hash)``.

    Payloads are redacted and free text scrubbed first, so the hash covers what is stored.
    Raises ValueError for two drafts with the same explicit id, TypeError for a payload value
    that has no JSON form.
    """
    at = format_time(now)
    stamp = parse_time(at)  # the record holds exactly what is stored (microseconds, UTC)
    out: list[AuditRecord] = []
    seen: set[str] = set()
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


# --------------------------------------------------------------------------- redaction

# A key is secret-looking when, lowercased with everything but a-z and 0-9 removed (so
# "api_key", "API-Key" and "apiKey" are all "apikey"), it contains one of these words, or
# when, lowercased, it is one of the short names below ("key" is not one: taints have keys).
_SECRET_KEY_WORDS: Final = (
    "token",
    "secret",
    "passw",
    "passphrase",
    "pwd",
    "authori",
    "bearer",
    "apikey",
    "private",
    "credential",
    "signature",
    "cookie",
    "accesskey",
    "sessionkey",
    "hmac",
    "connectionstring",
    "clientassertion",
    "jwt",
)
_SECRET_KEY_EXACT: Final = frozenset({"auth", "pin", "sig", "otp"})
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def _mask_scheme(match: re.Match[str]) -> str:
    scheme, cred = match["scheme"], match["cred"]
    if scheme.lower() != "bearer":
        # "Basic checks passed" is prose: a credential has a digit, a capital or a symbol
        # (base64), and a "token" credential is long.
        prose = not any(c.isdigit() or c.isupper() or c in "+/=_-.~" for c in cred)
        if prose or (scheme.lower() == "token" and len(cred) < 16):
            return match.group(0)
    return f"{scheme}{match['space']}{REDACTED}"


def _mask_aws_secret(match: re.Match[str]) -> str:
    # 40 base64 characters are an AWS secret access key when they mix upper case, lower
    # case and digits: a git commit id (lowercase hex) or a path of words is left alone.
    text = match.group(0)
    mixed = (
        any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
    )
    return REDACTED if mixed else text


_SECRET_NAME = re.compile(
    r"token|secret|passw(?:or)?d|pwd|api[-_]?key|signature|credential|authorization"
    r"|private[-_]?key|access[-_]?key",
    re.I | re.A,
)


def _mask_pair(match: re.Match[str]) -> str:
    # The name is matched as a whole word and tested here: a pattern with the keywords
    # inside [\w.-]* backtracks at every word of every string.
    if _SECRET_NAME.search(match.group(1)) is None:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


_TOKEN_CHARS = r"[A-Za-z0-9\-._~+/]"
_Replacement = str | Callable[[re.Match[str]], str]
_VALUE_PATTERNS: Final[tuple[tuple[re.Pattern[str], _Replacement], ...]] = (
    # PEM private keys, whole block (or to the end of a truncated one)
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    # Authorization header values: "Bearer <token>", "Basic <b64>", "token <gh token>"
    (
        re.compile(
            rf"\b(?P<scheme>(?i:bearer)|Basic|Digest|Negotiate|(?i:token))(?P<space>\s+)"
            rf"(?P<cred>{_TOKEN_CHARS}{{6,}}=*)",
            re.A,  # ASCII only, here and below: the pre-checks rely on it
        ),
        _mask_scheme,
    ),
    # JWTs (Kubernetes service-account tokens, OIDC id tokens)
    (
        re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        REDACTED,
    ),
    # AWS access key ids (long-lived AKIA, temporary ASIA)
    (re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"), REDACTED),
    # provider tokens with a recognisable prefix
    (
        re.compile(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"
            r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}"
            r"|AIza[0-9A-Za-z_-]{35}|sk_live_[0-9A-Za-z]{16,}|sk-[A-Za-z0-9_-]{32,})",
            re.A,
        ),
        REDACTED,
    ),
    # passwords in URLs: scheme://user:PASSWORD@host
    (
        re.compile(r"\b([a-z][a-z0-9+.-]*://[^/\s:@]*):([^/\s@]+)@", re.I | re.A),
        r"\1:" + REDACTED + "@",
    ),
    # name=value / name: value pairs whose name looks secret (query strings, env, log lines)
    (
        re.compile(r"(?<![\w.-])([\w.-]+)(\"?\s*[=:]\s*\"?)(?!\[REDACTED\])([^\s&,;\"'<>]+)", re.A),
        _mask_pair,
    ),
    # Azure SAS signature in a query string
    (re.compile(r"([?&]sig=)[^&\s\"']+", re.I | re.A), r"\1" + REDACTED),
    # AWS secret access keys: 40 base64 characters standing alone (see _mask_aws_secret)
    (re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), _mask_aws_secret),
)

# Pre-checks.  Every pattern above needs one of these hints in the text lowercased (ASCII
# only), or a secret-looking key name, or a run of 40 base64 characters: most text has none
# and is passed by a few substring tests on bytes instead of nine regular expressions.
_TEXT_HINTS: Final = (
    "://",
    "sk-",
    "sk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "aiza",
    "eyj",
    "akia",
    "asia",
    "basic",
    "digest",
    "negotiate",
    "sig=",
    "private key",
)
# In serialised JSON, whitespace other than a space is escaped (and any escape sends the text
# the slow way), and an exact key name is quoted and followed by a colon.
_JSON_HINTS: Final = (
    "\\",
    *(h for h in _TEXT_HINTS if h not in ("basic", "digest", "negotiate")),
    "basic ",
    "digest ",
    "negotiate ",
    *(f'"{k}":' for k in sorted(_SECRET_KEY_EXACT)),
)
_NOT_ALNUM_BYTES: Final = bytes(c for c in range(256) if not (48 <= c <= 57 or 97 <= c <= 122))
_BASE64_MARKS: Final = bytes(
    65 if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c in b"+/") else 46
    for c in range(256)
)
_BASE64_RUN: Final = b"A" * 40
_SHORTEST_SECRET = 6  # shorter text cannot hold any of the patterns above


def _maybe_secret(text: str, hints: tuple[str, ...]) -> bool:
    """False only when no pattern can match and no key in it can be secret-looking.

    Substring tests on str (bytes' ``in`` costs five times more on short text); bytes only
    for the two translations.  str.lower() first, as the slow path does: dropping non-ASCII
    characters afterwards can only join text into more hints, never hide one.
    """
    lowered = text.lower()
    for hint in hints:
        if hint in lowered:
            return True
    ascii_text = lowered.encode("ascii", "ignore")
    letters = ascii_text.translate(None, _NOT_ALNUM_BYTES).decode("ascii")
    for word in _SECRET_KEY_WORDS:  # key names, and the names of name=value pairs
        if word in letters:
            return True
    return _BASE64_RUN in ascii_text.translate(_BASE64_MARKS)


def scrub_text(text: str) -> str:
    """Mask every secret-looking substring of free text (see the module docstring)."""
    if len(text) < _SHORTEST_SECRET or not _maybe_secret(text, _TEXT_HINTS):
        return text
    for pattern, replacement in _VALUE_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@lru_cache(maxsize=4096)  # payloads repeat the same few hundred key names
def _secret_key(key: str) -> bool:
    lowered = key.lower()
    if lowered in _SECRET_KEY_EXACT:
        return True
    norm = _NOT_ALNUM.sub("", lowered)
    return any(word in norm for word in _SECRET_KEY_WORDS)


def redact(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe copy of ``payload`` with nothing secret-looking left in it.

    Values under secret-looking keys (token, secret, password, authorization, apiKey,
    private..., credential...) become ``REDACTED`` unless they are booleans or null (a flag
    like ``endpointPrivateAccess: true`` is not a secret); every other string is scrubbed
    with ``scrub_text``.  Tuples and sets become lists, datetimes ``format_time`` text,
    enums their values, non-finite floats strings; NUL characters and lone surrogates are
    replaced.  Raises TypeError for other types.
    """
    out = _json_value(payload)
    assert isinstance(out, dict)  # a Mapping stays a mapping
    return out


def redacted_json(payload: Mapping[str, Any]) -> str:
    """``canonical_json(redact(payload))``, fast for the common payload without secrets.

    The payload is serialised first; only when that text holds a hint of a secret (in a
    value, or a key name once normalised), an escape, or a value JSON cannot take as it is,
    the full ``redact`` walk runs.  A test pins that both ways give the same text.
    """
    try:
        text = _RAW_ENCODER.encode(payload)
        text.encode()  # lone surrogates: the walk replaces them
    except (TypeError, ValueError):
        return canonical_json(redact(payload))
    # Without escapes, every key and string of the payload is a substring of the text.
    if _maybe_secret(text, _JSON_HINTS):
        return canonical_json(redact(payload))
    return text


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=canonical_json)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"audit payload value of type {type(value).__name__} has no JSON form")


_RAW_ENCODER: Final = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_json_default,
)


def _json_value(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return scrub_text(_clean(value))
    if kind is dict or isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = scrub_text(_clean(_key_text(k)))
            if _secret_key(name) and not (v is None or isinstance(v, bool)):
                out[name] = REDACTED
            else:
                out[name] = _json_value(v)
        return out
    if value is None or kind is bool or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else str(value)
    if kind is list or kind is tuple:
        return [_json_value(v) for v in value]
    if isinstance(value, Enum):
        return _json_value(value.value)
    if isinstance(value, str):
        return _json_value(str(value))
    if isinstance(value, bool | int):
        return int(value) if not isinstance(value, bool) else bool(value)
    if isinstance(value, float):
        return _json_value(float(value))
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_json_value(v) for v in value), key=canonical_json)
    if isinstance(value, datetime):
        return format_time(value)
    raise TypeError(f"audit payload value of type {type(value).__name__} has no JSON form")


def _key_text(key: Any) -> str:
    """A key as JSON writes it (json.dumps turns True into "true", None into "null")."""
    if isinstance(key, str):
        return key.value if isinstance(key, Enum) else str(key)
    if key is True or key is False or key is None:
        return json.dumps(key)
    if isinstance(key, Enum):
        return _key_text(key.value)
    if isinstance(key, int | float):
        return json.dumps(key)
    raise TypeError(f"audit payload key of type {type(key).__name__} has no JSON form")


def _clean(text: str) -> str:
    """Text every store accepts: no NUL (PostgreSQL refuses it), no lone surrogates."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode(errors="replace").decode()
    return text


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
