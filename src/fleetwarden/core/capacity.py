"""Capacity after scaling (seed 003): pods left unschedulable by a scale-down, linked to it. Pure.

A pool scaled down (a ``pool.scaled`` lifecycle event whose ``to`` is below its ``from``, a
node of the pool removed, or a provider's SCALE change event with its principal) opens a
*window* (default 10 minutes). A pod of the same cluster whose ``PodScheduled`` condition turns
``False`` with reason ``Unschedulable`` inside that window is linked to the scale-down: the
pods the scheduler can no longer place are the capacity the scale-down took away. While any
linked pod stays unschedulable, the pool has one ``CAPACITY`` finding naming the pods, the pool
and who scaled it (``actor`` in the contract's shape when known); it clears when every linked
pod schedules or is deleted.

What links: the *latest* scale-down of the cluster at or before the moment the pod became
unschedulable (its condition's ``lastTransitionTime``; the observation time when absent), no
older than the window. A pod that was already unschedulable before the scale-down is not its
doing and is not linked. Pods are not matched to pools by their selectors (the pod may fit
several pools): the cluster's newest scale-down is the one named. A scale event seen twice
(the watch's ``pool.scaled`` and the provider's SCALE event for the same change) is one
scale-down; the one that names an actor gives it. Bounded: scale-downs older than the window
are forgotten; a linked pod keeps its link until it schedules or goes.

The state is a value; ``observe_scale`` and ``observe_pod`` return the next state, and
``capacity_findings`` the findings it implies (the shell diffs them with ``FindingTracker``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from fleetwarden.core.actors import Actor, Via, kind_of_principal
from fleetwarden.core.events import ChangeEvent, Operation, parse_time
from fleetwarden.core.findings import Finding, Layer, Severity

__all__ = [
    "DEFAULT_WINDOW",
    "FIELD",
    "CapacityState",
    "PodObservation",
    "ScaleDown",
    "capacity_findings",
    "observe_pod",
    "observe_scale",
    "pod_observation",
    "scale_down_from_change",
    "scale_down_from_lifecycle",
]

DEFAULT_WINDOW = timedelta(minutes=10)
FIELD = "pods.unschedulable"


@dataclass(frozen=True, slots=True)
class ScaleDown:
    """One scale-down of a pool: when, from how many nodes to how many, by whom."""

    cluster: str
    pool: str
    at: datetime
    before: int | None = None
    after: int | None = None
    actor: Actor | None = None
    via: str = "pool.scaled"  # pool.scaled | node.removed | the change event's type

    @property
    def key(self) -> tuple[str, str, datetime]:
        return (self.cluster, self.pool, self.at)

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "at": self.at.isoformat().replace("+00:00", "Z"),
            "from": self.before,
            "to": self.after,
            "via": self.via,
        }


def scale_down_from_lifecycle(
    cluster: str, details: Mapping[str, Any], at: datetime
) -> ScaleDown | None:
    """A ``pool.scaled`` event's details (``{"pool", "from", "to"}``): a scale-down when ``to``
    is below ``from``; None for a scale-up or a pool-less group."""
    pool, before, after = details.get("pool"), details.get("from"), details.get("to")
    if not isinstance(pool, str) or not pool:
        return None
    if not isinstance(before, int) or not isinstance(after, int) or after >= before:
        return None
    return ScaleDown(cluster, pool, at, before, after)


def scale_down_from_change(event: ChangeEvent) -> ScaleDown | None:
    """A provider's SCALE event for a pool, with its principal as the actor. A successful
    change only (a failed one took nothing away); a size in ``detail`` that grows the pool is
    not a scale-down, and with no size at all the event is taken as one (a terminate)."""
    if event.operation is not Operation.SCALE or not event.cluster or not event.pool:
        return None
    if event.outcome == "failure":
        return None
    at = event.time or event.received_at
    if at is None:
        return None
    before = _int(event.detail.get("from"))
    after = _int(event.detail.get("desiredCapacity", event.detail.get("to")))
    if before is not None and after is not None and after >= before:
        return None
    actor = None
    if event.actor:
        actor = Actor(event.actor, kind_of_principal(event.actor), Via.CLOUD_EVENT)
    return ScaleDown(event.cluster, event.pool, at, before, after, actor, via=event.type)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class PodObservation:
    """A pod as the watch last saw it: unschedulable or not, since when."""

    cluster: str
    namespace: str
    name: str
    unschedulable: bool
    since: datetime | None = None  # the PodScheduled condition's lastTransitionTime
    message: str = ""
    deleted: bool = False

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_observation(
    cluster: str, obj: Mapping[str, Any], *, deleted: bool = False
) -> PodObservation:
    """A Pod object (as the API serves it): unschedulable when its ``PodScheduled`` condition
    is ``False`` with reason ``Unschedulable`` (what kube-scheduler writes when no node fits)."""
    meta = _mapping(obj.get("metadata"))
    status = _mapping(obj.get("status"))
    raw = status.get("conditions")
    conditions: list[Any] = raw if isinstance(raw, list) else []
    unschedulable, since, message = False, None, ""
    for cond in conditions:
        if not isinstance(cond, Mapping) or cond.get("type") != "PodScheduled":
            continue
        if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            unschedulable = True
            since = parse_time(cond.get("lastTransitionTime"))
            message = str(cond.get("message") or "")
    return PodObservation(
        cluster,
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        unschedulable and not deleted,
        since,
        message,
        deleted,
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class _Link:
    scale: tuple[str, str, datetime]
    since: datetime


@dataclass(frozen=True, slots=True)
class CapacityState:
    """Recent scale-downs (by key) and the unschedulable pods linked to one of them."""

    window: timedelta = DEFAULT_WINDOW
    scale_downs: Mapping[tuple[str, str, datetime], ScaleDown] = field(default_factory=dict)
    links: Mapping[tuple[str, str], _Link] = field(default_factory=dict)  # (cluster, ns/name)


def _prune(state: CapacityState, now: datetime) -> dict[tuple[str, str, datetime], ScaleDown]:
    """Scale-downs still inside their window, and every one a linked pod still names."""
    named = {link.scale for link in state.links.values()}
    return {k: s for k, s in state.scale_downs.items() if k in named or now - s.at <= state.window}


def observe_scale(state: CapacityState, scale: ScaleDown, *, now: datetime) -> CapacityState:
    """Remember a scale-down. The same pool's scale-down within the window is the same change
    seen twice: it is merged (the actor and sizes it lacks are filled in), not added."""
    kept = _prune(state, now)
    for key, known in kept.items():
        same_pool = known.cluster == scale.cluster and known.pool == scale.pool
        one_change = abs(known.at - scale.at) <= state.window
        if same_pool and one_change and (known.actor is None or scale.actor is None):
            kept[key] = replace(
                known,
                actor=known.actor or scale.actor,
                before=known.before if known.before is not None else scale.before,
                after=known.after if known.after is not None else scale.after,
            )
            return replace(state, scale_downs=kept)
    kept[scale.key] = scale
    return replace(state, scale_downs=kept)


def observe_pod(state: CapacityState, pod: PodObservation, *, now: datetime) -> CapacityState:
    """A pod event: link a newly unschedulable pod to its cluster's latest scale-down inside
    the window; unlink a pod that scheduled or was deleted."""
    links = dict(state.links)
    ref = (pod.cluster, pod.ref)
    if not pod.unschedulable:
        links.pop(ref, None)
    elif ref not in links:  # a linked pod keeps its cause
        since = pod.since or now
        causes = [
            s
            for s in state.scale_downs.values()
            if s.cluster == pod.cluster and s.at <= since and since - s.at <= state.window
        ]
        if causes:
            cause = max(causes, key=lambda s: s.at)
            links[ref] = _Link(cause.key, since)
    after = replace(state, links=links)
    return replace(after, scale_downs=_prune(after, now))


def capacity_findings(state: CapacityState, cluster: str | None = None) -> list[Finding]:
    """One ``CAPACITY`` finding per pool whose scale-down left linked pods unschedulable
    (the pool's newest such scale-down is named when several are)."""
    pods: dict[tuple[str, str], list[tuple[str, ScaleDown]]] = {}
    for (pod_cluster, pod_ref), link in state.links.items():
        scale = state.scale_downs.get(link.scale)
        if scale is None or (cluster is not None and pod_cluster != cluster):
            continue
        pods.setdefault((scale.cluster, scale.pool), []).append((pod_ref, scale))
    out = []
    for (c, pool), members in sorted(pods.items()):
        names = sorted(ref for ref, _ in members)
        scale = max((s for _, s in members), key=lambda s: s.at)
        who = scale.actor.name if scale.actor else "an unknown actor"
        sizes = (
            f" from {scale.before} to {scale.after} nodes"
            if scale.before is not None and scale.after is not None
            else ""
        )
        extra: dict[str, Any] = {"pods": names, "scaledDown": scale.to_json()}
        if scale.actor is not None:  # the contract's ``actor``, where known
            extra["actor"] = scale.actor.to_json()
        out.append(
            Finding(
                cluster=c,
                pool=pool,
                layer=Layer.CAPACITY,
                field=FIELD,
                expected=0,
                actual=len(names),
                severity=Severity.HIGH,
                message=(
                    f"{len(names)} pod(s) unschedulable since pool {pool} was scaled down"
                    f"{sizes} by {who}: {', '.join(names[:10])}"
                    + (f" and {len(names) - 10} more" if len(names) > 10 else "")
                ),
                extra=extra,
            )
        )
    return out
