"""Raw Kubernetes objects: the kinds compared, an object's key, the app that owns it,
and the tolerant readers of raw maps every step shares. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeGuard

from fleetwarden.core.subjects import WorkloadRef

__all__ = [
    "AUTOSCALER_KIND",
    "CONFIG_KINDS",
    "GROUPS",
    "INSTANCE_LABEL",
    "KINDS",
    "LAST_APPLIED",
    "TRACKING_ANNOTATION",
    "WORKLOAD_KINDS",
    "ObjectKey",
    "app_of",
    "key_of",
]

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})
CONFIG_KINDS = frozenset({"ConfigMap", "Secret"})
AUTOSCALER_KIND = "HorizontalPodAutoscaler"
KINDS = WORKLOAD_KINDS | CONFIG_KINDS | {AUTOSCALER_KIND}
GROUPS = {
    "Deployment": "apps",
    "StatefulSet": "apps",
    "DaemonSet": "apps",
    "ConfigMap": "",
    "Secret": "",
    AUTOSCALER_KIND: "autoscaling",
}

TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
INSTANCE_LABEL = "app.kubernetes.io/instance"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


_new_tuple = tuple.__new__


class ObjectKey(NamedTuple):
    """An object's identity. ``namespace`` None: not stated (desired manifests often omit it)."""

    kind: str
    namespace: str | None
    name: str

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.namespace or '-'}/{self.name}"

    @property
    def order(self) -> tuple[str, str, str]:
        """A sort key: keys with and without a namespace sort together (``None`` first)."""
        return (self.kind, self.namespace or "", self.name)

    def in_cluster(self, cluster: str) -> WorkloadRef:
        """This object in ``cluster``: the subject of its findings (``ref`` is its ``pool``)."""
        return WorkloadRef(cluster, self.namespace, self.kind, self.name)


def key_of(obj: Mapping[str, Any]) -> ObjectKey | None:
    """The key of an object of a supported kind, else None."""
    kind = obj.get("kind")
    return _key_in(kind, obj.get("metadata")) if kind in KINDS else None


def _key_in(kind: str, meta: Any) -> ObjectKey | None:
    if type(meta) is not dict and not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    ns = meta.get("namespace")
    # ObjectKey(...) without the Python-level __new__ of a NamedTuple: one per object
    return _new_tuple(ObjectKey, (str(kind), ns if isinstance(ns, str) and ns else None, name))


def app_of(obj: Mapping[str, Any], *, app_label: str | None = None) -> str | None:
    """The Argo CD application an object belongs to, from (in order) the configured label,
    the ``argocd.argoproj.io/tracking-id`` annotation (``<app>:<group>/<kind>:<ns>/<name>``,
    ``<app>`` possibly ``<app-namespace>_<app>``) and the ``app.kubernetes.io/instance`` label.
    """
    meta = obj.get("metadata")
    return _app_in(meta, app_label) if _is_map(meta) else None


def _app_in(meta: Mapping[str, Any], app_label: str | None) -> str | None:
    labels = meta.get("labels")
    labels = labels if _is_map(labels) else _EMPTY
    if app_label:
        value = labels.get(app_label)
        if isinstance(value, str) and value:
            return value
    annotations = meta.get("annotations")
    if _is_map(annotations):
        tracking = annotations.get(TRACKING_ANNOTATION)
        if isinstance(tracking, str) and ":" in tracking:
            app = tracking.partition(":")[0]
            # apps outside the control-plane namespace are tracked as <namespace>_<name>;
            # '_' never occurs in a Kubernetes name, so the split is unambiguous
            return app.rpartition("_")[2] or None
    value = labels.get(INSTANCE_LABEL)
    return value if isinstance(value, str) and value else None


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


_EMPTY: Mapping[str, Any] = {}  # the missing map, shared: read only


def _mapping(value: Any) -> Mapping[str, Any]:
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return {}


def _list(value: Any) -> list[Any]:
    return value if type(value) is list else []
