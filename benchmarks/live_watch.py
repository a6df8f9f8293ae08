"""Figures for issue 3 on real kube-apiservers (started here by scripts/k8s-test-env).

    .venv/bin/python benchmarks/live_watch.py [--changes 200] [--nodes 500] [--cost-seconds 180]

1. Event-to-finding latency: a label (or taint) change PATCHed to a node -> the finding
   emitted by fleetwarden's watcher (same process, separate HTTP client); p50/p99 over N changes.
2. Argo CD cluster Secret created -> cluster inventoried (nodes listed) and diffed (first
   findings emitted): wall time, 10 repetitions.
3. Steady-state API cost for 500 nodes with 1 % changing per hour: fleetwarden's watch (plus
   its health probes) vs the seed's polling (a full LIST nodes every 60 s). Requests are counted
   in the API server's audit log, bytes from its own metrics (apiserver_response_sizes for
   LIST/GET, apiserver_watch_events_sizes for watch events); per-hour figures extrapolate the
   measured window.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import livecluster
from tests.support import k8s_env

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.core.tracking import FindingEvent


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[float, object]] = []

    def emit(self, event: object) -> None:
        self.events.append((time.perf_counter(), event))


async def latency(ep, changes: int) -> dict[str, float]:
    sink = Sink()
    fleet = FleetWatcher(
        livecluster.pool_specs(ep.name),
        http_client_factory,
        sink.emit,
        settings=WatchSettings(probe_interval=30),
    )
    async with KubeClient(ep) as api:
        names = await livecluster.populate(api, ep.name, 200)
        runner = asyncio.create_task(fleet.run([ep]))
        await livecluster.wait_for(
            lambda: fleet.watcher(ep.name) and fleet.watcher(ep.name).synced.is_set()
        )
        label_ms, taint_ms = [], []
        for i in range(changes):
            index = (i * 7) % len(names)
            node = names[index]
            key = next(iter(livecluster.fleetgen.POOLS[index % len(livecluster.fleetgen.POOLS)][5]))
            value = f"hand-{i}"
            mark = len(sink.events)
            t0 = time.perf_counter()
            if i % 2 == 0:
                await api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {key: value}}})
                field, want = f"labels.{key}", value
            else:
                await api.patch(
                    f"/api/v1/nodes/{node}",
                    {
                        "spec": {
                            "taints": [{"key": "surprise", "value": value, "effect": "NoExecute"}]
                        }
                    },
                    content_type="application/merge-patch+json",
                )
                field, want = "taints.surprise:NoExecute", value

            def seen(mark: int = mark, field: str = field, want: str = want) -> float | None:
                for at, ev in sink.events[mark:]:
                    if (
                        isinstance(ev, FindingEvent)
                        and ev.finding.field == field
                        and ev.finding.actual == want
                    ):
                        return at
                return None

            at = await livecluster.wait_for(seen, timeout=10)
            (label_ms if i % 2 == 0 else taint_ms).append((at - t0) * 1000)
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await api.request("DELETE", "/api/v1/nodes")
    both = label_ms + taint_ms
    return {
        "changes": len(both),
        "p50_ms": livecluster.percentile(both, 50),
        "p99_ms": livecluster.percentile(both, 99),
        "max_ms": max(both),
        "label_p50_ms": livecluster.percentile(label_ms, 50),
        "taint_p50_ms": livecluster.percentile(taint_ms, 50),
    }


def _secret(name: str, ep) -> dict:
    config = {
        "bearerToken": ep.credentials.token,
        "tlsClientConfig": {"caData": base64.b64encode(ep.ca_pem).decode()},
    }
    data = {"name": name, "server": ep.server, "config": json.dumps(config)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"cluster-{name}",
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
        },
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


async def secret_to_inventory(mgmt, target, reps: int) -> dict[str, float]:
    times = []
    async with KubeClient(mgmt) as api, KubeClient(target) as tapi:
        await livecluster.populate(tapi, "target", 200, seed=3)
        with contextlib.suppress(Exception):
            await api.request(
                "POST",
                "/api/v1/namespaces",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argocd"}},
            )
        for i in range(reps):
            name = f"remote-{i}"
            sink = Sink()
            fleet = FleetWatcher(
                livecluster.pool_specs(name),
                http_client_factory,
                sink.emit,
                settings=WatchSettings(probe_interval=30),
            )
            mgmt_client = http_client_factory(mgmt)
            runner = asyncio.create_task(fleet.run([], (mgmt_client, "argocd")))
            await asyncio.sleep(0.3)  # the secret watch is established
            t0 = time.perf_counter()
            await api.request(
                "POST", "/api/v1/namespaces/argocd/secrets", body=_secret(name, target)
            )
            await livecluster.wait_for(
                lambda fleet=fleet, name=name: (
                    fleet.watcher(name) and fleet.watcher(name).synced.is_set()
                ),
                timeout=10,
            )
            times.append((time.perf_counter() - t0) * 1000)
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await mgmt_client.aclose()
            await api.request("DELETE", f"/api/v1/namespaces/argocd/secrets/cluster-{name}")
        await tapi.request("DELETE", "/api/v1/nodes")
    return {"reps": reps, "p50_ms": livecluster.percentile(times, 50), "max_ms": max(times)}


def _metric_sum(text: str, name: str, **labels: str) -> tuple[float, float]:
    total = count = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        if not all(f'{k}="{v}"' in line for k, v in labels.items()):
            continue
        if line.startswith(f"{name}_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith(f"{name}_count"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


async def _bytes(api: KubeClient) -> dict[str, float]:
    text = await api.request("GET", "/metrics")
    list_b, _ = _metric_sum(text, "apiserver_response_sizes", resource="nodes", verb="LIST")
    get_b, _ = _metric_sum(text, "apiserver_response_sizes", resource="nodes", verb="GET")
    watch_b, _ = _metric_sum(text, "apiserver_watch_events_sizes", resource="nodes")
    return {"list": list_b, "get": get_b, "watch": watch_b}


def _requests(audit: Path, since_line: int, user: str) -> tuple[int, dict[str, int]]:
    by: dict[str, int] = {}
    lines = audit.read_text().splitlines()
    for line in lines[since_line:]:
        ev = json.loads(line)
        if ev.get("stage") != "ResponseComplete" or ev.get("user", {}).get("username") != user:
            continue
        uri = re.sub(r"\?.*", "", ev.get("requestURI", ""))
        key = f"{ev.get('verb')} {uri}"
        by[key] = by.get(key, 0) + 1
    return len(lines), by


async def api_cost(ep, audit: Path, user: str, nodes: int, seconds: float) -> dict:
    results = {}
    async with KubeClient(ep) as api:
        names = await livecluster.populate(api, ep.name, nodes, seed=5)
        changes_per_hour = nodes * 0.01
        # --- fleetwarden: list + watch + probes every 10 s
        start_line, _ = _requests(audit, 0, user)
        b0 = await _bytes(api)
        sink = Sink()
        watcher_ep = ep  # the same admin user: its requests are the ones counted
        fleet = FleetWatcher(
            livecluster.pool_specs(ep.name),
            http_client_factory,
            sink.emit,
            settings=WatchSettings(probe_interval=10, watch_timeout=300),
        )
        runner = asyncio.create_task(fleet.run([watcher_ep]))
        t0 = time.perf_counter()
        await livecluster.wait_for(
            lambda: fleet.watcher(ep.name) and fleet.watcher(ep.name).synced.is_set()
        )
        changes = max(1, round(changes_per_hour * seconds / 3600))
        for i in range(changes):
            await asyncio.sleep(seconds / (changes + 1))
            await api.patch(
                f"/api/v1/nodes/{names[i]}", {"metadata": {"labels": {"team": f"x{i}"}}}
            )
        await asyncio.sleep(max(0.0, seconds - (time.perf_counter() - t0)))
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        b1 = await _bytes(api)
        _, reqs = _requests(audit, start_line, user)
        # the PATCHes (the "changes") and our /metrics reads are not the watcher's cost
        watcher_reqs = {
            k: v for k, v in reqs.items() if not k.startswith(("patch", "get /metrics"))
        }
        window = time.perf_counter() - t0
        initial = sum(v for k, v in watcher_reqs.items() if k.startswith("list"))
        per_time = sum(watcher_reqs.values()) - initial
        list_bytes = b1["list"] - b0["list"]
        watch_bytes = b1["watch"] - b0["watch"]
        results["watch"] = {
            "window_s": round(window),
            "requests_in_window": watcher_reqs,
            "requests_per_hour": round(initial + per_time * 3600 / window),
            "bytes_per_hour": round(list_bytes + watch_bytes / max(changes, 1) * changes_per_hour),
            "initial_list_bytes": list_bytes,
            "watch_event_bytes_in_window": watch_bytes,
        }
        # --- the seed's polling: LIST nodes every 60 s
        start_line, _ = _requests(audit, 0, user)
        b0 = await _bytes(api)
        polls = max(2, round(seconds / 60))
        for _ in range(polls):
            await api.list("/api/v1/nodes")
        b1 = await _bytes(api)
        _, reqs = _requests(audit, start_line, user)
        per_list = (b1["list"] - b0["list"]) / polls
        results["polling"] = {
            "lists_measured": polls,
            "bytes_per_list": round(per_list),
            "requests_per_hour": 60,
            "bytes_per_hour": round(per_list * 60),
        }
        await api.request("DELETE", "/api/v1/nodes")
    w, p = results["watch"], results["polling"]
    results["ratio_bytes"] = round(p["bytes_per_hour"] / max(w["bytes_per_hour"], 1), 1)
    return results


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--cost-seconds", type=float, default=180)
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="fw-bench-k8s-"))
    await asyncio.to_thread(k8s_env.start_clusters, 2, state)
    try:
        st = k8s_env.load_state(state)
        eps = load_kubeconfig(Path(st["kubeconfig"]))
        out = {"latency": await latency(eps[0], args.changes)}
        print(json.dumps(out["latency"]), flush=True)
        out["secret_to_inventory"] = await secret_to_inventory(eps[0], eps[1], 10)
        print(json.dumps(out["secret_to_inventory"]), flush=True)
        audit = Path(st["clusters"][1]["audit_log"])
        out["api_cost"] = await api_cost(
            eps[1], audit, st.get("admin_user", "fw-admin"), args.nodes, args.cost_seconds
        )
        print(json.dumps(out["api_cost"], indent=1), flush=True)
    finally:
        await asyncio.to_thread(k8s_env.stop_clusters, state)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
