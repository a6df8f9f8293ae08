"""The leader-election port: one Lease, read and written with compare-and-swap. Callers bound
every call with their own timeout (``asyncio.timeout``).

Errors are the Kubernetes port's (``ports.kube``): ``Conflict`` when a create finds the Lease
already there or an update's version is no longer current (someone else wrote first),
``Transient`` when the API server cannot be reached, any other ``KubeError`` otherwise.
"""

from __future__ import annotations

from typing import Protocol

from fleetwarden.core.leadership import LeaseRecord

__all__ = ["LeaseStore"]


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
