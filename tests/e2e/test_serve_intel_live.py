"""Issue 14 in `serve` on a real kube-apiserver: a label patched with the field manager
`kubectl-edit` is a finding whose actor and timeline reach /api/findings, the audit store's
`finding` record and the MTTD/MTTR histograms of /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.core.events import parse_time
from fleetwarden.entrypoints.serve_cmd import build_service
from fleetwarden.wiring.running import serve
from fleetwarden.wiring.service_config import load_service_config
from tests.e2e.test_heal_live import _config, _node, _until

pytestmark = pytest.mark.live
KUBECTL_EDIT = {"name": "kubectl-edit", "kind": "human", "via": "managedFields"}


async def _label(api: KubeClient, node: str, value: str, manager: str) -> None:
    await api.request(
        "PATCH",
        f"/api/v1/nodes/{node}",
        params={"fieldManager": manager},
        body={"metadata": {"labels": {"team": value}}},
        content_type="application/strategic-merge-patch+json",
    )


def _audited_findings(store: Path) -> list[dict]:
    with contextlib.closing(sqlite3.connect(store)) as con:
        rows = con.execute(
            "SELECT payload FROM audit_records WHERE kind = 'finding' ORDER BY seq"
        ).fetchall()
    return [json.loads(p) for (p,) in rows]


async def test_serve_names_the_actor_and_measures_detect_and_restore(k8s, tmp_path):
    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    cfg = _config(tmp_path, k8s["kubeconfig"], ep.name, "dry-run")
    service = build_service(load_service_config(cfg))
    sample = service.metrics.registry.get_sample_value
    labels = {"cluster": ep.name, "layer": "L1"}
    async with KubeClient(ep) as api:
        for item in (await api.list("/api/v1/nodes")).items:
            await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
        await api.request("POST", "/api/v1/nodes", body=_node("s-1", team="platform"))
        task = asyncio.create_task(serve(service))
        try:
            await _until(
                lambda: (w := service.fleet.watcher(ep.name)) is not None and w.synced.is_set(),
                timeout=30,
            )
            await _label(api, "s-1", "intruder", "kubectl-edit")
            (found,) = await _until(
                lambda: [f for f in service.findings() if f.field == "labels.team"]
            )
            data = found.to_json()  # what /api/findings lists
            assert data["actor"] == KUBECTL_EDIT
            started, detected = parse_time(data["startedAt"]), parse_time(data["detectedAt"])
            assert started is not None and detected is not None
            assert started <= detected  # managedFields times are whole seconds
            assert sample("fleetwarden_time_to_detect_seconds_count", labels) == 1
            # over HTTP: the finding in /api/findings, its incident in /api/incidents
            base = f"http://{service.config.host}:{service.config.port}"
            async with httpx.AsyncClient(base_url=base, timeout=5) as http:
                listed = (await http.get("/api/findings")).json()
                (incident,) = (await http.get("/api/incidents")).json()
            assert [f["actor"] for f in listed if f["field"] == "labels.team"] == [KUBECTL_EDIT]
            assert incident["actor"] == KUBECTL_EDIT and incident["findings"] == [data["id"]]
            store = tmp_path / "audit.db"
            audited = await _until(
                lambda: [p for p in _audited_findings(store) if p["event"] == "finding.appeared"]
            )
            assert audited[0]["finding"]["actor"] == KUBECTL_EDIT
            # restored by hand: cleared, and the restore time is measured from the change
            await _label(api, "s-1", "platform", "kubectl-label")
            await _until(lambda: sample("fleetwarden_time_to_restore_seconds_count", labels) == 1)
            assert not [f for f in service.findings() if f.field == "labels.team"]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for item in (await api.list("/api/v1/nodes")).items:
                await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")


async def test_two_managers_alternating_a_label_are_one_fight_and_the_heal_is_paused(k8s, tmp_path):
    """kubectl-edit, argocd-controller, kubectl-edit on one label within the window: one
    FIGHT finding naming both; the third write's drift is not healed (its decision is blocked
    by the fight guard and says "paused"), only the first one was (dry-run)."""
    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[1]
    cfg = _config(tmp_path, k8s["kubeconfig"], ep.name, "dry-run")
    service = build_service(load_service_config(cfg))
    async with KubeClient(ep) as api:
        for item in (await api.list("/api/v1/nodes")).items:
            await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
        await api.request("POST", "/api/v1/nodes", body=_node("f-1", team="platform"))
        task = asyncio.create_task(serve(service))
        try:
            await _until(
                lambda: (w := service.fleet.watcher(ep.name)) is not None and w.synced.is_set(),
                timeout=30,
            )

            def label_decisions() -> list:
                return [
                    d
                    for d in service.healer.decisions.values()
                    if d.target is not None and "team" in json.dumps(d.to_json())
                ]

            await _label(api, "f-1", "intruder", "kubectl-edit")
            await _until(lambda: len(label_decisions()) == 1)
            await _label(api, "f-1", "platform", "argocd-controller")
            await _until(lambda: not [f for f in service.findings() if f.field == "labels.team"])
            await _label(api, "f-1", "intruder", "kubectl-edit")
            (fight,) = await _until(
                lambda: [f for f in service.findings() if f.layer.value == "FIGHT"]
            )
            data = fight.to_json()
            assert (data["field"], data["nodes"]) == ("labels.team", ["f-1"])
            assert data["actors"] == ["kubectl-edit", "argocd-controller"]
            assert data["writes"] == 3
            await _until(lambda: len(label_decisions()) == 2)
            first, paused = sorted(label_decisions(), key=lambda d: d.at)
            assert first.status.value == "dry-run"
            assert (paused.status.value, paused.guard.value) == ("blocked", "fight")
            assert any(r.startswith("paused: ") for r in paused.reasons)
            store = tmp_path / "audit.db"

            def paused_in_audit() -> bool:
                with contextlib.closing(sqlite3.connect(store)) as con:
                    rows = con.execute(
                        "SELECT payload FROM audit_records WHERE kind = 'decision'"
                    ).fetchall()
                return any("paused: " in p for (p,) in rows)

            await _until(paused_in_audit)
            with contextlib.closing(sqlite3.connect(store)) as con:
                sql = "SELECT count(*) FROM audit_records WHERE kind = 'action'"
                assert con.execute(sql).fetchone()[0] == 1  # the first (dry-run) heal only
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for item in (await api.list("/api/v1/nodes")).items:
                await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")


async def test_a_late_cloud_event_refines_the_actor_and_the_audit_records_it(k8s, tmp_path):
    """The watch sees a label written by the provider's agent (field manager kubelet) first;
    the provider's event arrives later through the gateway: the open finding's actor becomes
    the principal (finding.changed), and the audit store records the finding with it."""
    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    cfg = _config(tmp_path, k8s["kubeconfig"], ep.name, "dry-run")
    raw = json.loads(cfg.read_text())
    raw["auth"]["cloudevents"] = {"bearerToken": "ce-token"}
    cfg.write_text(json.dumps(raw))
    service = build_service(load_service_config(cfg))
    alice = "arn:aws:iam::123456789012:user/alice"
    async with KubeClient(ep) as api:
        for item in (await api.list("/api/v1/nodes")).items:
            await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
        await api.request("POST", "/api/v1/nodes", body=_node("r-1", team="platform"))
        task = asyncio.create_task(serve(service))
        try:
            await _until(
                lambda: (w := service.fleet.watcher(ep.name)) is not None and w.synced.is_set(),
                timeout=30,
            )
            await _label(api, "r-1", "rotated", "kubelet")
            (found,) = await _until(
                lambda: [f for f in service.findings() if f.field == "labels.team"]
            )
            assert found.extra["actor"]["name"] == "kubelet"
            event = {
                "specversion": "1.0",
                "id": "late-1",
                "source": "aws.eks",
                "type": "aws.eks.UpdateNodegroupConfig",
                "time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                "cluster": ep.name,
                "nodepool": "general",
                "actor": alice,
                "data": {},
            }
            base = f"http://{service.config.host}:{service.config.port}"
            async with httpx.AsyncClient(base_url=base, timeout=5) as http:
                r = await http.post(
                    "/events/cloudevents",
                    content=json.dumps(event),
                    headers={
                        "Authorization": "Bearer ce-token",
                        "content-type": "application/cloudevents+json",
                    },
                )
            assert r.status_code == 202, r.text
            (refined,) = await _until(
                lambda: [
                    f
                    for f in service.findings()
                    if f.field == "labels.team" and f.extra["actor"]["via"] == "cloudEvent"
                ]
            )
            assert refined.extra["actor"] == {"name": alice, "kind": "human", "via": "cloudEvent"}
            changed = [e for e in service.events if e["type"] == "finding.changed"]
            assert changed and "late-1" in changed[-1]["reason"]
            store = tmp_path / "audit.db"
            audited = await _until(
                lambda: [p for p in _audited_findings(store) if p["event"] == "finding.changed"]
            )
            assert audited[-1]["finding"]["actor"]["name"] == alice
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for item in (await api.list("/api/v1/nodes")).items:
                await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
