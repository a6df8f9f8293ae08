"""Cluster sharding across watcher replicas: who is a live member, and which member owns which
cluster.

The model is Argo CD's application-controller sharding, made dynamic (facts, not code, carried
over): every replica holds a *membership* Lease of its own, and each cluster belongs to one
live member chosen by **rendezvous (highest-random-weight) hashing**: every (member, cluster)
pair gets a weight from a stable hash, and the cluster goes to the member with the highest.

Why rendezvous rather than ``index % replicas`` (Argo CD's legacy algorithm): the winner for a
cluster only depends on the weights of the members present, so

* removing a member moves exactly the clusters it owned (each to its second-highest member);
* adding a member moves only clusters *to* the new member (those where it now weighs most);
* every replica computes the same map from the same member set, with no coordination, in any
  process (the hash is BLAKE2b over the UTF-8 names, never Python's per-process salted
  ``hash``).

Liveness is judged as ``core.leadership`` judges a lease (client-go semantics): on the
observer's own monotonic clock, a member is live until its Lease has stayed *unchanged* for its
``leaseDurationSeconds`` since this observer first saw that version; a released Lease (empty
holder) is gone at once. Clock offsets between replicas do not matter.

Bounds, given every member renews and lists the group every ``retryPeriod`` (jittered by up
to 20 %): a peer first sees a dead member's last renewal up to one retry after it, judges it
gone ``leaseDuration`` later and acts at its next round, so its clusters move at most
``leaseDuration + 2 x 1.2 x retryPeriod`` (plus request latency) after its last renewal. A
member that joins is seen by each peer within one retry (until then a cluster moving to it is
watched twice, never by nobody). Replicas whose views differ (one has noticed a loss, another
not yet) may briefly disagree: a cluster can then be owned twice or, within the same bound,
by nobody. ``gone_leases`` names the Leases a live member may delete, so that a newcomer
never counts a long-dead member as live for a lease duration after first seeing its Lease.

Healing per shard (``heal_problem``): a member decides a cluster's findings only while its
membership is *healthy* (its last successful round started within ``renewDeadline``, as a
leader's term) and only once it has owned the cluster, healthy throughout, for a
``leaseDuration`` (the *grace*). Why the grace: ownership moves without a handshake, so the
previous owner may still act for a while — until its next round lists the newcomer, or its own
health lapses, at most ``renewDeadline`` after the change was written; a member that comes back
after its health lapsed (peers may have judged it gone) waits the grace again. With clock rates
within ``rho`` (``renew_deadline * (1 + rho) < lease_duration * (1 - rho)``, the bound leader
election needs) no two members decide one cluster at once. ``member_fence_problem`` is the
re-read right before a remediation goes out: the member's own Lease must still name it.

Pure: no I/O, no clock reads (``now`` is passed in), no logging.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleetwarden.core.leadership import (
    ElectionTiming,
    LeaseRecord,
    Observation,
    expires_at,
    observe,
)

__all__ = [
    "Assignment",
    "ListedLease",
    "assign",
    "gone_leases",
    "heal_problem",
    "live_members",
    "member_fence_problem",
    "member_lease_name",
    "observe_members",
    "owned_by",
    "owner_of",
    "weight",
]


MEMBER_PREFIX = "fleetwarden-member-"
_NOT_NAME = re.compile(r"[^a-z0-9-]+")


def member_lease_name(identity: str) -> str:
    """``fleetwarden-member-<identity>`` as a valid object name: lowercase letters, digits and
    ``-`` (``host_1234`` becomes ``host-1234``); when the identity had to change, or is too
    long, a short hash of the exact identity is appended so two identities never share a
    Lease. The identity itself lives in the Lease's ``holderIdentity``."""
    clean = _NOT_NAME.sub("-", identity.lower()).strip("-")
    name = MEMBER_PREFIX + clean
    if clean != identity or len(name) > 63:
        tag = hashlib.blake2b(identity.encode(), digest_size=4).hexdigest()
        name = f"{name[: 63 - 9].rstrip('-')}-{tag}"
    return name


def weight(member: str, cluster: str) -> int:
    """The stable weight of ``member`` for ``cluster``: 64 bits of BLAKE2b over both names
    (length-prefixed, so ``("ab", "c")`` and ``("a", "bc")`` differ)."""
    m, c = member.encode(), cluster.encode()
    digest = hashlib.blake2b(
        len(m).to_bytes(4, "big") + m + c, digest_size=8, person=b"fw-shard"
    ).digest()
    return int.from_bytes(digest, "big")


def owner_of(cluster: str, members: Iterable[str]) -> str | None:
    """The member with the highest weight for ``cluster`` (ties, which need a 64-bit
    collision, go to the greater name); None when there are no members."""
    best: tuple[int, str] | None = None
    for member in members:
        key = (weight(member, cluster), member)
        if best is None or key > best:
            best = key
    return None if best is None else best[1]


def assign(clusters: Iterable[str], members: Iterable[str]) -> dict[str, str]:
    """Each cluster's owner among ``members`` ({} when there are none)."""
    pool = sorted(set(members))
    if not pool:
        return {}
    out: dict[str, str] = {}
    for cluster in clusters:
        owner = owner_of(cluster, pool)
        assert owner is not None
        out[cluster] = owner
    return out


def owned_by(member: str, clusters: Iterable[str], members: Iterable[str]) -> frozenset[str]:
    """The clusters ``member`` owns when ``members`` are live (``member`` counts as live)."""
    pool = set(members) | {member}
    return frozenset(c for c in clusters if owner_of(c, pool) == member)


@dataclass(frozen=True, slots=True)
class ListedLease:
    """One membership Lease as listed: its name, record and version (``resourceVersion``)."""

    name: str
    record: LeaseRecord
    version: str


def observe_members(
    previous: Mapping[str, Observation], listed: Iterable[ListedLease], now: float
) -> dict[str, Observation]:
    """The observations after a list at ``now``, by Lease name: a Lease whose version is
    unchanged keeps its first-seen time; a Lease no longer listed is forgotten."""
    return {
        lease.name: observe(previous.get(lease.name), lease.record, lease.version, now)
        for lease in listed
    }


def live_members(observations: Mapping[str, Observation], *, now: float) -> frozenset[str]:
    """The holders whose Leases are live at ``now`` (observer's clock): held (not released)
    and changed within their ``leaseDurationSeconds``."""
    return frozenset(
        o.record.holder_identity
        for o in observations.values()
        if o.record.holder_identity and now < expires_at(o)
    )


def gone_leases(observations: Mapping[str, Observation], *, now: float) -> list[ListedLease]:
    """The Leases whose members are gone at ``now`` (released, or unchanged for their
    duration): a live member deletes them, each only at the version it judged, so a newcomer
    does not count a dead member as live for a whole lease duration after it first sees it."""
    return [
        ListedLease(name, o.record, o.version)
        for name, o in sorted(observations.items())
        if not o.record.holder_identity or now >= expires_at(o)
    ]


@dataclass(frozen=True, slots=True)
class Assignment:
    """What one member owns after a change of the member set or of the cluster list, and what
    it must start (``added``) and stop (``removed``) to get there."""

    owned: frozenset[str]
    added: frozenset[str]
    removed: frozenset[str]

    @classmethod
    def between(cls, before: frozenset[str], after: frozenset[str]) -> Assignment:
        return cls(after, after - before, before - after)


def heal_problem(
    cluster: str,
    *,
    owned_since: Mapping[str, float],
    renewed_at: float | None,
    now: float,
    timing: ElectionTiming,
) -> str | None:
    """Why this member must not decide ``cluster``'s findings at ``now`` (None: it may).
    ``owned_since``: each owned cluster and the local time since when it has been owned with
    the membership healthy throughout; ``renewed_at``: when the last successful round
    *started* (None: no round yet)."""
    if renewed_at is None or now >= renewed_at + timing.renew_deadline:
        return "this replica's membership lease was not renewed within renewDeadline"
    since = owned_since.get(cluster)
    if since is None:
        return f"cluster {cluster} is not owned by this replica"
    if now < since + timing.lease_duration:
        return (
            f"cluster {cluster} was taken over {now - since:.3f}s ago: its previous owner may "
            f"still act for up to leaseDuration ({timing.lease_duration}s)"
        )
    return None


def member_fence_problem(record: LeaseRecord | None, *, identity: str) -> str | None:
    """Why a remediation of this member must not go out, given its membership Lease read
    right now (None: it may): the Lease is gone (peers judged the member gone and deleted it),
    released, or names someone else."""
    if record is None:
        return "the membership lease no longer exists (peers judged this replica gone)"
    if record.holder_identity != identity:
        holder = record.holder_identity or "nobody (released)"
        return f"the membership lease is held by {holder}, not by {identity}"
    return None
