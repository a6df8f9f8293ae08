"""Shared helpers for benchmarks against real kube-apiservers (scripts/k8s-test-env)."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fleetgen

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint


def pool_specs(cluster: str) -> list[NodePoolSpec]:
    return [
        NodePoolSpec(
            name=name,
            cluster=cluster,
            provider=Provisioner.AWS,
            instance_types=(itype,),
            min_size=1,
            max_size=1000,
            labels=labels,
            taints=tuple(Taint(t["key"], t["value"], t["effect"]) for t in taints),
            kubernetes_version="1.30",
        )
        for name, itype, _c, _m, _p, labels, taints in fleetgen.POOLS
    ]


def node_object(cluster: str, i: int, rng: random.Random) -> dict[str, Any]:
    n = fleetgen.node(cluster, i, fleetgen.POOLS[i % len(fleetgen.POOLS)], rng)
    for key in ("uid", "resourceVersion", "creationTimestamp"):
        n["metadata"].pop(key, None)
    return n


async def populate(
    api: KubeClient, cluster: str, count: int, *, seed: int = 1, concurrency: int = 16
) -> list[str]:
    """Create ``count`` realistic nodes (status included) with bounded concurrency."""
    rng = random.Random(seed)
    bodies = [node_object(cluster, i, rng) for i in range(count)]
    sem = asyncio.Semaphore(concurrency)

    async def create(body: dict[str, Any]) -> None:
        async with sem:
            await api.request("POST", "/api/v1/nodes", body=body)

    await asyncio.gather(*(create(b) for b in bodies))
    return [b["metadata"]["name"] for b in bodies]


async def wait_for(cond: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = cond()
        if result:
            return result
        await asyncio.sleep(0.001)
    raise TimeoutError("condition not met")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]
