"""Scale figure for issue 3: N real kube-apiservers with M nodes each, watched by ONE
``fleetwarden watch`` process; its memory and CPU recorded.

    .venv/bin/python benchmarks/live_scale.py [--clusters 20] [--nodes 200] [--seconds 60]

The clusters come from scripts/k8s-test-env; nodes are realistic EKS-like objects (status,
images, conditions). After every cluster is inventoried, a driver PATCHes labels across all
clusters at ``--rate`` changes/s for the window; every change must come out as a finding event.
RSS is read from /proc (peak and at the end); CPU is utime+stime of the watcher process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import livecluster
from tests.support import k8s_env

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def desired_yaml(clusters: list[str]) -> str:
    lines = ["apiVersion: fleetwarden.io/v1alpha1", "kind: NodePools", "pools:"]
    for name, itype, _c, _m, _p, labels, taints in livecluster.fleetgen.POOLS:
        lines += [
            f"  {name}:",
            f"    instanceTypes: [{itype}]",
            "    minSize: 1",
            "    maxSize: 1000",
            f"    labels: {json.dumps(labels)}",
            f"    taints: {json.dumps(taints)}",
            '    kubernetesVersion: "1.30"',
        ]
    lines.append("clusters:")
    lines += [f"  {c}: {{}}" for c in clusters]
    return "\n".join(lines) + "\n"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=20.0, help="label changes per second")
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="fw-scale-"))
    t = time.perf_counter()
    await asyncio.to_thread(k8s_env.start_clusters, args.clusters, state)
    print(f"{args.clusters} API servers up in {time.perf_counter() - t:.0f}s", flush=True)
    watcher = None
    try:
        st = k8s_env.load_state(state)
        eps = load_kubeconfig(Path(st["kubeconfig"]))
        clients = [KubeClient(ep) for ep in eps]
        names = await asyncio.gather(
            *(
                livecluster.populate(c, ep.name, args.nodes, seed=i)
                for i, (c, ep) in enumerate(zip(clients, eps, strict=True))
            )
        )
        desired = state / "desired.yaml"
        desired.write_text(desired_yaml([ep.name for ep in eps]))
        out = state / "events.jsonl"
        exe = str(Path(sys.executable).parent / "fleetwarden")
        with out.open("w") as fh:
            watcher = subprocess.Popen(
                [
                    exe,
                    "watch",
                    "-k",
                    st["kubeconfig"],
                    "-d",
                    str(desired),
                    "-o",
                    "json",
                    "--probe-interval",
                    "10",
                ],
                stdout=fh,
                stderr=subprocess.DEVNULL,
            )
        t0 = time.perf_counter()
        # inventoried: every cluster has reported its health
        while True:
            text = out.read_text()
            healthy = {
                json.loads(x)["cluster"] for x in text.splitlines() if '"cluster.health"' in x
            }
            if len(healthy) >= len(eps):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)  # let the initial lists finish
        ready_s = time.perf_counter() - t0
        cpu0, peak = cpu_seconds(watcher.pid), rss_mib(watcher.pid)
        print(
            f"all {len(eps)} clusters inventoried in {ready_s:.1f}s; RSS {peak:.0f} MiB", flush=True
        )
        rng = random.Random(9)
        sent = 0
        w0 = time.perf_counter()
        while time.perf_counter() - w0 < args.seconds:
            i = rng.randrange(len(eps))
            node = rng.choice(names[i])
            idx = names[i].index(node)
            key = next(iter(livecluster.fleetgen.POOLS[idx % 5][5]))
            await clients[i].patch(
                f"/api/v1/nodes/{node}", {"metadata": {"labels": {key: f"v{sent}"}}}
            )
            sent += 1
            peak = max(peak, rss_mib(watcher.pid))
            await asyncio.sleep(max(0.0, w0 + sent / args.rate - time.perf_counter()))
        window = time.perf_counter() - w0
        await asyncio.sleep(2)
        cpu1 = cpu_seconds(watcher.pid)
        end_rss = rss_mib(watcher.pid)
        # idle: no changes, probes only
        await asyncio.sleep(20)
        cpu2 = cpu_seconds(watcher.pid)
        events = [json.loads(x) for x in out.read_text().splitlines()]
        seen = {
            e["finding"]["actual"]
            for e in events
            if e["type"] in ("finding.appeared", "finding.changed")
        }
        got = sum(1 for k in range(sent) if f"v{k}" in seen)
        result = {
            "clusters": len(eps),
            "nodes": len(eps) * args.nodes,
            "inventory_s": round(ready_s, 1),
            "changes_sent": sent,
            "changes_seen": got,
            "window_s": round(window, 1),
            "cpu_under_load_pct": round(100 * (cpu1 - cpu0) / (window + 2), 1),
            "cpu_idle_pct": round(100 * (cpu2 - cpu1) / 20, 1),
            "rss_peak_mib": round(peak),
            "rss_end_mib": round(end_rss),
        }
        print(json.dumps(result), flush=True)
        for c in clients:
            await c.aclose()
    finally:
        if watcher is not None:
            watcher.terminate()
            watcher.wait(10)
        await asyncio.to_thread(k8s_env.stop_clusters, state)


if __name__ == "__main__":
    asyncio.run(main())
