"""The dashboard's live side over HTTP on the real ``serve``: ``/api/stream`` (server-sent
events: auth like every /api route, a finding as it appears, Last-Event-ID resume, reload when
the ring moved on, heartbeats), the heatmap/pool/timeline answers and their 4xx; and
``fleetwarden demo``'s service: its simulated cloud's deliveries go through the real gateway
and the findings they explain carry their actor."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import socket
import subprocess
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette

from fleetwarden.adapters import simulated_cloud
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.entrypoints import live_api
from fleetwarden.entrypoints.serve_cmd import build_service as serve_build
from fleetwarden.wiring import demo_service
from tests.support import serve_proc
from tests.support.asgi_server import serve_asgi
from tests.support.big_fleet import TOKENS, running_service, write_fleet

pytestmark = pytest.mark.live
READ = {"authorization": f"Bearer {TOKENS['read']}"}


async def _messages(resp, n, timeout=10.0, kind=None):
    """The next ``n`` messages of an open event stream (of ``kind`` only, when given: the
    healer's audit records of a finding interleave with it), as (id, event, data)."""
    out, current = [], {}

    async def read():
        async for line in resp.aiter_lines():
            if not line:
                if "event" in current and kind in (None, current["event"]):
                    out.append((int(current["id"]), current["event"], json.loads(current["data"])))
                current.clear()
                if len(out) == n:
                    return
            elif not line.startswith(":"):
                key, _, value = line.partition(": ")
                current[key] = value

    await asyncio.wait_for(read(), timeout)
    return out


def _emit(svc, pool, field):
    f = Finding("c001", pool, Layer.L1, field, "x", "y", Severity.HIGH)
    now = datetime.now(UTC)
    scoped = [x for x in svc.tracker.current() if (x.cluster, x.pool) == ("c001", pool)]
    for ev in svc.tracker.update(("c001", pool), [*scoped, f], now=now):
        svc.emit(ev)
    return f


async def test_stream_auth_live_findings_resume_and_reload(tmp_path):
    async with (
        running_service(tmp_path, 5) as (svc, base),
        httpx.AsyncClient(base_url=base, timeout=10) as http,
    ):
        assert (await http.get("/api/stream")).status_code == 401
        async with http.stream("GET", "/api/stream", headers=READ) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            first = _emit(svc, "system", "labels.a")
            # the healer's audit records of the initial findings may still be arriving
            ((seen_id, kind, data),) = await _messages(resp, 1, kind="finding")
        assert kind == "finding" and data["type"] == "finding.appeared"
        assert data["finding"]["id"] == first.id
        # disconnected: two more happen; a reconnect with Last-Event-ID gets exactly them
        missed = [_emit(svc, "system", "labels.b").id, _emit(svc, "general", "labels.c").id]
        resumed = {**READ, "last-event-id": str(seen_id)}
        async with http.stream("GET", "/api/stream", headers=resumed) as resp:
            got = await _messages(resp, 2, kind="finding")
        ids = [m[0] for m in got]
        assert ids[0] > seen_id and ids[1] > ids[0]  # the ones after seen_id, in order
        assert [m[2]["finding"]["id"] for m in got] == missed
        # an id the ring no longer has (another run's): told to reload
        svc.live._ring.clear()
        async with http.stream("GET", "/api/stream", headers=resumed) as resp:
            ((_, kind, data),) = await _messages(resp, 1)
        assert kind == "reload"
        # the other live answers, and what they refuse
        grid = (await http.get("/api/fleet/grid", headers=READ)).json()
        assert len(grid["rows"]) == 5 and grid["pools"] == ["batch", "general", "memory", "system"]
        pool = await http.get("/api/pools/c001/system", headers=READ)
        assert pool.status_code == 200 and pool.json()["layers"]["L1"]
        missing = await http.get("/api/pools/c001/nope", headers=READ)
        assert missing.status_code == 404 and "nope" in missing.json()["error"]
        for bad in ("0", "x", "99999"):
            r = await http.get(f"/api/timeline?minutes={bad}", headers=READ)
            assert r.status_code == 400 and "minutes" in r.json()["error"]
        timeline = (await http.get("/api/timeline?minutes=15", headers=READ)).json()
        assert sum(timeline["opened"]) >= 3
        # deny: the admin token only (the read one opens the API, not this)
        r = await http.post("/api/decisions/d-nope/deny", headers=READ)
        assert r.status_code == 401 and "auth.admin" in r.json()["error"]
        admin = {"authorization": f"Bearer {TOKENS['admin']}"}
        r = await http.post("/api/decisions/d-nope/deny", headers=admin)
        assert r.status_code == 404 and "d-nope" in r.json()["error"]


async def test_heartbeats_keep_an_idle_stream_open(tmp_path):
    async with running_service(tmp_path, 2) as (svc, _):
        app = Starlette(routes=live_api.routes(svc, heartbeat=0.1))
        with serve_asgi(app) as base:
            async with (
                httpx.AsyncClient(base_url=base, timeout=5) as http,
                http.stream("GET", "/api/stream") as resp,
            ):
                beats = 0
                async for line in resp.aiter_lines():
                    beats += line == ": heartbeat"
                    if beats == 2:
                        break
        assert beats == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keys(doc):
    return set(doc) if isinstance(doc, dict) else set(doc[0])


def test_the_simulated_clouds_deliveries_have_the_published_shapes(realdata):
    """Each delivery has the top-level fields of the provider's published sample."""
    events = realdata / "events"
    now = datetime.now(UTC)
    _, aws = simulated_cloud.delivery("prod-eu-1", "general", "alice", now)
    _, azure = simulated_cloud.delivery("prod-asia-1", "ingress", "bob@example.com", now)
    _, gcp = simulated_cloud.delivery("prod-us-1", "general", "carol@example.com", now)
    sample = json.loads((events / "aws-autoscaling-event-launch-successful.json").read_text())
    assert _keys(orjson.loads(aws)) == _keys(sample)
    sample = json.loads((events / "azure-eventgrid-ResourceWriteSuccessEvent.json").read_text())
    got = orjson.loads(azure)
    assert isinstance(got, list) and _keys(got) == _keys(sample)
    assert set(got[0]["data"]) <= set(sample[0]["data"]) | {"resourceUri"}
    sample = json.loads((events / "gcp-pubsub-MessagePublishedData-text.json").read_text())
    got = orjson.loads(gcp)
    assert _keys(got) == _keys(sample)
    assert set(got["message"]) <= set(sample["message"])
    entry = json.loads(base64.b64decode(got["message"]["data"]))
    audit = json.loads((events / "gcp-cloudevent-structured-auditlog.json").read_text())["data"]
    # the LogEntry: the sample's fields (plus resource and severity, which GKE's entries carry)
    assert set(entry) <= set(audit) | {"resource", "severity", "timestamp"}
    assert set(entry["protoPayload"]) - {"@type", "serviceName"} <= set(audit["protoPayload"])


async def test_the_demo_service_posts_its_clouds_events_through_the_gateway():
    """``fleetwarden demo``'s service: the simulated cloud's deliveries are accepted by the
    gateway (its bearer tokens), stored, and the findings they explain name their actor."""
    port = _free_port()
    seen: dict[str, Any] = {}
    runner = asyncio.create_task(
        demo_service.run(
            port=port, interval=0.05, seed=3, steps=8,
            on_ready=lambda url, tokens, svc: seen.update(url=url, tokens=tokens, svc=svc),
            build=serve_build,
        )
    )  # fmt: skip
    try:
        events: list[dict[str, Any]] = []
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(600):
                if "tokens" in seen:
                    auth = {"authorization": f"Bearer {seen['tokens']['read']}"}
                    events = (await http.get("/api/events?limit=100", headers=auth)).json()
                    if len(events) >= 8:
                        break
                await asyncio.sleep(0.05)
        assert seen["url"] == f"http://127.0.0.1:{port}/ui/"
        assert len(events) >= 8
        assert {e["route"] for e in events} <= {"aws", "gcp", "azure"}
        assert len({e["route"] for e in events}) >= 2
        assert all(e["cluster"] in simulated_cloud.PROVIDERS and e["pool"] for e in events)
        assert all(e["actor"] and not e["flags"] for e in events)
        caused = [f for f in seen["svc"].findings() if f.extra.get("cause")]
        assert caused and all(f.extra["cause"]["actor"] for f in caused)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


def test_behind_a_supervised_serves_gateway_the_stream_is_passed_on_as_it_comes(tmp_path):
    """The default ``serve`` (gateway and worker processes): the gateway process passes the
    worker's event stream on as it comes — the missed messages arrive at once and the answer
    stays open for what comes next (it used to be held until the worker's answer ended)."""
    desired, nodes = write_fleet(tmp_path, 3)
    config = {
        "desired": [str(desired)],
        "nodes": nodes,
        "auth": {"read": {"bearerToken": TOKENS["read"]}},
    }
    with serve_proc.serve(tmp_path, config) as running:
        start = time.monotonic()
        text, open_after = "", False
        headers = {**READ, "last-event-id": "0"}
        with httpx.stream("GET", f"{running.base}/api/stream", headers=headers, timeout=20) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            chunks = r.iter_text()
            while "event: finding" not in text:
                text += next(chunks)
                assert time.monotonic() - start < 10, "the missed messages were held back"
            took = time.monotonic() - start
            # still open a second later: the answer did not end after the burst
            pool = concurrent.futures.ThreadPoolExecutor(1)
            pending = pool.submit(lambda: next(chunks, None))
            try:  # more messages, or none yet: open; the end of the answer: None
                open_after = pending.result(timeout=1.0) is not None
            except concurrent.futures.TimeoutError:
                open_after = True
            pool.shutdown(wait=False, cancel_futures=True)
    assert took < 10 and "retry: 2000" in text
    kinds = [
        line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event: ")
    ]
    assert kinds and set(kinds) <= {"finding", "event", "audit"}
    assert open_after, "the stream ended after the first burst"


def test_the_demo_on_a_taken_port_says_which_option_to_change():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            [serve_proc.EXE, "demo", "--no-open", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"fleetwarden: error: demo: cannot listen on 127.0.0.1:{port} (Address already in use): "
        "pass --port N"
    ]


async def test_in_the_demo_an_approved_restore_patches_the_fleet_and_clears_its_finding():
    """``fleetwarden demo --mode approval``: a label or taint drift waits for approval; the
    admin approves it over HTTP; the restore patches the simulated nodes and the finding
    clears (the service diffs the pool again, as after a real patch)."""
    port = _free_port()
    seen: dict[str, Any] = {}
    runner = asyncio.create_task(
        demo_service.run(
            port=port, interval=3600, seed=3, steps=1, mode="approval",
            on_ready=lambda url, tokens, svc: seen.update(tokens=tokens, svc=svc),
            build=serve_build,
        )
    )  # fmt: skip
    try:
        for _ in range(400):
            if "svc" in seen and seen["svc"].healer.pending():
                break
            await asyncio.sleep(0.05)
        svc = seen["svc"]
        request = svc.healer.pending()[0]
        assert request.action.value == "restore"
        admin = {"authorization": f"Bearer {seen['tokens']['admin']}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
            r = await http.post(f"/api/decisions/{request.id}/approve", headers=admin)
        assert r.status_code == 200 and r.json()["status"] == "execute"
        for _ in range(200):
            if request.finding_id not in {f.id for f in svc.findings()}:
                break
            await asyncio.sleep(0.05)
        assert request.finding_id not in {f.id for f in svc.findings()}
        outcomes = await svc.healer.audit.query(kind=AuditKind.OUTCOME, limit=10)
        assert [o.summary for o in outcomes] == ["ok: restore"]
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
