"""Remediation ports over a client opened for one call, on a cluster not watched here.

With sharding each replica holds live connections only to the clusters its shard owns, but an
approved request is carried out by the replica that approved it (the leader, with leader
election; the replica that claimed ``approve:<id>`` in the shared store, without): the
cluster may be another shard's. Then the call goes out over a client made from the same
endpoint (kubeconfig context, in-cluster, Argo CD cluster Secret) the owner watches it with,
opened for that one call and closed after it. It is fenced as every approval is (the
leader's term, read again right before the calls: ``app/authority``); the owner's own heals
of that cluster are serialised with it through the shared guard state (the approval is on
record before its call, and the owner's cooldown counts it).

Not done here: deciding who runs what (``app/authority``, ``app/healing``) or keeping any
connection open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

from fleetwarden.core.ownership import FluxRef
from fleetwarden.core.pools import Taint
from fleetwarden.ports.kube import KubeApi
from fleetwarden.ports.remediation import FluxReconciler, NodeRestorer

__all__ = ["OneCallFlux", "OneCallRestorer"]

P = TypeVar("P")


class _OneCall(Generic[P]):
    def __init__(self, open_client: Callable[[], KubeApi], make: Callable[[KubeApi], P]) -> None:
        self._open, self._make = open_client, make

    @asynccontextmanager
    async def _port(self) -> AsyncIterator[P]:
        client = self._open()
        try:
            yield self._make(client)
        finally:
            await client.aclose()


class OneCallRestorer(_OneCall[NodeRestorer]):
    """A ``NodeRestorer`` whose every call opens its own client and closes it."""

    async def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        async with self._port() as port:
            return await port.patch_labels(node, labels)

    async def patch_taints(
        self,
        node: str,
        taints: Sequence[Taint],
        *,
        replace: Collection[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        async with self._port() as port:
            return await port.patch_taints(node, taints, replace=replace)


class OneCallFlux(_OneCall[FluxReconciler]):
    """A ``FluxReconciler`` whose every call opens its own client and closes it."""

    async def reconcile(self, ref: FluxRef) -> dict[str, Any]:
        async with self._port() as port:
            return await port.reconcile(ref)

    async def suspend(self, ref: FluxRef) -> dict[str, Any]:
        async with self._port() as port:
            return await port.suspend(ref)

    async def resume(self, ref: FluxRef) -> dict[str, Any]:
        async with self._port() as port:
            return await port.resume(ref)
