"""Decisions: what policy decided about a finding, with every reason, and their JSON form
(``Decision.to_json`` / ``from_json``, which the audit log keeps and a restart replays).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from fleetwarden.core.describing import describe_type
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef
from fleetwarden.core.policy.policies import Action, Guard, Mode, Status
from fleetwarden.core.pools import Taint

__all__ = [
    "Decision",
    "DecisionTarget",
    "MalformedDecision",
    "NodeRestore",
    "RequestCancelled",
    "UnknownDecision",
]

# --- decisions -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeRestore:
    """Put labels/taints back on nodes. ``labels``: key → value (``None``: remove the label).
    ``replace``: the (key, effect) taints this restore owns; on each node they are replaced by
    ``taints`` and every other taint is kept."""

    cluster: str
    pool: str | None
    nodes: tuple[str, ...]
    labels: tuple[tuple[str, str | None], ...] = ()
    taints: tuple[Taint, ...] = ()
    replace: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        what = [f"label {k}={v}" if v is not None else f"no label {k}" for k, v in self.labels]
        owned = {(t.key, t.effect) for t in self.taints}
        what += [f"taint {t.key}={t.value or ''}:{t.effect}" for t in self.taints]
        what += [f"no taint {k}:{e}" for k, e in self.replace if (k, e) not in owned]
        return f"{', '.join(what)} on {len(self.nodes)} node(s) of {self.cluster}/{self.pool}"

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "nodes": list(self.nodes),
            "labels": dict(self.labels),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints],
            "replace": [list(pair) for pair in self.replace],
        }


DecisionTarget = FluxRef | ArgoApp | NodeRestore


@dataclass(frozen=True, slots=True)
class Decision:
    id: str
    finding_id: str
    cluster: str
    pool: str | None
    action: Action
    mode: Mode
    status: Status
    reasons: tuple[str, ...]
    target: DecisionTarget | None
    at: datetime
    notify: bool = False  # tell a human: an alert, a guard that stopped a fix, a request
    guard: Guard | None = None
    expires_at: datetime | None = None  # executable (or approvable) until then
    approved_at: datetime | None = None
    config: str | None = None  # the fingerprint of the rules and routing it was made under
    cancelled_at: datetime | None = None
    warn: tuple[str, str] | None = None  # (field glob, owner): warn mode held a heal back

    @property
    def executable(self) -> bool:
        return self.status is Status.EXECUTE

    @property
    def effective_at(self) -> datetime:
        """When it took effect: approved, cancelled, else decided."""
        return self.approved_at or self.cancelled_at or self.at

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now > self.expires_at

    def to_json(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return value.isoformat().replace("+00:00", "Z") if value else None

        return {
            "id": self.id,
            "findingId": self.finding_id,
            "cluster": self.cluster,
            "pool": self.pool,
            "action": self.action.value,
            "mode": self.mode.value,
            "status": self.status.value,
            "reasons": list(self.reasons),
            "target": self.target.to_json() if self.target else None,
            "at": ts(self.at),
            "notify": self.notify,
            "guard": self.guard.value if self.guard else None,
            "expiresAt": ts(self.expires_at),
            "approvedAt": ts(self.approved_at),
            "config": self.config,
            "cancelledAt": ts(self.cancelled_at),
            **({"warn": {"field": self.warn[0], "owner": self.warn[1]}} if self.warn else {}),
        }

    @classmethod
    def from_json(cls, data: object) -> Decision:
        """The decision ``to_json`` wrote (as stored in the audit log), every field checked.

        Raises ``MalformedDecision`` naming the first bad field. A target comes back as the
        same value only if the store kept it verbatim: a node label whose key looks secret
        is stored redacted, and a restore's labels come back in key order.
        """
        d = _Fields(data, "decision")
        action = d.enum("action", Action)
        decision = cls(
            id=d.text("id", nonempty=True),
            finding_id=d.text("findingId", nonempty=True),
            cluster=d.text("cluster"),
            pool=d.opt_text("pool"),
            action=action,
            mode=d.enum("mode", Mode),
            status=d.enum("status", Status),
            reasons=d.texts("reasons"),
            target=_target_from_json(action, d.get("target"), "decision.target"),
            at=d.time("at"),
            notify=d.flag("notify"),
            guard=d.opt_enum("guard", Guard),
            expires_at=d.opt_time("expiresAt"),
            approved_at=d.opt_time("approvedAt"),
            config=d.opt_text("config"),  # absent in records written before it was kept
            cancelled_at=d.opt_time("cancelledAt"),
            warn=_warn_from_json(d.get("warn")),
        )
        if decision.status is Status.PENDING_APPROVAL and (
            decision.target is None or decision.expires_at is None
        ):
            raise MalformedDecision(
                "decision: a pending-approval decision needs a target and an expiresAt"
            )
        return decision


class UnknownDecision(LookupError):
    """``approve`` was given an id that is not waiting for approval."""


class RequestCancelled(LookupError):
    """``approve`` was given a request that was cancelled before: ``decision`` is the
    cancellation (its last reason says why). Nothing is to be recorded or run."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(
            f"decision {decision.id} was cancelled at {_ts(decision.cancelled_at)}: "
            f"{decision.reasons[-1]}"
        )


class MalformedDecision(ValueError):
    """``Decision.from_json`` was given something that is not a decision; the message names
    the field."""


_E = TypeVar("_E", bound=StrEnum)


class _Fields:
    """Typed reads of one JSON object, each failing with the field's path."""

    __slots__ = ("_data", "_path")

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, Mapping):
            raise MalformedDecision(f"{path}: expected an object, got {describe_type(data)}")
        self._data: Mapping[str, Any] = data
        self._path = path

    def get(self, key: str) -> object:
        return self._data.get(key)

    def bad(self, key: str, want: str) -> MalformedDecision:
        got = repr(self._data.get(key))[:80]
        return MalformedDecision(f"{self._path}.{key}: expected {want}, got {got}")

    def text(self, key: str, *, nonempty: bool = False) -> str:
        value = self._data.get(key)
        if not isinstance(value, str) or (nonempty and not value):
            raise self.bad(key, "a non-empty string" if nonempty else "a string")
        return value

    def opt_text(self, key: str) -> str | None:
        return None if self._data.get(key) is None else self.text(key)

    def texts(self, key: str) -> tuple[str, ...]:
        value = self._data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.bad(key, "a list of strings")
        return tuple(value)

    def flag(self, key: str) -> bool:
        value = self._data.get(key, False)
        if not isinstance(value, bool):
            raise self.bad(key, "true or false")
        return value

    def enum(self, key: str, kind: type[_E]) -> _E:
        value = self._data.get(key)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return kind(value)
        raise self.bad(key, f"one of {', '.join(m.value for m in kind)}")

    def opt_enum(self, key: str, kind: type[_E]) -> _E | None:
        return None if self._data.get(key) is None else self.enum(key, kind)

    def time(self, key: str) -> datetime:
        value = self._data.get(key)
        try:
            parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            raise self.bad(key, "an ISO 8601 time with a UTC offset")
        return parsed

    def opt_time(self, key: str) -> datetime | None:
        return None if self._data.get(key) is None else self.time(key)


def _warn_from_json(raw: object) -> tuple[str, str] | None:
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        field, owner = raw.get("field"), raw.get("owner")
        if isinstance(field, str) and isinstance(owner, str):
            return field, owner
    raise MalformedDecision("decision.warn: expected {field, owner} strings")


def _target_from_json(action: Action, data: object, path: str) -> DecisionTarget | None:
    """The inverse of the targets' ``to_json``; which kind is read follows the action."""
    if data is None:
        return None
    t = _Fields(data, path)
    if action in (Action.SYNC, Action.ROLLBACK):
        return ArgoApp(t.text("application", nonempty=True))
    if action is Action.RECONCILE:
        return FluxRef(
            t.enum("kind", FluxKind),
            t.text("namespace", nonempty=True),
            t.text("name", nonempty=True),
            t.opt_text("cluster"),
        )
    if action is Action.RESTORE:
        cluster, pool, nodes = t.text("cluster"), t.opt_text("pool"), t.texts("nodes")
        labels = t.get("labels")
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in labels.items()
        ):
            raise t.bad("labels", "an object of label values (strings or null)")
        taints = t.get("taints")
        if not isinstance(taints, list):
            raise t.bad("taints", "a list of taints")
        parsed = []
        for i, item in enumerate(taints):
            one = _Fields(item, f"{path}.taints[{i}]")
            parsed.append(Taint(one.text("key"), one.opt_text("value"), one.text("effect")))
        pairs = t.get("replace")
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in pairs
        ):
            raise t.bad("replace", "a list of [key, effect] pairs")
        return NodeRestore(
            cluster,
            pool,
            nodes,
            labels=tuple(labels.items()),
            taints=tuple(parsed),
            replace=tuple((p[0], p[1]) for p in pairs),
        )
    raise MalformedDecision(f"{path}: {action.value} decisions have no target")


def _ts(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value else "-"
