"""A fleet of N clusters (4 pools each, 2 nodes a pool) as files ``serve`` reads: one native
desired file (``clusters:``) and one node dump per cluster, with drift planted in some pools;
and ``running_service``: the real ``serve`` on them, for the dashboard's browser tests and
its benchmark."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from fleetwarden.entrypoints.serve_cmd import build_service
from fleetwarden.wiring.running import serve
from fleetwarden.wiring.service import Service
from fleetwarden.wiring.service_config import service_config_from
from tests.support.nodes import node

__all__ = ["POOLS", "TOKENS", "cluster_name", "running_service", "write_fleet"]

POOLS = {
    "general": ("m5.large", {"team": "platform"}),
    "memory": ("r5.xlarge", {"team": "data"}),
    "batch": ("c5.2xlarge", {"team": "batch"}),
    "system": ("m5.large", {"team": "platform"}),
}
TOKENS = {"read": "big-fleet-read-token", "admin": "big-fleet-admin-token"}


def cluster_name(i: int) -> str:
    return f"c{i:03d}"


def _drift(i: int, pool: str) -> dict[str, str]:
    """Planted: every 7th cluster has a hand-set label on general (high), every 11th a
    console resize on memory (critical), every 5th a missing team label on batch."""
    if pool == "general" and i % 7 == 0:
        return {"team": "by-hand"}
    if pool == "batch" and i % 5 == 0:
        return {"team": ""}
    return {}


def write_fleet(root: Path, clusters: int) -> tuple[Path, list[str]]:
    pools = {
        name: {"instanceTypes": [itype], "minSize": 2, "labels": labels}
        for name, (itype, labels) in POOLS.items()
    }
    desired = root / "fleet.yaml"
    doc = {
        "apiVersion": "fleetwarden.io/v1alpha1",
        "kind": "NodePools",
        "pools": pools,
        "clusters": {cluster_name(i): None for i in range(clusters)},
    }
    desired.write_text(json.dumps(doc))  # JSON is YAML
    args = []
    for i in range(clusters):
        cluster = cluster_name(i)
        items = []
        for pool, (itype, labels) in POOLS.items():
            for n in range(2):
                got = {**labels, "eks.amazonaws.com/nodegroup": pool, **_drift(i, pool)}
                resized = pool == "memory" and i % 11 == 0 and n == 0
                items.append(
                    node(
                        f"{cluster}-{pool}-{n}",
                        labels={k: v for k, v in got.items() if v},
                        instance_type="t3.medium" if resized else itype,
                    )
                )
        path = root / f"nodes-{cluster}.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        args.append(f"{cluster}={path}")
    return desired, args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def running_service(
    root: Path, clusters: int, *, mode: str = "dry-run", extra: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Service, str]]:
    """``serve`` (in this event loop) on a fleet of ``clusters``; yields it and its base URL."""
    desired, nodes = write_fleet(root, clusters)
    port = _free_port()
    raw = {
        "listen": f"127.0.0.1:{port}",
        "queuePath": str(root / "q.db"),
        "store": f"sqlite:///{root / 'audit.db'}",
        "desired": [str(desired)],
        "nodes": nodes,
        "debounceSeconds": 0.1,
        "policy": {"mode": mode},
        "auth": {name: {"bearerToken": token} for name, token in TOKENS.items()},
        **(extra or {}),
    }
    svc = build_service(service_config_from(raw, source="big-fleet"))
    ready = asyncio.Event()
    task = asyncio.create_task(serve(svc, ready=ready))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiting}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done():
        task.result()  # start-up failed: say why
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/healthz")).status_code == 200
    try:
        yield svc, base
    finally:
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=30)
        assert done, "serve did not stop"
