"""Change events and decisions read back from the audit store, for ``GET /api/events`` and
``GET /api/decisions``: newest first, filtered, in pages.

Everything comes from the store and nothing from memory, so a listing is the same before and
after a restart, and whichever replica answers; the store holds one ``event`` record per event
key, so an event delivered twice is listed once.

Paging
    A page holds up to ``limit`` items. ``Page.cursor`` is where the next one starts (the
    ``seq`` of the last record read; pass it as ``before``), None when nothing older is left.
    A filter that matches little stops a page after ``scan`` records read, with a cursor: the
    caller goes on from there, and no request reads a whole store.

Filters
    ``cluster`` and ``actor`` are the records' columns (exact, or a glob with ``*``, as for
    ``fleetwarden audit query``). ``source`` (the event's ``source`` attribute; for a decision,
    that of the event its finding was attributed to) and ``route`` (the gateway route an event
    came through) are narrowed in SQL by the payload's canonical JSON text and then checked on
    the parsed payload.

Answers
    ``page_answer`` is the whole use case of either route: the query parameters checked, a
    page read, and the answer (``app.ingesting.Answer``): the page with the headers that point
    at the next one, 400 naming a bad parameter, 503 while the store is not open or cannot
    answer.

Decisions
    Each decision record, with the status a later record gave it (an approval note, or any
    record ``healing.recorded_decision`` reads a decision from): the notes newer than the page
    are read with it (at most ``NOTES_READ`` of them; a status changed by an older note than
    that shows as it was decided).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fleetwarden.app.healing import recorded_decision
from fleetwarden.app.ingesting import Answer
from fleetwarden.core.audit import AuditKind, AuditRecord, canonical_json
from fleetwarden.core.integers import ascii_int
from fleetwarden.core.policy import Decision
from fleetwarden.ports.audit import AuditStore, AuditStoreError

__all__ = [
    "DECISION_FILTERS",
    "EVENT_FILTERS",
    "MAX_LIMIT",
    "NOTES_READ",
    "SCAN",
    "BadParameter",
    "Page",
    "PageQuery",
    "list_decisions",
    "list_events",
    "next_page_headers",
    "page_answer",
    "page_query",
]

MAX_LIMIT = 1000  # items per page
SCAN = 20_000  # records read per page at most (a filter that matches little)
NOTES_READ = 10_000  # notes read per page to find later statuses of its decisions
_CHUNK = 500  # records per store query
_TEXT_LIMIT = 1024  # characters of a filter value
EVENT_FILTERS = ("source", "route", "cluster", "actor")  # list_events' filters
DECISION_FILTERS = ("status", "source", "cluster", "actor")  # list_decisions'


@dataclass(frozen=True, slots=True)
class Page:
    items: list[dict[str, Any]]
    cursor: int | None  # ``before`` of the next page; None: nothing older


async def list_events(
    store: AuditStore,
    *,
    limit: int = 100,
    before: int | None = None,
    source: str | None = None,
    route: str | None = None,
    cluster: str | None = None,
    actor: str | None = None,
    scan: int = SCAN,
) -> Page:
    """Canonical change events (as stored: redacted), newest first."""

    def pick(rec: AuditRecord) -> dict[str, Any] | None:
        event = rec.payload.get("event")
        if not isinstance(event, dict):
            return None
        if source is not None and event.get("source") != source:
            return None
        if route is not None and event.get("route") != route:
            return None
        return event

    text = _pair("source", source) if source is not None else _pair("route", route)
    return await _page(
        store,
        AuditKind.EVENT,
        pick,
        cluster=cluster,
        actor=actor,
        text=text,
        before=before,
        limit=limit,
        scan=scan,
    )


async def list_decisions(
    store: AuditStore,
    *,
    limit: int = 100,
    before: int | None = None,
    status: str | None = None,
    source: str | None = None,
    cluster: str | None = None,
    actor: str | None = None,
    scan: int = SCAN,
) -> Page:
    """Decisions (``Decision.to_json``) with their latest recorded status, newest first."""
    later: dict[str, Decision] = {}
    covered: int | None = None  # notes newer than this seq are in ``later``

    async def pick_chunk(recs: list[AuditRecord]) -> None:
        nonlocal later, covered
        if recs and (covered is None or recs[-1].seq < covered):
            later = await _later_decisions(store, recs[-1].seq)
            covered = recs[-1].seq

    def pick(rec: AuditRecord) -> dict[str, Any] | None:
        try:
            decision = recorded_decision(rec)
        except ValueError:
            return None  # unreadable: `fleetwarden audit verify` is where that is reported
        if decision is None:
            return None
        decision = later.get(decision.id, decision)
        if status is not None and decision.status.value != status:
            return None
        if source is not None:
            cause = rec.payload.get("cause")
            if not isinstance(cause, dict) or cause.get("source") != source:
                return None
        return decision.to_json()

    return await _page(
        store,
        AuditKind.DECISION,
        pick,
        cluster=cluster,
        actor=actor,
        text=_pair("source", source),
        before=before,
        limit=limit,
        scan=scan,
        on_chunk=pick_chunk,
    )


async def _page(
    store: AuditStore,
    kind: AuditKind,
    pick: Callable[[AuditRecord], dict[str, Any] | None],
    *,
    cluster: str | None,
    actor: str | None,
    text: str | None,
    before: int | None,
    limit: int,
    scan: int,
    on_chunk: Callable[[list[AuditRecord]], Any] | None = None,
) -> Page:
    limit = max(1, min(limit, MAX_LIMIT))
    items: list[dict[str, Any]] = []
    cursor, read = before, 0
    while True:
        chunk = min(_CHUNK, max(limit - len(items), 1) + 10)
        recs = await store.query(
            kind=kind,
            cluster=cluster,
            actor=actor,
            payload_contains=text,
            before_seq=cursor,
            limit=chunk,
        )
        if on_chunk is not None:
            await on_chunk(recs)
        for rec in recs:
            read += 1
            cursor = rec.seq
            item = pick(rec)
            if item is not None:
                items.append(item)
                if len(items) == limit:
                    return Page(items, cursor)
        if len(recs) < chunk:
            return Page(items, None)
        if read >= scan:
            return Page(items, cursor)


async def _later_decisions(store: AuditStore, after_seq: int) -> dict[str, Decision]:
    """The newest decision each note after ``after_seq`` carries, by decision id."""
    out: dict[str, Decision] = {}
    before: int | None = None
    read = 0
    while read < NOTES_READ:
        notes = await store.query(kind=AuditKind.NOTE, before_seq=before, limit=_CHUNK)
        for note in notes:
            if note.seq <= after_seq:
                return out
            read += 1
            try:
                decision = recorded_decision(note)
            except ValueError:
                continue
            if decision is not None:
                out.setdefault(decision.id, decision)  # newest first: the first one wins
        if len(notes) < _CHUNK:
            return out
        before = notes[-1].seq
    return out


def _pair(name: str, value: str | None) -> str | None:
    """``"name":"value"`` as canonical JSON writes it inside the stored payload."""
    return None if value is None else canonical_json({name: value})[1:-1]


class BadParameter(ValueError):
    """A query parameter that is not valid; the message names it and what it must be."""


@dataclass(frozen=True, slots=True)
class PageQuery:
    limit: int
    before: int | None
    filters: dict[str, str | None]  # name -> value, None when not given


def page_query(params: Mapping[str, str], filters: Sequence[str]) -> PageQuery:
    """``limit`` (1..MAX_LIMIT, default 100), ``cursor`` (where the page starts) and the
    ``filters`` (1 to 1024 characters each) of a request, checked in that order;
    ``BadParameter`` names the first that is not valid."""
    limit = _number(params, "limit", low=1, high=MAX_LIMIT) or 100
    before = _number(params, "cursor", low=1, high=2**63 - 1)
    return PageQuery(limit, before, {name: _text(params, name) for name in filters})


async def page_answer(
    store: AuditStore | None,
    read: Callable[..., Awaitable[Page]],
    filters: Sequence[str],
    path: str,
    params: Sequence[tuple[str, str]],
) -> Answer:
    """The answer to ``GET path?params`` listed by ``read`` (``list_events`` or
    ``list_decisions``, with their ``filters``) from ``store`` (None: not open yet)."""
    if store is None:
        return Answer(503, {"error": "the audit store is not open yet"})
    try:
        q = page_query(dict(params), filters)  # a repeated parameter: its last value
    except BadParameter as exc:
        return Answer(400, {"error": str(exc)})
    try:
        page = await read(store, limit=q.limit, before=q.before, **q.filters)
    except AuditStoreError as exc:
        return Answer(503, {"error": f"cannot read the audit store: {exc}"})
    return Answer(200, page.items, next_page_headers(path, params, page.cursor))


def next_page_headers(
    path: str, params: Sequence[tuple[str, str]], cursor: int | None
) -> dict[str, str]:
    """The answer's headers that point at the next page (none when nothing older follows):
    ``Link: <PATH?...&cursor=N>; rel="next"`` (RFC 8288, the request's parameters kept) and
    ``X-Next-Cursor: N``."""
    if cursor is None:
        return {}
    query = urlencode([*((k, v) for k, v in params if k != "cursor"), ("cursor", str(cursor))])
    return {"Link": f'<{path}?{query}>; rel="next"', "X-Next-Cursor": str(cursor)}


def _number(params: Mapping[str, str], name: str, *, low: int, high: int) -> int | None:
    raw = params.get(name)
    if raw is None:
        return None
    number = ascii_int(raw)
    if number is None or not low <= number <= high:
        raise BadParameter(f"{name} must be an integer from {low} to {high}")
    return number


def _text(params: Mapping[str, str], name: str) -> str | None:
    raw = params.get(name)
    if raw is None:
        return None
    if not raw or len(raw) > _TEXT_LIMIT:
        raise BadParameter(f"{name} must be 1 to {_TEXT_LIMIT} characters")
    return raw
