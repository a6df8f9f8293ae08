"""The Lease ports: one Lease read and written with compare-and-swap (leader election), and a
group of labelled membership Leases listed at once (cluster sharding). Callers bound
every call with their own timeout (``asyncio.timeout``).

Errors are the Kubernetes port's (``ports.kube``): ``Conflict`` when a create finds the Lease
already there or an update's version is no longer current (someone else wrote first),
``Transient`` when the API server cannot be reached, any other ``KubeError`` otherwise.
"""

from __future__ import annotations

from typing import Protocol

from fleetwarden.core.leadership import LeaseRecord
from fleetwarden.core.sharding import ListedLease

__all__ = ["LeaseGroup", "LeaseStore"]


class LeaseStore(Protocol):
    where: str  # "cluster/namespace/name", for messages and logs

    async def read(self) -> tuple[LeaseRecord, str] | None:
        """The record and its version, or None when the Lease does not exist."""
        ...

    async def create(self, record: LeaseRecord) -> str:
        """Create the Lease holding ``record``; its new version."""
        ...

    async def update(self, record: LeaseRecord, version: str) -> str:
        """Write ``record`` over ``version`` (and only over it); the new version."""
        ...


class LeaseGroup(Protocol):
    """The membership Leases of one sharding group (one label value in one namespace)."""

    where: str  # "cluster/namespace/label=value"

    async def list(self) -> list[ListedLease]:
        """Every Lease of the group (the whole group, in one consistent list)."""
        ...

    async def delete(self, lease: ListedLease) -> None:
        """Delete ``lease`` if it is still at ``lease.version`` (``Conflict`` if it changed,
        ``NotFound`` if it is gone)."""
        ...

    def member(self, name: str) -> LeaseStore:
        """The Lease ``name`` of the group: created and written with the group's label."""
        ...
