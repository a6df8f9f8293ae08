"""``fleetwarden serve`` restores the guards' history before it decides anything: a request
left waiting for approval by the previous process is listed by the API after the restart and
can be approved there (real SQLite audit store, real HTTP server; no cluster needed)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from datetime import UTC, datetime
from pathlib import Path

import httpx

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Mode, Status
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.entrypoints.serve_cmd import build_service, serve
from fleetwarden.entrypoints.service_config import load_service_config


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp: Path, port: int) -> Path:
    (tmp / "desired.yaml").write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n"
        "cluster: prod\npools:\n  general:\n    minSize: 1\n    labels: {team: platform}\n"
    )
    cfg = tmp / "svc.json"
    cfg.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{port}",
                "queuePath": str(tmp / "q.db"),
                "store": f"sqlite:///{tmp / 'audit.db'}",
                "desired": [str(tmp / "desired.yaml")],
                "policy": {"mode": "approval"},
                "auth": {"admin": {"bearerToken": "adm"}},
            }
        )
    )
    return cfg


async def test_a_request_made_before_the_restart_is_approvable_through_the_api(tmp_path):
    # the previous process: a request waits for approval, then the process is gone
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    before = Healer(
        ownership=OwnershipMap(), remediator=Remediator(), audit=store, mode=Mode.APPROVAL
    )
    drift = Finding(
        "prod", "general", Layer.L1, "labels.team", "platform", "x", Severity.CRITICAL,
        nodes=("n-1",),
    )  # fmt: skip
    (request,) = await before.process(
        [FindingEvent(FindingEventType.APPEARED, drift, datetime.now(UTC))]
    )
    assert request.status is Status.PENDING_APPROVAL
    await store.close()

    port = _port()
    service = build_service(load_service_config(_config(tmp_path, port)))
    ready = asyncio.Event()
    task = asyncio.create_task(serve(service, ready=ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=30)
        assert [d.id for d in service.healer.pending()] == [request.id]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            listed = await http.get("/api/decisions", params={"status": "pending-approval"})
            assert [d["id"] for d in listed.json()] == [request.id]
            approved = await http.post(
                f"/api/decisions/{request.id}/approve", headers={"authorization": "Bearer adm"}
            )
        assert approved.status_code == 200, approved.text
        assert approved.json()["status"] == "execute"
        assert service.healer.pending() == []
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
