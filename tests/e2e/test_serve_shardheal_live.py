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
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from tests.e2e.test_serve_leader_live import (
    ADMIN,
    PYTHONPATH,
    export,
    health,
    leaders,
    patches,
    wait_for,
)
from tests.support import pg_env
from tests.support.shard_heal_rig import agreed, nodes_of, relabel, reset, rig, teams

pytestmark = pytest.mark.live

LEASE, RETRY = 4, 0.5
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


def test_a_non_leaders_shard_is_healed_once_and_its_heir_heals_after_kill9(
    k8s, pg_server, tmp_path
):
    endpoints = load_kubeconfig(Path(k8s["kubeconfig"]))[:2]
    clusters = [ep.name for ep in endpoints]
    store = pg_env.fresh_database(pg_server, "shardheal")
    loop = asyncio.new_event_loop()
    apis = {ep.name: KubeClient(ep) for ep in endpoints}

    def run(coro: Any) -> Any:
        return loop.run_until_complete(coro)

    run(reset(apis))
    r = rig(tmp_path, kubeconfig=k8s["kubeconfig"], clusters=clusters, store=store, lease=LEASE)
    try:
        r.start(PYTHONPATH)
        (leader,) = wait_for(lambda: leaders(r.replicas), 20, "a leader")
        shard = wait_for(lambda: agreed(r, r.replicas, clusters), 30, "agreed owners")
        assert shard[clusters[0]] != shard[clusters[1]]
        target = next(c for c in clusters if shard[c] != r.who(leader))
        owner = r.by_identity(shard[target])
        assert (health(owner) or {}).get("leader") is False
        print(f"\nleader {r.who(leader)}; owners {shard}; drift on {target} (not the leader's)")
        api, names = apis[target], nodes_of(target)
        time.sleep(LEASE + 1)  # the takeover grace of the first assignment

        # drift on a cluster owned by a replica that does not lead: its owner heals it
        run(relabel(api, names[:2], "intruder"))
        t0 = time.monotonic()
        wait_for(
            lambda: all(run(teams(api))[n] == "platform" for n in names[:2]), 30, "shard heals"
        )
        print(f"healed by the non-leading owner in {time.monotonic() - t0:.2f}s")

        # the outcomes follow the calls: on record before the kill (else only they are lost)
        wait_for(lambda: set(names[:2]) <= set(patches(store)[0]), 30, "the outcomes on record")
        # kill -9 the owner; drift lands while nobody owns the cluster; the heir heals it
        owner.kill9()
        killed = time.monotonic()
        run(relabel(api, names[2:], "intruder"))
        survivors = [p for p in r.replicas if p.alive]
        after = wait_for(lambda: agreed(r, survivors, clusters), BUDGET, "a new owner")
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
        r.stop()
        for a in apis.values():
            run(a.aclose())
        loop.close()


def test_an_approval_on_the_leader_restores_a_cluster_another_shard_owns_once(
    k8s, pg_server, tmp_path
):
    """Approval mode (#13): the request is made by the cluster's owner, which does not lead;
    approved through the leader's API, the leader carries it out over a client opened from the
    cluster's kubeconfig context for the call (it watches only its own shard): the node is
    patched once, the outcome on record once, and no "no live connection" anywhere."""
    endpoints = load_kubeconfig(Path(k8s["kubeconfig"]))[:2]
    clusters = [ep.name for ep in endpoints]
    store = pg_env.fresh_database(pg_server, "shardapprove")
    loop = asyncio.new_event_loop()
    apis = {ep.name: KubeClient(ep) for ep in endpoints}

    def run(coro: Any) -> Any:
        return loop.run_until_complete(coro)

    run(reset(apis))
    r = rig(
        tmp_path,
        kubeconfig=k8s["kubeconfig"],
        clusters=clusters,
        store=store,
        lease=LEASE,
        mode="approval",
        admin=ADMIN,
    )
    try:
        r.start(PYTHONPATH)
        (leader,) = wait_for(lambda: leaders(r.replicas), 20, "a leader")
        shard = wait_for(lambda: agreed(r, r.replicas, clusters), 30, "agreed owners")
        target = next(c for c in clusters if shard[c] != r.who(leader))
        api, (name, *_) = apis[target], nodes_of(target)
        time.sleep(LEASE + 1)  # the takeover grace of the first assignment
        run(relabel(api, [name], "intruder"))

        def request() -> str | None:
            for rec in export(store):
                d = rec["payload"].get("decision") if rec["kind"] == "decision" else None
                if d and d["cluster"] == target and d["status"] == "pending-approval":
                    return str(d["id"])
            return None

        wanted = wait_for(request, 30, "the owner's request waiting for approval")
        answer = httpx.post(
            f"{leader.base}/api/decisions/{wanted}/approve",
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "execute"
        wait_for(lambda: run(teams(api))[name] == "platform", 20, "the approved restore")
        time.sleep(2)  # a second patch or outcome, if any were coming, would be on record
        sent, outcomes, _ = patches(store)
        assert sent == Counter({name: 1}), sent
        mine = [o for o in outcomes if o["decisionId"] == wanted]
        assert [o["status"] for o in mine] == ["ok"], mine
        records = export(store)
        assert not [rec for rec in records if "no live connection" in str(rec)]
        approvals = [rec for rec in records if "approval" in rec["payload"]]
        assert [rec["payload"]["by"] for rec in approvals] == [r.who(leader)]
        for c in clusters:  # nothing else was touched
            if c != target:
                assert set(run(teams(apis[c])).values()) == {"platform"}
    finally:
        r.stop()
        for a in apis.values():
            run(a.aclose())
        loop.close()
