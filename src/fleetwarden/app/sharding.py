"""Cluster sharding for watcher replicas: one ``Membership`` per process, in a TaskGroup.

Each replica holds a membership Lease of its own (``fleetwarden-member-<identity>``, labelled
``fleetwarden.io/membership=<group>``, ``holderIdentity`` = the identity). Every
``retry_period`` (plus up to 20 % jitter, so replicas do not all ask at once) it renews that
Lease with one compare-and-swap write, lists the group's Leases, judges which members are live
(``core.sharding.live_members``: on its own clock, as leader election judges a lease), and
computes the clusters it owns by rendezvous hashing. When the owned set changes it calls
``on_assign(added, removed)`` — the watchers start the added clusters' watches (with a fresh
list: changes made while nobody watched are found) and stop the removed ones.

A round that fails (the API server cannot be reached, a write lost to a concurrent one, a
timeout) changes nothing: the replica keeps the clusters it owns. Peers judge it gone
``leaseDuration`` after its last renewal and take its clusters, so a partitioned replica
makes a cluster watched *twice* for a while, never by nobody — a watcher's findings are
idempotent, a blind spot is not.

On cancellation (graceful shutdown) the replica calls ``on_assign(set(), owned)`` and then
releases its Lease (holder cleared), so peers take its clusters at their next round instead
of after a whole lease duration.

For healing per shard (``app/authority.ShardAuthority``) the membership keeps when its last
successful round started (``renewed_at``) and since when it has owned each cluster with its
health unbroken (``owned_since``: restarted for every cluster after a lapse of health);
``core.sharding.heal_problem`` judges from both.

``owners()`` is what ``/api/clusters`` shows: each configured cluster's owner in this
replica's current view (None before the first successful round).

After each successful round a member deletes the Leases of members it judges gone (released,
or unchanged for their duration), each with a ``resourceVersion`` precondition so a Lease
renewed meanwhile is kept: the group does not grow with the pod names of a Deployment, and a
newcomer does not count a dead member as live for a whole lease duration after first seeing
its Lease (which would leave that member's clusters unwatched meanwhile).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetwarden.app.leader_config import lease_location, lease_namespace, lease_timing
from fleetwarden.core.leadership import ElectionTiming, LeaseRecord, Observation, released
from fleetwarden.core.sharding import (
    Assignment,
    assign,
    gone_leases,
    live_members,
    member_lease_name,
    observe_members,
    owned_by,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.logs import get_logger
from fleetwarden.ports.kube import Conflict, KubeError
from fleetwarden.ports.leases import LeaseGroup
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = [
    "MEMBERSHIP_LABEL",
    "SCHEMA",
    "Membership",
    "ShardingConfig",
    "sharding_from",
]

log = get_logger("fleetwarden.sharding")

MEMBERSHIP_LABEL = "fleetwarden.io/membership"

OnAssign = Callable[[frozenset[str], frozenset[str]], None]


class Membership:
    """Holds ``identity``'s membership in ``group`` and owns its share of ``clusters`` for as
    long as ``run`` runs.

    ``on_assign(added, removed)`` is called from the membership's task, once per change, in
    order; ``assigned_event`` is set after the first successful round. ``clock.monotonic()``
    times the membership, ``clock.now()`` is the time written into the Lease."""

    def __init__(
        self,
        group: LeaseGroup,
        *,
        identity: str,
        clusters: Iterable[str],
        timing: ElectionTiming,
        on_assign: OnAssign | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.group, self.identity, self.timing = group, identity, timing
        self.lease_name = member_lease_name(identity)
        self.store = group.member(self.lease_name)
        self.on_assign, self.clock = on_assign, clock
        self._rng = rng or random.Random()
        self._clusters = tuple(dict.fromkeys(clusters))
        self._observed: dict[str, Observation] = {}
        self._mine: tuple[LeaseRecord, str] | None = None  # my record and its version
        self.members: frozenset[str] | None = None  # live members, None before a round
        self.owned: frozenset[str] = frozenset()
        self.renewed_at: float | None = None  # when the last successful round started
        self.owned_since: dict[str, float] = {}  # owned cluster -> owned (healthy) since
        self.assigned_event = asyncio.Event()
        self.last_reason = "not started"

    @property
    def clusters(self) -> tuple[str, ...]:
        return self._clusters

    def owners(self) -> dict[str, str | None]:
        """Each cluster's owner in this replica's view (for ``/api/clusters``)."""
        if self.members is None:
            return dict.fromkeys(self._clusters)
        return {c: o for c, o in assign(self._clusters, self.members).items()}

    def set_clusters(self, clusters: Iterable[str]) -> None:
        """The configured clusters changed: reassign now over the members last seen live."""
        self._clusters = tuple(dict.fromkeys(clusters))
        if self.members is not None:
            self._reassign(self.members)

    async def run(self) -> None:
        """Hold the membership until cancelled; then give up every cluster and release."""
        try:
            while True:
                await self._round()
                await asyncio.sleep(self.timing.retry_period * (1 + 0.2 * self._rng.random()))
        finally:
            await self._leave()

    async def _round(self) -> None:
        started = self.clock.monotonic()
        try:
            async with asyncio.timeout(self.timing.renew_deadline):
                await self._renew()
                listed = await self.group.list()
        except (KubeError, TimeoutError) as exc:
            # the write may have landed, or someone else wrote or deleted my Lease: read it
            # again next round before writing
            self._mine = None
            if isinstance(exc, Conflict):
                self.last_reason = "my membership lease was written by someone else"
            elif isinstance(exc, TimeoutError):
                self.last_reason = "the membership request timed out"
            else:
                self.last_reason = f"the membership request failed: {exc}"
            log.info(
                "membership round failed",
                group=self.group.where,
                why=self.last_reason,
            )
            return
        now = self.clock.monotonic()
        # measured when the round ends: a renewal that lands late does not bridge the lapse
        lapsed = self.renewed_at is None or now >= self.renewed_at + self.timing.renew_deadline
        self.renewed_at = started
        self._observed = observe_members(self._observed, listed, now)
        live = live_members(self._observed, now=now) | {self.identity}
        self.last_reason = f"{len(live)} live members"
        self._reassign(live)
        if lapsed:  # healthy again after a lapse: peers may have taken my clusters meanwhile
            self.owned_since = dict.fromkeys(self.owned, now)
        self.assigned_event.set()
        await self._sweep(now)

    async def _sweep(self, now: float) -> None:
        """Delete the Leases of gone members (each only at the version judged gone): a
        newcomer then never counts a dead member as live. Peers race to do it; losing
        (Conflict: it was renewed or recreated; NotFound: already deleted) is fine."""
        for lease in gone_leases(self._observed, now=now):
            if lease.name == self.lease_name:
                continue
            try:
                async with asyncio.timeout(self.timing.retry_period):
                    await self.group.delete(lease)
            except (KubeError, TimeoutError) as exc:
                log.debug("gone member's lease not deleted", lease=lease.name, error=exc)
            else:
                log.info("deleted a gone member's lease", lease=lease.name)

    async def _renew(self) -> None:
        wall = self.clock.now()
        if self._mine is None:
            got = await self.store.read()
            if got is None:
                record = self._record(acquired=wall, wall=wall)
                self._mine = record, await self.store.create(record)
                return
            self._mine = got
        held, version = self._mine
        acquired = held.acquire_time if held.holder_identity == self.identity else wall
        record = self._record(acquired=acquired, wall=wall)
        self._mine = record, await self.store.update(record, version)

    def _record(self, *, acquired: datetime | None, wall: datetime) -> LeaseRecord:
        return LeaseRecord(self.identity, self.timing.lease_duration, acquired, wall, 0)

    def _reassign(self, live: frozenset[str]) -> None:
        if live != self.members:
            log.info("members changed", members=sorted(live))
        self.members = live
        change = Assignment.between(self.owned, owned_by(self.identity, self._clusters, live))
        self._apply(change)

    def _apply(self, change: Assignment) -> None:
        self.owned = change.owned
        now = self.clock.monotonic()
        for cluster in change.removed:
            self.owned_since.pop(cluster, None)
        for cluster in change.added:
            self.owned_since[cluster] = now
        if (change.added or change.removed) and self.on_assign is not None:
            self.on_assign(change.added, change.removed)

    async def _leave(self) -> None:
        self._apply(Assignment.between(self.owned, frozenset()))
        self.members, self.renewed_at = None, None
        if self._mine is None:
            return
        record, version = self._mine
        try:
            async with asyncio.timeout(self.timing.retry_period):
                await self.store.update(released(record, wall=self.clock.now()), version)
        except (KubeError, TimeoutError) as exc:
            log.info("membership not released", lease=self.store.where, error=exc)


# --- the ``sharding`` section of the service config ---------------------------------------

SECTION = "sharding"
# the service schema's entry: ``sharding_from`` checks the section itself, with precise errors
SCHEMA: dict[str, Any] = {"type": "object"}
_KEYS = (
    "context",
    "inCluster",
    "namespace",
    "group",
    "leaseSeconds",
    "renewDeadlineSeconds",
    "retryPeriodSeconds",
)


@dataclass(frozen=True, slots=True)
class ShardingConfig:
    """Where the membership Leases live, the group's name (the label value) and the timing::

    sharding:
      context: mgmt            # or inCluster: true (exactly one)
      namespace: fleetwarden
      group: watchers          # default: fleetwarden
      leaseSeconds: 15         # default 15; renewDeadlineSeconds, retryPeriodSeconds too
    """

    namespace: str
    group: str = "fleetwarden"
    context: str | None = None
    in_cluster: bool = False
    timing: ElectionTiming = field(default_factory=ElectionTiming)


def sharding_from(raw: Any, *, source: str) -> ShardingConfig | None:
    """The section ``raw`` (``config.get("sharding")``) of the file ``source``; None when it is
    absent (every replica watches every cluster, as before). Every refusal is a
    ``FormatError`` naming the file and the field (``sharding.group``)."""
    if raw is None:
        return None

    def fail(key: str | None, reason: str) -> FormatError:
        return FormatError(source, reason, field=f"{SECTION}.{key}" if key else SECTION)

    if not isinstance(raw, Mapping):
        raise fail(None, "must be a mapping (context or inCluster, namespace, group, leaseSeconds)")
    for key in raw:
        if key not in _KEYS:
            raise fail(str(key), f"unknown field; the fields are {', '.join(_KEYS)}")
    context, in_cluster = lease_location(raw, fail)
    namespace = lease_namespace(raw, fail)
    group = raw.get("group", "fleetwarden")
    if not isinstance(group, str) or not _label_value(group):
        raise fail(
            "group",
            "must be a label value: 1-63 letters, digits, '-', '_' or '.', starting and "
            "ending with a letter or digit",
        )
    return ShardingConfig(
        namespace=namespace,
        group=group,
        context=context,
        in_cluster=in_cluster,
        timing=lease_timing(raw, fail),
    )


def _label_value(text: str) -> bool:
    ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    return 1 <= len(text) <= 63 and set(text) <= ok and text[0].isalnum() and text[-1].isalnum()
