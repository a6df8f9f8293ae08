"""Event -> Argo CD OutOfSync seen: fleetwarden's targeted refresh vs Argo CD's poll.

    .venv/bin/python benchmarks/argocd_refresh.py [--deployments 5] [--changes 20]
        [--burst 5] [--poll 180] [--jitter 60] [--samples 100000]

Measured (tests/support/argo_refresh_rig: a real kube-apiserver from scripts/k8s-test-env with
the real Argo CD CRDs, the Argo CD API simulator whose controller compares the live objects
when refreshed, a WorkloadWatcher feeding an ArgoRefresher with the default 2 s debounce):

1. ``--changes`` image edits of a managed Deployment (drift, then revert, alternately; each
   after a quiet ``debounce``): from the PATCH being sent to the refresh answer reporting the
   expected sync status (OutOfSync after a drift, Synced after a revert); p50 / p99 / max.
2. A burst: ``--burst`` edits of one Deployment 100 ms apart; how many refreshes were sent
   and how long after the *last* edit the status reflecting it was seen (the trailing refresh
   of the debounce window).
3. One edit of an unmanaged Deployment: refreshes sent (expected 0).
4. In process, no I/O: deciding the owners of 3,000 changes among ``--decide-apps``
   applications, a scan of every app vs the ``OwnershipIndex`` (same answers, asserted).

Computed, not waited for (the poll side): Argo CD requeues each application every
``timeout.reconciliation`` (180 s by default) plus a uniform jitter of up to
``timeout.reconciliation.jitter`` (``--jitter``); a change at a random moment is seen at the
next poll, plus the comparison time (the measured median refresh answer). ``--samples``
seeded Monte-Carlo draws of (period, phase) give mean / p50 / p99 of that wait. Caveat stated
in BENCHMARKS.md: a real Argo CD controller also refreshes an application when its cluster
cache sees a watched, managed resource change; the poll bound is what remains when that path
does not fire (resource updates ignored, the cluster cache not watching, changes made outside
the app's objects).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import livecluster
from tests.conftest import REALDATA
from tests.support import k8s_env
from tests.support.argo_refresh_rig import Rig, bystander, object_path, rig, wait_for

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.app.argo_refreshing import RefreshResult, RefreshSettings
from fleetwarden.core.argo_refresh import (
    TRACKING_ANNOTATION,
    AppTracking,
    OwnershipIndex,
    ResourceKey,
    TouchedObject,
    owners_of,
)

ARGO_NS, APP_NS = "bench-argocd", "bench-shop"


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def until_status(r: Rig, since: int, status: str, timeout: float = 30.0) -> RefreshResult:
    def found() -> RefreshResult | None:
        return next((x for x in r.refresher.results[since:] if x.sync == status), None)

    result: RefreshResult = await wait_for(found, timeout=timeout, what=f"a refresh to {status}")
    return result


async def measure(r: Rig, deployments: int, changes: int, burst: int) -> dict[str, Any]:
    debounce = r.refresher.settings.debounce
    latencies, answers = [], []
    for i in range(changes):
        await asyncio.sleep(debounce + 0.05)  # quiet: the next change takes the leading edge
        index, drift = (i // 2) % deployments, i % 2 == 0
        since = len(r.refresher.results)
        started = time.monotonic()
        await r.set_image(index, "nginx:drifted" if drift else "nginx:1.27")
        result = await until_status(r, since, "OutOfSync" if drift else "Synced")
        latencies.append((time.monotonic() - started) * 1000)
        answers.append(result.seconds * 1000)

    await asyncio.sleep(debounce + 0.05)
    sent_before = len(r.sim.refreshes)
    since = len(r.refresher.results)
    for j in range(burst):
        await r.set_image(0, f"nginx:burst-{j}")
        last = time.monotonic()
        if j < burst - 1:
            await asyncio.sleep(0.1)
    # edits 100 ms apart fall in one debounce window: the leading refresh, then one trailing
    # refresh after the window, which sees the last edit
    expected = since + (2 if burst > 1 else 1)
    await wait_for(
        lambda: len(r.refresher.results) >= expected and not r.refresher.scheduler.pending,
        timeout=debounce + 30,
        what="the burst's refreshes",
    )
    assert r.refresher.results[-1].sync == "OutOfSync"
    burst_last_ms = (time.monotonic() - last) * 1000
    burst_sent = len(r.sim.refreshes) - sent_before

    await asyncio.sleep(debounce + 0.05)
    sent_before = len(r.sim.refreshes)
    body = {"metadata": {"labels": {"bench": str(time.time_ns())}}}
    await r.api.patch(object_path(bystander(APP_NS)), body, content_type=JSON_MERGE)
    await wait_for(
        lambda: r.seen(
            bystander(APP_NS),
            lambda b: b["metadata"]["labels"].get("bench") == body["metadata"]["labels"]["bench"],
        ),
        what="the bystander change seen",
    )
    bystander_sent = len(r.sim.refreshes) - sent_before + len(r.refresher.scheduler.pending)
    return {
        "targeted_ms": {
            "n": len(latencies),
            "p50": round(livecluster.percentile(latencies, 50), 1),
            "p99": round(livecluster.percentile(latencies, 99), 1),
            "max": round(max(latencies), 1),
        },
        "refresh_answer_ms_p50": round(livecluster.percentile(answers, 50), 1),
        "burst": {
            "edits": burst,
            "refreshes_sent": burst_sent,
            "last_edit_seen_ms": round(burst_last_ms, 1),
        },
        "bystander_refreshes": bystander_sent,
    }


def decide_cost(apps: int, changes: int) -> dict[str, float]:
    """Microseconds per change to decide its owners among ``apps`` applications of 20 tree
    nodes each: a scan of every app (``owners_of``) vs the ``OwnershipIndex``, same changes,
    same run (a third of them owned by tree, a third by tracking-id, a third by nobody)."""
    rng = random.Random(6)
    index = OwnershipIndex()
    for i in range(apps):
        nodes = frozenset(
            ResourceKey("apps", "Deployment", f"ns-{i}", f"web-{j}") for j in range(20)
        )
        index[f"app-{i}"] = AppTracking(f"app-{i}", cluster="c1", resources=nodes)
    touched = []
    for n in range(changes):
        i, j = rng.randrange(apps), rng.randrange(40)
        key = ResourceKey("apps", "Deployment", f"ns-{i}", f"web-{j}")
        note = {TRACKING_ANNOTATION: f"app-{i}:apps/Deployment:ns-{i}/web-{j}"} if n % 3 else {}
        touched.append(TouchedObject("c1", key, {}, note))
    everyone = list(index.values())
    started = time.perf_counter()
    scanned = [owners_of(t, everyone).apps for t in touched]
    scan_s = time.perf_counter() - started
    started = time.perf_counter()
    indexed = [index.owners(t).apps for t in touched]
    index_s = time.perf_counter() - started
    assert scanned == indexed
    return {
        "apps": apps,
        "scan_us": round(scan_s / changes * 1e6, 1),
        "index_us": round(index_s / changes * 1e6, 1),
        "ratio": round(scan_s / index_s, 0),
    }


def poll_wait(poll: float, jitter: float, compare_s: float, samples: int) -> dict[str, float]:
    """Seconds from a change at a random moment to the next poll's comparison. A renewal
    process: a random moment falls in a period with probability proportional to its length
    (length-biased draw), at a uniform phase inside it."""
    rng = random.Random(14)
    periods = [poll + rng.uniform(0, jitter) for _ in range(samples)]
    total = sum(periods)
    waits = []
    for _ in range(samples):
        # length-biased choice of the period, then a uniform phase within it
        x = rng.uniform(0, total)
        period = periods[int(x / total * samples) % samples]
        waits.append(rng.uniform(0, period) + compare_s)
    waits.sort()
    return {
        "mean": round(sum(waits) / len(waits), 1),
        "p50": round(waits[len(waits) // 2], 1),
        "p99": round(waits[int(len(waits) * 0.99)], 1),
        "max": round(poll + jitter + compare_s, 1),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deployments", type=int, default=5)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--burst", type=int, default=5)
    ap.add_argument("--poll", type=float, default=180.0)
    ap.add_argument("--jitter", type=float, default=60.0)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--decide-apps", type=int, default=2000)
    args = ap.parse_args()
    if not (REALDATA / "crds").is_dir():
        sys.exit(f"argocd_refresh: the real Argo CD CRDs are missing ({REALDATA / 'crds'})")
    load_before = loadavg()
    state = Path(tempfile.mkdtemp(prefix="fw-bench-argo-"))
    await asyncio.to_thread(k8s_env.start_clusters, 1, state)
    try:
        st = k8s_env.load_state(state)
        (ep,) = load_kubeconfig(Path(st["kubeconfig"]))
        async with (
            KubeClient(ep) as api,
            rig(
                api,
                ep.name,
                ep.server,
                REALDATA / "crds",
                argo_ns=ARGO_NS,
                app_ns=APP_NS,
                apps=args.deployments,
                settings=RefreshSettings(control_namespace=ARGO_NS),
            ) as r,
        ):
            measured = await measure(r, args.deployments, args.changes, args.burst)
    finally:
        await asyncio.to_thread(k8s_env.stop_clusters, state)
    compare_s = measured["refresh_answer_ms_p50"] / 1000
    poll = poll_wait(args.poll, args.jitter, compare_s, args.samples)
    no_jitter = poll_wait(args.poll, 0.0, compare_s, args.samples)
    targeted_p50_s = measured["targeted_ms"]["p50"] / 1000
    result = {
        "measured": measured,
        "poll_computed_s": {
            f"{args.poll:g}s+jitter{args.jitter:g}s": poll,
            f"{args.poll:g}s": no_jitter,
        },
        "ratio_poll_mean_to_targeted_p50": round(poll["mean"] / targeted_p50_s, 0),
        "decide_per_change": decide_cost(args.decide_apps, 3000),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
