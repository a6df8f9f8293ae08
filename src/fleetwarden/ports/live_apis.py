"""What ``deprecations --live`` reads from each cluster: its ``/metrics`` text and, where one
is configured, its audit log. ``adapters.live_apis.LiveClusters`` implements it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fleetwarden.formats.audit_log import AuditLogs

__all__ = ["LiveApiSources"]


class LiveApiSources(Protocol):
    @property
    def clusters(self) -> Sequence[str]: ...

    async def metrics(self, cluster: str) -> str:
        """The API server's /metrics; ``ports.kube.KubeError`` when it cannot be read."""
        ...

    def audit(self, cluster: str) -> AuditLogs | None:
        """The cluster's audit log read once (None: none configured); OSError when the
        configured file cannot be read."""
        ...
