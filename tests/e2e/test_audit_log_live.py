"""The API server's audit log names the person behind a field manager (issue 14, item 1): a
kubectl-like patch of a node label by a user with a client certificate, on a real
kube-apiserver that writes an audit log, gives a finding whose actor is that user, with the
kubectl user agent and source IP, ``via: audit`` and the field manager kept."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from fleetwarden.adapters.audit_logs import AuditLogTail, read_audit_logs
from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from tests.e2e.test_exec_credentials_live import POOLS, client_certificate
from tests.e2e.test_watch_live import Recorder, _clean, node_body, spec

pytestmark = pytest.mark.live

KUBECTL_AGENT = "kubectl/v1.36.3 (linux/amd64) kubernetes/abc1234"


def _as_user(k8s: dict, index: int, user: str, tmp_path: Path) -> httpx.AsyncClient:
    """An HTTP client that authenticates as ``user`` (client certificate) and says it is
    kubectl, as ``kubectl label`` would."""
    cert, key = client_certificate(k8s, user, index)
    (tmp_path / "u.crt").write_text(cert)
    (tmp_path / "u.key").write_text(key)
    c = k8s["clusters"][index]
    ctx = ssl.create_default_context(cafile=str(Path(c["dir"]) / "ca.crt"))
    ctx.load_cert_chain(str(tmp_path / "u.crt"), str(tmp_path / "u.key"))
    return httpx.AsyncClient(
        base_url=c["server"], verify=ctx, headers={"User-Agent": KUBECTL_AGENT}, timeout=10
    )


async def test_a_label_patched_by_a_named_user_with_kubectl_names_the_user_agent_and_ip(
    k8s, tmp_path
):
    (ep,) = load_kubeconfig(Path(k8s["kubeconfig"]), contexts=[k8s["clusters"][0]["name"]])
    log = AuditLogTail(Path(k8s["clusters"][0]["audit_log"]), ep.name)
    rec = Recorder()
    fleet = FleetWatcher(
        [spec(ep.name)],
        http_client_factory,
        rec.emit,
        settings=WatchSettings(probe_interval=0.5, audit_logs={ep.name: log}),
    )
    async with KubeClient(ep) as api, _as_user(k8s, 0, "alice", tmp_path) as alice:
        await _clean(api)
        await api.request("POST", "/api/v1/nodes", body=node_body("audit-1"))
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            await rec.wait(
                lambda: fleet.watcher(ep.name) and fleet.watcher(ep.name).synced.is_set()
            )
            r = await alice.patch(
                "/api/v1/nodes/audit-1",
                params={"fieldManager": "kubectl-label"},
                json={"metadata": {"labels": {"team": "payments"}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert r.status_code == 200, r.text
            (appeared,) = await rec.wait(lambda: rec.findings("finding.appeared", "labels.team"))
            actor = appeared.to_json()["finding"]["actor"]
            assert actor == {
                "name": "alice",
                "kind": "human",
                "via": "audit",
                "manager": "kubectl-label",
                "userAgent": KUBECTL_AGENT,
                "sourceIPs": ["127.0.0.1"],
            }
            # the tracker's finding (what /api/findings shows) carries it too
            (current,) = [f for f in fleet.tracker.current() if f.field == "labels.team"]
            assert current.to_json()["actor"]["via"] == "audit"
            # the same patch by fw-admin's token with the manager only: that user is named
            await api.request(
                "PATCH",
                "/api/v1/nodes/audit-1",
                params={"fieldManager": "argocd-controller"},
                body={"metadata": {"labels": {"team": "ops"}}},
                content_type="application/merge-patch+json",
            )
            ops = await rec.wait(
                lambda: [
                    e
                    for e in rec.findings("finding.appeared", "labels.team")
                    if e.finding.actual == "ops"
                ]
            )
            second = ops[0].to_json()["finding"]["actor"]
            assert (second["name"], second["via"], second["manager"]) == (
                "fw-admin",
                "audit",
                "argocd-controller",
            )
            assert second["name"] != actor["name"]
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await _clean(api)
            log.close()
    # the whole log, read once, holds the patch; no line of it is refused
    read = read_audit_logs(Path(k8s["clusters"][0]["audit_log"]), ep.name)
    assert read.bad == 0
    assert any(e.user == "alice" and e.verb == "patch" and e.name == "audit-1" for e in read.events)


def test_watch_with_audit_log_prints_the_user_behind_a_kubectl_label(k8s, tmp_path):
    """The command line: ``watch --audit-log CLUSTER=PATH -o json`` prints the finding of a
    label patched by alice with ``actor.via: audit`` (and refuses a log for no cluster)."""
    c = k8s["clusters"][1]
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS.format(cluster=c["name"]))
    base = [sys.executable, "-m", "fleetwarden", "watch", "-k", k8s["kubeconfig"]]
    base += ["--context", c["name"], "-d", str(pools), "-o", "json"]
    bad = subprocess.run(
        [*base, "--audit-log", f"nope={c['audit_log']}"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "no such cluster" in bad.stderr and "Traceback" not in bad.stderr

    async def scenario() -> list[dict]:
        (ep,) = load_kubeconfig(Path(k8s["kubeconfig"]), contexts=[c["name"]])
        async with KubeClient(ep) as api, _as_user(k8s, 1, "alice", tmp_path) as alice:
            await _clean(api)
            await api.request("POST", "/api/v1/nodes", body=node_body("cli-1", team="wrong"))
            proc = await asyncio.create_subprocess_exec(
                *base, "--audit-log", f"{c['name']}={c['audit_log']}", "--duration", "60",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            seen: list[dict] = []

            async def until(cond) -> dict:
                async with asyncio.timeout(30):
                    while True:
                        hit = next((e for e in seen if cond(e)), None)
                        if hit is not None:
                            return hit
                        assert proc.stdout is not None
                        line = await proc.stdout.readline()
                        assert line, (await proc.stderr.read()).decode()[-2000:]  # type: ignore[union-attr]
                        seen.append(json.loads(line))

            def team(value: str):
                return lambda e: (
                    e.get("type") == "finding.appeared"
                    and e["finding"]["field"] == "labels.team"
                    and e["finding"]["actual"] == value
                )

            try:
                await until(team("wrong"))  # the watch is synced: the relist's finding
                r = await alice.patch(
                    "/api/v1/nodes/cli-1",
                    params={"fieldManager": "kubectl-label"},
                    json={"metadata": {"labels": {"team": "payments"}}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                assert r.status_code == 200, r.text
                await until(team("payments"))
            finally:
                proc.terminate()
                await proc.wait()
                await _clean(api)
            return seen

    seen = asyncio.run(scenario())
    (payments,) = [
        e
        for e in seen
        if e.get("type") == "finding.appeared" and e["finding"]["actual"] == "payments"
    ]
    actor = payments["finding"]["actor"]
    assert (actor["name"], actor["via"], actor["manager"], actor["userAgent"]) == (
        "alice",
        "audit",
        "kubectl-label",
        KUBECTL_AGENT,
    )


async def test_serve_joins_the_audit_log_of_auditlogs_in_its_config(k8s, tmp_path):
    """``auditLogs:`` in serve's config: the finding /api/findings lists names the user behind
    the field manager, as ``watch --audit-log`` does."""
    from fleetwarden.entrypoints.serve_cmd import build_service
    from fleetwarden.wiring.running import serve
    from fleetwarden.wiring.service_config import load_service_config
    from tests.e2e.test_heal_live import _config, _node, _until

    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    cfg = _config(tmp_path, k8s["kubeconfig"], ep.name, "dry-run")
    raw = json.loads(cfg.read_text())
    raw["auditLogs"] = {ep.name: k8s["clusters"][0]["audit_log"]}
    cfg.write_text(json.dumps(raw))
    service = build_service(load_service_config(cfg))
    assert set(service.audit_logs) == {ep.name}
    async with KubeClient(ep) as api, _as_user(k8s, 0, "alice", tmp_path) as alice:
        await _clean(api)
        await api.request("POST", "/api/v1/nodes", body=_node("sa-1", team="platform"))
        task = asyncio.create_task(serve(service))
        try:
            await _until(
                lambda: (w := service.fleet.watcher(ep.name)) is not None and w.synced.is_set(),
                timeout=30,
            )
            r = await alice.patch(
                "/api/v1/nodes/sa-1",
                params={"fieldManager": "kubectl-label"},
                json={"metadata": {"labels": {"team": "payments"}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert r.status_code == 200, r.text
            (found,) = await _until(
                lambda: [
                    f
                    for f in service.findings()
                    if f.field == "labels.team"
                    and (f.extra.get("actor") or {}).get("via") == "audit"
                ],
                timeout=30,
            )
            actor = found.to_json()["actor"]
            assert (actor["name"], actor["manager"], actor["userAgent"]) == (
                "alice",
                "kubectl-label",
                KUBECTL_AGENT,
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await _clean(api)
