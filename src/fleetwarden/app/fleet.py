"""Workloads across clusters: the use cases behind ``fleet versions``, ``fleet diff`` and
``gate``, over desired and observed states the caller has loaded.

- ``build_versions``: the cluster x container table of images, with Git's image and the image
  most clusters run (the ``fleet versions --format json`` document).
- ``drift_of_app``: every drift of the app per cluster (image, configuration, resources,
  replicas, dependencies), in ``scan``'s finding shape with ``layer: WORKLOAD``.
- ``gate``: the Argo CD PreSync gate's checks: would every workload of the app schedule on
  the pools it targets, and does one of those pools drift at or above the threshold.

Loading is the caller's (``adapters.workload_files`` for files, the live clients for
clusters and Argo CD); this module reads nothing and prints nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import DesiredState
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import assign_pools, severity_order
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.schedulability import GateCluster, GateResult, PlannedWorkload, decide_gate
from fleetwarden.formats.settings import Settings
from fleetwarden.formats.workloads import FleetSettings

__all__ = [
    "AppDrift",
    "GateInputs",
    "LoadedFleet",
    "build_versions",
    "by_severity",
    "drift_of_app",
    "gate",
    "gate_clusters",
    "missing_app",
    "nothing_observed",
    "planned_workloads",
    "require_app",
    "skipped_json",
    "versions_of_app",
]


def missing_app(app: str, desired: DesiredState) -> str | None:
    """Why ``app`` cannot be compared (the desired state holds nothing of it), or None."""
    if any(o.app in (None, app) for objs in desired.objects.values() for o in objs):
        return None
    found = ", ".join(sorted(desired.apps())) or "none"
    why = ""
    if desired.unreadable:  # the app may be in them: say so, not only that it is missing
        first = desired.unreadable[0]
        more = len(desired.unreadable) - 1
        why = f"; {len(desired.unreadable)} files not read, first {first.path}: {first.reason}"
        why += f" (and {more} more)" if more else ""
    return (
        f"--app {app}: the desired state holds no workload, ConfigMap, Secret or HPA of "
        f"this application (applications found: {found}){why}"
    )


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


def by_severity(findings: Sequence[Finding]) -> dict[str, int]:
    """Finding counts per severity, most severe first (every severity present)."""
    counts = {s.value: 0 for s in reversed(Severity)}
    for f in findings:
        counts[f.severity.value] += 1
    return counts


@dataclass(frozen=True, slots=True)
class AppDrift:
    """Every drift of one app across the clusters compared, most severe first."""

    app: str
    findings: list[Finding]
    clusters: int
    objects: int

    def to_json(self, skipped: list[dict[str, str]]) -> dict[str, Any]:
        """The ``fleet diff --format json`` document."""
        return {
            "app": self.app,
            "findings": [f.to_json() for f in self.findings],
            "summary": {
                "clusters": self.clusters,
                "objects": self.objects,
                "findings": len(self.findings),
                "bySeverity": by_severity(self.findings),
            },
            "skipped": skipped,
        }


def drift_of_app(
    app: str,
    desired: Mapping[str, wl.ObjectIndex],
    observed: Mapping[str, wl.ObjectIndex],
    *,
    options: wl.WorkloadOptions,
) -> AppDrift:
    """The app's desired objects against each cluster's."""
    results = wl.diff_fleet_workloads(app, desired, observed, options=options)
    findings = sorted((f for r in results for f in r.findings), key=severity_order)
    return AppDrift(app, findings, len(results), sum(r.compared for r in results))


def skipped_json(state: DesiredState) -> list[dict[str, str]]:
    """Every skipped file: those that could not be read or parsed, then the rest."""
    unreadable = {s.path for s in state.unreadable}
    rest = [s for s in state.skipped if s.path not in unreadable]
    return [s.to_json() for s in (*state.unreadable, *rest)]


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


def gate_clusters(
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
    assigned = assign_pools(specs, nodes.keys())
    by_cluster = assigned.pools
    notes.extend(f"{s.path}: {s.reason}" for s in assigned.skips)
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


def gate(
    app: str,
    state: DesiredState,
    nodes: Mapping[str, list[ObservedNode]],
    observed: Mapping[str, wl.ObjectIndex],
    fleet: FleetSettings,
    *,
    fail_on: Severity,
    options: DiffOptions,
) -> GateResult:
    """The PreSync gate's decision, with every reason and note (the pools assigned to each
    cluster, the app's planned workloads, the schedulability and drift checks)."""
    clusters, notes = gate_clusters(app, state, nodes, observed, fleet)
    result = decide_gate(app, clusters, fail_on=fail_on, options=options)
    result.notes[:0] = notes
    return result


def require_app(app: str, desired: DesiredState) -> None:
    """``ValueError`` saying why ``app`` cannot be compared (``missing_app``), if it cannot."""
    problem = missing_app(app, desired)
    if problem is not None:
        raise ValueError(problem)


def nothing_observed(state: DesiredState, observed: Mapping[str, wl.ObjectIndex]) -> str | None:
    """Why there is no cluster to compare when every observed file was skipped, or None."""
    if observed or not state.unreadable:
        return None
    first = state.unreadable[0]
    return (
        f"no cluster to compare: {len(state.unreadable)} files were skipped, "
        f"e.g. {first.path}: {first.reason}"
    )


def versions_of_app(
    app: str,
    state: DesiredState,
    desired: Mapping[str, wl.ObjectIndex],
    observed: Mapping[str, wl.ObjectIndex],
    *,
    namespace: str = "default",
    drift_only: bool = False,
) -> dict[str, Any]:
    """``fleet versions``: ``build_versions`` with the skipped files; ``drift_only``: only the
    rows that diverge from Git or from their peers (the summary still counts every row)."""
    doc = build_versions(app, desired, observed, namespace=namespace)
    if drift_only:
        doc["rows"] = [r for r in doc["rows"] if r["drift"] or r["divergesFromPeers"]]
    doc["skipped"] = skipped_json(state)
    return doc


class LoadedFleet(NamedTuple):
    """An application's desired and observed state, read for ``fleet versions | diff``."""

    app: str
    state: DesiredState
    desired: dict[str, wl.ObjectIndex]  # cluster -> the app's desired objects there
    observed: dict[str, wl.ObjectIndex]
    fleet: FleetSettings

    def versions(self, *, drift_only: bool = False) -> dict[str, Any]:
        """``fleet versions``: ``versions_of_app`` in the settings' namespace."""
        namespace = self.fleet.options.namespace
        return versions_of_app(
            self.app, self.state, self.desired, self.observed,
            namespace=namespace, drift_only=drift_only,
        )  # fmt: skip

    def drift(self) -> AppDrift:
        """``fleet diff``: ``drift_of_app`` with the settings' options."""
        return drift_of_app(self.app, self.desired, self.observed, options=self.fleet.options)


class GateInputs(NamedTuple):
    """What ``gate`` compares: the app, the settings, the desired state, each cluster's nodes
    and (optional) workloads."""

    app: str
    settings: Settings
    fleet: FleetSettings
    state: DesiredState
    nodes: dict[str, list[ObservedNode]]
    observed: dict[str, wl.ObjectIndex]

    def decide(self, fail_on: Severity) -> GateResult:
        """``gate`` over these inputs, the pools diffed with the settings' options."""
        return gate(
            self.app, self.state, self.nodes, self.observed, self.fleet,
            fail_on=fail_on, options=self.settings.diff,
        )  # fmt: skip
