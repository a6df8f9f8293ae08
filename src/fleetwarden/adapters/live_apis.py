"""``deprecations --live``'s inputs: the kubeconfig's contexts (their ``/metrics``) and the
audit logs configured for them (``--audit-log``, ``auditLogs:`` in ``--config``).

Refusals (before anything is fetched): ``FormatError`` for the kubeconfig or the config,
``ValueError`` for a context or an audit log that names no cluster."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetwarden.adapters.audit_logs import audit_log_paths, read_audit_logs
from fleetwarden.adapters.kube.config import (
    http_client_factory,
    kubeconfig_paths,
    load_kubeconfig,
)
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.formats.audit_log import AuditLogs
from fleetwarden.formats.settings import load_settings
from fleetwarden.ports.kube import KubeError

__all__ = ["LiveClusters", "read_live_clusters"]


@dataclass
class LiveClusters:
    """``ports.live_apis.LiveApiSources`` over kubeconfig contexts and audit log files."""

    endpoints: dict[str, ClusterEndpoint]
    audit_logs: dict[str, Path]
    timeout: float = 15.0

    @property
    def clusters(self) -> list[str]:
        return list(self.endpoints)

    async def metrics(self, cluster: str) -> str:
        try:
            client = http_client_factory(self.endpoints[cluster])
        except (OSError, ValueError) as exc:  # a CA or client key that does not load
            raise KubeError(cluster, f"cannot make a client: {exc}") from None
        try:
            return await client.metrics_text(timeout=self.timeout)
        finally:
            await client.aclose()

    def audit(self, cluster: str) -> AuditLogs | None:
        path = self.audit_logs.get(cluster)
        return None if path is None else read_audit_logs(path, cluster)


def read_live_clusters(
    kubeconfig: Path | None,
    contexts: Sequence[str],
    audit_logs: Sequence[str],
    config: Path | None,
) -> LiveClusters:
    """The clusters to ask (every context of the kubeconfig, or those named; without
    ``kubeconfig``, kubectl's: every file ``$KUBECONFIG`` lists, merged, else
    ``~/.kube/config``)."""
    paths = [kubeconfig] if kubeconfig is not None else kubeconfig_paths()
    settings = load_settings(config)
    endpoints = {e.name: e for e in load_kubeconfig(paths, contexts=contexts)}
    if not endpoints:
        raise ValueError(f"{os.pathsep.join(map(str, paths))}: no context to read")
    logs = audit_log_paths(audit_logs, settings.audit_logs, list(endpoints))
    return LiveClusters(endpoints, logs)
