"""Workloads and nodes read live from many clusters at once (``fleet``, ``gate``).

Each cluster's client comes from its endpoint (a kubeconfig context, or the pod's own
ServiceAccount); an exec credential plugin runs first, and if it fails its own error is the
message. ``LIVE_CONCURRENCY`` clusters are read at a time; the first failure names its
cluster. ``on_done(cluster)`` is called as each cluster is read (the CLI's progress bar).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory
from fleetwarden.adapters.workload_sources import list_nodes, list_workloads
from fleetwarden.core import workloads as wl
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import KubeError

__all__ = ["LIVE_CONCURRENCY", "gather", "read_gate_inputs", "read_workloads"]

T = TypeVar("T")
LIVE_CONCURRENCY = 32  # clusters read at once: kind to API servers and to this machine


def _nothing(cluster: str) -> None:
    return None


async def gather(
    endpoints: Sequence[ClusterEndpoint],
    read: Callable[[KubeClient], Awaitable[T]],
    *,
    on_done: Callable[[str], None] = _nothing,
) -> dict[str, T]:
    """``read`` on every cluster, ``LIVE_CONCURRENCY`` at a time."""
    gate = asyncio.Semaphore(LIVE_CONCURRENCY)

    async def one(endpoint: ClusterEndpoint) -> tuple[str, T]:
        async with gate:
            try:
                client = http_client_factory(endpoint)
            except KubeError as exc:
                raise FormatError(endpoint.name, str(exc)) from None
            async with client:
                # an exec plugin runs first: if it fails, its own error is the message
                await client.authenticate()
                result = await read(client)
            on_done(endpoint.name)
            return endpoint.name, result

    return dict(await asyncio.gather(*(one(e) for e in endpoints)))


async def read_workloads(
    endpoints: Sequence[ClusterEndpoint],
    *,
    namespaces: Sequence[str] = (),
    app_label: str | None = None,
    on_done: Callable[[str], None] = _nothing,
) -> dict[str, wl.ObjectIndex]:
    """Each cluster's workloads now (all namespaces, or ``namespaces``)."""
    return await gather(
        endpoints,
        lambda c: list_workloads(c, namespaces=namespaces, app_label=app_label),
        on_done=on_done,
    )


async def read_gate_inputs(
    endpoints: Sequence[ClusterEndpoint],
    *,
    namespaces: Sequence[str] = (),
    app_label: str | None = None,
    on_done: Callable[[str], None] = _nothing,
) -> tuple[dict[str, list[ObservedNode]], dict[str, wl.ObjectIndex]]:
    """Nodes, workloads and HPAs of each cluster: all the gate reads (never a Secret or a
    ConfigMap, so its RBAC need not grant them)."""

    async def read(client: KubeClient) -> tuple[list[ObservedNode], wl.ObjectIndex]:
        found = await list_workloads(
            client,
            namespaces=namespaces,
            kinds=wl.WORKLOAD_KINDS | {wl.AUTOSCALER_KIND},
            app_label=app_label,
        )
        return await list_nodes(client), found

    got = await gather(endpoints, read, on_done=on_done)
    return {c: n for c, (n, _) in got.items()}, {c: w for c, (_, w) in got.items()}
