"""Argo CD's own objects as values: Applications, ApplicationSets, AppProjects, and a cluster.

``formats.argocd_apps`` reads them from the API server's JSON; ``core.orphans`` asks which of
them point at a cluster that is gone. What "points at" means follows Argo CD:

* an Application's ``spec.destination`` names its cluster by ``server`` (the API URL) or by
  ``name`` (the cluster Secret's ``name``), not both; URLs compare without a trailing slash;
* an ApplicationSet is known from an Application's ``ownerReferences`` (kind ``ApplicationSet``,
  group ``argoproj.io``) -- its identity discovered, never named by the user -- and, where its
  generators can be read without running them, from the clusters they name: a ``list``
  generator's elements rendered into the template's destination, a ``clusters`` generator's
  ``matchLabels`` against the cluster Secret's labels;
* an AppProject lists a cluster when an entry of ``spec.destinations`` names it exactly by
  ``server`` or ``name`` (a glob such as ``*`` allows every cluster and names none).

Pure values: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AppProject",
    "AppSetRef",
    "Application",
    "ApplicationSet",
    "ClusterRef",
    "Destination",
    "GeneratorTarget",
    "normalise_server",
]


def normalise_server(url: str) -> str:
    """A cluster URL as Argo CD compares it: without a trailing slash."""
    return url.strip().rstrip("/")


@dataclass(frozen=True, slots=True)
class ClusterRef:
    """A cluster as Argo CD knows it: its Secret's ``name`` and ``server``, and the Secret's
    labels (what a ``clusters`` generator selects on)."""

    name: str
    server: str
    labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "server", normalise_server(self.server))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "server": self.server}


@dataclass(frozen=True, slots=True)
class Destination:
    """``spec.destination``: ``server`` or ``name`` (None when absent), and the namespace."""

    server: str | None = None
    name: str | None = None
    namespace: str | None = None

    def __post_init__(self) -> None:
        if self.server is not None:
            object.__setattr__(self, "server", normalise_server(self.server))

    def targets(self, cluster: ClusterRef) -> bool:
        return (self.server is not None and self.server == cluster.server) or (
            self.name is not None and self.name == cluster.name
        )

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "name": self.name, "namespace": self.namespace}


@dataclass(frozen=True, slots=True)
class AppSetRef:
    """The ApplicationSet that owns an Application (from its ``ownerReferences``): in the
    Application's namespace, as Kubernetes owner references always are."""

    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Application:
    namespace: str
    name: str
    project: str
    destination: Destination
    sync: str | None = None  # status.sync.status: Synced | OutOfSync | Unknown
    health: str | None = None  # status.health.status: Healthy | Degraded | Missing | ...
    app_set: AppSetRef | None = None
    uid: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class GeneratorTarget:
    """A cluster one generator of an ApplicationSet names without being run.

    ``kind`` ``list``: one element rendered into the template's destination (``server`` /
    ``name``). ``kind`` ``clusters``: every registered cluster whose Secret carries all of
    ``match_labels`` (``all_clusters``: no selector at all), narrowed by the generator's own
    ``selector`` over its parameters (``post``: (key, operator, values) requirements; keys
    ``name``, ``server``, ``metadata.labels.<key>``; an operator or key it cannot evaluate
    makes it name no cluster rather than guess)."""

    kind: str
    server: str | None = None
    name: str | None = None
    match_labels: tuple[tuple[str, str], ...] = ()
    all_clusters: bool = False
    post: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.server is not None:
            object.__setattr__(self, "server", normalise_server(self.server))

    def names(self, cluster: ClusterRef) -> bool:
        if self.kind == "clusters":
            labels = dict(cluster.labels)
            selected = self.all_clusters or (
                bool(self.match_labels) and all(labels.get(k) == v for k, v in self.match_labels)
            )
            params = {"name": cluster.name, "server": cluster.server}
            params.update({f"metadata.labels.{k}": v for k, v in cluster.labels})
            return selected and all(_requirement(params, *r) for r in self.post)
        return Destination(self.server, self.name).targets(cluster)


def _requirement(params: dict[str, str], key: str, op: str, values: tuple[str, ...]) -> bool:
    """One label-selector requirement over generator parameters (unknown: False)."""
    if op == "In":
        return params.get(key) in values
    if op == "NotIn":
        return key in params and params[key] not in values
    if op == "Exists":
        return key in params
    if op == "DoesNotExist":
        return key not in params
    return False


@dataclass(frozen=True, slots=True)
class ApplicationSet:
    namespace: str
    name: str
    uid: str = ""
    targets: tuple[GeneratorTarget, ...] = ()
    # generators whose clusters cannot be known without running them (git, scm, matrix, ...)
    unreadable: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class AppProject:
    namespace: str
    name: str
    # spec.destinations entries: (server, name, namespace), globs kept as written
    destinations: tuple[Destination, ...] = field(default=())

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def lists(self, cluster: ClusterRef) -> bool:
        """An entry naming the cluster exactly: a glob allows clusters, it does not list one."""
        return any(
            (_exact(d.server) and d.server == cluster.server)
            or (_exact(d.name) and d.name == cluster.name)
            for d in self.destinations
        )


def _exact(value: str | None) -> bool:
    return value is not None and value != "" and not any(c in value for c in "*?[!")
