"""``fleetwarden watch``: live clusters, findings and lifecycle events as they happen."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.text import Text

from fleetwarden.adapters import files
from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.kube.config import PreparedClients, load_kubeconfig
from fleetwarden.app.watching import Event, FleetWatcher, WatchSettings
from fleetwarden.app.workload_watching import WorkloadWatchSettings
from fleetwarden.cli.common import FORMAT_METAVAR, OutputFormat, WideOpt, fail
from fleetwarden.cli.rendering import event_text, findings_table, literal, make_console
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import DeprecationTable
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.fleet import NothingToCompare, check_comparable, severity_order
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.entrypoints.deprecations_cmd import scan_manifests
from fleetwarden.entrypoints.settings import load_settings
from fleetwarden.formats import manifests as manifests_format
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import CredentialError

if TYPE_CHECKING:  # the serve stack loads only when applications are followed
    from fleetwarden.entrypoints.service_config import ServiceConfig

__all__ = ["register", "upgrade_hook"]


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
    ) -> None:
        """Watch live clusters: every node change re-diffs its pool at once; findings that
        appear, change or clear and cluster events (added, removed, health, upgraded, pool
        scaled) are printed as they happen."""
        try:
            settings = load_settings(config)
            desired_args = [files.parse_path_arg(a) for a in desired]
            loaded = files.load_desired(
                desired_args, limit=settings.desired_file_limit, assume=settings.assume
            )
            if desired and not loaded.pools and not follow and not allow_empty:
                fail(loaded.nothing_found([a.label for a in desired_args]))
            endpoints = load_kubeconfig(kubeconfig, contexts=context or ())
            argocd = None
            if argocd_secrets:
                pool = load_kubeconfig(
                    kubeconfig, contexts=[argocd_context] if argocd_context else ()
                )
                if not pool:
                    fail(f"{kubeconfig}: no context to read Argo CD secrets from")
                argocd = (pool[0], argocd_secrets)
            elif loaded.pools and not allow_empty:
                # the contexts are all there is to watch: a desired tree none of whose
                # clusters is among them would compare nothing, for ever
                check_comparable(
                    loaded.pools,
                    [e.name for e in endpoints],
                    desired_paths=[a.label for a in desired_args],
                )
        except (FormatError, NothingToCompare) as exc:
            fail(str(exc))
        try:
            followed = _followed(config, settings.raw, follow or (), namespace or ())
        except FormatError as exc:
            fail(str(exc))
        watch_settings = WatchSettings(
            probe_interval=probe_interval, options=settings.diff, capacity=True
        )
        runner = _JsonSink() if output is OutputFormat.json else _LiveSink(wide=wide)
        hook = upgrade_hook([files.parse_path_arg(m) for m in manifests or ()], runner.emit)
        pools = loaded.pools
        try:
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(
                    _run(pools, endpoints, argocd, watch_settings, runner, duration, hook, followed)
                )
        except FormatError as exc:  # a followed app's desired state did not load
            fail(str(exc))
        except CredentialError as exc:  # a context's exec plugin is missing or failed
            fail(exc.reason)  # fail() prints it literally


def upgrade_hook(
    manifests: Sequence[files.PathArg], emit: Callable[[Event], None]
) -> Callable[[str, str], Awaitable[None]] | None:
    """On a cluster upgrade, scan that cluster's desired manifests at the new version and emit
    one ``cluster.deprecations`` event with what is deprecated or removed there."""
    if not manifests:
        return None

    async def on_upgrade(cluster: str, version: str) -> None:
        target = deprecations.parse_minor(version)
        paths = [m.path for m in manifests if m.cluster in (None, cluster)]
        if target is None or not paths:
            return
        table = DeprecationTable(manifests_format.bundled_table()).only({"k8s"})
        try:
            scan = await asyncio.to_thread(scan_manifests, paths, target, table)
            details: dict[str, Any] = scan.to_json()
        except FormatError as exc:
            details = {"target": deprecations.format_minor(target), "error": str(exc)}
        emit(LifecycleEvent(LifecycleType.DEPRECATIONS, cluster, datetime.now(UTC), details))

    return on_upgrade


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


async def _run(specs, endpoints, argocd, settings, sink, duration, hook, followed=None) -> None:  # type: ignore[no-untyped-def]
    desired_apps, workload_settings = None, None
    if followed is not None:
        workload_settings, desired_apps = await followed.load()
    # the contexts' exec plugins run before anything is watched: one that is missing or fails
    # stops the command with its error (later refreshes that fail are reported per cluster)
    clients = PreparedClients()
    await clients.prepare([*endpoints, *([argocd[0]] if argocd else [])])
    fleet = FleetWatcher(
        specs,
        clients,
        sink.emit,
        settings=settings,
        on_upgrade=hook,
        desired_apps=desired_apps,
        workload_settings=workload_settings,
    )
    argocd_client = clients(argocd[0]) if argocd else None
    sink.fleet = fleet
    try:
        async with asyncio.timeout(duration):
            async with sink:
                await fleet.run(endpoints, (argocd_client, argocd[1]) if argocd_client else None)
    except TimeoutError:
        pass
    finally:
        if argocd_client is not None:
            await argocd_client.aclose()
        await clients.aclose()


class _JsonSink:
    fleet: FleetWatcher | None = None

    async def __aenter__(self) -> _JsonSink:
        return self

    async def __aexit__(self, *exc: object) -> None:
        sys.stdout.flush()

    def emit(self, event: Event) -> None:
        sys.stdout.write(json.dumps(event.to_json()) + "\n")
        sys.stdout.flush()


class _LiveSink:
    fleet: FleetWatcher | None = None

    def __init__(self, *, wide: bool = False) -> None:
        self.wide = wide  # the live view is cropped to the terminal all the same
        self.console = make_console()
        self.log: deque[Text] = deque(maxlen=12)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)

    async def __aenter__(self) -> _LiveSink:
        self.live.__enter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def emit(self, event: Event) -> None:
        data = event.to_json()
        finding = event.finding if isinstance(event, FindingEvent) else None
        self.log.append(literal(event_text(data, finding)))
        current = sorted(self.fleet.tracker.current(), key=severity_order) if self.fleet else []
        self.live.update(
            Group(
                findings_table(current, title=f"{len(current)} findings", wide=self.wide),
                Text("recent events:", style="bold"),
                *self.log,
            ),
            refresh=True,
        )
