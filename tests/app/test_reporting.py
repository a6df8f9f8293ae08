"""healedAt, notifiedAt and the report built from them, end to end over a real SQLite audit
store: the healer stamps ``healedAt`` on a finding its executed heal cleared (never on a
dry-run); a webhook delivered over real HTTP stamps ``notifiedAt`` on the live finding, on
record; ``build_report`` and ``fleetwarden report`` read the figures back."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from typer.testing import CliRunner

from fleetwarden.adapters.notify.webhook import WebhookSink
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.app.reporting import build_report
from fleetwarden.app.serving import Serving, ServingSettings
from fleetwarden.cli.main import app
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.events import parse_time
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.notifying import SinkPolicy
from fleetwarden.core.ownership import ArgoApp, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Guards, Mode, Policy
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.sources import FixedClock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OWNERS = OwnershipMap([OwnershipRule(direct_restore=False, argocd=ArgoApp("{cluster}-nodes"))])
ROOMY = Policy(guards=Guards(max_per_cluster=100, max_fleet=100, flap_heals=10))


class Argo:  # Argo CD's API cannot run here: a port fake that syncs
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def sync(self, app: str, **_: Any) -> dict[str, Any]:
        self.calls.append(app)
        return {"application": app}


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def drift(kind: FindingEventType, at: datetime, **extra: str) -> FindingEvent:
    f = Finding(
        "c0",
        "general",
        Layer.L1,
        "labels.team",
        "platform",
        "x",
        Severity.CRITICAL,
        nodes=("n-1",),
        extra={"startedAt": iso(T0 - timedelta(seconds=30)), "detectedAt": iso(T0), **extra},
    )
    return FindingEvent(kind, f, at)


@pytest.mark.parametrize("mode", [Mode.ENFORCE, Mode.DRY_RUN])
async def test_a_cleared_finding_is_healed_only_when_an_executed_heal_ended_ok(tmp_path, mode):
    clock = FixedClock(T0)
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}", clock=clock)
    try:
        argo = Argo()
        h = Healer(
            ownership=OWNERS,
            remediator=Remediator(argocd=argo, clock=clock),
            audit=store,
            policy=ROOMY,
            mode=mode,
            clock=clock,
        )
        h.set_pool_counts({"c0": 10})
        await h.process([drift(FindingEventType.APPEARED, T0)])
        clock.at = T0 + timedelta(minutes=2)
        cleared_at = iso(clock.at)
        await h.process([drift(FindingEventType.CLEARED, clock.at, clearedAt=cleared_at)])
        records = await store.query(kind=AuditKind.FINDING, limit=10)
        cleared = next(r for r in records if r.payload["event"] == "finding.cleared").payload[
            "finding"
        ]
        assert cleared["clearedAt"] == cleared_at
        if mode is Mode.ENFORCE:
            assert argo.calls == ["c0-nodes"] and cleared["healedAt"] == iso(T0)
        else:
            assert argo.calls == [] and "healedAt" not in cleared
        report = await build_report(store, since="1d", now=clock.at + timedelta(seconds=1))
        total = report.to_json()["total"]
        assert total["opened"] == 1 and total["cleared"] == 1
        assert total["healed"] == (1 if mode is Mode.ENFORCE else 0)
        assert total["mttd"]["p50Seconds"] == 30.0 and total["mttr"]["p50Seconds"] == 150.0
    finally:
        await store.close()


# --- notifiedAt over a real webhook -------------------------------------------------------


@pytest.fixture
async def hook() -> AsyncIterator[tuple[str, list[bytes]]]:
    got: list[bytes] = []

    async def receive(request: Request) -> Response:
        got.append(await request.body())
        return Response(status_code=204)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/hook", receive, methods=["POST"])]),
            log_level="warning",
            lifespan="off",
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/hook", got
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


def node(itype: str, name: str = "a") -> ObservedNode:
    labels = {"node.kubernetes.io/instance-type": itype, "eks.amazonaws.com/nodegroup": "general"}
    return ObservedNode(name, labels=labels, kubelet_version="v1.30.4")


class Queue:
    async def close(self) -> None: ...


async def test_a_delivered_finding_gains_notified_at_in_json_and_on_record(tmp_path, hook):
    url, got = hook
    sink = WebhookSink("hooks", url)
    serving = Serving(
        ServingSettings(),
        [NodePoolSpec("general", "c1", instance_types=("m5.large",))],
        Queue(),  # type: ignore[arg-type]
        client_factory=lambda _e: None,  # type: ignore[arg-type,return-value]
        snapshot={"c1": [node("t3.medium")]},
        clock=FixedClock(T0),
        sinks=[(SinkPolicy("hooks"), sink)],
    )
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    serving.healer.audit = store
    assert serving.notifier is not None
    try:
        assert await serving.rediff("c1", "general") == 1
        assert "notifiedAt" not in serving.findings()[0].extra  # not yet delivered
        events = [serving.healer.queue.get_nowait() for _ in range(serving.healer.queue.qsize())]
        await serving.healer.process(events)  # decides (dry-run) and hands it to the notifier
        runner = asyncio.create_task(serving.notifier.run())
        async with asyncio.timeout(15):
            await serving.notifier.drain()
        runner.cancel()
        (body,) = got
        assert json.loads(body)  # the webhook really received the message
        (finding,) = serving.findings()
        notified = finding.to_json()["notifiedAt"]
        assert T0 <= parse_time(notified) < T0 + timedelta(seconds=15)  # the delivery's end
        (note,) = await store.query(kind=AuditKind.NOTE, limit=10)
        assert note.payload["notified"] == {
            "finding": finding.id,
            "sink": "hooks",
            "notifiedAt": notified,
        }
        # the finding rebuilt by a re-diff (a second node drifts the same way) keeps it
        serving.snapshot["c1"] = [node("t3.medium"), node("t3.medium", "b")]
        assert await serving.rediff("c1", "general") == 1
        (changed,) = serving.findings()
        assert changed.nodes == ("a", "b") and changed.extra["notifiedAt"] == notified
    finally:
        await sink.aclose()
        await store.close()


# --- the command ---------------------------------------------------------------------------


def test_report_reads_the_store_and_refuses_bad_input_in_one_line(tmp_path: Path):
    db = tmp_path / "audit.db"

    async def fill() -> None:
        store = await open_audit_store(f"sqlite:///{db}")  # records stamped now
        h = Healer(
            ownership=OWNERS,
            remediator=Remediator(argocd=Argo()),
            audit=store,
            policy=ROOMY,
            mode=Mode.ENFORCE,
        )
        h.set_pool_counts({"c0": 10})
        await h.process([drift(FindingEventType.APPEARED, T0)])
        await h.process(
            [drift(FindingEventType.CLEARED, T0, clearedAt=iso(T0 + timedelta(minutes=1)))]
        )
        await store.close()

    asyncio.run(fill())
    runner = CliRunner()
    ok = runner.invoke(app, ["report", "--since", "1d", "--store", f"sqlite:///{db}", "-o", "json"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["pools"][0]["cluster"] == "c0" and data["pools"][0]["healed"] == 1
    assert data["total"]["mttr"]["p50Seconds"] == 90.0
    table = runner.invoke(
        app, ["report", "--since", "1d", "--store", f"sqlite:///{db}", "--cluster", "c*"]
    )
    assert table.exit_code == 0 and "per pool" in table.stdout and "1m30s" in table.stdout
    none = runner.invoke(
        app,
        ["report", "--since", "1d", "--store", f"sqlite:///{db}", "--cluster", "x*", "-o", "json"],
    )
    assert json.loads(none.stdout)["total"]["opened"] == 0
    for args, needle in [
        (["--since", "7x", "--store", f"sqlite:///{db}"], "--since '7x'"),
        # the argument first: a bad --since is said even when the store is missing too
        (["--since", "7x", "--store", f"sqlite:///{tmp_path / 'nope.db'}"], "--since '7x'"),
        (["--since", "7d", "--store", f"sqlite:///{tmp_path / 'nope.db'}"], "nope.db"),
        (["--since", "7d"], "no audit store given"),
    ]:
        bad = runner.invoke(app, ["report", *args])
        assert bad.exit_code == 2, bad.output
        assert (
            needle in bad.stderr and bad.stderr.count("\n") == 1 and "Traceback" not in bad.output
        )
