"""Issue 13 figure: 3 watcher replicas share 100 clusters by rendezvous hashing over membership
Leases; kill -9 one and measure how long until every cluster is owned (and watched) again, and
whether changes made during the gap are all found after the new owner's relist.

    PYTHONPATH=src:. .venv/bin/python benchmarks/sharding_failover.py [--rounds 3] \
        [--lease 15] [--retry 2]

Two real API servers from scripts/k8s-test-env: the first holds the membership Leases, the
second stands in for the fleet — cluster ``cluster-007`` is the namespace ``cluster-007`` there,
holding one ConfigMap ``probe``. A hundred real API servers (one per cluster) do not fit on
2 cores beside the replicas, so the 100 watches go to one server; the sharding itself does not
care where a cluster's API server is.

Each round: wait until the 3 replicas own and watch every cluster exactly once; hold steady
and read each replica's RSS and CPU from /proc; kill -9 one replica; at once change the probe
of every cluster the dead replica watched (the gap); record when the survivors own every
cluster again and when each changed value was reported by its new owner (from its relist);
start a replacement replica. Prints one JSON object per round and a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support import k8s_env
from tests.support.shard_member import (
    MemberProc,
    cluster_names,
    put_probes,
    rss_and_cpu,
    spawn,
)

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.core.sharding import assign


def wait(cond: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)
    raise SystemExit(f"timed out after {timeout}s waiting for {what}")


def steady(ps: list[MemberProc], clusters: list[str]) -> bool:
    expected = assign(clusters, [p.name for p in ps])
    return all(p.owned == {c for c, o in expected.items() if o == p.name} for p in ps)


def reported(p: MemberProc, cluster: str, value: str, since: float) -> float | None:
    """When ``p`` printed ``cluster``'s probe with ``value`` (after ``since``), if it did."""
    for e in list(p.events):
        if (
            e["event"] == "seen"
            and e["t"] >= since
            and e["cluster"] == cluster
            and e["value"] == value
        ):
            return float(e["t"])
    return None


def failover_round(
    rnd: int, live: list[MemberProc], clusters: list[str], fleet_ep: Any, args: Any
) -> tuple[dict[str, Any], list[MemberProc]]:
    """One round (see the module docstring): its figures and the surviving replicas."""
    wait(lambda: steady(live, clusters), 60 + args.lease, "3 replicas to share")
    t0, u0 = time.monotonic(), {p.name: rss_and_cpu(p.popen.pid) for p in live}
    time.sleep(args.steady_seconds)
    span = time.monotonic() - t0
    usage = {}
    for p in live:
        rss, cpu = rss_and_cpu(p.popen.pid)
        usage[p.name] = {
            "owns": len(p.owned),
            "rss_mib": round(rss / 2**20, 1),
            "cpu_pct": round(100 * (cpu - u0[p.name][1]) / span, 2),
        }
    victim, survivors = live[rnd % 3], [p for p in live if p is not live[rnd % 3]]
    lost = sorted(victim.owned)
    os.kill(victim.popen.pid, signal.SIGKILL)
    killed = time.time()
    victim.popen.wait(10)
    value = f"gap-{rnd}"
    asyncio.run(_put(fleet_ep, lost, value))  # changes nobody is watching
    changed = time.time() - killed
    wait(lambda: steady(survivors, clusters), 4 * args.lease, "survivors to own all")
    owned_again = max(e["t"] for p in survivors for e in p.assigns(since=killed)) - killed
    expected = assign(clusters, [p.name for p in survivors])
    by_name = {p.name: p for p in survivors}

    def found_all() -> bool:
        return all(reported(by_name[expected[c]], c, value, killed) is not None for c in lost)

    wait(found_all, 30, "every gap change to be found")
    found = max(reported(by_name[expected[c]], c, value, killed) or 0.0 for c in lost) - killed
    moved_only_lost = all(not any(e["removed"] for e in p.assigns(since=killed)) for p in survivors)
    result = {
        "round": rnd,
        "killed": victim.name,
        "clusters_lost": len(lost),
        "gap_changes_written_s": round(changed, 3),
        "owned_again_s": round(owned_again, 3),
        "all_gap_changes_found_s": round(found, 3),
        "gap_changes_found": len(lost),
        "only_lost_clusters_moved": moved_only_lost,
        "steady_state": usage,
    }
    return result, survivors


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lease", type=int, default=15)
    ap.add_argument("--retry", type=float, default=2.0)
    ap.add_argument("--steady-seconds", type=float, default=10.0)
    args = ap.parse_args()
    deadline = args.lease * 2 / 3
    clusters = cluster_names(args.clusters)
    state_dir = Path(tempfile.mkdtemp(prefix="fw-shard-bench-"))
    kubeconfig = str(k8s_env.start_clusters(2, state_dir))
    procs: list[MemberProc] = []
    results: list[dict[str, Any]] = []
    try:
        leases_ep, fleet_ep = load_kubeconfig(Path(kubeconfig))[:2]

        async def prepare() -> None:
            async with KubeClient(fleet_ep) as api:
                await put_probes(api, clusters, "v0", create_namespaces=True)

        asyncio.run(prepare())
        group = f"bench-{uuid.uuid4().hex[:6]}"
        serial = iter(range(1000))

        def start() -> MemberProc:
            name = f"replica-{next(serial)}"
            p = MemberProc(
                name,
                spawn(
                    kubeconfig,
                    leases_ep.name,
                    "default",
                    group,
                    name,
                    clusters=len(clusters),
                    lease=args.lease,
                    deadline=deadline,
                    retry=args.retry,
                    watch_context=fleet_ep.name,
                ),
            )
            procs.append(p)
            return p

        live = [start() for _ in range(3)]
        for rnd in range(args.rounds):
            result, survivors = failover_round(rnd, live, clusters, fleet_ep, args)
            print(json.dumps(result), flush=True)
            results.append(result)
            live = [*survivors, start()]
        owned = [r["owned_again_s"] for r in results]
        found = [r["all_gap_changes_found_s"] for r in results]
        rss = [u["rss_mib"] for r in results for u in r["steady_state"].values()]
        cpu = [u["cpu_pct"] for r in results for u in r["steady_state"].values()]
        print(
            json.dumps(
                {
                    "summary": True,
                    "clusters": len(clusters),
                    "replicas": 3,
                    "lease_s": args.lease,
                    "retry_s": args.retry,
                    "owned_again_s": {"median": statistics.median(owned), "max": max(owned)},
                    "all_gap_changes_found_s": {
                        "median": statistics.median(found),
                        "max": max(found),
                    },
                    "rss_mib": {"min": min(rss), "max": max(rss)},
                    "cpu_pct": {"min": min(cpu), "max": max(cpu)},
                }
            ),
            flush=True,
        )
    finally:
        for p in procs:
            p.stop()
        k8s_env.stop_clusters(state_dir)


async def _put(endpoint: Any, clusters: list[str], value: str) -> None:
    async with KubeClient(endpoint) as api:
        await put_probes(api, clusters, value)


if __name__ == "__main__":
    sys.exit(main())
