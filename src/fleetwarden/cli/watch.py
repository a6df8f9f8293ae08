"""``fleetwarden watch``: live clusters, findings and lifecycle events as they happen."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwarden.adapters import files
from fleetwarden.adapters.argocd.client import ArgoCDClient, client_from_env
from fleetwarden.adapters.kube.config import PreparedClients
from fleetwarden.adapters.watch_inputs import read_watch_inputs
from fleetwarden.app.deprecating import DEFAULT_COMPONENTS, table_for, upgrade_hook
from fleetwarden.app.upgrade_drift import UpgradeInProgress
from fleetwarden.app.upgrade_scan import for_fleet
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.app.workload_watching import WorkloadWatchSettings
from fleetwarden.cli.common import (
    FORMAT_METAVAR,
    AuditLogOpt,
    OutputFormat,
    WideOpt,
    fail,
    warn,
)
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.audit import AuditStore, AuditStoreError
from fleetwarden.ports.kube import CredentialError
from fleetwarden.presenting.watching import JsonLines, LiveView

if TYPE_CHECKING:  # the serve stack loads only when applications are followed
    from fleetwarden.app.service_config import ServiceConfig

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
            typer.Option(
                "--argocd-server",
                metavar="URL",
                help="The Argo CD API (token in ARGOCD_AUTH_TOKEN): on a cluster upgrade, the "
                "rendered manifests of every application targeting it are checked for APIs "
                "removed at the new version (cluster.upgrade_scan).",
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
            typer.Option(
                "--config",
                "-c",
                metavar="FILE",
                help="scan: (pool diff), fleet: (workload diff), workloads: (apps to follow).",
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
            typer.Option(metavar="SECONDS", help="Seconds between /readyz and /version probes."),
        ] = 10.0,
        duration: Annotated[
            float | None,
            typer.Option(
                metavar="SECONDS",
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
        try:
            inputs = read_watch_inputs(
                kubeconfig, desired, contexts=context or (), config=config,
                argocd_secrets=argocd_secrets, argocd_context=argocd_context,
                following=bool(follow), allow_empty=allow_empty, audit_logs=audit_log or (),
                on_bad_audit_line=warn,
            )  # fmt: skip
        except (FormatError, ValueError) as exc:  # NothingToCompare is a ValueError
            fail(str(exc))
        settings, endpoints, argocd = inputs.settings, inputs.endpoints, inputs.argocd
        try:
            followed = _followed(config, settings.raw, follow or (), namespace or ())
        except FormatError as exc:
            fail(str(exc))
        watch_settings = WatchSettings(
            probe_interval=probe_interval, options=settings.diff, capacity=True,
            audit_logs=inputs.audit_logs,
        )  # fmt: skip
        runner = JsonLines(sys.stdout) if output is OutputFormat.json else LiveView(wide=wide)
        hook = upgrade_hook(
            [(m.cluster, m.path) for m in map(files.parse_path_arg, manifests or ())],
            runner.emit, list_files=files.list_manifests, read=files.read_manifest,
        )  # fmt: skip
        try:
            argocd_api = (
                client_from_env(argocd_server, option="--argocd-server") if argocd_server else None
            )
        except ValueError as exc:
            fail(str(exc))
        up = _UpgradeScan(argocd_api, hook) if argocd_api is not None else hook
        from fleetwarden.entrypoints.service_config import default_store

        runs = _Runs(store, explicit=True) if store else _Runs(default_store(), explicit=False)
        pools = inputs.desired.pools
        try:
            with contextlib.suppress(KeyboardInterrupt):
                args = (pools, endpoints, argocd, watch_settings, runner, duration, up, followed)
                asyncio.run(_run(*args, runs=runs))
        except FormatError as exc:  # a followed app's desired state did not load
            fail(str(exc))
        except CredentialError as exc:  # a context's exec plugin is missing or failed
            fail(exc.reason)  # fail() prints it literally
        except AuditStoreError as exc:  # --store given and not readable
            fail(f"--store: {exc}")
        finally:
            for log in inputs.audit_logs.values():
                log.close()


@dataclass
class _Runs:
    """Where upgrade runs are read: a store given (must open) or serve's (when it exists)."""

    url: str
    explicit: bool

    async def open(self) -> AuditStore | None:
        from fleetwarden.adapters.storage.audit_sql import open_audit_store

        try:
            return await open_audit_store(self.url, create=False, migrate=False)
        except AuditStoreError:
            if self.explicit:
                raise
            return None  # no serve store here: no upgrade runs to know of


@dataclass
class _UpgradeScan:
    """``--argocd-server``: the Argo CD API that upgrades scan, and the ``--manifests`` hook."""

    api: ArgoCDClient
    then: Callable[[str, str], Awaitable[None]] | None


@dataclass
class _Followed:
    """The applications ``watch`` follows: a service config's workload part."""

    config: ServiceConfig

    async def load(self) -> tuple[WorkloadWatchSettings, DesiredApps]:
        client = None
        if self.config.argocd_url:
            client = ArgoCDClient(
                self.config.argocd_url,
                token=self.config.argocd_token,
                verify=not self.config.argocd_insecure,
            )
        try:
            # the serve stack's loader: imported only when applications are followed
            from fleetwarden.entrypoints.workloads_api import load_apps

            desired, failures = await load_apps(self.config, client)
        finally:
            if client is not None:
                await client.aclose()
        for error in failures.values():
            raise FormatError("--follow", error)
        assert self.config.workloads is not None
        return self.config.workloads, desired


def _followed(
    config: Path | None,
    raw: Mapping[str, Any],
    follow: Sequence[str],
    namespaces: Sequence[str],
) -> _Followed | None:
    """``--follow APP=PATH`` and/or the config's ``workloads:`` (validated as serve's)."""
    section: dict[str, Any] = dict(raw.get("workloads") or {})
    apps = [dict(a) for a in section.get("apps") or ()]
    for item in follow:
        app, sep, path = item.partition("=")
        if not sep or not app or not path:
            raise FormatError(item, "expected APP=PATH", field="--follow")
        apps.append({"name": app, "desired": [path]})
    if not apps:
        return None
    section["apps"] = apps
    if namespaces:
        section["namespaces"] = list(namespaces)
    doc = {k: raw[k] for k in ("fleet", "argocd", "scan") if k in raw}
    doc["workloads"] = section
    from fleetwarden.entrypoints.service_config import service_config_from

    cfg = service_config_from(doc, source=str(config or "--follow"))
    return _Followed(cfg)


async def _run(
    specs, endpoints, argocd, settings, sink, duration, hook, followed=None, *, runs=None
) -> None:  # type: ignore[no-untyped-def]
    desired_apps, workload_settings = None, None
    if followed is not None:
        workload_settings, desired_apps = await followed.load()
    audit = await runs.open() if runs is not None else None
    # the contexts' exec plugins run before anything is watched: one that is missing or fails
    # stops the command with its error (later refreshes that fail are reported per cluster)
    clients = PreparedClients()
    await clients.prepare([*endpoints, *([argocd[0]] if argocd else [])])
    scan = hook if isinstance(hook, _UpgradeScan) else None
    fleet = FleetWatcher(
        specs,
        clients,
        sink.emit,
        settings=settings,
        on_upgrade=scan.then if scan is not None else hook,
        desired_apps=desired_apps,
        workload_settings=workload_settings,
    )
    if scan is not None:  # the Argo CD API's apps are scanned; --manifests runs after
        for_fleet(fleet, scan.api, table=table_for(DEFAULT_COMPONENTS), then=scan.then)
    gate, refresh = None, None
    if audit is not None:  # upgrade runs under way: their pools' drift is in progress
        gate = UpgradeInProgress(
            fleet.emit, store=audit, specs=specs, now=fleet.now, current=fleet.findings
        )
        fleet.emit = gate.observe
        if isinstance(sink, LiveView):
            sink.select = gate.findings
    argocd_client = clients(argocd[0]) if argocd else None
    sink.fleet = fleet
    try:
        async with asyncio.timeout(duration):
            async with sink:
                if gate is not None:  # the runs under way before the first event
                    with contextlib.suppress(AuditStoreError):
                        await gate.refresh()
                    refresh = asyncio.create_task(gate.refresh_forever(), name="upgrade-runs")
                await fleet.run(endpoints, (argocd_client, argocd[1]) if argocd_client else None)
    except TimeoutError:
        pass
    finally:
        if argocd_client is not None:
            await argocd_client.aclose()
        if scan is not None:
            await scan.api.aclose()
        if refresh is not None:
            refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresh
        if audit is not None:
            await audit.close()
        await clients.aclose()
