"""``fleetwarden deprecations``: ``app.deprecating`` over the file reader and helm (manifests
and charts on disk), ``app.live_deprecating`` over the live clusters and their audit logs
(``--live``). The live clients (httpx) load only for ``--live``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from fleetwarden.adapters import files, helm
from fleetwarden.app import deprecating
from fleetwarden.app.deprecating import DEFAULT_COMPONENTS, Scan
from fleetwarden.app.live_deprecating import LiveReport, find_live_deprecations
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import DeprecationTable

__all__ = ["scan_files", "scan_live", "scan_manifests"]


def scan_manifests(
    paths: Sequence[Path],
    target: deprecations.MinorVersion,
    table: DeprecationTable,
    *,
    charts: Sequence[Path] = (),
    workers: int = 1,
) -> Scan:
    """``find_deprecations`` over files on disk, and over ``charts`` rendered by helm for the
    target version (``ValueError`` when there is no helm to render them)."""
    helm_bin = helm.require_helm() if charts else None
    return deprecating.find_deprecations(
        paths,
        target,
        table,
        list_files=files.list_manifests,
        read=files.read_manifest,
        charts=charts,
        render=partial(_render, helm_bin) if helm_bin else None,
        workers=workers,
    )


def scan_files(
    paths: Sequence[Path],
    charts: Sequence[Path],
    target: deprecations.MinorVersion,
    components: Sequence[str],
) -> Scan:
    """``deprecations``' scan of manifest ``paths`` and helm ``charts`` against the table rows
    of ``components`` (none given: ``DEFAULT_COMPONENTS``), over the default workers.
    ``ValueError`` names what is wrong: nothing to scan, an unknown component, no helm
    (``FormatError``: a bad file)."""
    if not paths and not charts:
        raise ValueError("nothing to scan: give --manifests PATH or --helm-chart DIR")
    table = deprecating.table_for(components or DEFAULT_COMPONENTS)
    workers = deprecating.default_workers()
    return scan_manifests(paths, target, table, charts=charts, workers=workers)


def _render(helm_bin: str, chart: Path, target: deprecations.MinorVersion) -> str:
    return helm.render_chart(chart, helm=helm_bin, kube_version=deprecations.format_minor(target))


def scan_live(
    target: deprecations.MinorVersion,
    kubeconfig: Path | None,
    contexts: Sequence[str],
    audit_logs: Sequence[str],
    config: Path | None,
) -> LiveReport:
    """The deprecated APIs the clusters of ``kubeconfig`` still serve, and who calls them
    (``audit_logs``, or ``auditLogs:`` in ``config``). A bad kubeconfig, context or audit log
    raises ``FormatError``/``ValueError`` before any cluster is asked."""
    from fleetwarden.adapters.live_apis import read_live_clusters  # httpx: --live only

    sources = read_live_clusters(kubeconfig, contexts, audit_logs, config)
    return asyncio.run(find_live_deprecations(sources, target))
