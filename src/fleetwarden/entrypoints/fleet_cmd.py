"""``fleetwarden fleet versions | diff`` and ``fleetwarden gate``: workloads across clusters.

- ``fleet versions --app NAME``: the cluster x container table of images, with Git's image and
  the image most clusters run, so a cluster that diverges from Git or from its peers stands out.
- ``fleet diff --app NAME``: every drift of the app per cluster (image, configuration,
  resources, replicas, dependencies), in ``scan``'s finding shape with ``layer: WORKLOAD``.
- ``gate --app NAME``: the Argo CD PreSync gate. Exit 1 (with the reasons) when a workload of
  the app would not schedule on the pools it targets, or when one of those pools drifts at or
  above ``--fail-on``; exit 0 otherwise. ``deploy/argocd/presync-gate-job.yaml`` runs it.

Exit codes as everywhere: 0 clean, 1 drift (or a blocked gate), 2 bad arguments or input.

Unreadable files: for ``fleet versions`` and ``fleet diff``, a file found in a ``--desired`` or
``--workloads`` directory that cannot be read or parsed is listed under ``skipped`` (JSON) and
in a "skipped N files" section (table), and the rest is compared; a cluster whose dump was
skipped is left out of the comparison, not compared on half its objects. A path named on the
command line that is missing or unreadable, or a file named directly that does not parse,
exits 2. The gate is strict: a PreSync gate that let a sync through past a file it could not
read would be silence meaning "pass".

Sources are files today (``kubectl get -o json`` dumps, rendered manifests); the live Argo CD
source plugs in through ``formats.workloads.parse_argocd_manifests`` and the watchers' cache
through ``core.workloads.ObjectIndex``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from fleetwarden.adapters import files
from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import (
    http_client_factory,
    in_cluster_endpoint,
    load_kubeconfig,
)
from fleetwarden.adapters.workload_sources import (
    app_from_argocd,
    list_nodes,
    list_workloads,
    parse_argo_ref,
)
from fleetwarden.core import workloads as wl
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.desired_apps import AppDesired
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import Skip, assign_pools, severity_order
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.schedulability import GateCluster, GateResult, PlannedWorkload, decide_gate
from fleetwarden.entrypoints.common import err_console, fail
from fleetwarden.entrypoints.rendering import (
    SEVERITY_STYLE,
    cell_text,
    dumps,
    line,
    literal,
    make_console,
    print_skipped,
)
from fleetwarden.entrypoints.settings import Settings, load_settings
from fleetwarden.formats.desired import YAML_SUFFIXES, SourceFile, read_desired
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.workloads import (
    DesiredWorkloads,
    FleetSettings,
    fleet_settings,
    parse_workload_dump,
    read_desired_workloads,
)
from fleetwarden.ports.argocd import ArgoError
from fleetwarden.ports.kube import CredentialError, KubeError

__all__ = [
    "DesiredState",
    "build_versions",
    "gate_command",
    "load_desired_state",
    "load_observed",
    "planned_workloads",
    "register",
    "workload_sources",
]

T = TypeVar("T")
MATRIX_MAX_CONTAINERS = 8  # beyond this, one row per cluster and container reads better


class _Format(StrEnum):
    table = "table"
    json = "json"


class _FailOn(StrEnum):
    info = "info"
    low = "low"
    medium = "medium"
    high = "high"
    critical = "critical"


AppOpt = Annotated[
    str,
    typer.Option(
        "--app",
        "-a",
        metavar="NAME",
        help="The Argo CD application: objects carrying its tracking annotation or "
        "app.kubernetes.io/instance label (or fleet.appLabel), plus the desired objects.",
    ),
]
DesiredOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--desired",
        "-d",
        metavar="[CLUSTER=]PATH",
        help="Desired manifests: plain YAML, `kustomize build` or `helm template` output, or "
        "a saved Argo CD /manifests response; a file or a directory (recursive). CLUSTER= "
        "makes them that cluster's overlay. Repeat.",
    ),
]
WorkloadsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--workloads",
        "-w",
        metavar="[CLUSTER=]PATH",
        help="`kubectl get deploy,sts,ds,cm,secret,hpa -A -o json` output, a file or a "
        "directory of them; the cluster is CLUSTER= or the file's stem. Repeat.",
    ),
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        "-k",
        metavar="FILE",
        help="Read the live clusters instead of (or besides) dumps: one per context (all, or "
        "--context). Needs get/list on the six kinds; Secret values are hashed on arrival.",
    ),
]
ContextOpt = Annotated[
    list[str] | None,
    typer.Option("--context", metavar="NAME", help="Only these kubeconfig contexts (repeat)."),
]
NamespaceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--namespace",
        metavar="NS",
        help="With --kubeconfig: list only these namespaces (repeat; default: all).",
    ),
]
ArgoAppOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--argocd-app",
        metavar="[CLUSTER=]APPLICATION",
        help="Desired manifests from Argo CD: what it renders for the application's target "
        "revision (GET /api/v1/applications/NAME/manifests). CLUSTER= makes them that "
        "cluster's overlay (an ApplicationSet's per-cluster application). Repeat.",
    ),
]
ArgoServerOpt = Annotated[
    str | None,
    typer.Option(
        "--argocd-server",
        metavar="URL",
        envvar="ARGOCD_SERVER",
        help="Argo CD API server URL (env ARGOCD_SERVER). The token is read from the "
        "environment variable ARGOCD_AUTH_TOKEN, never from the command line.",
    ),
]
ArgoInsecureOpt = Annotated[
    bool,
    typer.Option("--argocd-insecure", help="Do not verify Argo CD's TLS certificate."),
]
RevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--revision", metavar="REV", help="With --argocd-app: render this revision instead."
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="YAML config: `fleet:` (appLabel, namespace, ignoreDifferences in Argo CD's "
        "format, severities, ignore) and `scan:` (pool diff options, for the gate).",
    ),
]
FormatOpt = Annotated[
    _Format, typer.Option("--format", "-o", help="table for people, json for machines.")
]
FailOnOpt = Annotated[
    _FailOn, typer.Option("--fail-on", help="Exit 1 when a finding is at or above this severity.")
]


# =========================================================================== loading


@dataclass(slots=True)
class DesiredState:
    """Desired objects (all clusters: key None; a cluster's overlay: its name), pools, skips."""

    objects: dict[str | None, list[wl.ManifestObject]] = field(default_factory=dict)
    pools: list[NodePoolSpec] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # see AppDesired
    # files that could not be read or parsed (also in skipped): always shown
    unreadable: list[Skip] = field(default_factory=list)

    def add(self, app: AppDesired) -> None:
        for cluster, objs in app.objects.items():
            self.objects.setdefault(cluster, []).extend(objs)
        for cluster, names in app.aliases.items():
            self.aliases[cluster] = (*self.aliases.get(cluster, ()), *names)

    def apply_aliases(self, app: str, observed: Mapping[str, wl.ObjectIndex]) -> None:
        """In a cluster whose overlay is another Argo CD application, objects labelled for
        that application are the app's."""
        for cluster, index in observed.items():
            index.set_aliases(app, self.aliases.get(cluster, ()))

    def names(self) -> set[tuple[str, str]]:
        return {(o.key.kind, o.key.name) for objs in self.objects.values() for o in objs}

    def apps(self) -> set[str]:
        return {o.app for objs in self.objects.values() for o in objs if o.app}

    def indexes(self, clusters: Iterable[str]) -> dict[str, wl.ObjectIndex]:
        """One desired index per cluster; clusters without an overlay share one (its models
        are then built once for the whole fleet)."""
        base = wl.ObjectIndex(self.objects.get(None, ()))
        out: dict[str, wl.ObjectIndex] = {}
        for cluster in clusters:
            overlay = self.objects.get(cluster)
            if not overlay:
                out[cluster] = base
                continue
            merged = wl.ObjectIndex(base.objects.values())
            for obj in overlay:
                merged.put(obj)
            out[cluster] = merged
        return out


def _read_workload_files(
    root: Path, *, app_label: str | None, limit: int, unreadable: list[Skip]
) -> DesiredWorkloads:
    """``read_desired_workloads`` file by file: a file found in the directory that cannot be
    read or parsed goes to ``unreadable``; ``root`` named as a file must parse."""
    out = DesiredWorkloads()
    for f, data in files.read_tree(root, YAML_SUFFIXES, limit=limit, skipped=unreadable):
        try:
            got = read_desired_workloads([SourceFile(str(f.path), data)], app_label=app_label)
        except FormatError as exc:
            if f.named:
                raise
            unreadable.append(files.skip_of(exc))
            continue
        out.objects.extend(got.objects)
        out.skipped.extend(got.skipped)
        out.unparsed.extend(got.unparsed)
        out.files += got.files
    return out


def load_desired_state(
    args: Sequence[files.PathArg],
    *,
    app_label: str | None,
    with_pools: bool = False,
    limit: int = files.DEFAULT_DESIRED_LIMIT,
) -> DesiredState:
    """The desired objects (and, ``with_pools``, node pools) of every ``--desired`` path.
    Without pools, files that do not parse are skipped (``unreadable``); with pools (the
    gate) every file must read and parse."""
    out = DesiredState()
    for arg in args:
        if with_pools:
            sources = [
                SourceFile(str(p), files.read_limited(p, limit))
                for p in files.iter_tree(arg.path, (*YAML_SUFFIXES, ".tf"))
            ]
            got = read_desired_workloads(sources, app_label=app_label)
        else:
            got = _read_workload_files(
                arg.path, app_label=app_label, limit=limit, unreadable=out.unreadable
            )
            out.unreadable.extend(got.unparsed)
        out.objects.setdefault(arg.cluster, []).extend(got.objects)
        skipped = {s.path: s for s in got.skipped}
        if with_pools:
            pools = read_desired(sources, cluster=arg.cluster)
            out.pools.extend(pools.pools)
            has_pools = {p.source for p in pools.pools}
            skipped = {p: s for p, s in skipped.items() if p not in has_pools}
            if skipped:
                pool_notes = {s.path: s.reason for s in pools.skipped}
                skipped = {
                    p: Skip(p, f"{s.reason}; {pool_notes[p]}") if p in pool_notes else s
                    for p, s in skipped.items()
                }
        out.skipped.extend(skipped.values())
    return out


def workload_sources(
    args: Sequence[files.PathArg], *, skipped: list[Skip] | None = None
) -> dict[str, list[files.TreeFile]]:
    """Dump files per cluster; the cluster is ``CLUSTER=`` or the file's stem. With
    ``skipped``, what cannot be listed below a directory is skipped, else it raises."""
    out: dict[str, list[files.TreeFile]] = {}
    for arg in args:
        for f in files.walk_tree(arg.path, YAML_SUFFIXES, skipped=skipped):
            out.setdefault(arg.cluster or f.path.stem, []).append(f)
    return out


def load_observed(
    sources: Mapping[str, Sequence[files.TreeFile]],
    *,
    app: str,
    desired_names: set[tuple[str, str]],
    app_label: str | None,
    limit: int = files.DEFAULT_NODES_LIMIT,
    aliases: Iterable[str] = (),
    skipped: list[Skip] | None = None,
) -> dict[str, wl.ObjectIndex]:
    """Each cluster's objects that concern ``app``: labelled for it (or for one of its
    ``aliases``), named like a desired object, or an HPA (it may own a desired workload's
    replicas).

    With ``skipped``, a dump found in a directory that cannot be read or parsed is skipped
    and its cluster is left out (half a cluster's objects would show the rest as missing);
    a dump named directly must parse. Without it, every dump must."""
    names = {app, *aliases}

    def want(key: wl.ObjectKey, obj_app: str | None) -> bool:
        return (
            obj_app in names
            or (key.kind, key.name) in desired_names
            or key.kind == wl.AUTOSCALER_KIND
        )

    out: dict[str, wl.ObjectIndex] = {}
    for cluster, dumps_ in sources.items():
        index = wl.ObjectIndex(app_label=app_label)
        lost: list[Skip] = []
        for f in dumps_:
            try:
                data = files.read_limited(f.path, limit)
                found = parse_workload_dump(str(f.path), data, app_label=app_label, want=want)
            except FormatError as exc:
                if skipped is None or f.named:
                    raise
                lost.append(files.skip_of(exc))
                continue
            for obj in found:
                index.put(obj)
        if lost and skipped is not None:
            note = f"cluster {cluster} not compared"
            skipped.extend(Skip(s.path, f"{s.reason} ({note})") for s in lost)
            continue
        out[cluster] = index
    return out


def _live(
    kubeconfig: Path | None,
    contexts: list[str] | None,
    namespaces: list[str] | None,
    argocd_apps: list[str] | None,
    argocd_server: str | None,
    argocd_insecure: bool,
    revision: str | None,
) -> LiveSources:
    return LiveSources(
        kubeconfig=kubeconfig,
        contexts=tuple(contexts or ()),
        namespaces=tuple(namespaces or ()),
        argocd_apps=tuple(argocd_apps or ()),
        argocd_server=argocd_server,
        argocd_insecure=argocd_insecure,
        revision=revision,
    )


def _settings(config: Path | None) -> tuple[Settings, FleetSettings]:
    try:
        settings = load_settings(config)
        raw = settings.raw.get("fleet")
        if raw is not None and not isinstance(raw, Mapping):
            raise FormatError(str(config), "expected a mapping", field="fleet")
        return settings, fleet_settings(raw, source=str(config))
    except FormatError as exc:
        fail(str(exc))


def _check_app(app: str, desired: DesiredState) -> None:
    if not any(o.app in (None, app) for objs in desired.objects.values() for o in objs):
        found = ", ".join(sorted(desired.apps())) or "none"
        fail(
            f"--app {app}: the desired state holds no workload, ConfigMap, Secret or HPA of "
            f"this application (applications found: {found})"
        )


@dataclass(frozen=True, slots=True)
class LiveSources:
    """The live sources of a command: clusters from a kubeconfig, desired from Argo CD."""

    kubeconfig: Path | None = None
    contexts: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    argocd_apps: tuple[str, ...] = ()
    argocd_server: str | None = None
    argocd_insecure: bool = False
    revision: str | None = None


ARGOCD_TOKEN_ENV = "ARGOCD_AUTH_TOKEN"  # the argocd CLI's own variable


def argocd_client(server: str | None, *, insecure: bool = False) -> ArgoCDClient:
    """An Argo CD client from --argocd-server and ARGOCD_AUTH_TOKEN (never a flag: command
    lines end up in shell history and ``ps``)."""
    if not server:
        fail("--argocd-app needs --argocd-server URL (or ARGOCD_SERVER)")
    token = os.environ.get(ARGOCD_TOKEN_ENV, "").strip()
    if not token:
        fail(f"--argocd-app needs an Argo CD API token in the variable {ARGOCD_TOKEN_ENV}")
    if "://" not in server:
        server = f"https://{server}"  # the argocd CLI's ARGOCD_SERVER is a bare host:port
    try:
        return ArgoCDClient(server, token=token, verify=not insecure, retries=2)
    except (ArgoError, ValueError) as exc:
        fail(f"--argocd-server {server}: {exc}")


async def fetch_argocd_desired(app: str, live: LiveSources, *, app_label: str | None) -> AppDesired:
    refs = [parse_argo_ref(r) for r in live.argocd_apps]
    async with argocd_client(live.argocd_server, insecure=live.argocd_insecure) as client:
        return await app_from_argocd(app, client, refs, app_label=app_label, revision=live.revision)


def _endpoints(live: LiveSources) -> list[ClusterEndpoint]:
    if live.kubeconfig is None:
        return []
    endpoints = load_kubeconfig(live.kubeconfig.expanduser(), contexts=live.contexts)
    if not endpoints:
        raise FormatError(str(live.kubeconfig), "no context to read")
    return endpoints


LIVE_CONCURRENCY = 32  # clusters read at once: kind to API servers and to this machine


async def _gather_live(
    endpoints: Sequence[ClusterEndpoint], read: Callable[[KubeClient], Awaitable[T]]
) -> dict[str, T]:
    """``read`` on every cluster, ``LIVE_CONCURRENCY`` at a time, with a progress bar on a
    terminal when there are several; the first failure names its cluster."""
    gate = asyncio.Semaphore(LIVE_CONCURRENCY)
    show = err_console.is_terminal and len(endpoints) > 1
    with Progress(
        TextColumn("reading live clusters"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=not show,
    ) as bar:
        task = bar.add_task("read", total=len(endpoints))

        async def one(endpoint: ClusterEndpoint) -> tuple[str, T]:
            async with gate:
                try:
                    client = http_client_factory(endpoint)
                except KubeError as exc:
                    raise FormatError(endpoint.name, str(exc)) from None
                async with client:
                    # an exec plugin runs first: if it fails, its own error is the message
                    await client.authenticate()
                    result = await read(client)
                bar.advance(task)
                return endpoint.name, result

        return dict(await asyncio.gather(*(one(e) for e in endpoints)))


def load_live_workloads(live: LiveSources, *, app_label: str | None) -> dict[str, wl.ObjectIndex]:
    """Each kubeconfig cluster's workloads now (all namespaces, or --namespace)."""
    endpoints = _endpoints(live)
    if not endpoints:
        return {}
    return asyncio.run(
        _gather_live(
            endpoints,
            lambda c: list_workloads(c, namespaces=live.namespaces, app_label=app_label),
        )
    )


async def _read_gate_live(
    endpoints: Sequence[ClusterEndpoint], live: LiveSources, fleet: FleetSettings
) -> tuple[dict[str, list[ObservedNode]], dict[str, wl.ObjectIndex]]:
    """Nodes, workloads and HPAs of each live cluster: all the gate reads (never a Secret
    or a ConfigMap, so its RBAC need not grant them)."""

    async def read(client: KubeClient) -> tuple[list[ObservedNode], wl.ObjectIndex]:
        found = await list_workloads(
            client,
            namespaces=live.namespaces,
            kinds=wl.WORKLOAD_KINDS | {wl.AUTOSCALER_KIND},
            app_label=fleet.app_label,
        )
        return await list_nodes(client), found

    got = await _gather_live(endpoints, read)
    return {c: n for c, (n, _) in got.items()}, {c: w for c, (_, w) in got.items()}


def _load_fleet(
    app: str,
    desired: list[str] | None,
    workloads: list[str] | None,
    config: Path | None,
    live: LiveSources = LiveSources(),
) -> tuple[DesiredState, dict[str, wl.ObjectIndex], dict[str, wl.ObjectIndex], FleetSettings]:
    settings, fleet = _settings(config)
    if not desired and not live.argocd_apps:
        fail("no desired state: give --desired PATH or --argocd-app APPLICATION")
    if not workloads and live.kubeconfig is None:
        fail("no observed state: give --workloads PATH (dumps) or --kubeconfig FILE (live)")
    try:
        desired_args = [files.parse_path_arg(a) for a in desired or ()]
        workload_args = [files.parse_path_arg(a) for a in workloads or ()]
        state = load_desired_state(
            desired_args, app_label=fleet.app_label, limit=settings.desired_file_limit
        )
        if live.argocd_apps:
            state.add(asyncio.run(fetch_argocd_desired(app, live, app_label=fleet.app_label)))
        _check_app(app, state)
        observed = load_observed(
            workload_sources(workload_args, skipped=state.unreadable),
            app=app,
            desired_names=state.names(),
            app_label=fleet.app_label,
            limit=settings.nodes_file_limit,
            aliases=[n for names in state.aliases.values() for n in names],
            skipped=state.unreadable,
        )
        observed.update(load_live_workloads(live, app_label=fleet.app_label))
        state.apply_aliases(app, observed)
    except FormatError as exc:
        fail(str(exc))
    except CredentialError as exc:  # a context's exec plugin is missing or failed
        fail(exc.reason)  # fail() prints it literally
    if not observed and state.unreadable:
        first = state.unreadable[0]
        fail(
            f"no cluster to compare: {len(state.unreadable)} files were skipped, "
            f"e.g. {first.path}: {first.reason}"
        )
    return state, state.indexes(observed), observed, fleet


def _skipped_json(state: DesiredState) -> list[dict[str, str]]:
    """Every skipped file: those that could not be read or parsed, then the rest."""
    unreadable = {s.path for s in state.unreadable}
    rest = [s for s in state.skipped if s.path not in unreadable]
    return [s.to_json() for s in (*state.unreadable, *rest)]


def _print_skipped(console: Console, state: DesiredState, *, verbose: bool) -> None:
    print_skipped(console, state.unreadable, what="files (not read or not parsed)")
    if verbose:
        unreadable = {s.path for s in state.unreadable}
        for s in state.skipped:
            if s.path not in unreadable:
                console.print(line((f"skipped {s.path}: {s.reason}", "dim")), soft_wrap=True)


# =========================================================================== fleet versions


def build_versions(
    app: str,
    desired: Mapping[str, wl.ObjectIndex],
    observed: Mapping[str, wl.ObjectIndex],
    *,
    namespace: str = "default",
) -> dict[str, Any]:
    """The ``fleet versions --format json`` document."""
    rows = wl.fleet_versions(app, desired, observed, namespace=namespace)
    from_git = sorted({r.cluster for r in rows if r.drift})
    from_peers = sorted({r.cluster for r in rows if r.diverges_from_peers})
    return {
        "app": app,
        "rows": [r.to_json() for r in rows],
        "summary": {
            "clusters": len(observed),
            "containers": len({(r.kind, r.namespace, r.workload, r.container) for r in rows}),
            "rows": len(rows),
            "drift": sum(1 for r in rows if r.drift),
            "clustersDivergingFromGit": from_git,
            "clustersDivergingFromPeers": from_peers,
        },
    }


def _short(image: str | None, desired: str | None) -> str:
    if image is None:
        return "—"
    if desired and image != desired:
        want, have = wl.ImageRef.parse(desired), wl.ImageRef.parse(image)
        if want.repository == have.repository:
            tail = f":{have.tag}" if have.tag else ""
            return tail + (f"@{have.digest[:19]}" if have.digest else "")
    return image


def _style(row: Mapping[str, Any]) -> str:
    if row["drift"]:
        return "bold red"
    return "yellow" if row["divergesFromPeers"] else ""


def _print_versions(doc: Mapping[str, Any], state: DesiredState) -> None:
    console = make_console()
    rows = doc["rows"]
    columns: dict[tuple[str, str], str | None] = {}
    for r in rows:
        columns.setdefault((f"{r['kind']}/{r['workload']}", r["container"]), r["desiredImage"])
    clusters = sorted({r["cluster"] for r in rows})
    if rows and len(columns) <= MATRIX_MAX_CONTAINERS:
        table = Table(title=literal(f"images of {doc['app']}"), header_style="bold", expand=False)
        table.add_column("cluster", overflow="fold")
        for workload, container in columns:
            table.add_column(line(workload, "\n", container), overflow="fold")
        table.add_row(
            Text("Git", style="bold"), *[literal(d or "—", "dim") for d in columns.values()]
        )
        cells: dict[tuple[str, tuple[str, str]], Mapping[str, Any]] = {
            (r["cluster"], (f"{r['kind']}/{r['workload']}", r["container"])): r for r in rows
        }
        for cluster in clusters:
            row_cells = []
            for col, desired in columns.items():
                cell = cells.get((cluster, col))
                if cell is None:
                    row_cells.append(Text("—", style="dim"))
                else:
                    row_cells.append(literal(_short(cell["image"], desired), _style(cell)))
            table.add_row(literal(cluster), *row_cells)
        console.print(table)
    elif rows:
        table = Table(title=literal(f"images of {doc['app']}"), header_style="bold", expand=False)
        for name in ("cluster", "workload", "container", "image", "Git", "peers"):
            table.add_column(name, overflow="fold")
        for r in rows:
            table.add_row(
                literal(r["cluster"]),
                literal(f"{r['kind']}/{r['namespace']}/{r['workload']}"),
                literal(r["container"] + (" (init)" if r["init"] else "")),
                literal(r["image"] or "—", _style(r)),
                literal("=" if not r["drift"] else r["desiredImage"] or "—"),
                literal("=" if not r["divergesFromPeers"] else r["peerImage"] or "—"),
            )
        console.print(table)
    s = doc["summary"]
    git = ", ".join(s["clustersDivergingFromGit"]) or "none"
    peers = ", ".join(s["clustersDivergingFromPeers"]) or "none"
    console.print(
        line(
            (f"{s['containers']} containers in {s['clusters']} clusters", "bold"),
            f": {s['drift']} drift from Git (red); clusters diverging from Git: {git}; from "
            f"their peers (yellow): {peers}",
        ),
        highlight=False,
    )
    _print_skipped(console, state, verbose=False)


def versions_command(
    app: AppOpt,
    desired: DesiredOpt = None,
    workloads: WorkloadsOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    argocd_app: ArgoAppOpt = None,
    argocd_server: ArgoServerOpt = None,
    argocd_insecure: ArgoInsecureOpt = False,
    revision: RevisionOpt = None,
    config: ConfigOpt = None,
    output: FormatOpt = _Format.table,
    fail_on: FailOnOpt = _FailOn.high,
    drift_only: Annotated[
        bool,
        typer.Option(
            "--drift-only",
            help="Only rows that diverge from Git or from their peers (the summary still "
            "counts every row).",
        ),
    ] = False,
) -> None:
    """Which image of the app runs in every cluster: a cluster x container table, marking
    each cluster that diverges from Git and from its peers. Image drift is high: exit 1
    with the default --fail-on.

    Examples:
      fleetwarden fleet versions --app shop -d rendered/ -w dumps/ --format json
      ARGOCD_AUTH_TOKEN=... fleetwarden fleet versions --app shop --argocd-app shop
        --argocd-server argocd.example.com --kubeconfig ~/.kube/fleet.yaml
    """
    live = _live(
        kubeconfig, context, namespace, argocd_app, argocd_server, argocd_insecure, revision
    )
    state, desired_idx, observed, fleet = _load_fleet(app, desired, workloads, config, live)
    doc = build_versions(app, desired_idx, observed, namespace=fleet.options.namespace)
    if drift_only:
        doc["rows"] = [r for r in doc["rows"] if r["drift"] or r["divergesFromPeers"]]
    doc["skipped"] = _skipped_json(state)
    if output is _Format.json:
        sys.stdout.write(dumps(doc) + "\n")
    else:
        _print_versions(doc, state)
    drift = doc["summary"]["drift"] > 0
    raise typer.Exit(1 if drift and Severity.HIGH.at_least(Severity(fail_on.value)) else 0)


# =========================================================================== fleet diff


def _by_severity(findings: Sequence[Finding]) -> dict[str, int]:
    counts = {s.value: 0 for s in reversed(Severity)}
    for f in findings:
        counts[f.severity.value] += 1
    return counts


def _findings_table(findings: Sequence[Finding], *, title: str | None = None) -> Table:
    table = Table(
        title=None if title is None else literal(title), header_style="bold", expand=False
    )
    for name in ("severity", "cluster", "object", "field", "expected", "actual", "note"):
        table.add_column(name, overflow="fold")
    for f in findings:
        table.add_row(
            Text(f.severity.value, style=SEVERITY_STYLE[f.severity]),
            literal(f.cluster),
            literal(f.pool or "—"),
            literal(f.field),
            literal(_cell(f.expected)),
            literal(_cell(f.actual)),
            literal(f.message),
        )
    return table


def _cell(value: object) -> str:
    return cell_text(value)


def diff_command(
    app: AppOpt,
    desired: DesiredOpt = None,
    workloads: WorkloadsOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    argocd_app: ArgoAppOpt = None,
    argocd_server: ArgoServerOpt = None,
    argocd_insecure: ArgoInsecureOpt = False,
    revision: RevisionOpt = None,
    config: ConfigOpt = None,
    output: FormatOpt = _Format.table,
    fail_on: FailOnOpt = _FailOn.high,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List skipped files.")] = False,
) -> None:
    """Every drift of the app per cluster: image (repository, tag, digest), configuration
    (ConfigMap/Secret content, env, envFrom), resources (requests, limits, replicas unless
    an HPA owns them) and dependencies (sidecars, init containers, mesh injection).

    Examples:
      fleetwarden fleet diff --app shop -d rendered/ -w prod-eu-1=eu.json -w us.json
      fleetwarden fleet diff --app shop -d rendered/ --kubeconfig ~/.kube/config --context prod
    """
    live = _live(
        kubeconfig, context, namespace, argocd_app, argocd_server, argocd_insecure, revision
    )
    state, desired_idx, observed, fleet = _load_fleet(app, desired, workloads, config, live)
    results = wl.diff_fleet_workloads(app, desired_idx, observed, options=fleet.options)
    findings = sorted((f for r in results for f in r.findings), key=severity_order)
    if output is _Format.json:
        doc = {
            "app": app,
            "findings": [f.to_json() for f in findings],
            "summary": {
                "clusters": len(results),
                "objects": sum(r.compared for r in results),
                "findings": len(findings),
                "bySeverity": _by_severity(findings),
            },
            "skipped": _skipped_json(state),
        }
        sys.stdout.write(dumps(doc) + "\n")
    else:
        console = make_console()
        if findings:
            console.print(_findings_table(findings, title=f"drift of {app}"))
        parts = [f"{n} {name}" for name, n in _by_severity(findings).items() if n]
        console.print(
            line(
                (f"{len(findings)} findings", "bold"),
                f" ({', '.join(parts) or 'none'}) for {app} in {len(results)} clusters, "
                f"{sum(r.compared for r in results)} objects compared",
            ),
            highlight=False,
        )
        _print_skipped(console, state, verbose=verbose)
    threshold = Severity(fail_on.value)
    raise typer.Exit(1 if any(f.severity.at_least(threshold) for f in findings) else 0)


# =========================================================================== gate


def _pods(
    key: wl.ObjectKey,
    model: wl.Workload,
    hpa_min: Mapping[tuple[str, str | None, str], int],
    observed: wl.ObjectIndex | None,
) -> int:
    owned = hpa_min.get((key.kind, key.namespace, key.name))
    if owned is not None:
        return owned
    if model.replicas is not None:
        return model.replicas
    if observed is not None and key in observed.objects:
        live = observed.model(key)
        if isinstance(live, wl.Workload) and live.replicas is not None:
            return live.replicas  # Git leaves replicas to the cluster: the sync keeps them
    return 1


def planned_workloads(
    app: str,
    desired: wl.ObjectIndex,
    observed: wl.ObjectIndex | None,
    *,
    namespace: str,
) -> list[PlannedWorkload]:
    """The app's desired workloads as the sync will apply them, with the pods that must fit."""
    pairs = wl.pair_objects(
        app, desired, observed or wl.ObjectIndex(), namespace=namespace, report_extra=False
    )
    hpa_min: dict[tuple[str, str | None, str], int] = {}
    for pair in pairs:
        if pair.key.kind == wl.AUTOSCALER_KIND and pair.desired is not None:
            hpa = desired.model(pair.desired)
            if isinstance(hpa, wl.Autoscaler):
                hpa_min[(hpa.target_kind, pair.key.namespace, hpa.target_name)] = hpa.min_replicas
    if observed is not None:
        for key in observed.autoscalers():
            hpa = observed.model(key)
            if isinstance(hpa, wl.Autoscaler):
                hpa_min.setdefault(
                    (hpa.target_kind, key.namespace, hpa.target_name), hpa.min_replicas
                )
    out = []
    for pair in pairs:
        if pair.key.kind not in wl.WORKLOAD_KINDS or pair.desired is None:
            continue
        model = desired.model(pair.desired)
        if isinstance(model, wl.Workload):
            pods = _pods(pair.key, model, hpa_min, observed)
            out.append(PlannedWorkload(model, pair.key.ref, pods))
    return out


def _gate_clusters(
    app: str,
    state: DesiredState,
    nodes: Mapping[str, list[ObservedNode]],
    observed: Mapping[str, wl.ObjectIndex],
    fleet: FleetSettings,
) -> tuple[list[GateCluster], list[str]]:
    notes: list[str] = []
    specs = state.pools
    if len(nodes) == 1:  # the hook's usual case: pools of an unnamed cluster are this one's
        only = next(iter(nodes))
        specs = [s if s.cluster else s.with_cluster(only) for s in specs]
    by_cluster, skips = assign_pools(specs, nodes.keys())
    notes.extend(f"{s.path}: {s.reason}" for s in skips)
    desired_idx = state.indexes(nodes)
    clusters = []
    for cluster, cluster_nodes in nodes.items():
        planned = planned_workloads(
            app, desired_idx[cluster], observed.get(cluster), namespace=fleet.options.namespace
        )
        if not planned:
            notes.append(
                f"cluster {cluster!r}: the app has no Deployment, StatefulSet or DaemonSet"
            )
        clusters.append(GateCluster(cluster, cluster_nodes, by_cluster.get(cluster, []), planned))
    return clusters, notes


def _print_gate(result: GateResult) -> None:
    console = make_console()
    if result.findings:
        # a blocking finding's message is its reason, given once below
        rows = [replace(f, message="") if f.id in result.blocking else f for f in result.findings]
        console.print(_findings_table(sorted(rows, key=severity_order)))
    for note in result.notes:
        console.print(line((f"note: {note}", "dim")), highlight=False)
    if result.blocked:
        n = len(result.reasons)
        why = f"{n} reason" if n == 1 else f"{n} reasons"
        console.print(
            line(("gate: BLOCK", "bold red"), f" sync of {result.app} ({why}):"), highlight=False
        )
        for reason in result.reasons:
            console.print(line(f"  - {reason}"), highlight=False)
    else:
        targets = sorted({t for c in result.checks for p in c.placements for t in p.targets})
        console.print(
            line(
                ("gate: PASS", "bold green"),
                f" {result.app}: every workload schedules; target pools "
                f"({', '.join(targets) or 'none'}) show no drift at or above the threshold",
            ),
            highlight=False,
        )


def gate_command(
    app: AppOpt,
    desired: DesiredOpt = None,
    nodes: Annotated[
        list[str] | None,
        typer.Option(
            "--nodes",
            "-n",
            metavar="[CLUSTER=]PATH",
            help="`kubectl get nodes -o json` of the destination cluster(s). Repeat.",
        ),
    ] = None,
    workloads: Annotated[
        list[str] | None,
        typer.Option(
            "--workloads",
            "-w",
            metavar="[CLUSTER=]PATH",
            help="Live workloads (optional): HPAs that own replicas, replicas Git leaves open.",
        ),
    ] = None,
    in_cluster: Annotated[
        str | None,
        typer.Option(
            "--in-cluster",
            metavar="CLUSTER",
            help="Read nodes and workloads live from the cluster this pod runs in (its "
            "ServiceAccount), named CLUSTER as the pool definitions name it. Instead of "
            "--nodes/--workloads (the PreSync hook's way).",
        ),
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    argocd_app: ArgoAppOpt = None,
    argocd_server: ArgoServerOpt = None,
    argocd_insecure: ArgoInsecureOpt = False,
    revision: RevisionOpt = None,
    config: ConfigOpt = None,
    output: FormatOpt = _Format.table,
    fail_on: Annotated[
        _FailOn,
        typer.Option("--fail-on", help="Block when a targeted pool drifts at or above this."),
    ] = _FailOn.high,
) -> None:
    """Argo CD PreSync gate: exit 1 (and say why) when a workload of the app would not
    schedule (nodeSelector, affinity, tolerations, requests vs allocatable) or a pool it
    targets drifts at or above --fail-on; exit 0 to let the sync go ahead.

    --desired holds the app's manifests and the desired node pools (any supported format);
    --argocd-app takes the app's manifests from Argo CD instead. Nodes and workloads come
    from dumps (--nodes, --workloads), a kubeconfig, or the pod's own cluster (--in-cluster).

    Examples:
      fleetwarden gate --app shop -d /git/shop/ -d /git/pools/ -n nodes.json
      fleetwarden gate --app shop --argocd-app shop -d /git/pools/ --in-cluster prod-eu-1
    """
    settings, fleet = _settings(config)
    live = _live(
        kubeconfig, context, namespace, argocd_app, argocd_server, argocd_insecure, revision
    )
    if not desired and not live.argocd_apps:
        fail("no desired state: give --desired PATH or --argocd-app APPLICATION")
    if not nodes and kubeconfig is None and in_cluster is None:
        fail("no nodes: give --nodes PATH, --kubeconfig FILE or --in-cluster CLUSTER")
    try:
        state = load_desired_state(
            [files.parse_path_arg(a) for a in desired or ()],
            app_label=fleet.app_label,
            with_pools=True,
            limit=settings.desired_file_limit,
        )
        if live.argocd_apps:
            state.add(asyncio.run(fetch_argocd_desired(app, live, app_label=fleet.app_label)))
        _check_app(app, state)
        node_map = files.load_nodes(
            [files.parse_path_arg(a) for a in nodes or ()], limit=settings.nodes_file_limit
        )
        observed = load_observed(
            workload_sources([files.parse_path_arg(a) for a in workloads or ()]),
            app=app,
            desired_names=state.names(),
            app_label=fleet.app_label,
            limit=settings.nodes_file_limit,
            aliases=[n for names in state.aliases.values() for n in names],
        )
        endpoints = _endpoints(live)
        if in_cluster is not None:
            endpoints.append(in_cluster_endpoint(in_cluster))
        if endpoints:
            live_nodes, live_workloads = asyncio.run(_read_gate_live(endpoints, live, fleet))
            node_map.update(live_nodes)
            observed.update(live_workloads)
        state.apply_aliases(app, observed)
        if not node_map:
            fail("--nodes: no node dump found")
    except FormatError as exc:
        fail(str(exc))
    except CredentialError as exc:  # a context's exec plugin is missing or failed
        fail(exc.reason)  # fail() prints it literally
    clusters, notes = _gate_clusters(app, state, node_map, observed, fleet)
    result = decide_gate(app, clusters, fail_on=Severity(fail_on.value), options=settings.diff)
    result.notes[:0] = notes
    if output is _Format.json:
        sys.stdout.write(dumps(result.to_json()) + "\n")
    else:
        _print_gate(result)
    if result.blocked and output is _Format.json:
        # stdout is for machines: one line for people on stderr (the table says it already)
        first = result.reasons[0] if result.reasons else ""
        more = f" (+{len(result.reasons) - 1} more)" if len(result.reasons) > 1 else ""
        err_console.print(
            line(f"fleetwarden gate: blocked sync of {app}: {first}{more}"),
            highlight=False,
            soft_wrap=True,
        )
    raise typer.Exit(1 if result.blocked else 0)


# =========================================================================== wiring


def register(app: typer.Typer) -> None:
    """Add ``fleet versions``, ``fleet diff`` and ``gate`` to the command line."""
    fleet = typer.Typer(
        name="fleet",
        help="Workloads across clusters: which image runs where, and every drift from Git.",
        no_args_is_help=True,
        rich_markup_mode=None,  # help prints literally
    )
    fleet.command("versions")(versions_command)
    fleet.command("diff")(diff_command)
    app.add_typer(fleet, name="fleet")
    app.command("gate")(gate_command)
