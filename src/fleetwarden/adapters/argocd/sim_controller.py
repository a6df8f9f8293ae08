"""The simulator's application controller: a refresh compares desired and live objects.

What argocd-server and the application controller do with ``GET /api/v1/applications/{name}
?refresh=normal|hard`` (argo-cd ``server/application``: ``RefreshApp`` then wait): the server
sets the Application's ``argocd.argoproj.io/refresh`` annotation, the controller sees it,
compares every managed object's desired state with its live state, writes ``status.sync``,
``status.resources[*].status`` and ``status.reconciledAt``, and removes the annotation; the
server answers with the application as it is then.

``LiveReader`` is how the simulator sees the cluster: given the desired objects, it returns
each one's live object (None: not there) -- in tests, read from a real kube-apiserver.
The comparison is Argo CD's in spirit, not in detail: a desired field absent from or different
in the live object makes the resource OutOfSync; fields only the live object has (defaults,
status, server metadata) do not count. No normalisers, no ignoreDifferences, no three-way
merge with last-applied: this is a test double, not gitops-engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

__all__ = ["REFRESH_ANNOTATION", "LiveReader", "differs", "finish_refresh", "reconcile"]

REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"

LiveReader = Callable[[Sequence[Mapping[str, Any]]], Awaitable[Sequence[Mapping[str, Any] | None]]]

# server-written metadata: never part of what Git declares
_IGNORED_META = {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"}


def differs(desired: Any, live: Any) -> bool:
    """Whether ``live`` lacks or changes anything ``desired`` states."""
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return True
        return any(k not in live or differs(v, live[k]) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return True
        return any(differs(d, lv) for d, lv in zip(desired, live, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is not live
    if isinstance(desired, int | float) and isinstance(live, int | float):
        return float(desired) != float(live)
    return bool(desired != live)


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        out["metadata"] = {k: v for k, v in meta.items() if k not in _IGNORED_META}
    return out


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    api_version = str(obj.get("apiVersion") or "")
    meta = obj.get("metadata") or {}
    return (
        api_version.rpartition("/")[0],
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


async def reconcile(
    app: dict[str, Any], desired: Sequence[Mapping[str, Any]], live: LiveReader, at: str
) -> None:
    """Compare, write the sync status, and remove the refresh annotation (in place)."""
    found = await live(desired)
    status = app.setdefault("status", {})
    by_key = {
        (str(r.get("group") or ""), str(r.get("kind")), str(r.get("namespace") or ""), r["name"]): r
        for r in status.get("resources") or ()
        if isinstance(r, dict) and r.get("name")
    }
    out_of_sync = False
    for obj, current in zip(desired, found, strict=True):
        changed = current is None or differs(_comparable(obj), current)
        out_of_sync |= changed
        group, kind, namespace, name = _identity(obj)
        resource = by_key.get((group, kind, namespace, name))
        if resource is None:
            version = str(obj.get("apiVersion") or "").rpartition("/")[2]
            resource = {"group": group, "version": version, "kind": kind, "name": name}
            if namespace:
                resource["namespace"] = namespace
            status.setdefault("resources", []).append(resource)
        resource["status"] = "OutOfSync" if changed else "Synced"
    sync = status.setdefault("sync", {})
    sync["status"] = "OutOfSync" if out_of_sync else "Synced"
    finish_refresh(app, at)


def finish_refresh(app: dict[str, Any], at: str) -> None:
    """The controller's last step: reconciled now, the refresh annotation removed."""
    app.setdefault("status", {})["reconciledAt"] = at
    meta = app.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    annotations.pop(REFRESH_ANNOTATION, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
