"""The dashboard's views as JSON: the cluster list (``/api/clusters``), the fleet heatmap
(clusters x pools, worst severity), one pool's detail (desired facts with where each came
from, nodes, findings with actor and timeline), and the drift timeline (findings opened and
cleared over time, MTTD/MTTR per pool).

Pure: values in, JSON-ready dicts out; the entry point (``entrypoints/live_api.py``) reads the
pipeline and answers HTTP. Every value stays data: the page puts it on screen as text.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from fleetwarden.app.watching import FleetWatcher
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import assign_pools, not_found
from fleetwarden.core.nodes import ObservedNode, pool_of
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.skips import Skip

__all__ = ["SEVERITY_RANK", "cluster_list", "drift_timeline", "fleet_grid", "pool_detail"]

SEVERITY_RANK = {s.value: i for i, s in enumerate(Severity)}  # info < ... < critical

_FACTS = (
    ("instanceTypes", "instance_types"),
    ("diskSizeGiB", "disk_size_gib"),
    ("diskType", "disk_type"),
    ("minSize", "min_size"),
    ("maxSize", "max_size"),
    ("desiredSize", "desired_size"),
    ("kubernetesVersion", "kubernetes_version"),
    ("osFamily", "os_family"),
)


def _worst(findings: Iterable[Finding]) -> str | None:
    worst = max((SEVERITY_RANK[f.severity.value] for f in findings), default=None)
    return None if worst is None else list(SEVERITY_RANK)[worst]


def fleet_grid(
    clusters: Iterable[str],
    known_pools: Mapping[str, Iterable[str]],
    findings: Sequence[Finding],
    not_compared: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, Any]:
    """One row per cluster, one column per pool name seen anywhere: ``cells[i]`` is
    ``[worst severity or "ok", findings]``, or None where the cluster has no such pool.
    Findings without a pool (cluster-wide) are in the column ``"(cluster)"``. A pool of
    ``not_compared`` (cluster -> pool names: defined twice there, a name not known, of a
    cluster not found) without a finding is ``["notCompared", 0]``: nothing was compared, so
    it is not "ok"; a row all of whose pools are so is ``worst: "notCompared"``."""
    unseen = {(c, p) for c, pools in (not_compared or {}).items() for p in pools}
    by_cell: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        by_cell[(f.cluster, f.pool or "(cluster)")].append(f)
    pools_of: dict[str, set[str]] = {c: set(p) for c, p in known_pools.items()}
    for cluster, pool in by_cell:
        pools_of.setdefault(cluster, set()).add(pool)
    names = sorted({*clusters, *pools_of})
    columns = sorted({p for ps in pools_of.values() for p in ps})
    rows = []
    for cluster in names:
        have = pools_of.get(cluster, set())
        cells: list[list[Any] | None] = []
        for pool in columns:
            if pool not in have:
                cells.append(None)
                continue
            found = by_cell.get((cluster, pool), [])
            none = "notCompared" if (cluster, pool) in unseen else "ok"
            cells.append([_worst(found) or none, len(found)])
        # a cluster none of whose pools was compared (one the service has no access to) is
        # not "ok" either
        none = "notCompared" if have and all((cluster, p) in unseen for p in have) else "ok"
        rows.append({"cluster": cluster, "worst": _worst(
            f for p in have for f in by_cell.get((cluster, p), [])
        ) or none, "cells": cells})  # fmt: skip
    return {"pools": columns, "rows": rows}


def _spec_facts(spec: NodePoolSpec) -> list[dict[str, Any]]:
    facts: list[dict[str, Any]] = []
    for name, attr in _FACTS:
        value = getattr(spec, attr)
        if value in (None, (), ""):
            continue
        shown = list(value) if isinstance(value, tuple) else value
        facts.append({"fact": name, "value": shown, "from": spec.origin_of(name)})
    for key, value in sorted(spec.labels.items()):
        fact = f"labels.{key}"
        facts.append({"fact": fact, "value": value, "from": spec.origin_of(fact)})
    for taint in spec.taints:
        fact = f"taints.{taint.field_name}"
        shown = f"{taint.key}={taint.value or ''}:{taint.effect}"
        facts.append({"fact": fact, "value": shown, "from": spec.origin_of(fact)})
    return facts


def pool_detail(
    cluster: str,
    pool: str,
    specs: Sequence[NodePoolSpec],
    nodes: Sequence[ObservedNode] | None,
    findings: Sequence[Finding],
    events: Iterable[Mapping[str, Any]],
    not_compared: Iterable[Skip] | None = None,
) -> dict[str, Any]:
    """What an SRE looks at for one pool: desired facts and where each came from, the pool's
    nodes, its findings by layer (with actor and timeline), and its recent finding events.
    A pool not compared (defined twice in its cluster, a name not known: ``assign_pools``; of
    a cluster the service has no access to: ``not_compared``, the cluster's entries of
    ``Serving.pools_not_compared``, which gives those too) has ``desired`` None and
    ``skipped``: scan's ``skipped[]`` entries that say why."""
    mine_specs = [s for s in specs if s.cluster == cluster]
    if not_compared is None:
        not_compared = assign_pools(mine_specs, [cluster]).skips
    skipped = [s for s in not_compared if s.pool == pool]
    spec = next((s for s in mine_specs if s.name == pool), None) if not skipped else None
    mine = [f for f in findings if f.cluster == cluster and (f.pool or "(cluster)") == pool]
    members = [n for n in nodes or () if pool_of(n) == pool]
    by_layer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in mine:
        by_layer[f.layer.value].append(f.to_json())
    history = [
        e
        for e in events
        if isinstance(e.get("finding"), Mapping)
        and e["finding"].get("cluster") == cluster
        and (e["finding"].get("pool") or "(cluster)") == pool
    ]
    return {
        "cluster": cluster,
        "pool": pool,
        "worst": _worst(mine) or "ok",
        "desired": None
        if spec is None
        else {"source": spec.source, "format": spec.source_format, "facts": _spec_facts(spec)},
        "nodes": [
            {
                "name": n.name,
                "instanceType": n.instance_type,
                "kubelet": n.kubelet_version,
                "unschedulable": n.unschedulable,
                "drifting": sum(1 for f in mine if n.name in f.nodes),
            }
            for n in sorted(members, key=lambda n: n.name)
        ],
        "layers": dict(sorted(by_layer.items())),
        "events": history[-50:][::-1],
        "skipped": [s.to_json() for s in skipped],
    }


def _at(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def drift_timeline(
    events: Iterable[Mapping[str, Any]], *, now: datetime, window: timedelta, buckets: int = 30
) -> dict[str, Any]:
    """Finding events of the last ``window`` (``finding.appeared``/``cleared`` as
    ``Serving.events`` keeps them) in ``buckets`` equal slices: how many opened and cleared;
    and per pool the mean time to detect (detectedAt - startedAt) and to restore (cleared -
    startedAt, else cleared - detectedAt) in seconds, None where nothing was measured. Where
    the watcher stamped no ``startedAt``, the time of the change event the finding was
    attributed to (``cause.time``) is the start."""
    start = now - window
    step = window / buckets
    opened, cleared = [0] * buckets, [0] * buckets
    detect: dict[str, list[float]] = defaultdict(list)
    restore: dict[str, list[float]] = defaultdict(list)
    counts: Counter[str] = Counter()
    for ev in events:
        kind, finding, at = ev.get("type"), ev.get("finding"), _at(ev.get("at"))
        if at is None or not isinstance(finding, Mapping) or not start <= at <= now:
            continue
        key = f"{finding.get('cluster')}/{finding.get('pool') or '(cluster)'}"
        slot = min(buckets - 1, int((at - start) / step))
        cause = finding.get("cause")
        cause_at = _at(cause.get("time")) if isinstance(cause, Mapping) else None
        started = _at(finding.get("startedAt")) or cause_at  # the change, else its event
        detected = _at(finding.get("detectedAt")) or at
        if kind == "finding.appeared":
            opened[slot] += 1
            counts[key] += 1
            if started is not None:
                detect[key].append(max(0.0, (detected - started).total_seconds()))
        elif kind == "finding.cleared":
            cleared[slot] += 1
            since = started or _at(finding.get("detectedAt"))
            if since is not None:
                restore[key].append(max(0.0, (at - since).total_seconds()))

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 3) if values else None

    pools = sorted({*counts, *detect, *restore})
    return {
        "from": start.isoformat().replace("+00:00", "Z"),
        "to": now.isoformat().replace("+00:00", "Z"),
        "bucketSeconds": step.total_seconds(),
        "opened": opened,
        "cleared": cleared,
        "pools": [
            {
                "pool": key,
                "opened": counts[key],
                "mttdSeconds": mean(detect[key]),
                "mttrSeconds": mean(restore[key]),
            }
            for key in pools
        ],
    }


def _cluster_row(name: str, source: str, **known: Any) -> dict[str, Any]:
    """A cluster's row; what is not ``known`` of it is null."""
    empty = dict.fromkeys(("health", "version", "nodes", "synced", "workloadObjects"))
    return {"cluster": name, "source": source, **empty, **known}


def cluster_list(
    fleet: FleetWatcher,
    snapshot: Mapping[str, Sequence[ObservedNode]],
    findings: Sequence[Finding],
    owners: Mapping[str, str | None],
) -> list[dict[str, Any]]:
    """One row per cluster known to the service, by name, with its current finding count:
    live ones (health, version, node count, cached workload objects, synced), those known
    only from node dumps or from events, the desired clusters the service has no access to
    (``source: "not found"``, ``notCompared``: why), and -- with sharding (``owners``: which replica
    watches each cluster) -- those another replica watches, each with its ``owner``."""
    per_cluster = Counter(f.cluster for f in findings)
    rows: dict[str, dict[str, Any]] = {}
    for name in sorted(fleet.running):
        watcher = fleet.watcher(name)
        if watcher is None:
            continue
        workloads = watcher.workloads
        rows[name] = _cluster_row(
            name,
            watcher.endpoint.source.value,
            health=watcher.health.state.value,
            version=watcher.health.version,
            nodes=len(watcher.nodes) if watcher.synced.is_set() else None,
            synced=watcher.synced.is_set() and (workloads is None or workloads.synced.is_set()),
            workloadObjects=len(workloads.index) if workloads is not None else None,
        )
    for name, nodes in sorted(snapshot.items()):
        rows.setdefault(name, _cluster_row(name, "node dump", nodes=len(nodes)))
    for name in per_cluster:  # findings of a cluster no longer watched (e.g. from events)
        rows.setdefault(name, _cluster_row(name, "events"))
    for name, pools in fleet.unfound().items():  # desired, no access: never compared
        reason = not_found(name, pools, fleet.found)["reason"]
        rows.setdefault(name, _cluster_row(name, "not found", notCompared=reason))
    out = [{**rows[name], "findings": per_cluster.get(name, 0)} for name in sorted(rows)]
    if owners:  # a cluster another replica watches (sharding): known here by name only
        out += [
            {**_cluster_row(name, "another replica"), "findings": 0}
            for name in owners
            if name not in rows
        ]
        out.sort(key=lambda row: str(row["cluster"]))
        for row in out:
            row["owner"] = owners.get(str(row["cluster"]))
    return out
