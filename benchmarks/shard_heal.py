"""Issue 13 figure: with ``leaderElection`` AND ``sharding``, does a cluster owned by a replica
that does not lead heal as fast as the leader's own cluster, and how long after kill -9 of its
owner is drift made in the gap healed by the heir?

    PYTHONPATH=src:. .venv/bin/python benchmarks/shard_heal.py [--rounds 3] [--lease 4]

Two real API servers from scripts/k8s-test-env (one cluster each), a real PostgreSQL audit
store (scripts via tests/support/pg_env), three ``fleetwarden serve`` processes in enforce mode
(tests/support/shard_heal_rig.py: identities picked so the two clusters have two owners).
Each round, on fresh Leases and a fresh database: wait for one leader and agreed owners and
the takeover grace; twice, relabel one node on the leader's cluster and one on the other
cluster *at the same moment* and time each heal (side by side, so machine load hits both; the poll
reads one cluster after the other, so which is read first alternates);
then kill -9 the non-leader owner, relabel two of its cluster's nodes at once, and time until
both are healed by the heir. Each round also counts the label patches on record: each node
must be patched exactly once. Prints one JSON object per round and a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.e2e.test_serve_leader_live import leaders, patches
from tests.support import k8s_env, pg_env
from tests.support.shard_heal_rig import agreed, nodes_of, relabel, reset, rig, teams

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig

ROOT = Path(__file__).resolve().parents[1]
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "src")])


def wait(cond: Any, timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if got := cond():
            return got
        time.sleep(0.02)
    raise SystemExit(f"timed out after {timeout}s waiting for {what}")


def one_round(rnd: int, tmp: Path, kubeconfig: str, pg_url: str, lease: int) -> dict[str, Any]:
    endpoints = load_kubeconfig(Path(kubeconfig))[:2]
    clusters = [ep.name for ep in endpoints]
    loop = asyncio.new_event_loop()
    apis = {ep.name: KubeClient(ep) for ep in endpoints}

    def run(coro: Any) -> Any:
        return loop.run_until_complete(coro)

    def healed(cluster: str, name: str) -> bool:
        return bool(run(teams(apis[cluster]))[name] == "platform")

    store = pg_env.fresh_database(pg_url, f"bench{rnd}")
    run(reset(apis))
    r = rig(tmp, kubeconfig=kubeconfig, clusters=clusters, store=store, lease=lease)
    try:
        r.start(PYTHONPATH)
        (leader,) = wait(lambda: leaders(r.replicas), 30, "a leader")
        shard = wait(lambda: agreed(r, r.replicas, clusters), 30, "agreed owners")
        time.sleep(lease + 1)  # the takeover grace of the first assignment
        other = next(c for c in clusters if shard[c] != r.who(leader))
        mine = next((c for c in clusters if shard[c] == r.who(leader)), None)
        side: dict[str, list[float]] = {"leader": [], "non_leader": []}
        for i in range(2):
            planted = {other: nodes_of(other)[i]}
            if mine is not None:
                planted[mine] = nodes_of(mine)[i]
            if i % 2:  # the poll reads one cluster after the other: alternate who is first
                planted = dict(reversed(planted.items()))
            for c, n in planted.items():
                run(relabel(apis[c], [n], "intruder"))
            t0 = time.monotonic()
            pending = dict(planted)
            while pending:
                for c, n in list(pending.items()):
                    if healed(c, n):
                        key = "non_leader" if c == other else "leader"
                        side[key].append(time.monotonic() - t0)
                        del pending[c]
                if time.monotonic() - t0 > 30:
                    raise SystemExit(f"not healed in 30 s: {pending}")
        # the outcome records follow the calls: on record before the kill (write-ahead keeps
        # the decision either way; a kill between call and outcome would lose only the outcome)
        done = nodes_of(other)[:2] + (nodes_of(mine)[:2] if mine is not None else [])
        wait(lambda: set(done) <= set(patches(store)[0]), 30, "the outcomes on record")
        owner = r.by_identity(shard[other])
        owner.kill9()
        killed = time.monotonic()
        gap = nodes_of(other)[2:]
        run(relabel(apis[other], gap, "intruder"))
        wait(lambda: all(healed(other, n) for n in gap), 4 * lease + 30, "the heir's heals")
        takeover = time.monotonic() - killed
        time.sleep(2)
        sent, _, _ = patches(store)
        expected = Counter(nodes_of(other))  # each node healed once, nothing else
        if mine is not None:
            expected.update(nodes_of(mine)[:2])
        return {
            "round": rnd,
            "leader_heal_s": side["leader"],
            "non_leader_heal_s": side["non_leader"],
            "kill9_to_heir_heal_s": round(takeover, 3),
            "patched_exactly_once": sent == expected,
            "patches": dict(sent),
        }
    finally:
        r.stop()
        for a in apis.values():
            run(a.aclose())
        loop.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lease", type=int, default=4)
    args = ap.parse_args()
    state_dir = Path(tempfile.mkdtemp(prefix="fw-shardheal-bench-"))
    (state_dir / "k8s").mkdir()
    (state_dir / "pg").mkdir()
    kubeconfig = str(k8s_env.start_clusters(2, state_dir / "k8s"))
    pg_url = pg_env.start_server(state_dir / "pg")
    results = []
    try:
        for rnd in range(args.rounds):
            tmp = state_dir / f"round{rnd}"
            tmp.mkdir()
            result = one_round(rnd, tmp, kubeconfig, pg_url, args.lease)
            print(json.dumps(result), flush=True)
            results.append(result)
    finally:
        pg_env.stop_server(state_dir / "pg")
        k8s_env.stop_clusters(state_dir / "k8s")
        shutil.rmtree(state_dir, ignore_errors=True)  # the rounds' configs, queues, logs
    lead = [x for r in results for x in r["leader_heal_s"]]
    other = [x for r in results for x in r["non_leader_heal_s"]]
    summary = {
        "rounds": len(results),
        "leader_heal_median_s": round(statistics.median(lead), 3) if lead else None,
        "non_leader_heal_median_s": round(statistics.median(other), 3),
        "non_leader_over_leader": (
            round(statistics.median(other) / statistics.median(lead), 2) if lead else None
        ),
        "kill9_to_heir_heal_s": [r["kill9_to_heir_heal_s"] for r in results],
        "all_exactly_once": all(r["patched_exactly_once"] for r in results),
        "load_average": os.getloadavg(),
    }
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
