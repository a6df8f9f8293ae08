"""``fleetwarden watch``: live clusters, findings and lifecycle events as they happen (the
watchers assembled over their clients: ``wiring/watching.py``)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.cli.common import (
    FORMAT_METAVAR,
    AuditLogOpt,
    OutputFormat,
    WideOpt,
    argocd_server_option,
    config_option,
    failing,
    warn,
)
from fleetwarden.ports.kube import CredentialError
from fleetwarden.presenting.watching import JsonLines, LiveView
from fleetwarden.wiring import watching

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command()
    def watch(
        kubeconfig: Annotated[
            Path,
            typer.Option(
                "--kubeconfig", "-k", metavar="FILE", help="Clusters to watch: one per context."
            ),
        ],
        desired: Annotated[
            list[str],
            typer.Option(
                "--desired",
                "-d",
                metavar="[CLUSTER=]PATH",
                help="Desired node pools (as for scan). Contexts are matched by cluster name.",
            ),
        ],
        context: Annotated[
            list[str] | None,
            typer.Option(
                "--context", metavar="NAME", help="Only these contexts (repeat). Default: all."
            ),
        ] = None,
        argocd_secrets: Annotated[
            str | None,
            typer.Option(
                "--argocd-secrets",
                metavar="NAMESPACE",
                help="Also watch Argo CD cluster Secrets in this namespace (of --argocd-context): "
                "a Secret created adds a cluster, updated reconnects it, deleted removes it.",
            ),
        ] = None,
        argocd_context: Annotated[
            str | None,
            typer.Option(
                "--argocd-context",
                metavar="NAME",
                help="The context that holds the Argo CD Secrets (default: the first one).",
            ),
        ] = None,
        argocd_server: Annotated[
            str | None,
            argocd_server_option(
                "The Argo CD API (token in ARGOCD_AUTH_TOKEN): on a cluster upgrade, the "
                "rendered manifests of every application targeting it are checked for APIs "
                "removed at the new version (cluster.upgrade_scan).",
                from_env=False,
            ),
        ] = None,
        store: Annotated[
            str | None,
            typer.Option(
                "--store",
                metavar="URL",
                help="The audit store where `upgrade run` records its runs (default: serve's, "
                "when it exists): a pool's drift while its upgrade runs is upgrade.in_progress.",
            ),
        ] = None,
        manifests: Annotated[
            list[str] | None,
            typer.Option(
                "--manifests",
                "-m",
                metavar="[CLUSTER=]PATH",
                help="Desired manifests of a cluster (all clusters without CLUSTER=): scanned for "
                "deprecated and removed APIs whenever that cluster is upgraded.",
            ),
        ] = None,
        follow: Annotated[
            list[str] | None,
            typer.Option(
                "--follow",
                metavar="APP=PATH",
                help="Also watch this application's workloads (Deployments, StatefulSets, "
                "DaemonSets, ConfigMaps, Secrets hashed, HPAs) against its rendered manifests "
                "at PATH; every change re-diffs the app. Repeat. (Or `workloads:` in --config, "
                "as for serve, with Argo CD applications too.)",
            ),
        ] = None,
        namespace: Annotated[
            list[str] | None,
            typer.Option(
                "--namespace",
                metavar="NS",
                help="With --follow: watch only these namespaces (repeat; default: all).",
            ),
        ] = None,
        config: Annotated[
            Path | None,
            config_option(
                "scan: (pool diff), fleet: (workload diff), workloads: (apps to follow)."
            ),
        ] = None,
        output: Annotated[
            OutputFormat,
            typer.Option(
                "--format",
                "-o",
                metavar=FORMAT_METAVAR,
                help="table (live view) or json (one event per line).",
            ),
        ] = OutputFormat.table,
        probe_interval: Annotated[
            float,
            typer.Option(
                metavar="SECONDS", min=0.1, help="Seconds between /readyz and /version probes."
            ),
        ] = 10.0,
        duration: Annotated[
            float | None,
            typer.Option(
                metavar="SECONDS",
                min=0.0,
                help="Stop after this many seconds (default: run until interrupted).",
            ),
        ] = None,
        allow_empty: Annotated[
            bool,
            typer.Option(
                "--allow-empty",
                help="Run even when --desired holds no pool definition (else exit 2).",
            ),
        ] = False,
        wide: WideOpt = False,
        audit_log: AuditLogOpt = None,
    ) -> None:
        """Watch live clusters: every node change re-diffs its pool at once; findings that
        appear, change or clear and cluster events (added, removed, health, upgraded, pool
        scaled) are printed as they happen."""
        runner = JsonLines(sys.stdout) if output is OutputFormat.json else LiveView(wide=wide)
        # NothingToCompare is a ValueError, and so is a --store that cannot be read
        with failing(ValueError, CredentialError), contextlib.suppress(KeyboardInterrupt):
            raise typer.Exit(watching.watch(
                runner, kubeconfig, desired, contexts=context or (), config=config,
                argocd_secrets=argocd_secrets, argocd_context=argocd_context,
                argocd_server=argocd_server, store=store, manifests=manifests or (),
                follow=follow or (), namespaces=namespace or (), allow_empty=allow_empty,
                probe_interval=probe_interval, duration=duration,
                audit_logs=audit_log or (), on_bad_audit_line=warn,
            ))  # fmt: skip
