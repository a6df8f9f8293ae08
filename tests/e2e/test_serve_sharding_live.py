"""``fleetwarden serve`` replicas with ``sharding`` over the real clusters of the test env:
three OS processes split the clusters (each watched by exactly one replica, ``/api/clusters``
names the owner the same way on every replica); after kill -9 of a cluster's owner another
replica watches it again, and a drift made while nobody watched it is reported.

The test env has two API servers; each is reached under three kubeconfig context names, so
the replicas split six clusters (a cluster is what serve calls one: a context name)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from tests.support.serve_process import ServeProcess, free_port

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "src")])  # this checkout's src/ first
LEASE, RETRY = 4, 0.5
# a survivor judges the dead member gone leaseSeconds after its last renewal seen, acts at
# its next round; then the watcher lists the cluster afresh and the inspector re-diffs it
BUDGET = LEASE + 2 * 1.2 * RETRY + 10


def wait_for(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := cond():
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def get(p: ServeProcess, path: str) -> Any:
    try:
        r = httpx.get(f"{p.base}{path}", timeout=2.0)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def node(name: str, team: str) -> dict[str, Any]:
    labels = {"eks.amazonaws.com/nodegroup": "general", "team": team}
    labels["node.kubernetes.io/instance-type"] = "m5.large"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_three_replicas_split_the_clusters_and_a_killed_owners_cluster_is_watched_again(
    k8s, tmp_path
):
    endpoints = load_kubeconfig(Path(k8s["kubeconfig"]))
    kubeconfig = yaml.safe_load(Path(k8s["kubeconfig"]).read_text())
    server_of: dict[str, str] = {}  # context name -> the real cluster (API server) behind it
    for ctx in list(kubeconfig["contexts"]):
        for suffix in ("a", "b", "c"):
            alias = f"{ctx['name']}-{suffix}"
            kubeconfig["contexts"].append({**ctx, "name": alias})
            server_of[alias] = ctx["name"]
    aliased = tmp_path / "kubeconfig"
    aliased.write_text(yaml.safe_dump(kubeconfig))
    names = sorted(server_of)
    group = f"fw-serve-{uuid.uuid4().hex[:8]}"
    loop = asyncio.new_event_loop()
    apis = {ep.name: KubeClient(ep) for ep in endpoints}

    def run(coro: Any) -> Any:
        return loop.run_until_complete(coro)

    async def reset() -> None:
        for cluster, api in apis.items():
            for item in (await api.list("/api/v1/nodes")).items:
                await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
            await api.request("POST", "/api/v1/nodes", body=node(f"sh-{cluster}", "platform"))

    run(reset())
    desired = tmp_path / "desired.yaml"
    desired.write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n"
        "pools:\n  general:\n    minSize: 1\n    labels: {team: platform}\n"
        "clusters:\n" + "".join(f"  {c}: {{}}\n" for c in names)
    )
    replicas = []
    for i in range(3):
        port = free_port()
        cfg = tmp_path / f"replica-{i}.yaml"
        cfg.write_text(
            json.dumps(
                {
                    "listen": f"127.0.0.1:{port}",
                    "queuePath": str(tmp_path / f"q{i}.db"),
                    "store": f"sqlite:///{tmp_path / f'audit{i}.db'}",
                    "desired": [str(desired)],
                    "clusters": {
                        "kubeconfig": str(aliased),
                        "contexts": names,
                        "probeIntervalSeconds": 1,
                    },
                    "debounceSeconds": 0.2,
                    "sharding": {
                        "context": names[0],
                        "namespace": "default",
                        "group": group,
                        "leaseSeconds": LEASE,
                        "renewDeadlineSeconds": 2.5,
                        "retryPeriodSeconds": RETRY,
                    },
                }
            )
        )
        replicas.append(ServeProcess(cfg, port))
    ids = [f"replica-{i}" for i in range(3)]
    try:
        for who, p in zip(ids, replicas, strict=True):
            p.start(env={"POD_NAME": who, "FLEETWARDEN_ONE_PROCESS": "1", "PYTHONPATH": PYTHONPATH})

        def agreed(live: list[ServeProcess]) -> dict[str, str] | None:
            """Every live replica names the same live owner for every cluster, and that
            owner (and only it) watches the cluster."""
            views = []
            for p in live:
                rows = get(p, "/api/clusters")
                if rows is None:
                    return None
                views.append({r["cluster"]: r for r in rows})
            alive = {ids[replicas.index(p)] for p in live}
            owners = {c: views[0].get(c, {}).get("owner") for c in names}
            if any(o not in alive for o in owners.values()):
                return None
            for p, view in zip(live, views, strict=True):
                me = ids[replicas.index(p)]
                for c in names:
                    row = view.get(c, {})
                    if row.get("owner") != owners[c]:
                        return None
                    watched = row.get("source") != "another replica"
                    if watched != (owners[c] == me) or (watched and not row.get("synced")):
                        return None
            return owners

        owners = wait_for(lambda: agreed(replicas), 30, "one agreed owner per cluster")
        print(f"\nowners: {owners}")
        assert len(set(owners.values())) >= 2  # six clusters are split, not all on one
        victim_id = owners[names[0]]
        victim = replicas[ids.index(victim_id)]
        real = server_of[names[0]]
        gap = [c for c in names if owners[c] == victim_id and server_of[c] == real]
        victim.kill9()
        killed = time.monotonic()
        # the gap: nobody watches the victim's clusters until a survivor takes them
        run(
            apis[real].request(
                "PATCH",
                f"/api/v1/nodes/sh-{real}",
                body={"metadata": {"labels": {"team": "intruder"}}},
                content_type="application/merge-patch+json",
            )
        )
        survivors = [p for p in replicas if p.alive]
        after = wait_for(lambda: agreed(survivors), BUDGET, "the survivors own every cluster")

        def reported() -> bool:
            for c in gap:
                heir = replicas[ids.index(after[c])]
                findings = get(heir, "/api/findings") or []
                if not any(
                    f["cluster"] == c and f["field"] == "labels.team" and f["actual"] == "intruder"
                    for f in findings
                ):
                    return False
            return True

        wait_for(reported, BUDGET, "the drift made during the gap, reported by the heirs")
        took = time.monotonic() - killed
        print(f"cluster watched again and the gap's drift reported {took:.2f}s after kill -9")
        # clusters the victim did not own stayed where they were
        for c in names:
            if owners[c] != victim_id:
                assert after[c] == owners[c]
    finally:
        for p in replicas:
            p.stop()
        for api in apis.values():
            run(api.aclose())
        loop.close()
