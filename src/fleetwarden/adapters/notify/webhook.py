"""The generic JSON webhook: one POST per batch, optionally signed.

Body (``webhook_payload``)::

    {"version": 1, "source": "fleetwarden", "sink": "<name>", "delivery": "<batch key>",
     "cluster": "<shared cluster or null>", "pool": "<shared pool or null>",
     "counts": {"firing": n, "resolved": m},
     "notifications": [Notification.to_json(), ...]}

A sink configured with ``events: true`` also gets every processed change event
(``app/relaying.py``), batched, in a message of its own (``events_payload``)::

    {"version": 1, "source": "fleetwarden", "sink": "<name>", "kind": "events",
     "delivery": "<id of the batch>", "events": [{"key": "<event key>", "event": {...}}, ...]}

Each event is sent once; only a crash between the receiver's 2xx and the sender's record of it
sends a batch again: receivers drop an event whose ``key`` they already have.

Headers: ``X-Fleetwarden-Delivery`` (the batch key: the same on every retry, so receivers can
drop duplicates) and, when a secret is configured, ``X-Fleetwarden-Signature: t=<unix>,v1=<hex
HMAC-SHA256(secret, "<t>.<body>")>`` (``core.signatures.sign``; receivers verify it with
``core.signatures.check_signature``). Each attempt is signed afresh, so a retry after a long
back-off is still inside the receiver's replay window.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from fleetwarden.adapters.notify import JsonPoster, RetryPolicy
from fleetwarden.core.notifying import Batch
from fleetwarden.core.signatures import sign
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["SIGNATURE_HEADER", "WebhookSink", "events_payload", "webhook_payload"]

SIGNATURE_HEADER = "X-Fleetwarden-Signature"
DELIVERY_HEADER = "X-Fleetwarden-Delivery"


def webhook_payload(batch: Batch) -> dict[str, Any]:
    return {
        "version": 1,
        "source": "fleetwarden",
        "sink": batch.sink,
        "delivery": batch.key,
        "cluster": batch.cluster,
        "pool": batch.pool,
        "counts": {"firing": len(batch.firing), "resolved": len(batch.resolved)},
        "notifications": [n.to_json() for n in batch.notifications],
    }


def events_payload(sink: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    keys = "\n".join(key for key, _ in events)
    return {
        "version": 1,
        "source": "fleetwarden",
        "sink": sink,
        "kind": "events",
        "delivery": hashlib.sha256(keys.encode()).hexdigest()[:32],
        "events": [{"key": key, "event": dict(event)} for key, event in events],
    }


class WebhookSink:
    """POSTs ``webhook_payload`` as JSON. The URL is treated as a secret (it often carries a
    token); ``headers`` (e.g. an Authorization) are never logged."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        secret: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock = SYSTEM_CLOCK,
        **poster: Any,
    ) -> None:
        self.name = name
        self._secret = secret
        self._clock = clock
        self._poster = JsonPoster(
            name,
            url,
            headers=headers,
            secrets=[s for s in (secret, *(headers or {}).values()) if s],
            timeout=timeout,
            retry=retry,
            transport=transport,
            **poster,
        )

    def __repr__(self) -> str:
        signed = "signed" if self._secret else "unsigned"
        return f"WebhookSink(name={self.name!r}, endpoint={self._poster.endpoint!r}, {signed})"

    async def send(self, batch: Batch) -> None:
        body = json.dumps(webhook_payload(batch), separators=(",", ":")).encode()
        await self._post(body, batch.key)

    async def send_events(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """One message with the events (``events_payload``), signed like ``send``."""
        payload = events_payload(self.name, events)
        await self._post(json.dumps(payload, separators=(",", ":")).encode(), payload["delivery"])

    async def _post(self, body: bytes, delivery: str) -> None:
        secret = self._secret

        def signature(raw: bytes) -> dict[str, str]:
            return {SIGNATURE_HEADER: sign(secret, raw, int(self._clock.time()))} if secret else {}

        await self._poster.post(body, headers={DELIVERY_HEADER: delivery}, sign=signature)

    async def aclose(self) -> None:
        await self._poster.aclose()
