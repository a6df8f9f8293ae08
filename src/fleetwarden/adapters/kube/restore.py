"""Put a node's labels and taints back: ``ports.remediation.NodeRestorer`` over the API.

Labels are a map, so a strategic-merge patch of ``metadata.labels`` touches only the keys
given (``None`` removes one) and needs no lock. Taints are a list that other hands change too
(the node lifecycle controller, Cluster Autoscaler, Karpenter add transient ones), so they
are read, rewritten and written back with the read ``resourceVersion`` as a precondition: a
concurrent change makes the write fail with 409, and the restorer reads again and retries
once. Transient taints are always kept; so is every taint the call does not own.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from fleetwarden.adapters.kube.client import JSON_MERGE, STRATEGIC_MERGE
from fleetwarden.core.pools import Taint
from fleetwarden.core.rules import DEFAULT_TRANSIENT_TAINTS
from fleetwarden.ports.kube import Conflict, KubeApi

__all__ = ["KubeNodeRestorer", "merge_taints"]

TaintDict = dict[str, Any]


def _taint_dict(t: Taint) -> TaintDict:
    out: TaintDict = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def merge_taints(
    current: Sequence[TaintDict],
    want: Sequence[Taint],
    *,
    replace: Collection[tuple[str, str]] | None,
    transient: Collection[str],
) -> list[TaintDict]:
    """The node's new taint list. Owned taints (``replace``, or with ``None`` every
    non-transient one) are dropped and ``want`` added; an unchanged taint keeps its entry
    (and ``timeAdded``); order is kept, new taints go last."""
    wanted = {(t.key, t.effect): _taint_dict(t) for t in want}
    owned = set(replace) if replace is not None else None
    out: list[TaintDict] = []
    for t in current:
        k = (t.get("key", ""), t.get("effect", ""))
        if k in wanted:
            w = wanted.pop(k)
            out.append(t if (t.get("value") or None) == w.get("value") else w)
        elif t.get("key") in transient or (owned is not None and k not in owned):
            out.append(t)  # transient, or not this call's to change
    out.extend(wanted.values())
    return out


class KubeNodeRestorer:
    """Restores nodes of the cluster ``kube`` talks to."""

    def __init__(self, kube: KubeApi, *, transient: Collection[str] = DEFAULT_TRANSIENT_TAINTS):
        self.kube = kube
        self.transient = frozenset(transient)

    async def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        body = {"metadata": {"labels": dict(labels)}}
        obj = await self.kube.patch(f"/api/v1/nodes/{node}", body, content_type=STRATEGIC_MERGE)
        meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
        have = meta.get("labels") or {}
        return {
            "cluster": self.kube.cluster,
            "node": node,
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {k: have.get(k) for k in labels},
        }

    async def patch_taints(
        self,
        node: str,
        taints: Sequence[Taint],
        *,
        replace: Collection[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        path = f"/api/v1/nodes/{node}"
        for attempt in (1, 2):
            obj = await self.kube.get(path)
            meta, spec = obj.get("metadata", {}), obj.get("spec", {})
            current = spec.get("taints") or []
            new = merge_taints(current, taints, replace=replace, transient=self.transient)
            result = {
                "cluster": self.kube.cluster,
                "node": node,
                "attempts": attempt,
                "taints": new,
            }
            if new == current:
                return {**result, "changed": False, "resourceVersion": meta.get("resourceVersion")}
            # merge patch: the list is replaced whole; resourceVersion makes it conditional
            body = {
                "metadata": {"resourceVersion": meta.get("resourceVersion")},
                "spec": {"taints": new},
            }
            try:
                patched = await self.kube.patch(path, body, content_type=JSON_MERGE)
            except Conflict:
                if attempt == 2:
                    raise
                continue
            rv = (
                patched.get("metadata", {}).get("resourceVersion")
                if isinstance(patched, dict)
                else None
            )
            return {**result, "changed": True, "resourceVersion": rv}
        raise AssertionError("unreachable")  # the loop returns or raises
