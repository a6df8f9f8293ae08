"""What runs where: one row per container of a workload per cluster, with what Git states and
what the peer clusters run. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwarden.core.workloads.diffing import pair_objects
from fleetwarden.core.workloads.images import image_drift
from fleetwarden.core.workloads.indexing import ObjectIndex
from fleetwarden.core.workloads.models import Workload
from fleetwarden.core.workloads.objects import WORKLOAD_KINDS, ObjectKey

__all__ = ["VersionRow", "fleet_versions"]


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One container of one workload in one cluster: what runs, what Git says, what peers run."""

    cluster: str
    kind: str
    namespace: str | None
    workload: str
    container: str
    image: str | None
    desired_image: str | None
    drift: bool
    init: bool = False
    peer_image: str | None = None  # the image most clusters run (None: none, or no majority)
    diverges_from_peers: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "kind": self.kind,
            "namespace": self.namespace,
            "workload": self.workload,
            "container": self.container,
            "image": self.image,
            "desiredImage": self.desired_image,
            "drift": self.drift,
            "init": self.init,
            "peerImage": self.peer_image,
            "divergesFromPeers": self.diverges_from_peers,
        }


def _image_rows(
    cluster: str, key: ObjectKey, want: Workload | None, have: Workload | None
) -> list[VersionRow]:
    rows = []
    want_by = {c.name: c for c in want.all_containers()} if want else {}
    have_by = {c.name: c for c in have.all_containers()} if have else {}
    inits = {c.name for w in (want, have) if w for c in w.init_containers}
    order = list(want_by) + [n for n in have_by if n not in want_by]
    for name in order:
        w, h = want_by.get(name), have_by.get(name)
        image = h.image if h else None
        desired_image = w.image if w else None
        if desired_image is None or image is None:
            drift = True
        else:
            drift = bool(image_drift(desired_image, image))
        rows.append(
            VersionRow(
                cluster,
                key.kind,
                key.namespace,
                key.name,
                name,
                image,
                desired_image,
                drift,
                name in inits,
            )
        )
    return rows


def fleet_versions(
    app: str,
    desired: Mapping[str, ObjectIndex],
    observed: Mapping[str, ObjectIndex],
    *,
    namespace: str = "default",
) -> list[VersionRow]:
    """The cluster x container table of images for ``app``: per row, Git's image, the
    cluster's, and the image most clusters run (so a cluster that diverges from its peers
    shows even where Git itself is behind)."""
    rows: list[VersionRow] = []
    for cluster, index in observed.items():
        want_index = desired.get(cluster)
        if want_index is None:
            continue
        for pair in pair_objects(app, want_index, index, namespace=namespace):
            if pair.key.kind not in WORKLOAD_KINDS:
                continue
            w = want_index.model(pair.desired) if pair.desired else None
            h = index.model(pair.observed) if pair.observed else None
            rows.extend(
                _image_rows(
                    cluster,
                    pair.key,
                    w if isinstance(w, Workload) else None,
                    h if isinstance(h, Workload) else None,
                )
            )
    # peers: the image most clusters run for each container, absence included (a sidecar
    # in one cluster of three diverges from its peers, who run none)
    clusters = [c for c in observed if c in desired]
    seen: dict[tuple[str, str | None, str, str], dict[str, str | None]] = {}
    for r in rows:
        seen.setdefault((r.kind, r.namespace, r.workload, r.container), {})[r.cluster] = r.image
    peers: dict[tuple[str, str | None, str, str], tuple[bool, str | None]] = {}
    for k, images in seen.items():
        counter: Counter[str | None] = Counter(images.values())
        missing = sum(1 for c in clusters if c not in images)
        if missing:
            counter[None] += missing
        top = counter.most_common(2)
        majority = len(top) == 1 or top[0][1] > top[1][1]
        peers[k] = (majority, top[0][0] if majority else None)
    out = []
    for r in rows:
        known, peer = peers[(r.kind, r.namespace, r.workload, r.container)]
        out.append(
            VersionRow(
                r.cluster,
                r.kind,
                r.namespace,
                r.workload,
                r.container,
                r.image,
                r.desired_image,
                r.drift,
                r.init,
                peer,
                known and r.image != peer,
            )
        )
    out.sort(
        key=lambda r: (
            r.kind,
            r.namespace or "",
            r.workload,
            r.init is False,
            r.container,
            r.cluster,
        )
    )
    return out
