"""Taking in one delivery of change events: authenticate, parse, flag, store durably.

``Ingest.deliver(source, headers, query, body)`` is the use case behind ``POST
/events/<source>`` (``entrypoints/gateway.py`` reads the body within its limit and writes the
``Answer``). Answers: 202 once stored; a handshake's own status; 401 without valid credentials
(nothing stored); 413 over ``batch_events`` events in one request; 400 for a body that does
not parse (with the reason); 429 with Retry-After when the queue is over its limit; 503 when
the queue cannot store. A surprise in a payload is a 400, never a 5xx.

Credentials per source (``SourceAuth``): ``X-Fleetwarden-Signature`` (HMAC-SHA256 over
``"<t>.<body>"``, within ``replay_window`` seconds) and/or ``Authorization: Bearer`` (Basic
for AWS API destinations; a ``token`` query parameter for Pub/Sub push, which cannot add
headers). Counts go to ``IngestCounters`` (the entry point's Prometheus metrics).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import orjson

from fleetwarden.core import eventrules, signatures
from fleetwarden.core.events import ChangeEvent
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.events import Parsed, Reply
from fleetwarden.logs import get_logger, is_debug
from fleetwarden.ports.queue import EventQueue, QueueFull, QueueUnavailable
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["Answer", "Ingest", "IngestCounters", "Parser", "SourceAuth"]

log = get_logger("fleetwarden.gateway")
_std = logging.getLogger("fleetwarden.gateway")  # for the hot path's level check

Parser = Callable[[Any, Mapping[str, str], datetime], Parsed]
_KEYS_LOGGED = 20  # event keys named in one request's debug line


@dataclass(frozen=True)
class SourceAuth:
    hmac_secrets: tuple[str, ...] = ()
    bearer_tokens: tuple[str, ...] = ()

    @property
    def configured(self) -> bool:
        return bool(self.hmac_secrets or self.bearer_tokens)

    def __repr__(self) -> str:  # never print secrets
        return (
            f"SourceAuth(hmac={len(self.hmac_secrets)} secret(s), "
            f"bearer={len(self.bearer_tokens)} token(s))"
        )


class IngestCounters(Protocol):
    def reject(self, source: str, reason: str) -> None: ...

    def accept(self, source: str, events: int, folded: int) -> None: ...

    def handshake(self, source: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: Any  # JSON
    headers: Mapping[str, str] = field(default_factory=dict)


class Ingest:
    def __init__(
        self,
        queue: EventQueue,
        parsers: Mapping[str, Parser],
        counters: IngestCounters,
        *,
        auth: Mapping[str, SourceAuth],
        replay_window: float = 300.0,
        batch_events: int = 1000,
        retry_after: int = 5,
        known_pools: Mapping[str, set[str]] | None = None,
        on_reply: Callable[[str, Reply], None] | None = None,
        recent: deque[ChangeEvent] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.queue, self.parsers, self.counters = queue, parsers, counters
        self.auth, self.replay_window, self.batch_events = auth, replay_window, batch_events
        self.retry_after, self.known_pools = retry_after, known_pools or {}
        self.on_reply, self.clock = on_reply, clock
        self.recent: deque[ChangeEvent] = recent if recent is not None else deque(maxlen=1000)

    def authenticate(
        self, source: str, headers: Mapping[str, str], query: Mapping[str, str], body: bytes
    ) -> signatures.AuthResult:
        auth = self.auth.get(source)
        if auth is None or not auth.configured:
            return signatures.AuthResult(False, f"no credentials are configured for {source}")
        results = []
        sig = headers.get("x-fleetwarden-signature")
        if auth.hmac_secrets and sig:
            results.append(
                signatures.check_signature(
                    sig,
                    body,
                    auth.hmac_secrets,
                    now=self.clock.time(),
                    window=self.replay_window,
                )
            )
        if auth.bearer_tokens:
            header = headers.get("authorization")
            if header and header.lower().startswith("basic ") and source == "aws":
                results.append(signatures.check_basic(header, auth.bearer_tokens))
            elif header:
                results.append(signatures.check_bearer(header, auth.bearer_tokens))
            elif source == "gcp" and query.get("token"):
                # Pub/Sub push cannot add headers: Google documents a token in the push URL
                results.append(
                    signatures.check_bearer(f"Bearer {query['token']}", auth.bearer_tokens)
                )
        for result in results:
            if result.ok:
                return result
        if results:
            return results[0]
        return signatures.AuthResult(
            False, "missing credentials (X-Fleetwarden-Signature or Authorization)"
        )

    async def deliver(
        self, source: str, headers: Mapping[str, str], query: Mapping[str, str], body: bytes
    ) -> Answer:
        """One delivery to ``source`` (a key of ``parsers``); ``headers`` lower-case."""
        auth = self.authenticate(source, headers, query, body)
        if not auth.ok:
            log.info("delivery refused", source=source, reason="unauthorized")
            self.counters.reject(source, "unauthorized")
            return Answer(401, {"error": auth.reason}, {"www-authenticate": "Bearer"})
        try:
            decoded = _decode(body, headers)
            if isinstance(decoded, list) and len(decoded) > self.batch_events:
                # refused before the parser spends time on it (every batch form is an array)
                self.counters.reject(source, "too_many_events")
                return Answer(413, {"error": _too_many(len(decoded), self.batch_events)})
            parsed = self.parsers[source](decoded, headers, self.clock.now())
        except FormatError as exc:
            self.counters.reject(source, "malformed")
            return Answer(400, {"error": str(exc)})
        except Exception as exc:  # a surprise in a payload is the sender's problem, not a 5xx
            log.warning("unexpected payload error", source=source, error=type(exc).__name__)
            self.counters.reject(source, "malformed")
            return Answer(
                400, {"error": f"{source} payload: cannot be processed ({type(exc).__name__})"}
            )
        if len(parsed.events) > self.batch_events:  # one body that names many events
            self.counters.reject(source, "too_many_events")
            return Answer(413, {"error": _too_many(len(parsed.events), self.batch_events)})
        # the route names the credential that admitted the events: their keys live in its
        # namespace, so no other route's sender can make them look like duplicates
        known = self.known_pools
        events = [e.via(source, flags=eventrules.known_flags(e, known)) for e in parsed.events]
        if events:
            try:
                folded = await self.queue.put_many(events)
            except QueueFull as exc:
                self.counters.reject(source, "queue_full")
                return Answer(429, {"error": str(exc)}, {"retry-after": str(self.retry_after)})
            except QueueUnavailable as exc:
                self.counters.reject(source, "unavailable")
                # the cause (a file path, a broker address) is the operator's, not the sender's
                log.warning("queue unavailable", source=source, error=str(exc))
                return Answer(
                    503,
                    {"error": "cannot store events now: the queue is unavailable; retry later"},
                    {"retry-after": str(self.retry_after)},
                )
            self.counters.accept(source, len(events), folded)
            if is_debug(_std):  # the hot path: no work for a line not shown
                log.debug(
                    "events queued",
                    source=source,
                    count=len(events),
                    folded=folded,
                    event_keys=[e.key for e in events[:_KEYS_LOGGED]],
                )
            self.recent.extend(events)
        if parsed.reply is not None:
            self.counters.handshake(source)
            if self.on_reply is not None:
                self.on_reply(source, parsed.reply)
            if parsed.reply.status is not None:
                return Answer(
                    parsed.reply.status,
                    parsed.reply.body,
                    {k.lower(): v for k, v in parsed.reply.headers.items()},
                )
        return Answer(202, {"accepted": len(events), "ids": [e.id for e in events]})


def _too_many(n: int, limit: int) -> str:
    return f"{n} events in one request: over limits.batchEvents ({limit}); send smaller batches"


def _decode(body: bytes, headers: Mapping[str, str]) -> Any:
    """JSON bodies; CloudEvents binary mode may carry any content type (kept as bytes)."""
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    if "ce-specversion" in headers and not ctype.endswith("json"):
        return body
    if not body.strip():
        raise FormatError("request body", "empty body (expected JSON)")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise FormatError("request body", f"not valid JSON: {exc}") from None
