"""Queues under test: the embedded SQLite file and a real nats-server (scripts/nats-test-env).

``queue_kit`` is parametrised over both backends; a test asks it for a fresh queue
(``await kit.open(ack_wait=...)``) and, for work sharing, a ``kit.replica(q)``: a second
handle on the same store (a second ``NatsQueue``; for SQLite, which one process owns, the
same object shared by several consumer tasks).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.queue.nats import NatsQueue
from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.ports.queue import EventQueue
from tests.support import nats_env

_names = itertools.count(1)


@dataclass
class NatsServer:
    url: str
    state_dir: Path


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One nats-server with JetStream for the session; each test uses its own stream."""
    state_dir = tmp_path_factory.mktemp("nats")
    url = nats_env.start_server(state_dir)
    try:
        yield NatsServer(url, state_dir)
    finally:
        nats_env.stop_server(state_dir)


def nats_names() -> dict[str, str]:
    """Stream, subject and consumer names no other test uses."""
    n = next(_names)
    return {"stream": f"T{n}", "subject": f"t{n}.events", "durable": f"w{n}"}


@dataclass
class QueueKit:
    kind: str
    _open: Callable[..., EventQueue]
    _replica: Callable[[EventQueue], EventQueue]
    opened: list[EventQueue] = field(default_factory=list)

    async def open(self, **options: Any) -> EventQueue:
        q = self._open(**options)
        self.opened.append(q)
        return q

    async def replica(self, q: EventQueue) -> EventQueue:
        r = self._replica(q)
        if r is not q:
            self.opened.append(r)
        return r


@pytest.fixture(params=["sqlite", pytest.param("nats", marks=pytest.mark.live)])
async def queue_kit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[QueueKit]:
    if request.param == "sqlite":
        paths = (tmp_path / f"queue-{i}.db" for i in itertools.count())

        def open_sqlite(**options: Any) -> EventQueue:
            return SqliteQueue(next(paths), **options)

        kit = QueueKit("sqlite", open_sqlite, lambda q: q)
    else:
        server: NatsServer = request.getfixturevalue("nats_server")
        settings: dict[int, dict[str, Any]] = {}

        def open_nats(**options: Any) -> EventQueue:
            options = {"depth_cache": 0.0, **nats_names(), **options}
            q = NatsQueue(server.url, **options)
            settings[id(q)] = options
            return q

        def replica(q: EventQueue) -> EventQueue:
            options = settings[id(q)]
            r = NatsQueue(server.url, **options)
            settings[id(r)] = options
            return r

        kit = QueueKit("nats", open_nats, replica)
    try:
        yield kit
    finally:
        for q in kit.opened:
            await q.close()


@pytest.fixture
async def queue(queue_kit: QueueKit) -> EventQueue:
    """A fresh, empty queue of each backend (short ack_wait so expiry tests stay quick)."""
    return await queue_kit.open(ack_wait=1.0)


def event(i: int | str, *, source: str = "test", **fields: Any) -> ChangeEvent:
    """A small, valid change event; ``(source, id)`` makes its key."""
    return ChangeEvent(
        id=str(i),
        source=source,
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="prod-eu-1",
        pool="general",
        **fields,
    )


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                    "no_proxy", "REQUEST_METHOD")  # fmt: skip


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A process environment without proxy settings, for a test to set its own."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
