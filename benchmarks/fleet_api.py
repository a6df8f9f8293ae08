"""`GET /api/fleet/versions?app=NAME` of `serve`, from the warm cache, over real HTTP.

    .venv/bin/python benchmarks/fleet_api.py [--clusters 500] [--workloads 200] [--requests 50]

The fleet of benchmarks/workloads.py (every cluster runs the same 20 apps of ``--workloads``
workloads, as the API server serves them; 1 cluster in 25 drifts) is loaded into one
``WorkloadWatcher`` index per cluster -- what the watchers of ``serve`` keep warm -- and the
service's own routes answer on 127.0.0.1 (uvicorn, the same ASGI app as ``serve``). The figure
is the wall time of ``--requests`` sequential GETs from an HTTP client in another thread:
p50, p99 and the first request (models still to build). The issue's goal: one app across 500
clusters from the warm cache in 200 ms or less.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import livecluster
from starlette.applications import Starlette
from tests.support.asgi_server import serve_asgi
from workloads import APPS, TARGET_APP, desired_app, served

from fleetwarden.app.following import FollowedApps
from fleetwarden.app.service_config import ServiceConfig
from fleetwarden.app.workload_watching import WorkloadWatcher
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import AppDesired, DesiredApps
from fleetwarden.core.tracking import FindingTracker
from fleetwarden.entrypoints import workloads_api


class _Running:
    def __init__(self, watcher: Any) -> None:
        self.watcher = watcher


class _Fleet:
    """What FollowedApps reads of a FleetWatcher: running clusters and their watchers."""

    def __init__(self, desired: DesiredApps) -> None:
        self.desired_apps = desired
        self.tracker = FindingTracker()
        self.running: dict[str, Any] = {}

    def watcher(self, cluster: str) -> Any:
        running = self.running.get(cluster)
        return running.watcher if running else None


class _ClusterWatcher:
    def __init__(self, workloads: WorkloadWatcher) -> None:
        self.workloads = workloads


def build(clusters: int, workloads: int) -> tuple[_Fleet, int]:
    rnd = random.Random(42)
    per_app = workloads // APPS
    apps = {f"app-{a:02d}": desired_app(f"app-{a:02d}", per_app, rnd) for a in range(APPS)}
    desired = DesiredApps(
        AppDesired(app, {None: [o for o in (wl.ObjectIndex.wrap(d) for d in docs) if o]})
        for app, docs in apps.items()
    )
    template = [served(d, app, f"ns-{app}") for app, docs in apps.items() for d in docs]
    fleet = _Fleet(desired)
    objects = 0
    for c in range(clusters):
        name = f"cluster-{c:03d}"
        w = WorkloadWatcher(
            name,
            None,  # type: ignore[arg-type]  # never asked: the index is filled here
            desired,
            fleet.tracker,
            lambda e: None,
            now=time.time,  # type: ignore[arg-type]
        )
        for item in template:
            if (
                c % 25 == 0
                and item["kind"] == "Deployment"
                and "-svc-00" in item["metadata"]["name"]
            ):
                item = json.loads(json.dumps(item))
                main = item["spec"]["template"]["spec"]["containers"][0]
                main["image"] = main["image"].rsplit(":", 1)[0] + ":0.9.9"
            w.index.add(item, source=f"{name}:live")
        w.synced.set()
        objects += len(w.index)
        fleet.running[name] = _Running(_ClusterWatcher(w))
    return fleet, objects


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=500)
    ap.add_argument("--workloads", type=int, default=200)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument(
        "--gc",
        choices=["serve", "default"],
        default="serve",
        help="serve: the cache frozen out of the cyclic GC, as serve does after the first "
        "sync; default: Python's defaults (full collections walk the whole cache)",
    )
    args = ap.parse_args()
    t = time.perf_counter()
    fleet, objects = build(args.clusters, args.workloads)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"warm cache: {args.clusters} clusters, {objects} objects in "
        f"{time.perf_counter() - t:.1f}s (peak RSS {rss:.0f} MiB)",
        file=sys.stderr,
    )
    if args.gc == "serve":  # what serve does once the watchers are synced
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 20, 50)
    api = FollowedApps(ServiceConfig(), fleet)  # type: ignore[arg-type]
    app = Starlette(routes=workloads_api.routes(api))
    times = []
    with serve_asgi(app) as base, httpx.Client(base_url=base, timeout=60) as http:
        for _ in range(args.requests + 1):
            t = time.perf_counter()
            r = http.get("/api/fleet/versions", params={"app": TARGET_APP})
            times.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
    doc = r.json()
    first, rest = times[0], times[1:]
    result = {
        "clusters": doc["summary"]["clusters"],
        "rows": doc["summary"]["rows"],
        "clusters_diverging_from_git": len(doc["summary"]["clustersDivergingFromGit"]),
        "response_bytes": len(r.content),
        "first_ms": round(first, 1),
        "p50_ms": round(livecluster.percentile(rest, 50), 1),
        "p99_ms": round(livecluster.percentile(rest, 99), 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
