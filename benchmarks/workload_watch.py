"""Workloads seen live through the watchers, on a real kube-apiserver (scripts/k8s-test-env).

    .venv/bin/python benchmarks/workload_watch.py [--apps 20] [--workloads 20] [--changes 200]

1. Apply ``--apps`` applications of ``--workloads`` workloads each (the generator of
   benchmarks/workloads.py: Deployments, StatefulSets, DaemonSets with their ConfigMaps, HPAs,
   one Secret per app) by server-side apply as "argocd-controller".
2. Cold start: a FleetWatcher that follows every app lists the six kinds and diffs every app:
   time until synced (no finding: applied as in Git), objects cached, RSS added.
3. Change -> finding latency: ``--changes`` image edits by field manager "kubectl-set"
   (alternately set and reverted, across apps), from the PATCH being sent to the finding event
   (appeared / cleared) in the same process; p50 / p99.
4. Status-only writes (what controllers do all day): how many cost a diff (goal: none).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import livecluster
from tests.support import k8s_env
from workloads import desired_app

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.app.workload_watching import RESOURCES, WorkloadWatchSettings
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import AppDesired, DesiredApps
from fleetwarden.core.tracking import FindingEvent

NS = "bench"
PLURAL = {r.kind: r for r in RESOURCES}


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def apply(api: KubeClient, app: str, obj: dict[str, Any]) -> None:
    body = json.loads(json.dumps(obj))
    meta = body["metadata"]
    meta["namespace"] = NS
    kind = body["kind"]
    meta.setdefault("annotations", {})[wl.TRACKING_ANNOTATION] = (
        f"{app}:{wl.GROUPS[kind]}/{kind}:{NS}/{meta['name']}"
    )
    path = PLURAL[kind].path(NS) + f"/{meta['name']}"
    await api.request(
        "PATCH",
        path,
        params={"fieldManager": "argocd-controller", "force": "true"},
        body=body,
        content_type="application/apply-patch+yaml",
    )


async def run(ep: Any, apps: int, per_app: int, changes: int) -> dict[str, Any]:
    rnd = random.Random(7)
    desired = {f"app-{i:02d}": desired_app(f"app-{i:02d}", per_app, rnd) for i in range(apps)}
    async with KubeClient(ep) as api:
        with contextlib.suppress(Exception):
            await api.request(
                "POST",
                "/api/v1/namespaces",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            )
        sem = asyncio.Semaphore(16)

        async def one(app: str, obj: dict[str, Any]) -> None:
            async with sem:
                await apply(api, app, obj)

        t = time.perf_counter()
        await asyncio.gather(*(one(a, o) for a, objs in desired.items() for o in objs))
        applied = sum(len(v) for v in desired.values())
        print(f"applied {applied} objects in {time.perf_counter() - t:.1f} s", file=sys.stderr)

        events: list[tuple[float, FindingEvent]] = []

        def emit(event: object) -> None:
            if isinstance(event, FindingEvent) and event.finding.layer.value == "WORKLOAD":
                events.append((time.perf_counter(), event))

        apps_desired = DesiredApps(
            AppDesired(
                app,
                {None: [o for o in (wl.ObjectIndex.wrap(d, source="git") for d in objs) if o]},
            )
            for app, objs in desired.items()
        )
        rss0 = rss_mib()
        fleet = FleetWatcher(
            [],
            http_client_factory,
            emit,
            settings=WatchSettings(probe_interval=30),
            desired_apps=apps_desired,
            workload_settings=WorkloadWatchSettings(namespaces=(NS,)),
        )
        t0 = time.perf_counter()
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            while not (
                (c := fleet.watcher(ep.name)) and c.workloads and c.workloads.synced.is_set()
            ):
                await asyncio.sleep(0.005)
            cold_s = time.perf_counter() - t0
            w = c.workloads
            assert w is not None
            cached = len(w.index)
            initial = len(events)

            # status-only writes
            diffs = w.diffs
            deploys = [
                o["metadata"]["name"]
                for objs in desired.values()
                for o in objs
                if o["kind"] == "Deployment"
            ]
            path = PLURAL["Deployment"].path(NS)
            before = w.reflections[path].events
            for i, name in enumerate(deploys[:50]):
                await api.patch(
                    f"{path}/{name}/status",
                    {"status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": i % 3}},
                    content_type="application/merge-patch+json",
                )
            while w.reflections[path].events < before + min(50, len(deploys)):
                await asyncio.sleep(0.01)
            status_diffs = w.diffs - diffs

            # change -> finding
            latencies = []
            names = [n for n in deploys]
            rnd.shuffle(names)
            for i in range(changes):
                name = names[(i // 2) % len(names)]
                image = "example.com/drift:9" if i % 2 == 0 else _git_image(desired, name)
                want = "finding.appeared" if i % 2 == 0 else "finding.cleared"
                seen = len(events)
                sent = time.perf_counter()
                await api.request(
                    "PATCH",
                    f"{path}/{name}",
                    params={"fieldManager": "kubectl-set"},
                    body={
                        "spec": {
                            "template": {"spec": {"containers": [{"name": "main", "image": image}]}}
                        }
                    },
                    content_type="application/strategic-merge-patch+json",
                )
                while True:
                    hit = [
                        at
                        for at, e in events[seen:]
                        if e.type.value == want and e.finding.field == "image.main"
                    ]
                    if hit:
                        latencies.append((hit[0] - sent) * 1000)
                        break
                    await asyncio.sleep(0.0005)
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
    return {
        "objects_applied": applied,
        "cold_sync_s": round(cold_s, 3),
        "objects_cached": cached,
        "findings_at_start": initial,
        "rss_added_mib": round(rss_mib() - rss0, 1),
        "status_writes": min(50, len(deploys)),
        "diffs_for_status_writes": status_diffs,
        "changes": changes,
        "p50_ms": round(livecluster.percentile(latencies, 50), 2),
        "p99_ms": round(livecluster.percentile(latencies, 99), 2),
        "max_ms": round(max(latencies), 2),
    }


def _git_image(desired: dict[str, list[dict[str, Any]]], name: str) -> str:
    for objs in desired.values():
        for o in objs:
            if o["metadata"]["name"] == name and o["kind"] == "Deployment":
                return str(o["spec"]["template"]["spec"]["containers"][0]["image"])
    raise KeyError(name)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--apps", type=int, default=20)
    ap.add_argument("--workloads", type=int, default=20)
    ap.add_argument("--changes", type=int, default=200)
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="fw-bench-wl-"))
    await asyncio.to_thread(k8s_env.start_clusters, 1, state)
    try:
        st = k8s_env.load_state(state)
        (ep,) = load_kubeconfig(Path(st["kubeconfig"]))
        result = await run(ep, args.apps, args.workloads, args.changes)
    finally:
        await asyncio.to_thread(k8s_env.stop_clusters, state)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
