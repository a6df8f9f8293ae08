"""``fleetwarden watch``: the fleet watcher (``app/watching.py``) over its clients -- the
kubeconfig contexts (exec plugins run first), Argo CD cluster Secrets and API, the audit store
of upgrade runs, the followed applications' sources -- printing to a sink
(``presenting/watching.py``: the live view or JSON lines)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetwarden.adapters import files
from fleetwarden.adapters.argocd.client import ArgoCDClient, client_from_env
from fleetwarden.adapters.kube.config import PreparedClients
from fleetwarden.adapters.watch_inputs import WatchInputs, read_watch_inputs
from fleetwarden.app.deprecating import DEFAULT_COMPONENTS, table_for, upgrade_hook
from fleetwarden.app.upgrade_drift import UpgradeInProgress
from fleetwarden.app.upgrade_scan import for_fleet
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.app.workload_watching import WorkloadWatchSettings
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.fleet import NothingToCompare, cluster_unknown
from fleetwarden.core.lifecycle import LifecycleEvent, SkipEvent
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.skips import Skip
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.audit import AuditStore, AuditStoreError
from fleetwarden.presenting.watching import JsonLines, LiveView

if TYPE_CHECKING:  # the serve stack loads only when applications are followed
    from fleetwarden.app.service_config import ServiceConfig

__all__ = ["watch"]


def watch(
    sink: JsonLines | LiveView,
    kubeconfig: Path,
    desired: Sequence[str],
    *,
    contexts: Sequence[str],
    config: Path | None,
    argocd_secrets: str | None,
    argocd_context: str | None,
    argocd_server: str | None,
    store: str | None,
    manifests: Sequence[str],
    follow: Sequence[str],
    namespaces: Sequence[str],
    allow_empty: bool,
    probe_interval: float,
    duration: float | None,
    audit_logs: Sequence[str] = (),
    on_bad_audit_line: Callable[[str], None] | None = None,
) -> int:
    """Watch until ``duration`` (or an interrupt); then the exit code: 1 when a desired
    cluster was never found among the clusters watched (said as ``cluster.not_compared``), as
    ``scan`` exits 1 on its high "no nodes were given" finding; else 0. Raises
    ``FormatError`` (an input, a followed app's desired state), ``ValueError`` (nothing to
    compare, ``--argocd-server``), ``CredentialError`` (a context's exec plugin);
    ``ValueError`` too when ``store`` is given and not readable ("--store: " and the store's
    error)."""
    inputs = read_watch_inputs(
        kubeconfig, desired, contexts=contexts, config=config,
        argocd_secrets=argocd_secrets, argocd_context=argocd_context,
        following=bool(follow), allow_empty=allow_empty, audit_logs=audit_logs,
        on_bad_audit_line=on_bad_audit_line,
    )  # fmt: skip
    try:
        return _watch(inputs, sink, config=config, argocd_server=argocd_server, store=store,
               manifests=manifests, follow=follow, namespaces=namespaces,
               probe_interval=probe_interval, duration=duration,
               allow_empty=allow_empty)  # fmt: skip
    finally:
        for log in inputs.audit_logs.values():
            log.close()


def _watch(
    inputs: WatchInputs,
    sink: JsonLines | LiveView,
    *,
    config: Path | None,
    argocd_server: str | None,
    store: str | None,
    manifests: Sequence[str],
    follow: Sequence[str],
    namespaces: Sequence[str],
    probe_interval: float,
    duration: float | None,
    allow_empty: bool = False,
) -> int:
    settings, endpoints, argocd = inputs.settings, inputs.endpoints, inputs.argocd
    followed = _followed(config, settings.raw, follow, namespaces)
    watch_settings = WatchSettings(
        probe_interval=probe_interval, options=settings.diff, capacity=True,
        audit_logs=inputs.audit_logs,
    )  # fmt: skip
    hook = upgrade_hook(
        [(m.cluster, m.path) for m in map(files.parse_path_arg, manifests)],
        sink.emit, list_files=files.list_manifests, read=files.read_manifest,
    )  # fmt: skip
    argocd_api = client_from_env(argocd_server, option="--argocd-server") if argocd_server else None
    up = _UpgradeScan(argocd_api, hook) if argocd_api is not None else hook
    from fleetwarden.wiring.service_config import default_store

    runs = _Runs(store, explicit=True) if store else _Runs(default_store(), explicit=False)
    args = (inputs.desired.pools, endpoints, argocd, watch_settings, sink, duration, up, followed)
    # what scan would list in skipped[] whatever the clusters: files not read (or defining no
    # pool), pools whose cluster is not known -- compared in no cluster, so said first
    skipped = [*inputs.desired.skipped, *cluster_unknown(inputs.desired.pools)]
    watched, unseen, idle, missing = asyncio.run(_run(*args, runs=runs, skipped=skipped))
    if watched and len(unseen) == watched:  # a watch that compared nothing is no pass
        said = "; ".join(
            f"{e.cluster} ({e.details.get('lastError') or e.details['health']})" for e in unseen
        )
        raise ValueError(f"no cluster's nodes could be listed during the watch: {said}")
    if idle is not None and inputs.desired.pools and not allow_empty:
        # the clusters came from Argo CD (the contexts are checked before the watch starts):
        # none of them had a pool to compare -- as scan, nothing compared is no pass
        raise NothingToCompare(f"no pool was compared during the watch: {idle}")
    # a desired cluster no context or Argo CD Secret named had no pool compared: scan gives it a
    # high "no nodes were given" finding (exit 1 at the default --fail-on); the watch said it
    return 1 if missing else 0


@dataclass
class _Runs:
    """Where upgrade runs are read: a store given (must open) or serve's (when it exists)."""

    url: str
    explicit: bool

    async def open(self) -> AuditStore | None:
        from fleetwarden.adapters.storage.audit_sql import open_audit_store

        try:
            return await open_audit_store(self.url, create=False, migrate=False)
        except AuditStoreError as exc:
            if self.explicit:  # the command's error, naming the option
                raise ValueError(f"--store: {exc}") from exc
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
            from fleetwarden.wiring.workloads import load_apps

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
    from fleetwarden.wiring.service_config import service_config_from

    cfg = service_config_from(doc, source=str(config or "--follow"))
    return _Followed(cfg)


async def _run(
    specs: Sequence[NodePoolSpec],
    endpoints: list[ClusterEndpoint],
    argocd: tuple[ClusterEndpoint, str] | None,
    settings: WatchSettings,
    sink: JsonLines | LiveView,
    duration: float | None,
    hook: _UpgradeScan | Callable[[str, str], Awaitable[None]] | None,
    followed: _Followed | None = None,
    *,
    runs: _Runs | None = None,
    skipped: Sequence[Skip] = (),
) -> tuple[int, list[LifecycleEvent], str | None, list[str]]:
    """Watch until ``duration``; then how many clusters were watched, the
    ``cluster.not_compared`` events of those whose nodes were never listed, when no cluster
    added had a pool to compare, why (``_none_compared``), and the desired clusters never
    found among those watched. ``skipped``: the desired state
    compared in no cluster, said (``SkipEvent``) before any cluster is added."""
    desired_apps, workload_settings = None, None
    if followed is not None:
        workload_settings, desired_apps = await followed.load()
    audit = await runs.open() if runs is not None else None
    # the contexts' exec plugins run before anything is watched: one that is missing or fails
    # stops the command with its error (later refreshes that fail are reported per cluster)
    clients = PreparedClients()
    await clients.prepare([*endpoints, *([argocd[0]] if argocd else [])])
    scan, on_upgrade = (hook, hook.then) if isinstance(hook, _UpgradeScan) else (None, hook)
    fleet = FleetWatcher(
        specs,
        clients,
        sink.emit,
        settings=settings,
        on_upgrade=on_upgrade,
        desired_apps=desired_apps,
        workload_settings=workload_settings,
    )
    if scan is not None:  # the Argo CD API's apps are scanned; --manifests runs after
        for_fleet(fleet, scan.api, table=table_for(DEFAULT_COMPONENTS), then=scan.then)
    gate, refresh = None, None
    if audit is not None:  # upgrade runs under way: their pools' drift is in progress
        gate = UpgradeInProgress(
            fleet.emit, store=audit, specs=specs, clock=fleet.clock, current=fleet.findings
        )
        fleet.emit = gate.observe
        if isinstance(sink, LiveView):
            sink.select = gate.findings
    argocd_client = clients(argocd[0]) if argocd else None
    secrets = (argocd_client, argocd[1]) if argocd_client and argocd else None
    sink.fleet = fleet
    try:
        async with asyncio.timeout(duration):
            async with sink:
                for skip in skipped:
                    sink.emit(SkipEvent(skip, fleet.clock.now()))
                if gate is not None:  # the runs under way before the first event
                    with contextlib.suppress(AuditStoreError):
                        await gate.refresh()
                    refresh = asyncio.create_task(gate.refresh_forever(), name="upgrade-runs")
                await fleet.run(endpoints, secrets)
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
    idle = None if fleet.comparing else _none_compared(fleet)
    return len(fleet.running), fleet.not_compared(), idle, list(fleet.unfound())


def _none_compared(fleet: FleetWatcher) -> str:
    """Why each cluster watched compared no pool: its first pool not compared (defined twice,
    a name not known), or that no desired pool names it."""
    said = []
    for name, running in sorted(fleet.running.items()):
        reasons = list(dict.fromkeys(s.reason for s in running.watcher.skips))
        if not reasons:
            said.append(f"{name}: no desired pool names this cluster")
            continue
        more = f" (and {len(reasons) - 1} more pools not compared)" if len(reasons) > 1 else ""
        said.append(f"{name}: {reasons[0]}{more}")
    if not said:
        return "no cluster was being watched when it ended"
    return "; ".join(said[:5]) + (f"; and {len(said) - 5} more clusters" if len(said) > 5 else "")
