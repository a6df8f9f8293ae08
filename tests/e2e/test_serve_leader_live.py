"""``fleetwarden serve`` replicas with ``leaderElection`` on a real kube-apiserver, one
PostgreSQL audit store: three OS processes, exactly one reports ``leader: true`` (/healthz and
``fleetwarden_leader``); kill -9 of the leader hands over within leaseSeconds + 5 s; label
drift on many pools made while nobody leads is healed once each by the new leader (0 twice,
0 lost, every patch on record); a replica that does not lead answers an approval with 503."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from tests.support import pg_env
from tests.support.serve_process import ServeProcess, free_port

pytestmark = pytest.mark.live

EXE = str(Path(sys.executable).parent / "fleetwarden")
ROOT = Path(__file__).resolve().parents[2]
# the helper runs serve with PYTHONPATH=ROOT: keep this checkout's src/ first
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "src")])
LEASE = 4
POOLS = [f"p{i}" for i in range(12)]
ADMIN = "admin-token"


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


def node(name: str, pool: str, team: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "eks.amazonaws.com/nodegroup": pool,
                "node.kubernetes.io/instance-type": "m5.large",
                "team": team,
            },
        },
    }


def wait_for(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := cond():
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def health(p: ServeProcess) -> dict[str, Any] | None:
    try:
        r = httpx.get(f"{p.base}/healthz", timeout=1.0)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def leaders(replicas: list[ServeProcess]) -> list[ServeProcess]:
    out = []
    for p in replicas:
        if not p.alive:
            continue
        h = health(p)
        if h is not None and h.get("leader") is True:
            out.append(p)
    return out


def replica_config(
    tmp: Path,
    i: int,
    *,
    kubeconfig: str,
    context: str,
    store: str,
    lease: str | None,
    mode: str = "enforce",
) -> ServeProcess:
    desired = tmp / "desired.yaml"
    if not desired.exists():
        pools = "".join(f"  {p}:\n    minSize: 1\n    labels: {{team: platform}}\n" for p in POOLS)
        desired.write_text(
            "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n"
            f"cluster: {context}\npools:\n{pools}"
        )
    port = free_port()
    cfg = tmp / f"replica-{i}.yaml"
    election = {
        "context": context,
        "namespace": "default",
        "name": lease,
        "leaseSeconds": LEASE,
        "renewDeadlineSeconds": 2.5,
        "retryPeriodSeconds": 0.5,
    }
    cfg.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{port}",
                "queuePath": str(tmp / f"q{i}.db"),
                "store": store,
                "desired": [str(desired)],
                "clusters": {
                    "kubeconfig": kubeconfig,
                    "contexts": [context],
                    "probeIntervalSeconds": 1,
                },
                "debounceSeconds": 0.2,
                "policy": {"mode": mode, "maxActionsPerCluster": 100, "maxActionsFleet": 100},
                "auth": {"admin": {"bearerToken": ADMIN}},
                **({"leaderElection": election} if lease is not None else {}),
            }
        )
    )
    return ServeProcess(cfg, port)


def start(replicas: list[ServeProcess]) -> None:
    for i, p in enumerate(replicas):
        p.start(
            env={
                "POD_NAME": f"replica-{i}",
                "FLEETWARDEN_ONE_PROCESS": "1",
                "PYTHONPATH": PYTHONPATH,
            }
        )


def export(store: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [EXE, "audit", "export", "--store", store],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def patches(store: str) -> tuple[Counter[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """Label patches that went out, per node; every outcome; every decision record."""
    records = export(store)
    sent: Counter[str] = Counter()
    outcomes = []
    for rec in records:
        if rec["kind"] != "outcome":
            continue
        outcomes.append(rec["payload"]["outcome"])
        for call in rec["payload"]["outcome"]["calls"]:
            if call["call"]["method"] == "patch_labels" and call["status"] == "ok":
                sent[call["call"]["args"]["node"]] += 1
    decisions = [r for r in records if r["kind"] == "decision"]
    return sent, outcomes, decisions


async def relabel(api: KubeClient, names: list[str], team: str) -> None:
    for name in names:
        await api.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"metadata": {"labels": {"team": team}}},
            content_type="application/merge-patch+json",
        )


async def teams(api: KubeClient) -> dict[str, str]:
    listed = await api.list("/api/v1/nodes")
    return {n["metadata"]["name"]: n["metadata"]["labels"].get("team", "") for n in listed.items}


def test_three_replicas_one_leader_takeover_after_kill9_and_each_heal_runs_once(
    k8s, pg_server, tmp_path
):
    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    lease = f"fw-serve-{uuid.uuid4().hex[:8]}"
    store = pg_env.fresh_database(pg_server, "leader")
    names = [f"ln-{p}" for p in POOLS]
    loop = asyncio.new_event_loop()
    api = KubeClient(ep)

    def run(coro: Any) -> Any:
        return loop.run_until_complete(coro)

    async def reset() -> None:
        for item in (await api.list("/api/v1/nodes")).items:
            await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
        for name, pool in zip(names, POOLS, strict=True):
            await api.request("POST", "/api/v1/nodes", body=node(name, pool, "platform"))

    run(reset())
    replicas = [
        replica_config(
            tmp_path, i, kubeconfig=k8s["kubeconfig"], context=ep.name, store=store, lease=lease
        )
        for i in range(3)
    ]
    try:
        start(replicas)
        first = wait_for(lambda: leaders(replicas), 15, "a first leader")
        assert len(first) == 1
        end = time.monotonic() + 3  # steady: one leader at every sample, the others follow
        while time.monotonic() < end:
            assert len(leaders(replicas)) == 1
            time.sleep(0.1)
        leader = first[0]
        assert leader.metric("fleetwarden_leader") == 1.0
        followers = [p for p in replicas if p is not leader]
        assert [p.metric("fleetwarden_leader") for p in followers] == [0.0, 0.0]
        # a follower approves nothing: the leader does
        r = httpx.post(
            f"{followers[0].base}/api/decisions/nope/approve",
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=5,
        )
        assert r.status_code == 503 and r.json()["leader"] is False

        # drift on half the pools while the first leader leads: it heals them
        before, during = names[:6], names[6:]
        run(relabel(api, before, "intruder"))
        wait_for(lambda: all(run(teams(api))[n] == "platform" for n in before), 30, "first heals")

        # kill -9 the leader; the storm lands while the Lease is still its
        leader.kill9()
        killed = time.monotonic()
        run(relabel(api, during, "intruder"))
        survivors = [p for p in replicas if p.alive]
        second = wait_for(lambda: leaders(survivors), LEASE + 5, "a new leader")
        took = time.monotonic() - killed
        print(f"\ntakeover after kill -9: {took:.2f}s (leaseSeconds {LEASE})")
        assert len(second) == 1 and took <= LEASE + 5
        wait_for(
            lambda: all(v == "platform" for v in run(teams(api)).values()),
            30,
            "every drifted node healed by the new leader",
        )
        time.sleep(2)  # a second heal, if any were coming, would be on record by now
        sent, outcomes, decisions = patches(store)
        assert set(sent) == set(names), f"lost: {set(names) - set(sent)}"
        twice = {n: c for n, c in sent.items() if c != 1}
        assert not twice, f"patched more than once: {twice}"
        executed = [d for d in decisions if d["payload"]["decision"]["status"] == "execute"]
        # every executed decision carries the term it was decided in
        tokens = {d["payload"].get("leaseTerm") for d in executed}
        assert None not in tokens and len(tokens) == 2, tokens
        assert all(o["status"] in ("ok", "skipped") for o in outcomes), outcomes
    finally:
        for p in replicas:
            p.stop()
        run(api.aclose())
        loop.close()


def test_one_approval_posted_to_three_replicas_on_one_store_runs_once_the_others_409(
    k8s, pg_server, tmp_path
):
    """Approval mode, no election: three replicas on one PostgreSQL; the same approval POSTed
    to all three at once runs on one (200, the label restored once); the other two answer 409
    naming who approved it and when."""
    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[1]
    store = pg_env.fresh_database(pg_server, "approve")
    loop = asyncio.new_event_loop()
    api = KubeClient(ep)

    def run(coro: Any) -> Any:
        return loop.run_until_complete(coro)

    async def reset() -> None:
        for item in (await api.list("/api/v1/nodes")).items:
            await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
        for pool in POOLS:
            await api.request("POST", "/api/v1/nodes", body=node(f"an-{pool}", pool, "platform"))

    run(reset())
    replicas = [
        replica_config(
            tmp_path,
            i,
            kubeconfig=k8s["kubeconfig"],
            context=ep.name,
            store=store,
            lease=None,
            mode="approval",
        )
        for i in range(3)
    ]
    try:
        start(replicas)
        run(relabel(api, ["an-p0"], "intruder"))

        def pending() -> list[str]:
            return [
                r["payload"]["decision"]["id"]
                for r in export(store)
                if r["kind"] == "decision"
                and r["payload"]["decision"]["status"] == "pending-approval"
            ]

        wanted = wait_for(pending, 30, "a request waiting for approval")[0]
        time.sleep(1)  # every replica has decided the drift by now (one request or several)
        with ThreadPoolExecutor(3) as pool:
            answers = list(
                pool.map(
                    lambda p: httpx.post(
                        f"{p.base}/api/decisions/{wanted}/approve",
                        headers={"authorization": f"Bearer {ADMIN}"},
                        timeout=30,
                    ),
                    replicas,
                )
            )
        codes = sorted(a.status_code for a in answers)
        assert codes == [200, 409, 409], [(a.status_code, a.text) for a in answers]
        winner = next(i for i, a in enumerate(answers) if a.status_code == 200)
        for a in answers:
            if a.status_code == 409:
                body = a.json()
                assert body["holder"] == f"replica-{winner}"
                assert body["at"].endswith("Z") and "already approved" in body["error"]
        wait_for(lambda: run(teams(api))["an-p0"] == "platform", 20, "the approved restore")
        sent, _, _ = patches(store)
        assert sent == Counter({"an-p0": 1})
    finally:
        for p in replicas:
            p.stop()
        run(api.aclose())
        loop.close()


def test_role_all_under_its_supervisor_reports_the_workers_leadership(k8s, pg_server, tmp_path):
    """``role: all`` runs a gateway and a worker process: the worker elects, and the pair's
    /healthz and /metrics say so."""
    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    p = replica_config(
        tmp_path,
        0,
        kubeconfig=k8s["kubeconfig"],
        context=ep.name,
        store=pg_env.fresh_database(pg_server, "pair"),
        lease=f"fw-pair-{uuid.uuid4().hex[:8]}",
        mode="dry-run",
    )
    try:
        p.start(env={"POD_NAME": "pair-0", "PYTHONPATH": PYTHONPATH})
        body = wait_for(
            lambda: (h := health(p)) is not None and h.get("leader") is True and h,
            15,
            "the worker to lead",
        )
        assert body["processes"]["worker"]["leader"] is True
        assert "fleetwarden_leader 1.0" in httpx.get(f"{p.base}/metrics", timeout=5).text
    finally:
        p.stop()
