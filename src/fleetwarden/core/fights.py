"""Fights: two or more writers overwriting one field of one object in turn. Pure.

A **fight** is ``min_alternations`` (default 3) or more *alternating* writes to the same field
within ``window`` (default 10 min) by two or more writers: A, B, A is a fight; A, A, B is not
(consecutive writes by one writer count once — a controller retrying is not a second party).
Such a field is never healed automatically while the fight lasts: a heal would be one more
writer. The fight is **cleared** when the field has had no write for ``window``.

State first, action second: ``FightState`` is a value; ``observe(state, write, now)`` returns
the next state and a ``FightDecision`` (``started``, ``ongoing``, ``none``) with its reasons;
``expire(state, now)`` returns the next state and the ``cleared`` decisions; ``in_fight`` is
the question the healer asks before it acts. Nothing here reads a clock.

Bounded: each field keeps at most ``max_writes`` writes (older ones drop first, and writes older
than the window are dropped on every transition of that field); at most ``max_fields`` fields are
tracked, the one written longest ago is forgotten first (an open fight is never forgotten for a
calm field: fights are kept until they clear).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from fleetwarden.core import actors
from fleetwarden.core.findings import Finding, Layer, Severity

__all__ = [
    "Fight",
    "FightDecision",
    "FightKey",
    "FightOptions",
    "FightState",
    "FightStatus",
    "Write",
    "alternations",
    "blocking",
    "expire",
    "fight_finding",
    "in_fight",
    "node_writes",
    "observe",
]


@dataclass(frozen=True, slots=True, order=True)
class FightKey:
    """One field of one object: ``subject`` is the object (``Node/ip-10-0-1-2``,
    ``Deployment/shop/api``), ``field`` the finding field (``labels.role``)."""

    cluster: str
    subject: str
    field: str
    pool: str | None = None


@dataclass(frozen=True, slots=True)
class Write:
    key: FightKey
    writer: str  # the actor's name: a field manager, a user, a principal
    at: datetime
    value: str | None = None


@dataclass(frozen=True, slots=True)
class FightOptions:
    window: timedelta = timedelta(minutes=10)
    min_alternations: int = 3
    max_writes: int = 32
    max_fields: int = 10_000


@dataclass(frozen=True, slots=True)
class Fight:
    key: FightKey
    writers: tuple[str, ...]  # in order of first write in the window
    writes: int  # writes in the window
    alternations: int
    first: datetime
    last: datetime


class FightStatus(StrEnum):
    NONE = "none"
    STARTED = "started"
    ONGOING = "ongoing"
    CLEARED = "cleared"


@dataclass(frozen=True, slots=True)
class FightDecision:
    key: FightKey
    status: FightStatus
    fight: Fight | None
    reasons: tuple[str, ...]

    @property
    def fighting(self) -> bool:
        return self.status in (FightStatus.STARTED, FightStatus.ONGOING)


_NO_WRITES: tuple[Write, ...] = ()


@dataclass(frozen=True, slots=True)
class FightState:
    """Per field: its recent writes (oldest first) and, while it lasts, its fight."""

    options: FightOptions = FightOptions()
    writes: Mapping[FightKey, tuple[Write, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    fights: Mapping[FightKey, Fight] = field(default_factory=lambda: MappingProxyType({}))

    def __len__(self) -> int:
        return len(self.writes)


def alternations(writers: tuple[str, ...]) -> int:
    """How many alternating writes: the length of the sequence once consecutive writes by one
    writer are merged (A A B A → A B A → 3)."""
    count, previous = 0, None
    for w in writers:
        if w != previous:
            count += 1
            previous = w
    return count


def _recent(writes: tuple[Write, ...], now: datetime, window: timedelta) -> tuple[Write, ...]:
    start = 0
    while start < len(writes) and now - writes[start].at > window:
        start += 1
    return writes[start:]


def _fight_of(key: FightKey, writes: tuple[Write, ...]) -> Fight:
    names = tuple(w.writer for w in writes)
    return Fight(
        key=key,
        writers=tuple(dict.fromkeys(names)),
        writes=len(writes),
        alternations=alternations(names),
        first=writes[0].at,
        last=writes[-1].at,
    )


def observe(state: FightState, write: Write, now: datetime) -> tuple[FightState, FightDecision]:
    """Record one write; say whether its field is (now, still) in a fight."""
    opts = state.options
    key = write.key
    history = _recent((*state.writes.get(key, _NO_WRITES), write), now, opts.window)
    history = history[-opts.max_writes :]
    writes = dict(state.writes)
    writes.pop(key, None)  # re-inserted last: dict order is least-recently-written first
    writes[key] = history
    fights = dict(state.fights)
    while len(writes) > opts.max_fields:
        oldest = next(k for k in writes if k not in fights or k == key)
        if oldest == key:
            break
        del writes[oldest]
    candidate = _fight_of(key, history) if history else None
    stale = fights.get(key)
    if stale is not None and now - stale.last > opts.window:
        del fights[key]  # calm for the window before this write: that fight is over
    was = key in fights
    reasons: list[str]
    if candidate is not None and candidate.alternations >= opts.min_alternations:
        fights[key] = candidate
        status = FightStatus.ONGOING if was else FightStatus.STARTED
        reasons = [
            f"{candidate.alternations} alternating writes by {', '.join(candidate.writers)} "
            f"within {opts.window} (threshold {opts.min_alternations})"
        ]
    elif was:
        # a fight lasts until the field is calm for the window, whatever the latest write
        old = fights[key]
        merged = replace(
            old,
            writers=tuple(dict.fromkeys((*old.writers, write.writer))),
            writes=old.writes + 1,
            last=write.at,
        )
        fights[key] = merged
        candidate, status = merged, FightStatus.ONGOING
        reasons = [f"the field was written {now - old.last} after the last fight write"]
    else:
        status = FightStatus.NONE
        n = candidate.alternations if candidate else 0
        reasons = [f"{n} alternating write(s) within {opts.window}: below {opts.min_alternations}"]
        candidate = None
    new_state = FightState(opts, MappingProxyType(writes), MappingProxyType(fights))
    return new_state, FightDecision(key, status, candidate, tuple(reasons))


def expire(state: FightState, now: datetime) -> tuple[FightState, tuple[FightDecision, ...]]:
    """Drop writes older than the window; clear the fights whose field was calm for it."""
    window = state.options.window
    writes: dict[FightKey, tuple[Write, ...]] = {}
    for key, history in state.writes.items():
        recent = _recent(history, now, window)
        if recent:
            writes[key] = recent
    fights: dict[FightKey, Fight] = {}
    cleared: list[FightDecision] = []
    for key, fight in state.fights.items():
        if now - fight.last > window:
            cleared.append(
                FightDecision(
                    key,
                    FightStatus.CLEARED,
                    fight,
                    (f"no write since {fight.last.isoformat()} ({now - fight.last} > {window})",),
                )
            )
        else:
            fights[key] = fight
    new_state = FightState(state.options, MappingProxyType(writes), MappingProxyType(fights))
    return new_state, tuple(cleared)


def in_fight(state: FightState, key: FightKey, now: datetime) -> FightDecision:
    """The healer's question: may this field be healed now? ``fighting`` → do not heal."""
    fight = state.fights.get(key)
    window = state.options.window
    if fight is None:
        return FightDecision(key, FightStatus.NONE, None, ("no fight on this field",))
    if now - fight.last > window:
        return FightDecision(
            key, FightStatus.CLEARED, fight, (f"calm for {now - fight.last} > {window}",)
        )
    return FightDecision(
        key,
        FightStatus.ONGOING,
        fight,
        (
            f"{', '.join(fight.writers)} are fighting over {key.field} "
            f"({fight.writes} writes since {fight.first.isoformat()}): a heal would be one more",
        ),
    )


def fight_finding(fight: Fight, *, severity: Severity = Severity.HIGH) -> Finding:
    """The finding of a fight (contract: ``layer: "FIGHT"``, the contested field, ``actors``
    every writer). Its id depends on the place and field only, so it stays one finding while
    writers and counts change."""
    k = fight.key
    return Finding(
        cluster=k.cluster,
        pool=k.pool,
        layer=Layer.FIGHT,
        field=k.field,
        expected=None,
        actual=None,
        severity=severity,
        nodes=(k.subject.split("/", 1)[1],) if k.subject.startswith("Node/") else (),
        message=(
            f"{len(fight.writers)} writers alternate on {k.subject} {k.field}: "
            f"{fight.writes} writes from {fight.first.isoformat()} to {fight.last.isoformat()}"
        ),
        extra={
            "actors": list(fight.writers),
            "writes": fight.writes,
            "firstWriteAt": fight.first.isoformat().replace("+00:00", "Z"),
            "lastWriteAt": fight.last.isoformat().replace("+00:00", "Z"),
        },
    )


def _node_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    """A raw Node's labels and taints as finding fields → value."""
    meta = obj.get("metadata") or {}
    out = {f"labels.{k}": str(v) for k, v in (meta.get("labels") or {}).items()}
    for t in (obj.get("spec") or {}).get("taints") or ():
        if isinstance(t, Mapping) and t.get("key"):
            out[f"taints.{t['key']}:{t.get('effect', '')}"] = str(t.get("value") or "")
    return out


def node_writes(
    cluster: str,
    pool: str | None,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    now: datetime,
) -> tuple[Write, ...]:
    """The writes one Node update made (a watch MODIFIED event: the object before and after):
    every label or taint that appeared, changed or went, with its writer from managedFields
    (``actors.actor_from_managed_fields``; ``unknown`` when none is named) at the entry's time,
    else ``now``. Raises ``ValueError`` on malformed managedFields."""
    old, new = _node_fields(before), _node_fields(after)
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if not changed:
        return ()
    name = str((after.get("metadata") or {}).get("name") or "")
    entries_before = actors.parse_managed_fields(
        (before.get("metadata") or {}).get("managedFields")
    )
    entries_after = actors.parse_managed_fields((after.get("metadata") or {}).get("managedFields"))
    out = []
    for f in changed:
        path = actors.finding_field_path(f)
        if path is None:
            continue
        d = actors.actor_from_managed_fields(entries_after, path, before=entries_before)
        writer = d.actor.name if d.actor else "unknown"
        key = FightKey(cluster, f"Node/{name}", f, pool)
        out.append(Write(key, writer, d.started_at or now, new.get(f)))
    return tuple(out)


def blocking(state: FightState, finding: Finding, now: datetime) -> FightDecision | None:
    """The fight that forbids healing ``finding`` now, if any: its field on any of its nodes
    (node findings) or on the pool's subject (a FIGHT finding itself is never healed)."""
    keys = [
        FightKey(finding.cluster, f"Node/{n}", finding.field, finding.pool) for n in finding.nodes
    ]
    for key in keys:
        d = in_fight(state, key, now)
        if d.fighting:
            return d
    if finding.layer is Layer.FIGHT:
        key = FightKey(finding.cluster, "", finding.field, finding.pool)
        return FightDecision(key, FightStatus.ONGOING, None, ("a fight is reported, not healed",))
    return None
