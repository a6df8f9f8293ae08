"""The event queue on NATS JetStream: several gateway and worker replicas share one stream.

Storing
    ``put_many`` publishes every event to ``subject`` with ``Nats-Msg-Id`` = the event key,
    concurrently, and returns once every PubAck is in: the events are then in the stream's
    file store.  JetStream drops a message whose id it saw within the stream's
    ``duplicate_window`` (default 2 min), so a re-sent event is accepted and stored once
    (its PubAck says ``duplicate``: ``put_many`` counts those).  That window is the only
    "already seen" memory here, and it is short: after it, a redelivered event is queued
    again and the workers' stores, idempotent by key, decide it is a duplicate.
    A batch is not atomic in JetStream: when some publishes fail, ``put_many`` raises
    ``QueueUnavailable`` and the caller's retry stores the rest, the stored ones deduped.
    Beyond the duplicate window, effects must stay idempotent by key (the port's rule).

Consuming
    One durable pull consumer (explicit ack, ``ack_wait``, unlimited redeliveries) is bound
    by every replica: each message goes to one of them.  ``get_batch`` is a fetch;
    ``ack`` waits for the server to confirm (so an acked event is not delivered again);
    ``nack(delay)`` is ``-NAK`` with a delay.  The stream uses work-queue retention: an acked
    message is removed, so the stream holds exactly what is still to do.

Durability
    With nats-server 2.9 a PubAck means the message was written to the store file: it
    survives ``kill -9`` of the server.  The file is fsynced in the background (2.9 has no
    per-message sync), so surviving a power loss needs a replicated stream (``num_replicas``
    3 on a cluster) or nats-server >= 2.10 with ``sync_interval: always``.
    Acks are the other way round: a confirmed ack survives any *consumer* crash, but 2.9
    writes consumer state a moment later, so a *server* ``kill -9`` right after acks
    (measured: within ~0.1 s) can deliver those events again.  Hence the port's rule:
    effects idempotent by event key.

Depth is ``num_pending + num_ack_pending`` of the consumer, cached for ``depth_cache``
seconds.  Connection, timeout and JetStream API errors become ``QueueUnavailable``; while the
client is reconnecting, ``put_many`` and ``depth`` raise it at once instead of waiting out
the request timeout.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import nats.errors
import nats.js.errors
import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from fleetwarden.core.events import ChangeEvent
from fleetwarden.logs import get_logger
from fleetwarden.ports.queue import Delivery, QueueFull, QueueUnavailable

__all__ = ["NatsQueue"]

log = get_logger(__name__)

# Transport failures of every kind the client raises; mapped to QueueUnavailable.
_FAILURES = (nats.errors.Error, OSError, TimeoutError)


class NatsQueue:
    """``EventQueue`` over a JetStream stream and one shared durable pull consumer.

    Connects on first use (and again after a failed connect); reconnects by itself after
    a server restart.  Call ``close()`` when done.
    """

    def __init__(
        self,
        servers: str | Sequence[str],
        *,
        stream: str = "FLEETWARDEN_EVENTS",
        subject: str = "fleetwarden.events",
        durable: str = "fleetwarden-workers",
        max_depth: int = 100_000,
        ack_wait: float = 30.0,
        duplicate_window: float = 120.0,
        max_deliver: int = -1,
        max_ack_pending: int = 20_000,
        num_replicas: int = 1,
        request_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        depth_cache: float = 0.5,
    ) -> None:
        self.servers = [servers] if isinstance(servers, str) else list(servers)
        self.stream = stream
        self.subject = subject
        self.durable = durable
        self.max_depth = max_depth
        self.ack_wait = ack_wait
        self.duplicate_window = duplicate_window
        self.max_deliver = max_deliver
        self.max_ack_pending = max_ack_pending
        self.num_replicas = num_replicas
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.depth_cache = depth_cache
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self._setup_lock = asyncio.Lock()
        self._fetch_lock = asyncio.Lock()  # one fetch at a time per subscription inbox
        self._depth_lock = asyncio.Lock()
        self._depth_value = 0
        self._depth_at = float("-inf")
        self._closed = False

    # ------------------------------------------------------------------ EventQueue

    async def put_many(self, events: Sequence[ChangeEvent]) -> int:
        if not events:
            return 0
        js = (await self._ready())[0]
        self._check_connected("not stored")
        depth = await self.depth()
        if depth >= self.max_depth:
            raise QueueFull(depth, self.max_depth)
        results = await asyncio.gather(
            *(
                js.publish(
                    self.subject,
                    orjson.dumps(event.to_json()),
                    timeout=self.request_timeout,
                    stream=self.stream,
                    headers={"Nats-Msg-Id": event.key},
                )
                for event in events
            ),
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            for failure in failures:
                if not isinstance(failure, Exception):
                    raise failure  # CancelledError and the like are not ours to map
            stored = len(results) - len(failures)
            raise QueueUnavailable(
                f"nats: {len(failures)} of {len(results)} events not stored in stream "
                f"{self.stream} ({stored} stored; a retry stores the rest once): {failures[0]!r}"
            ) from failures[0]
        folded = sum(1 for r in results if getattr(r, "duplicate", False))
        self._depth_value += len(events) - folded  # honest between refreshes
        return folded

    async def get_batch(self, max_items: int, timeout: float) -> list[Delivery]:
        sub = (await self._ready())[1]
        async with self._fetch_lock:
            try:
                msgs = await sub.fetch(batch=max(max_items, 1), timeout=max(timeout, 0.01))
            except TimeoutError:  # nats' own and asyncio's (both raised): nothing came
                return []
            except _FAILURES as exc:
                raise QueueUnavailable(f"nats: fetch from {self.durable} failed: {exc!r}") from exc
        deliveries = []
        for msg in msgs:
            delivery = await self._delivery(msg)
            if delivery is not None:
                deliveries.append(delivery)
        return deliveries

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        if not deliveries:
            return
        nc = await self._connection()
        # Acked synchronously (a request): when this returns the server has the ack, so
        # the event is not delivered again to any replica.
        results = await asyncio.gather(
            *(nc.request(d.token, b"+ACK", timeout=self.request_timeout) for d in deliveries),
            return_exceptions=True,
        )
        self._raise_first(results, "ack")
        self._depth_value = max(self._depth_value - len(deliveries), 0)

    async def nack(self, deliveries: Sequence[Delivery], *, delay: float = 0.0) -> None:
        if not deliveries:
            return
        nc = await self._connection()
        payload = b"-NAK"
        if delay > 0:
            payload += b" " + json.dumps({"delay": int(delay * 1_000_000_000)}).encode()
        try:
            for d in deliveries:
                await nc.publish(d.token, payload)
            await nc.flush(timeout=max(int(self.request_timeout), 1))
        except _FAILURES as exc:
            raise QueueUnavailable(f"nats: nack failed: {exc!r}") from exc

    async def depth(self) -> int:
        if time.monotonic() - self._depth_at < self.depth_cache:
            return self._depth_value
        async with self._depth_lock:  # one consumer-info request however many callers
            if time.monotonic() - self._depth_at < self.depth_cache:
                return self._depth_value
            js = (await self._ready())[0]
            self._check_connected("depth unknown")
            try:
                info = await js.consumer_info(
                    self.stream, self.durable, timeout=self.request_timeout
                )
            except _FAILURES as exc:
                raise QueueUnavailable(f"nats: consumer info failed: {exc!r}") from exc
            self._depth_value = (info.num_pending or 0) + (info.num_ack_pending or 0)
            self._depth_at = time.monotonic()
            return self._depth_value

    async def close(self) -> None:
        self._closed = True
        nc, self._nc, self._js, self._sub = self._nc, None, None, None
        if nc is not None and not nc.is_closed:
            try:
                await asyncio.wait_for(nc.close(), self.request_timeout)
            except _FAILURES as exc:
                log.warning("nats close failed", servers=self.servers, error=repr(exc))

    def _check_connected(self, what: str) -> None:
        """While the client reconnects, a publish would wait in its buffer until the request
        timeout: the gateway would answer nothing for seconds (a webhook sender's own timeout
        is about 5 s). Refuse at once instead: the sender retries, the gateway says 503."""
        nc = self._nc
        if nc is not None and not nc.is_connected:
            raise QueueUnavailable(f"nats: not connected to {', '.join(self.servers)}: {what}")

    # ------------------------------------------------------------------ setup

    async def _connection(self) -> Client:
        await self._ready()
        assert self._nc is not None
        return self._nc

    async def _ready(self) -> tuple[JetStreamContext, JetStreamContext.PullSubscription]:
        if self._closed:
            raise QueueUnavailable("nats queue is closed")
        js, sub = self._js, self._sub
        if js is not None and sub is not None and self._nc is not None and not self._nc.is_closed:
            return js, sub
        async with self._setup_lock:
            if self._js is None or self._sub is None or self._nc is None or self._nc.is_closed:
                await self._setup()
            assert self._js is not None and self._sub is not None
            return self._js, self._sub

    async def _setup(self) -> None:
        nc = Client()
        try:
            # Retrying forever keeps a connection through broker restarts, but it also makes
            # the first connect wait forever for a server that is not there: bound that one.
            await asyncio.wait_for(
                nc.connect(
                    servers=self.servers,
                    connect_timeout=max(int(self.connect_timeout), 1),
                    reconnect_time_wait=0.5,  # type: ignore[arg-type]  # seconds: floats work
                    max_reconnect_attempts=-1,
                    allow_reconnect=True,
                    error_cb=self._on_error,
                    disconnected_cb=self._on_disconnect,
                    reconnected_cb=self._on_reconnect,
                ),
                self.connect_timeout,
            )
            js = nc.jetstream(timeout=self.request_timeout)
            await self._ensure_stream(js)
            await self._ensure_consumer(js)
            sub = await js.pull_subscribe_bind(durable=self.durable, stream=self.stream)
        except _FAILURES as exc:
            await _close_quietly(nc)
            reason = (
                f"no answer within {self.connect_timeout:g}s"
                if isinstance(exc, TimeoutError)
                else str(exc) or repr(exc)  # JetStream's refusals say why in their text
            )
            raise QueueUnavailable(
                f"nats: cannot set up stream {self.stream} on {', '.join(self.servers)}: {reason}"
            ) from exc
        self._nc, self._js, self._sub = nc, js, sub

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        config = StreamConfig(
            name=self.stream,
            subjects=[self.subject],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            duplicate_window=self.duplicate_window,
            num_replicas=self.num_replicas,
        )
        try:
            await js.stream_info(self.stream)
            return  # exists: its settings are the operator's (we do not reconfigure)
        except nats.js.errors.NotFoundError:
            pass
        try:
            await js.add_stream(config)
        except nats.js.errors.BadRequestError as refused:
            # A replica created it meanwhile: the loser hears "stream name already in use"
            # or, as often, "subjects overlap with an existing stream" -- fine when the stream
            # is there now. Otherwise the error stands (another stream holds the subject).
            try:
                await js.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                raise refused from None

    async def _ensure_consumer(self, js: JetStreamContext) -> None:
        try:
            await js.consumer_info(self.stream, self.durable)
            return
        except nats.js.errors.NotFoundError:
            pass
        config = ConsumerConfig(
            durable_name=self.durable,
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            max_deliver=self.max_deliver,
            max_ack_pending=self.max_ack_pending,
            filter_subject=self.subject,
        )
        try:
            await js.add_consumer(self.stream, config)
        except nats.js.errors.APIError:
            # Two replicas racing: the loser's create fails if configs differ; bind anyway
            # when the consumer now exists, else the error stands.
            await js.consumer_info(self.stream, self.durable)

    # ------------------------------------------------------------------ helpers

    async def _delivery(self, msg: Msg) -> Delivery | None:
        try:
            event = ChangeEvent.from_json(orjson.loads(msg.data))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Unreadable: redelivering it forever would only block the consumer.
            log.error("terminating unreadable queued event", subject=msg.subject, error=repr(exc))
            try:
                await msg.term()
            except _FAILURES as term_exc:
                raise QueueUnavailable(f"nats: term failed: {term_exc!r}") from term_exc
            return None
        try:
            attempt = msg.metadata.num_delivered
        except nats.errors.NotJSMessageError:
            attempt = 1
        return Delivery(event=event, token=msg.reply, attempt=attempt)

    @staticmethod
    def _raise_first(results: list[Any], what: str) -> None:
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            raise QueueUnavailable(
                f"nats: {what} failed for {len(failures)} of {len(results)}: {failures[0]!r}"
            ) from failures[0]

    async def _on_error(self, exc: Exception) -> None:
        log.warning("nats error", servers=self.servers, error=repr(exc))

    async def _on_disconnect(self) -> None:
        if not self._closed:  # close() disconnects too: nothing to report then
            log.warning("nats disconnected", servers=self.servers)

    async def _on_reconnect(self) -> None:
        log.info("nats reconnected", servers=self.servers)


async def _close_quietly(nc: Client) -> None:
    try:
        await asyncio.wait_for(nc.close(), 5)
    except _FAILURES as exc:
        log.warning("nats close after failed setup failed", error=repr(exc))
