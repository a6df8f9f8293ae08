"""``fleetwarden serve`` replicas with ``leaderElection`` AND ``sharding`` on the real API
servers of the test env, one PostgreSQL audit store, enforce mode: each shard heals its own
clusters (issue #13). Three OS processes; the replica identities are picked so the two
clusters are owned by two different replicas, so at least one cluster is owned by a replica
that does not lead. Drift planted on that cluster's nodes is healed (before the heal
authority, only the leader healed, and only its own shard); after kill -9 of the owner its
cluster is healed by the new owner; every label patch went out exactly once (the audit store's
outcome records), and nothing else was patched."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.core.sharding import owner_of
from tests.e2e.test_serve_leader_live import (
    PYTHONPATH,
    health,
    leaders,
    node,
    patches,
    relabel,
    teams,
    wait_for,
)
from tests.support import pg_env
from tests.support.serve_process import ServeProcess, free_port

pytestmark = pytest.mark.live

LEASE, RETRY = 4, 0.5
POOLS = ["p0", "p1", "p2", "p3"]
# a survivor judges the dead owner gone leaseSeconds after its last renewal seen, at its next
# round; then the takeover grace (leaseSeconds) before it heals; then list, diff, heal
BUDGET = LEASE + 2 * 1.2 * RETRY + LEASE + 20


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


def split_identities(clusters: list[str]) -> list[str]:
    """Three identities under which the two clusters have two different owners."""
    for n in range(1000):
        ids = [f"heal-{n}-{i}" for i in range(3)]
        if owner_of(clusters[0], ids) != owner_of(clusters[1], ids):
            return ids
    raise AssertionError("no split found")


def owners(p: ServeProcess) -> dict[str, str | None] | None:
    try:
        r = httpx.get(f"{p.base}/api/clusters", timeout=2.0)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    return {row["cluster"]: row.get("owner") for row in r.json()}


def agreed(live: list[ServeProcess], clusters: list[str], ids: dict[int, str]) -> Any:
    """Every live replica names the same live owner for every cluster."""
    views = [owners(p) for p in live]
    if any(v is None for v in views):
        return None
    alive = {ids[id(p)] for p in live}
    first = views[0]
    assert first is not None
    if any(first.get(c) not in alive for c in clusters):
        return None
    if any(v != first for v in views):
        return None
    return first


def test_a_non_leaders_shard_is_healed_once_and_its_heir_heals_after_kill9(
    k8s, pg_server, tmp_path
):
    endpoints = load_kubeconfig(Path(k8s["kubeconfig"]))[:2]
    clusters = [ep.name for ep in endpoints]
    identities = split_identities(clusters)
    lease, group = f"fw-heal-{uuid.uuid4().hex[:8]}", f"fw-heal-{uuid.uuid4().hex[:8]}"
    store = pg_env.fresh_database(pg_server, "shardheal")
    loop = asyncio.new_event_loop()
    apis = {ep.name: KubeClient(ep) for ep in endpoints}

    def run(coro: Any) -> Any:
        return loop.run_until_complete(coro)

    def nodes_of(cluster: str) -> list[str]:
        return [f"sh-{cluster}-{pool}" for pool in POOLS]

    async def reset() -> None:
        for cluster, api in apis.items():
            for item in (await api.list("/api/v1/nodes")).items:
                await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
            for name, pool in zip(nodes_of(cluster), POOLS, strict=True):
                await api.request("POST", "/api/v1/nodes", body=node(name, pool, "platform"))

    run(reset())
    desired = tmp_path / "desired.yaml"
    pools = "".join(f"  {p}:\n    minSize: 1\n    labels: {{team: platform}}\n" for p in POOLS)
    desired.write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n"
        f"pools:\n{pools}clusters:\n" + "".join(f"  {c}: {{}}\n" for c in clusters)
    )
    timing = {"leaseSeconds": LEASE, "renewDeadlineSeconds": 2.5, "retryPeriodSeconds": RETRY}
    replicas: list[ServeProcess] = []
    for i in range(3):
        port = free_port()
        cfg = tmp_path / f"replica-{i}.yaml"
        cfg.write_text(
            json.dumps(
                {
                    "listen": f"127.0.0.1:{port}",
                    "queuePath": str(tmp_path / f"q{i}.db"),
                    "store": store,
                    "desired": [str(desired)],
                    "clusters": {
                        "kubeconfig": k8s["kubeconfig"],
                        "contexts": clusters,
                        "probeIntervalSeconds": 1,
                    },
                    "debounceSeconds": 0.2,
                    "policy": {
                        "mode": "enforce",
                        "maxActionsPerCluster": 100,
                        "maxActionsFleet": 100,
                    },
                    "leaderElection": {
                        "context": clusters[0],
                        "namespace": "default",
                        "name": lease,
                        **timing,
                    },
                    "sharding": {
                        "context": clusters[0],
                        "namespace": "default",
                        "group": group,
                        **timing,
                    },
                }
            )
        )
        replicas.append(ServeProcess(cfg, port))
    ids = {id(p): who for p, who in zip(replicas, identities, strict=True)}
    by_id = {who: p for p, who in zip(replicas, identities, strict=True)}
    try:
        for p, who in zip(replicas, identities, strict=True):
            p.start(env={"POD_NAME": who, "FLEETWARDEN_ONE_PROCESS": "1", "PYTHONPATH": PYTHONPATH})
        (leader,) = wait_for(lambda: leaders(replicas), 20, "a leader")
        shard = wait_for(lambda: agreed(replicas, clusters, ids), 30, "agreed owners")
        assert shard[clusters[0]] != shard[clusters[1]]
        target = next(c for c in clusters if shard[c] != ids[id(leader)])
        owner = by_id[shard[target]]
        assert health(owner) is not None and health(owner)["leader"] is False
        print(f"\nleader {ids[id(leader)]}; owners {shard}; drift on {target} (not the leader's)")
        api, names = apis[target], nodes_of(target)
        time.sleep(LEASE + 1)  # the takeover grace of the first assignment

        # drift on a cluster owned by a replica that does not lead: its owner heals it
        run(relabel(api, names[:2], "intruder"))
        t0 = time.monotonic()
        wait_for(
            lambda: all(run(teams(api))[n] == "platform" for n in names[:2]), 30, "shard heals"
        )
        print(f"healed by the non-leading owner in {time.monotonic() - t0:.2f}s")

        # kill -9 the owner; drift lands while nobody owns the cluster; the heir heals it
        owner.kill9()
        killed = time.monotonic()
        run(relabel(api, names[2:], "intruder"))
        survivors = [p for p in replicas if p.alive]
        after = wait_for(lambda: agreed(survivors, clusters, ids), BUDGET, "a new owner")
        assert after[target] != shard[target]
        wait_for(
            lambda: all(run(teams(api))[n] == "platform" for n in names[2:]),
            BUDGET,
            "the heir heals the drift made during the gap",
        )
        print(f"healed by the heir {after[target]} {time.monotonic() - killed:.2f}s after kill -9")
        time.sleep(2)  # a second heal, if any were coming, would be on record by now
        sent, outcomes, _ = patches(store)
        assert sent == Counter(dict.fromkeys(names, 1)), sent  # each once, nothing else
        assert all(o["status"] in ("ok", "skipped") for o in outcomes), outcomes
        for c in clusters:  # the other cluster was never touched
            if c != target:
                assert set(run(teams(apis[c])).values()) == {"platform"}
    finally:
        for p in replicas:
            p.stop()
        for a in apis.values():
            run(a.aclose())
        loop.close()
