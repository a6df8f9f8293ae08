"""``fleetwarden serve`` restores the guards' history before it decides anything: a request
left waiting for approval by the previous process is listed by the API after the restart and
can be approved there — unless the service now runs in another mode: then it is cancelled on
record at the start, and approving it (API or CLI) says so and does nothing (real SQLite audit
store, real HTTP server, the real CLI; no cluster needed)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Decision, Mode, Status
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.entrypoints.serve_cmd import build_service
from fleetwarden.formats.errors import FormatError
from fleetwarden.wiring.running import serve
from fleetwarden.wiring.service import healing_policy
from fleetwarden.wiring.service_config import load_service_config, service_config_from


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp: Path, port: int, mode: str = "approval") -> Path:
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
                "policy": {"mode": mode},
                "auth": {"admin": {"bearerToken": "adm"}},
            }
        )
    )
    return cfg


async def _request_before_the_restart(tmp_path: Path) -> Decision:
    """The previous process, in approval mode under the same configuration as the service's
    approval config: a request waits for approval, then the process is gone."""
    _, config_hash = healing_policy(load_service_config(_config(tmp_path, _port(), "approval")))
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    before = Healer(
        ownership=OwnershipMap(),
        remediator=Remediator(),
        audit=store,
        mode=Mode.APPROVAL,
        config=config_hash,
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
    return request


async def test_a_request_made_before_the_restart_is_approvable_through_the_api(tmp_path):
    request = await _request_before_the_restart(tmp_path)
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


async def test_switched_to_dry_run_a_request_is_cancelled_and_approving_it_does_nothing(
    tmp_path,
):
    """The issue's case: a request waits in approval mode; the service is switched to dry-run
    and restarted; approving the request must not run it."""
    request = await _request_before_the_restart(tmp_path)
    port = _port()
    config = _config(tmp_path, port, "dry-run")
    service = build_service(load_service_config(config))
    ready = asyncio.Event()
    task = asyncio.create_task(serve(service, ready=ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=30)
        assert service.healer.pending() == []
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            listed = await http.get("/api/decisions", params={"status": "cancelled"})
            assert [(d["id"], d["guard"]) for d in listed.json()] == [(request.id, "mode-changed")]
            refused = await http.post(
                f"/api/decisions/{request.id}/approve", headers={"authorization": "Bearer adm"}
            )
        assert refused.status_code == 409, refused.text
        assert "was cancelled, nothing was done" in refused.json()["error"]
        assert "now runs in dry-run mode" in refused.json()["error"]
        # the CLI says so too, and exits 1
        cli = await asyncio.to_thread(
            subprocess.run,
            [str(Path(sys.executable).parent / "fleetwarden"), "approve", request.id,
             "--config", str(config)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cli.returncode == 1, cli.stderr
        assert "was cancelled, nothing was done" in cli.stderr
        assert json.loads(cli.stdout)["status"] == "cancelled"
        audit = service.healer.audit
        assert audit is not None
        assert await audit.query(kind=AuditKind.ACTION) == []  # nothing was sent or intended
        (note,) = await audit.query(kind=AuditKind.NOTE, ref=request.id)
        assert note.payload["cancellation"]["guard"] == "mode-changed"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_the_request_expiry_is_configurable_and_the_fingerprint_follows_the_routing(tmp_path):
    raw = json.loads(_config(tmp_path, 8080).read_text())
    policy, fp = healing_policy(service_config_from(raw, source="t"))
    assert policy.guards.pending_ttl.total_seconds() == 3600  # the default: 1 h
    raw["policy"]["requestExpiryMinutes"] = 5
    policy5, fp5 = healing_policy(service_config_from(raw, source="t"))
    assert policy5.guards.pending_ttl.total_seconds() == 300
    assert fp5 == fp  # how long a request waits does not change what it would do
    raw["ownership"] = [{"pool": "general", "owner": "infrastructure"}]
    assert healing_policy(service_config_from(raw, source="t"))[1] != fp
    raw["policy"]["requestExpiryMinutes"] = 0
    with pytest.raises(FormatError, match=r"policy\.requestExpiryMinutes"):
        service_config_from(raw, source="t")
