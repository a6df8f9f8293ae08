"""Which Argo CD applications a changed object concerns, and when each may be refreshed.

Argo CD polls every application (``timeout.reconciliation``, 180 s plus jitter by default):
a live change shows as OutOfSync only at the next poll. fleetwarden hears the change first,
so it can ask Argo CD to refresh exactly the applications that own the changed object.

``owners_of`` decides who owns a touched object, in Argo CD's own order of trust:

1. **resource tree**: the object (or, for a ReplicaSet/Pod, the node itself) is a node of an
   application's last known resource tree in that cluster -- what Argo CD itself reported;
2. **tracking-id annotation** ``argocd.argoproj.io/tracking-id``
   (``<app>:<group>/<kind>:<namespace>/<name>``, ``<app>`` being ``<app-namespace>_<name>``
   outside the control-plane namespace), for applications whose tracking method reads it
   (``annotation``, ``annotation+label``). Like Argo CD, an annotation whose identity is not
   the object's own (copied onto another object) claims nothing;
3. **instance label** (``app.kubernetes.io/instance`` or the configured key), only for
   applications tracked by ``label``: under ``annotation+label`` the label is informational.

The first step that finds an owner decides; every step says why in ``Ownership.reasons``.

``RefreshScheduler`` spaces the refreshes: per application at most one per ``debounce``
seconds (the first at once, the changes during the window folded into one trailing refresh,
so the last change is always seen), and all applications together within a token bucket
(``rate`` per second, ``burst``). A hard refresh asked while a normal one waits makes the
waiting one hard. Pure: times are numbers passed in (seconds of a monotonic clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.workloads.objects import GROUPS, INSTANCE_LABEL, TRACKING_ANNOTATION

__all__ = [
    "CONTROL_NAMESPACE",
    "INSTANCE_LABEL",
    "TRACKING_ANNOTATION",
    "AppTracking",
    "Basis",
    "Claim",
    "Ownership",
    "OwnershipIndex",
    "RefreshMode",
    "RefreshScheduler",
    "ResourceKey",
    "TouchedObject",
    "TrackingMethod",
    "owners_of",
    "parse_tracking_id",
    "touched_by_event",
    "tracking_from_tree",
]

CONTROL_NAMESPACE = "argocd"


class TrackingMethod(StrEnum):
    """argocd-cm ``application.resourceTrackingMethod``."""

    ANNOTATION = "annotation"  # the default since Argo CD 3.0
    ANNOTATION_LABEL = "annotation+label"
    LABEL = "label"


class Basis(StrEnum):
    TREE = "resource-tree"
    TRACKING_ID = "tracking-id"
    INSTANCE_LABEL = "instance-label"


class RefreshMode(StrEnum):
    NORMAL = "normal"
    HARD = "hard"


@dataclass(frozen=True, slots=True, order=True)
class ResourceKey:
    """An object's identity as Argo CD writes it (``namespace`` "" when cluster-scoped)."""

    group: str
    kind: str
    namespace: str
    name: str

    def describe(self) -> str:
        gk = f"{self.group}/{self.kind}" if self.group else self.kind
        return f"{gk} {self.namespace or '-'}/{self.name}"


@dataclass(frozen=True, slots=True)
class TouchedObject:
    """What changed: an object of one cluster, with its labels and annotations."""

    cluster: str
    key: ResourceKey
    labels: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    group_known: bool = True  # False: named without its API group (a change event's detail)

    def in_tree(self, resources: frozenset[ResourceKey]) -> bool:
        key = self.key
        if key in resources:
            return True
        if self.group_known:
            return False
        return any(
            (r.kind, r.namespace, r.name) == (key.kind, key.namespace, key.name) for r in resources
        )

    @classmethod
    def from_object(cls, cluster: str, obj: Mapping[str, Any]) -> TouchedObject | None:
        """From a raw Kubernetes object (apiVersion, kind, metadata); None without a name."""
        meta = obj.get("metadata")
        kind = obj.get("kind")
        if not isinstance(meta, Mapping) or not isinstance(kind, str) or not kind:
            return None
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            return None
        api_version = obj.get("apiVersion")
        group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
        namespace = meta.get("namespace")
        return cls(
            cluster,
            ResourceKey(group, kind, namespace if isinstance(namespace, str) else "", name),
            _strings(meta.get("labels")),
            # only the tracking id: other annotations (last-applied of a Secret...) stay out
            {
                k: v
                for k, v in _strings(meta.get("annotations")).items()
                if k == TRACKING_ANNOTATION
            },
        )


@dataclass(frozen=True, slots=True)
class AppTracking:
    """One application as ownership needs it. ``cluster``: the fleet cluster its destination
    is (None: unknown, then its tree matches no cluster's objects); ``resources``: the nodes
    of its last resource tree."""

    name: str
    namespace: str = CONTROL_NAMESPACE
    cluster: str | None = None
    resources: frozenset[ResourceKey] = frozenset()
    method: TrackingMethod = TrackingMethod.ANNOTATION
    instance_label: str = INSTANCE_LABEL
    control_namespace: str = CONTROL_NAMESPACE

    @property
    def tracked_name(self) -> str:
        """The name written into labels and tracking ids (Argo CD's ``InstanceName``)."""
        if self.namespace in ("", self.control_namespace):
            return self.name
        return f"{self.namespace}_{self.name}"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Claim:
    app: AppTracking
    basis: Basis
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "application": self.app.name,
            "namespace": self.app.namespace,
            "basis": self.basis.value,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Ownership:
    """The applications that own the object (empty: none) and why, step by step."""

    claims: tuple[Claim, ...]
    reasons: tuple[str, ...]

    @property
    def apps(self) -> tuple[AppTracking, ...]:
        return tuple(c.app for c in self.claims)


def parse_tracking_id(value: str) -> tuple[str, ResourceKey] | None:
    """``<app>:<group>/<kind>:<namespace>/<name>`` -> (app, key); None when malformed."""
    app, sep, rest = value.partition(":")
    gk, sep2, nsn = rest.partition(":")
    if not (sep and sep2 and app and "/" in gk and "/" in nsn):
        return None
    group, _, kind = gk.partition("/")
    namespace, _, name = nsn.partition("/")
    if not kind or not name:
        return None
    return app, ResourceKey(group, kind, namespace, name)


def owners_of(touched: TouchedObject, apps: Iterable[AppTracking]) -> Ownership:
    """The applications owning ``touched`` (see the module docstring for the order)."""
    apps = tuple(apps)
    key = touched.key
    reasons: list[str] = []
    tree = tuple(
        Claim(a, Basis.TREE, f"{key.describe()} is in its resource tree")
        for a in apps
        if a.cluster == touched.cluster and touched.in_tree(a.resources)
    )
    if tree:
        return Ownership(tree, tuple(c.reason for c in tree))
    reasons.append(f"{key.describe()} is in no known resource tree of cluster {touched.cluster}")

    raw = touched.annotations.get(TRACKING_ANNOTATION)
    if raw is not None:
        parsed = parse_tracking_id(raw)
        if parsed is None:
            reasons.append(f"{TRACKING_ANNOTATION} {raw!r} is malformed")
        elif parsed[1] != key:
            reasons.append(
                f"{TRACKING_ANNOTATION} names {parsed[1].describe()}, not this object: copied"
            )
        else:
            by_id = tuple(
                Claim(a, Basis.TRACKING_ID, f"{TRACKING_ANNOTATION} names {a.tracked_name}")
                for a in apps
                if a.method is not TrackingMethod.LABEL
                and a.tracked_name == parsed[0]
                and a.cluster in (None, touched.cluster)
            )
            if by_id:
                return Ownership(by_id, (*reasons, *(c.reason for c in by_id)))
            reasons.append(f"no annotation-tracked application is named {parsed[0]}")

    by_label = tuple(
        Claim(a, Basis.INSTANCE_LABEL, f"label {a.instance_label}={a.tracked_name}")
        for a in apps
        if a.method is TrackingMethod.LABEL
        and touched.labels.get(a.instance_label) == a.tracked_name
        and a.cluster in (None, touched.cluster)
    )
    if by_label:
        return Ownership(by_label, (*reasons, *(c.reason for c in by_label)))
    reasons.append("no label-tracked application's instance label matches")
    return Ownership((), tuple(reasons))


class OwnershipIndex:
    """The followed applications, indexed by what can claim an object: tree nodes by
    (cluster, key), applications by tracked name. ``owners(t)`` equals ``owners_of(t, all
    apps)`` (same claims, same order) while looking only at the candidates: a change costs
    O(its owners), not O(applications). An object named without its group (a change event)
    is matched against every application. Dict-like by application name."""

    def __init__(self) -> None:
        self._apps: dict[str, AppTracking] = {}
        self._seq: dict[str, int] = {}
        self._next = 0
        self._tree: dict[tuple[str, ResourceKey], set[str]] = {}
        self._named: dict[str, set[str]] = {}
        self._label_keys: dict[str, int] = {}

    def __setitem__(self, name: str, app: AppTracking) -> None:
        if app.name != name:
            raise ValueError(f"application {app.name} filed as {name}")
        old = self._apps.get(name)
        if old is None:
            self._seq[name] = self._next
            self._next += 1
        else:
            self._unindex(name, old)
        self._apps[name] = app  # a name filed again keeps its place (values() and seq agree)
        if app.cluster is not None:
            for key in app.resources:
                self._tree.setdefault((app.cluster, key), set()).add(name)
        self._named.setdefault(app.tracked_name, set()).add(name)
        self._label_keys[app.instance_label] = self._label_keys.get(app.instance_label, 0) + 1

    def pop(self, name: str, default: AppTracking | None = None) -> AppTracking | None:
        app = self._apps.pop(name, None)
        if app is None:
            return default
        del self._seq[name]
        self._unindex(name, app)
        return app

    def _unindex(self, name: str, app: AppTracking) -> None:
        if app.cluster is not None:
            for key in app.resources:
                _drop(self._tree, (app.cluster, key), name)
        _drop(self._named, app.tracked_name, name)
        self._label_keys[app.instance_label] -= 1
        if not self._label_keys[app.instance_label]:
            del self._label_keys[app.instance_label]

    def __getitem__(self, name: str) -> AppTracking:
        return self._apps[name]

    def get(self, name: str) -> AppTracking | None:
        return self._apps.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._apps

    def __iter__(self) -> Iterator[str]:
        return iter(self._apps)

    def __len__(self) -> int:
        return len(self._apps)

    def values(self) -> Iterable[AppTracking]:
        return self._apps.values()

    def candidates(self, touched: TouchedObject) -> list[AppTracking]:
        if not touched.group_known:
            return list(self._apps.values())
        names = set(self._tree.get((touched.cluster, touched.key), ()))
        raw = touched.annotations.get(TRACKING_ANNOTATION)
        parsed = parse_tracking_id(raw) if raw is not None else None
        if parsed is not None:
            names |= self._named.get(parsed[0], set())
        for label in self._label_keys:
            value = touched.labels.get(label)
            if value is not None:
                names |= self._named.get(value, set())
        return [self._apps[n] for n in sorted(names, key=self._seq.__getitem__)]

    def owners(self, touched: TouchedObject) -> Ownership:
        return owners_of(touched, self.candidates(touched))


def _drop(index: dict[Any, set[str]], key: Any, name: str) -> None:
    names = index.get(key)
    if names is not None:
        names.discard(name)
        if not names:
            del index[key]


# the Kubernetes object a node-pool change event touches, by the pool's provisioner
NODEPOOL = ("karpenter.sh", "NodePool")


def touched_by_event(event: ChangeEvent) -> tuple[TouchedObject, ...]:
    """The objects an accepted change event names, for ownership: the object in its
    ``detail`` (``kind``/``namespace``/``name``, e.g. a Flux event's involved object; its
    group from ``apiVersion`` or the well-known kinds) and, for a node-pool change, the
    Karpenter ``NodePool`` of that name (an Argo CD app that manages it has it in its tree).
    Events carry no labels or annotations: only tree membership can claim these. None
    without a cluster."""
    if not event.cluster:
        return ()
    out: list[TouchedObject] = []
    detail = event.detail
    kind, name = detail.get("kind"), detail.get("name")
    if isinstance(kind, str) and kind and isinstance(name, str) and name:
        api_version = detail.get("apiVersion")
        known = isinstance(api_version, str) or kind in GROUPS
        group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
        namespace = detail.get("namespace")
        ns = namespace if isinstance(namespace, str) else ""
        key = ResourceKey(group if group is not None else GROUPS.get(kind, ""), kind, ns, name)
        out.append(TouchedObject(event.cluster, key, group_known=known))
    if event.pool:
        out.append(TouchedObject(event.cluster, ResourceKey(*NODEPOOL, "", event.pool)))
    return tuple(out)


def tracking_from_tree(app: AppTracking, nodes: Iterable[Mapping[str, Any]]) -> AppTracking:
    """``app`` with the nodes of a ``v1alpha1ApplicationTree`` as its resources."""
    keys = set()
    for node in nodes:
        if not isinstance(node, Mapping):
            continue
        kind, name = node.get("kind"), node.get("name")
        if isinstance(kind, str) and kind and isinstance(name, str) and name:
            keys.add(
                ResourceKey(
                    str(node.get("group") or ""), kind, str(node.get("namespace") or ""), name
                )
            )
    return AppTracking(
        app.name,
        app.namespace,
        app.cluster,
        frozenset(keys),
        app.method,
        app.instance_label,
        app.control_namespace,
    )


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


# --- spacing the refreshes ------------------------------------------------------------------

_EPS = 1e-9  # a token refilled to 0.9999999999 by float arithmetic is a token


@dataclass
class RefreshScheduler:
    """Per-application debounce and a fleet-wide token bucket (see the module docstring).

    ``request`` notes that an application needs a refresh; ``due(now)`` hands out the
    refreshes that may be sent now (and counts them as sent); ``next_at`` says when the next
    one may become due (None: nothing waits)."""

    debounce: float = 2.0
    rate: float = 5.0
    burst: int = 10
    _pending: dict[str, RefreshMode] = field(default_factory=dict)
    _since: dict[str, float] = field(default_factory=dict)  # first request while pending
    _last: dict[str, float] = field(default_factory=dict)
    _tokens: float | None = None
    _filled_at: float = 0.0

    def __post_init__(self) -> None:
        if self.debounce < 0 or self.rate <= 0 or self.burst < 1:
            raise ValueError("debounce >= 0, rate > 0 and burst >= 1 are required")

    @property
    def pending(self) -> dict[str, RefreshMode]:
        return dict(self._pending)

    def request(self, app: str, now: float, mode: RefreshMode = RefreshMode.NORMAL) -> None:
        old = self._pending.get(app)
        self._pending[app] = RefreshMode.HARD if RefreshMode.HARD in (old, mode) else mode
        self._since.setdefault(app, now)

    def due(self, now: float) -> list[tuple[str, RefreshMode]]:
        self._fill(now)
        out: list[tuple[str, RefreshMode]] = []
        # oldest request first: a busy app cannot starve the others of tokens
        for app in sorted(self._pending, key=lambda a: (self._since[a], a)):
            if self._ready_at(app) > now:
                continue
            assert self._tokens is not None
            if self._tokens < 1 - _EPS:
                break
            self._tokens = max(0.0, self._tokens - 1)
            out.append((app, self._pending.pop(app)))
            del self._since[app]
            self._last[app] = now
        return out

    def next_at(self, now: float) -> float | None:
        if not self._pending:
            return None
        self._fill(now)
        assert self._tokens is not None
        ready = min(self._ready_at(a) for a in self._pending)
        token = now if self._tokens >= 1 - _EPS else now + (1 - self._tokens) / self.rate
        return max(ready, token)

    def _ready_at(self, app: str) -> float:
        last = self._last.get(app)
        return self._since[app] if last is None else max(self._since[app], last + self.debounce)

    def _fill(self, now: float) -> None:
        if self._tokens is None:
            self._tokens, self._filled_at = float(self.burst), now
            return
        elapsed = max(0.0, now - self._filled_at)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        self._filled_at = max(self._filled_at, now)
