"""Crash points: ``kill -9`` of ``serve`` at every step of its workers, again and again, then a
replay: every event the gateway acknowledged (202) ends up in each sink exactly once.

Sinks: the event log (``eventLog``), the audit store (SQLite file; a real PostgreSQL) and a
webhook that follows events (``notify: [{events: true}]``, a receiver run here). Queues: the
SQLite file and a real NATS JetStream. ``tests/support/crashing_serve.py`` kills the process
*at* a step: after the event log was written (``after-log``), after the audit transaction
committed (``after-audit``), before the queue acknowledgement (``before-ack``), and after the
webhook answered 2xx but before the relay marked the batch sent (``after-send``). Each round
starts the service with the next step's fault under a load of new events; the restart replays
what the dead process left, under the next fault; a last start runs without a fault and drains.

The event log and the audit store must hold each acknowledged event exactly once. The webhook
must receive each one (by key), and may receive a batch again only when it was the batch in
flight at a kill (the relay is a task of its own: any kill may fall between its send and its
mark, ``after-send`` makes sure one does): nothing can tell an HTTP receiver "exactly once"
but the ``key`` it deduplicates by, and the test checks that this is the only repeat.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.core.audit import AuditKind
from tests.support import nats_env, pg_env
from tests.support.asgi_server import serve_asgi
from tests.support.serve_process import ServeProcess, free_port

TOKEN = "crash-point-token"
STEPS = ("after-log", "after-audit", "before-ack", "after-send")
# passes over the steps: two for the default pair (SQLite store and queue), one for each other
# pair (every step is still hit; a second pass there cost a minute of CI for the same code)
ROUNDS = 2


@dataclass
class Receiver:
    """The webhook sink: records every POST of change events, answers 200."""

    posts: list[list[str]] = field(default_factory=list)  # event ids per POST, in order
    lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        async def post(request: Request) -> Response:
            body = json.loads(await request.body())
            if body.get("kind") == "events":
                with self.lock:
                    self.posts.append([item["event"]["id"] for item in body["events"]])
            return Response(status_code=200)

        return Starlette(routes=[Route("/hook", post, methods=["POST"])])

    def snapshot(self) -> list[list[str]]:
        with self.lock:
            return [list(p) for p in self.posts]


def _event(event_id: str) -> dict:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "AWS API Call via CloudTrail",
        "source": "aws.eks",
        "account": "123456789012",
        "time": "2026-12-01T10:00:00Z",
        "region": "eu-west-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.08",
            "eventSource": "eks.amazonaws.com",
            "userIdentity": {"arn": "arn:aws:iam::123456789012:user/alice"},
            "eventName": "UpdateNodegroupConfig",
            "awsRegion": "eu-west-1",
            "eventTime": "2026-12-01T10:00:00Z",
            "requestParameters": {
                "name": "duckboat",
                "nodegroupName": "custom-1",
                "scalingConfig": {"desiredSize": 2},
            },
        },
    }


def _produce(base: str, prefix: str, accepted: list[str], stop: threading.Event) -> None:
    """Posts events one by one until stopped or the service is gone; keeps the 202'd ids."""
    with httpx.Client(timeout=2) as client:
        i = 0
        while not stop.is_set():
            event_id = f"{prefix}-{i:05d}"
            try:
                r = client.post(
                    f"{base}/events/aws",
                    json=_event(event_id),
                    headers={"Authorization": f"Bearer {TOKEN}"},
                )
            except httpx.HTTPError:
                return  # killed: what was not answered 202 was not accepted
            if r.status_code == 202:
                accepted.append(event_id)
            i += 1


async def _stored_event_ids(store_url: str) -> list[str]:
    store = await open_audit_store(store_url, create=False)
    try:
        return [
            rec.payload["event"]["id"]
            async for rec in store.iterate()
            if rec.kind is AuditKind.EVENT
        ]
    finally:
        await store.close()


def _journal_ids(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_bytes().splitlines(keepends=True)
    return [json.loads(line)["id"] for line in lines if line.endswith(b"\n")]


def _scenario(
    tmp: Path, store_url: str, queue: str, *, ack_wait: str = "1", rounds: int = 1
) -> None:
    receiver = Receiver()
    journal = tmp / "events.jsonl"
    (tmp / "desired.yaml").write_text(
        "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
        "metadata: {name: duckboat}\nmanagedNodeGroups:\n  - {name: custom-1}\n"
    )
    with serve_asgi(receiver.app()) as hook:
        port = free_port()
        config = tmp / "svc.json"
        config.write_text(
            json.dumps(
                {
                    "listen": f"127.0.0.1:{port}",
                    "queue": queue,
                    "queuePath": str(tmp / "queue.db"),
                    "store": store_url,
                    "eventLog": str(journal),
                    "desired": [str(tmp / "desired.yaml")],
                    "auth": {"aws": {"bearerToken": TOKEN}},
                    "debounceSeconds": 0.05,
                    "notify": [
                        {"name": "feed", "kind": "webhook", "url": f"{hook}/hook", "events": True}
                    ],
                }
            )
        )
        svc = ServeProcess(config, port)
        accepted: list[str] = []
        resent_ok: set[str] = set()  # ids of the batch in flight at each kill
        in_replay = 0  # rounds whose fault hit while replaying the previous round's leftovers
        try:
            for n, step in enumerate(STEPS * rounds):
                # the 2nd to 4th time: the first hits are usually the replay of what the
                # last process left, and the fault is meant for new events too
                env = {
                    "FW_TEST_CRASH_AT": step,
                    "FW_TEST_CRASH_AFTER": str(2 + n % 3),
                    "FW_TEST_ACK_WAIT": ack_wait,
                }
                posts_before = len(receiver.snapshot())
                if svc.start(env=env, may_die=True):
                    stop = threading.Event()
                    producer = threading.Thread(
                        target=_produce, args=(svc.base, f"r{n}", accepted, stop)
                    )
                    producer.start()
                    try:
                        rc = svc.wait_dead(20)
                    finally:
                        stop.set()
                        producer.join(10)
                else:
                    in_replay += 1
                    rc = svc.wait_dead(1)
                assert rc == -signal.SIGKILL, f"round {n} ({step}): exit {rc}: {svc.stderr()}"
                # whatever step the kill hit, the relay (a task of its own) may have been
                # between a send and its mark: only that last batch may come again
                posts = receiver.snapshot()[posts_before:]
                if posts:
                    resent_ok.update(posts[-1])
                if step == "after-send":
                    assert posts, "the kill came after a send"
            svc.start()
            deadline = time.monotonic() + 60
            while True:
                want = set(accepted)
                done = (
                    want <= set(_journal_ids(journal))
                    and want <= set(asyncio.run(_stored_event_ids(store_url)))
                    and want <= {i for p in receiver.snapshot() for i in p}
                    and svc.metric("fleetwarden_queue_depth") == 0
                )
                if done or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        finally:
            svc.stop()
        logged = Counter(_journal_ids(journal))
        stored = Counter(asyncio.run(_stored_event_ids(store_url)))
        sent = Counter(i for p in receiver.snapshot() for i in p)
    print(f"accepted {len(accepted)}; faults hit while replaying: {in_replay} of {n + 1}")
    assert in_replay < n + 1 and accepted
    assert len(set(accepted)) == len(accepted)
    for name, sink in (("event log", logged), ("audit store", stored), ("webhook", sent)):
        lost = [i for i in accepted if i not in sink]
        assert not lost, f"{name}: {len(lost)} of {len(accepted)} acknowledged lost: {lost[:5]}"
    for name, sink in (("event log", logged), ("audit store", stored)):
        twice = sorted(i for i, k in sink.items() if k > 1)
        assert not twice, f"{name}: {len(twice)} events twice: {twice[:5]}"
    repeated = {i for i, k in sent.items() if k > 1}
    print(f"webhook: {len(sent)} events, {len(repeated)} sent again after a kill")
    assert repeated <= resent_ok, f"webhook repeats not in flight at a kill: {repeated}"


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


@pytest.fixture()
def nats_url(tmp_path: Path) -> Iterator[str]:
    state = tmp_path / "nats"
    url = nats_env.start_server(state)
    try:
        yield url
    finally:
        nats_env.stop_server(state)


def test_crash_at_every_step_sqlite_store_sqlite_queue_each_sink_once(tmp_path: Path) -> None:
    _scenario(tmp_path, f"sqlite:///{tmp_path / 'audit.db'}", "sqlite", rounds=ROUNDS)


@pytest.mark.live
def test_crash_at_every_step_sqlite_store_nats_queue_each_sink_once(
    tmp_path: Path, nats_url: str
) -> None:
    _scenario(tmp_path, f"sqlite:///{tmp_path / 'audit.db'}", nats_url)


@pytest.mark.live
def test_crash_at_every_step_postgresql_store_sqlite_queue_each_sink_once(
    tmp_path: Path, pg_server: str
) -> None:
    _scenario(tmp_path, pg_env.fresh_database(pg_server, "crash"), "sqlite")


@pytest.mark.live
def test_crash_at_every_step_postgresql_store_nats_queue_each_sink_once(
    tmp_path: Path, pg_server: str, nats_url: str
) -> None:
    _scenario(tmp_path, pg_env.fresh_database(pg_server, "crash"), nats_url)
