"""The desired side of the applications a live watcher follows, and who last wrote an object.

``DesiredApps`` holds, per application, its desired objects for every cluster (key ``None``)
and per-cluster overlays (a cluster's own rendered manifests, or its own Argo CD
application), whichever source they came from (files, Argo CD's rendered manifests). Objects
in an application's source that name no application are that application's. A watcher asks
two things of it: the desired index of (app, cluster) -- clusters without an overlay share
one index, so its models are built once for the fleet -- and which applications an observed
change can concern.

The merge of desired parts (an application's files and its Argo CD applications, or every
``--desired`` path of a command) is here too, once: ``merge_objects`` and ``merge_aliases``
concatenate per cluster, ``merge_apps`` makes one ``AppDesired`` of several, and
``overlay_index`` builds a cluster's desired index (the objects of every cluster, then the
cluster's overlay replacing same-keyed ones).

``last_writer`` reads an object's ``managedFields`` for the field manager that wrote it last
(``kubectl-set``, ``kubectl-edit``, ``argocd-controller``, ``helm``...): the "who" of a drift
seen live. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.skips import Skip
from fleetwarden.core.workloads import ManifestObject, ObjectIndex, ObjectKey

__all__ = [
    "AppDesired",
    "DesiredApps",
    "DesiredState",
    "Writer",
    "last_writer",
    "merge_aliases",
    "merge_apps",
    "merge_objects",
    "overlay_index",
]

Objects = Mapping[str | None, Sequence[ManifestObject]]  # cluster (None: all) -> objects
Aliases = Mapping[str, tuple[str, ...]]  # cluster -> other application names there


def merge_objects(parts: Iterable[Objects]) -> dict[str | None, list[ManifestObject]]:
    """Per cluster (``None``: all clusters), the objects of every part, in order."""
    out: dict[str | None, list[ManifestObject]] = {}
    for part in parts:
        for cluster, objs in part.items():
            out.setdefault(cluster, []).extend(objs)
    return out


def merge_aliases(parts: Iterable[Aliases]) -> dict[str, tuple[str, ...]]:
    """Per cluster, the application aliases of every part, in order."""
    out: dict[str, tuple[str, ...]] = {}
    for part in parts:
        for cluster, names in part.items():
            out[cluster] = (*out.get(cluster, ()), *names)
    return out


def overlay_index(objects: Objects, cluster: str | None) -> ObjectIndex:
    """The desired index of ``cluster``: every cluster's objects, then the cluster's own
    (its overlay) replacing those with the same key. ``None``: the shared index."""
    index = ObjectIndex(objects.get(None, ()))
    if cluster is not None:
        for obj in objects.get(cluster, ()):
            index.put(obj)
    return index


@dataclass(slots=True)
class AppDesired:
    """One application's desired objects: ``objects[None]`` for every cluster, and
    ``objects[cluster]`` replacing same-keyed objects in that cluster (an overlay)."""

    app: str
    objects: Mapping[str | None, Sequence[ManifestObject]]
    sources: tuple[str, ...] = ()  # where they came from, for messages
    # cluster -> the other application names the app runs under there (an ApplicationSet's
    # per-cluster Argo CD application): objects labelled so are the app's in that cluster
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    _indexes: dict[str | None, ObjectIndex] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # an object of the app's source that names no application is the app's own; one
        # that names another application is left to that application
        self.objects = {
            cluster: tuple(o for o in objs if o.app in (None, self.app))
            for cluster, objs in self.objects.items()
        }

    def index_for(self, cluster: str) -> ObjectIndex:
        key = cluster if self.objects.get(cluster) else None
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = overlay_index(self.objects, key)
        return index

    def names(self) -> set[tuple[str, str]]:
        return {(o.key.kind, o.key.name) for objs in self.objects.values() for o in objs}

    def __len__(self) -> int:
        return sum(len(objs) for objs in self.objects.values())


def merge_apps(name: str, parts: Sequence[AppDesired]) -> AppDesired:
    """One application's desired state from several parts (its files, its Argo CD
    applications): objects and aliases concatenated per cluster, sources in order."""
    return AppDesired(
        name,
        merge_objects(p.objects for p in parts),
        sources=tuple(s for p in parts for s in p.sources),
        aliases=merge_aliases(p.aliases for p in parts),
    )


@dataclass(slots=True)
class DesiredState:
    """Desired objects (all clusters: key None; a cluster's overlay: its name), pools, skips."""

    objects: dict[str | None, list[ManifestObject]] = field(default_factory=dict)
    pools: list[NodePoolSpec] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # see AppDesired
    # files that could not be read or parsed (also in skipped): always shown
    unreadable: list[Skip] = field(default_factory=list)

    def add(self, app: AppDesired) -> None:
        self.objects = merge_objects([self.objects, app.objects])
        self.aliases = merge_aliases([self.aliases, app.aliases])

    def apply_aliases(self, app: str, observed: Mapping[str, ObjectIndex]) -> None:
        """In a cluster whose overlay is another Argo CD application, objects labelled for
        that application are the app's."""
        for cluster, index in observed.items():
            index.set_aliases(app, self.aliases.get(cluster, ()))

    def names(self) -> set[tuple[str, str]]:
        return {(o.key.kind, o.key.name) for objs in self.objects.values() for o in objs}

    def apps(self) -> set[str]:
        return {o.app for objs in self.objects.values() for o in objs if o.app}

    def indexes(self, clusters: Iterable[str]) -> dict[str, ObjectIndex]:
        """One desired index per cluster; clusters without an overlay share one (its models
        are then built once for the whole fleet)."""
        base = overlay_index(self.objects, None)
        return {
            c: overlay_index(self.objects, c) if self.objects.get(c) else base for c in clusters
        }


class DesiredApps:
    """Every followed application's desired state; replaced whole when a source refreshes."""

    __slots__ = ("_by_alias", "_by_name", "apps")

    def __init__(self, apps: Iterable[AppDesired] = ()) -> None:
        self.apps: dict[str, AppDesired] = {a.app: a for a in apps}
        self._by_name: dict[tuple[str, str], set[str]] = {}
        self._by_alias: dict[str, set[str]] = {}
        for app in self.apps.values():
            for name in app.names():
                self._by_name.setdefault(name, set()).add(app.app)
            for others in app.aliases.values():
                for other in others:
                    self._by_alias.setdefault(other, set()).add(app.app)

    def __bool__(self) -> bool:
        return bool(self.apps)

    def index(self, app: str, cluster: str) -> ObjectIndex:
        return self.apps[app].index_for(cluster)

    def concerned(self, key: ObjectKey, *apps: str | None) -> set[str]:
        """The followed applications an observed change of ``key`` can concern: those it is
        labelled for (before and after the change) and those whose desired state holds an
        object of its kind and name."""
        found = {a for a in apps if a is not None and a in self.apps}
        for a in apps:
            if a is not None:
                found |= self._by_alias.get(a, set())
        found |= self._by_name.get((key.kind, key.name), set())
        return found


@dataclass(frozen=True, slots=True)
class Writer:
    """The field manager behind an object's latest write."""

    manager: str
    operation: str | None
    time: str | None

    def to_json(self) -> dict[str, Any]:
        return {"manager": self.manager, "operation": self.operation, "time": self.time}


def last_writer(obj: Mapping[str, Any]) -> Writer | None:
    """The manager of the latest ``managedFields`` entry that is not a status write (entries
    carry an RFC 3339 time of second precision; the later entry wins a tie)."""
    meta = obj.get("metadata")
    managed = meta.get("managedFields") if isinstance(meta, Mapping) else None
    if not isinstance(managed, list):
        return None
    best: Writer | None = None
    for entry in managed:
        if not isinstance(entry, Mapping) or entry.get("subresource"):
            continue
        manager, time = entry.get("manager"), entry.get("time")
        if not isinstance(manager, str) or not manager:
            continue
        time = time if isinstance(time, str) else None
        op = entry.get("operation")
        if best is None or (time or "") >= (best.time or ""):
            best = Writer(manager, op if isinstance(op, str) else None, time)
    return best
