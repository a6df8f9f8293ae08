"""``fleetwarden demo``: the real service on the embedded simulated fleet, with a simulated cloud.

What runs: ``serve``'s own pipeline (``build_service`` + ``serve``: gateway, SQLite queue and
audit store in a temporary directory, inspection workers, healer in dry-run, dashboard) over
the demo fleet's desired files and node state (``adapters.simulated``). Every ``interval``
seconds one scripted change acts on the fleet; the service's view of the touched clusters is
refreshed (as a node-dump refresh would), and the simulated cloud posts the change event the
cluster's provider would send (EventBridge, Event Grid, Pub/Sub push:
``adapters.simulated_cloud``) through the gateway's HTTP endpoint with its bearer token. The
findings appear in the dashboard with their actor, over server-sent events.

Not here: real kube-apiservers (the embedded fleet is node dumps; the live watchers are
exercised by the e2e tests), or any cloud API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import secrets
import signal
import socket
import sys
import tempfile
import webbrowser
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from fleetwarden import logs
from fleetwarden.adapters import simulated, simulated_cloud
from fleetwarden.app import demoing
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.nodes import pool_of
from fleetwarden.core.pools import Taint
from fleetwarden.formats.nodes import parse_nodes
from fleetwarden.presenting.demo import demo_service_text
from fleetwarden.wiring import demo_clusters
from fleetwarden.wiring.demo_clusters import DemoClusters
from fleetwarden.wiring.running import serve
from fleetwarden.wiring.service import Service
from fleetwarden.wiring.service_config import ServiceConfig, service_config_from

log = logs.get_logger("fleetwarden.demo")

__all__ = ["DemoTokens", "has_display", "port_problem", "run", "serve_demo"]

DemoTokens = dict[str, str]  # read, admin, aws, azure, gcp
Ready = Callable[[str, DemoTokens, Service], None]


def _write_inputs(root: Path, fleet: simulated.SimulatedFleet) -> tuple[list[str], list[str]]:
    desired, nodes = [], []
    for i, (path, cluster, text) in enumerate(simulated.DESIRED_FILES):
        target = root / f"desired-{i}-{Path(path).name}"
        target.write_text(text)
        desired.append(f"{cluster}={target}" if cluster else str(target))
    for cluster in sorted(fleet.nodes):
        target = root / f"nodes-{cluster}.json"
        target.write_bytes(orjson.dumps(fleet.node_list(cluster)))
        nodes.append(f"{cluster}={target}")
    return desired, nodes


async def _cloud(
    service: Service,
    fleet: simulated.SimulatedFleet,
    base: str,
    tokens: DemoTokens,
    *,
    interval: float,
    seed: int,
    steps: int,
    changes: Sequence[demoing.CloudChange],
    clusters: DemoClusters | None = None,
) -> None:
    def refresh(cluster: str) -> object:
        if clusters is not None:  # patched on the cluster's API server: the watch sees it
            return clusters.push(fleet, cluster)
        doc = orjson.dumps(fleet.node_list(cluster))  # else the service's view, as a dump
        service.snapshot[cluster] = parse_nodes(f"demo/{cluster}/nodes.json", doc)
        return None

    async with simulated_cloud.client(base) as client:

        async def deliver(cluster: str, pool: str, actor: str) -> int:
            source, body = simulated_cloud.delivery(cluster, pool, actor, datetime.now(UTC))
            return await simulated_cloud.post(client, source, body, tokens[source])

        await demoing.play_cloud(
            fleet, lambda f: f.nodes, changes, random.Random(seed), interval=interval,
            steps=steps, refresh=refresh, deliver=deliver,
        )  # fmt: skip


class _Restorer:
    """What the healer patches on a demo node: the simulated fleet (``adapters.simulated``),
    then the service's view of the cluster is refreshed and the node's pool diffed again, as
    the live watcher would after a real patch (so an approved restore clears its finding)."""

    def __init__(self, service: Service, fleet: simulated.SimulatedFleet, cluster: str) -> None:
        self.service, self.fleet, self.cluster = service, fleet, cluster
        self.inner = simulated.SimulatedNodeRestorer(fleet, cluster)

    async def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        out = await self.inner.patch_labels(node, labels)
        await self._seen(node)
        return out

    async def patch_taints(
        self,
        node: str,
        taints: Sequence[Taint],
        *,
        replace: Collection[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        out = await self.inner.patch_taints(node, taints, replace=replace)
        await self._seen(node)
        return out

    async def _seen(self, node: str) -> None:
        doc = orjson.dumps(self.fleet.node_list(self.cluster))
        nodes = parse_nodes(f"demo/{self.cluster}/nodes.json", doc)
        self.service.snapshot[self.cluster] = nodes
        pool = next((pool_of(n) for n in nodes if n.name == node), None)
        if pool is not None:
            await self.service.rediff(self.cluster, pool)


async def run(
    *,
    port: int,
    interval: float,
    seed: int,
    steps: int = 0,
    mode: str = "dry-run",
    on_ready: Ready,
    build: Callable[[ServiceConfig], Service],
    changes: Sequence[demoing.CloudChange] | None = None,
    real: bool = False,
) -> None:
    """The service and its simulated cloud until cancelled (or ``steps`` changes, then the
    service alone). ``on_ready`` gets the dashboard URL, the tokens and the service; ``build``
    is serve's (the entry layer puts its HTTP side in front). ``real``: the fleet on real
    kube-apiservers when they can start here without a build (``wiring.demo_clusters``),
    else on the embedded node dumps."""
    tokens = {name: secrets.token_urlsafe(24) for name in ("read", "admin", "aws", "azure", "gcp")}
    logs.add_secrets(tokens.values())  # masked in any log line, as serve's credentials are
    env = {f"FW_DEMO_{name.upper()}": value for name, value in tokens.items()}
    fleet = simulated.build_fleet()
    clusters = await _start_clusters(fleet) if real else None
    try:
        await _run(
            fleet, clusters, tokens, env, port=port, interval=interval, seed=seed, steps=steps,
            mode=mode, on_ready=on_ready, build=build, changes=changes,
        )  # fmt: skip
    finally:
        if clusters is not None:
            await asyncio.to_thread(clusters.down)


async def _start_clusters(fleet: simulated.SimulatedFleet) -> DemoClusters | None:
    """One real API server per cluster, loaded with the fleet's nodes; None (the embedded
    fleet) when this is no checkout with cached binaries, or when they do not start."""
    if not await asyncio.to_thread(demo_clusters.available):
        return None
    clusters = DemoClusters(sorted(fleet.nodes))
    try:
        await asyncio.to_thread(clusters.up)
        await clusters.load(fleet)
    except Exception as exc:  # any failure: the demo still runs, on the embedded fleet
        log.warning("demo: the test API servers did not start; the embedded fleet instead",
                    error=str(exc)[:300])  # fmt: skip
        await asyncio.to_thread(clusters.down)
        return None
    return clusters


async def _run(
    fleet: simulated.SimulatedFleet,
    clusters: DemoClusters | None,
    tokens: DemoTokens,
    env: Mapping[str, str],
    *,
    port: int,
    interval: float,
    seed: int,
    steps: int,
    mode: str,
    on_ready: Ready,
    build: Callable[[ServiceConfig], Service],
    changes: Sequence[demoing.CloudChange] | None,
) -> None:
    with tempfile.TemporaryDirectory(prefix="fleetwarden-demo-") as tmp:
        root = Path(tmp)
        desired, nodes = _write_inputs(root, fleet)
        raw = {
            "listen": f"127.0.0.1:{port}",
            "queuePath": str(root / "queue.db"),
            "store": f"sqlite:///{root / 'audit.db'}",
            "desired": desired,
            **(
                {"nodes": nodes}
                if clusters is None
                else {
                    "clusters": {
                        "kubeconfig": str(clusters.kubeconfig),
                        "contexts": clusters.names,
                        "probeIntervalSeconds": 5,
                    }
                }
            ),
            "debounceSeconds": 0.2,
            "policy": {"mode": mode},
            "auth": {name: {"bearerToken": f"env:FW_DEMO_{name.upper()}"} for name in tokens},
        }
        (root / "serve.json").write_text(json.dumps(raw))  # what ran, for a curious user
        service = build(service_config_from(raw, source="demo", env=env))
        if clusters is None:  # an approved restore patches the simulated nodes (no API server)
            service.healer.remediator = Remediator(
                nodes=lambda cluster: _Restorer(service, fleet, cluster)
            )
        ready = asyncio.Event()
        base = f"http://127.0.0.1:{port}"
        served = asyncio.create_task(serve(service, ready=ready), name="demo-serve")
        cloud: asyncio.Task[None] | None = None
        try:
            waiting = asyncio.create_task(ready.wait())
            await asyncio.wait({served, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if not served.done():
                on_ready(f"{base}/ui/", tokens, service)
                cloud = asyncio.create_task(
                    _cloud(
                        service, fleet, base, tokens, interval=interval, seed=seed,
                        steps=steps, changes=changes or _CHANGES, clusters=clusters,
                    ),
                    name="demo-cloud",
                )  # fmt: skip
            await served  # until the server stops (Ctrl-C) or the caller cancels
        finally:
            for task in (cloud, served):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task


async def _heal(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    """Someone (or an enforcing fleetwarden elsewhere) restores a label or taint drift."""
    healed = await demoing.heal_async(
        simulated.scan_fleet(fleet).findings, rng, now=datetime.now(UTC),
        nodes=lambda cluster: simulated.SimulatedNodeRestorer(fleet, cluster),
    )  # fmt: skip
    return healed or simulated.drop_taint(fleet, rng)


_CHANGES: tuple[demoing.CloudChange, ...] = (
    simulated.label_by_hand,
    simulated.drop_taint,
    simulated.console_resize,
    simulated.upgrade,
    _heal,
    _heal,
)


def has_display() -> bool:
    """Whether a browser can be opened here."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or (
        sys.platform in ("darwin", "win32")
    )


def port_problem(port: int) -> str | None:
    """Why the demo cannot listen on 127.0.0.1:``port`` (a taken port: which option to
    change), or None."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return f"demo: cannot listen on 127.0.0.1:{port} ({exc.strerror}): pass --port N"
    return None


def serve_demo(
    console: Console,
    *,
    port: int,
    interval: float,
    seed: int,
    browse: bool,
    mode: str,
    build: Callable[[ServiceConfig], Service],
) -> None:
    """The demo service until Ctrl-C (``run`` on real kube-apiservers when this checkout has
    their binaries cached): the URL and tokens printed on ``console``, the browser opened
    when ``browse`` and there is a display; everything started is stopped on the way out."""

    def ready(url: str, tokens: DemoTokens, service: Service) -> None:
        live = service.config.kubeconfig is not None
        text = demo_service_text(url, tokens["read"], tokens["admin"], interval, mode, live=live)
        console.print(text)
        if browse and has_display():
            webbrowser.open(url)

    logs.configure("console", "warning")  # what goes wrong, not every request
    run_demo = run(
        port=port, interval=interval, seed=seed, mode=mode, on_ready=ready, build=build, real=True
    )
    # SIGTERM (kill, timeout, a container's stop) stops it as Ctrl-C does: the clean-up then
    # stops the kube-apiservers and etcds it started instead of leaving them running
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with contextlib.suppress(KeyboardInterrupt), asyncio.Runner() as runner:
            runner.run(run_demo)
    finally:
        signal.signal(signal.SIGTERM, previous)
    console.print("demo stopped: service, simulated cloud and temporary store removed")
