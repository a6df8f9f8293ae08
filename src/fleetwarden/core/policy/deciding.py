"""Deciding: ``decide`` (finding, route, history → ``Decision``), ``approve``,
``cancellations`` and ``record`` (the explicit step that changes ``PolicyState``), with the
guards (cooldown, flap, blast radius) that bound remediation. Pure: ``now`` is passed in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from fleetwarden.core.describing import describe_type
from fleetwarden.core.findings import Finding, Layer
from fleetwarden.core.ownership import ArgoApp, FluxRef, Route
from fleetwarden.core.policy.decisions import (
    Decision,
    DecisionTarget,
    NodeRestore,
    RequestCancelled,
    UnknownDecision,
    _ts,
)
from fleetwarden.core.policy.policies import (
    DEFAULT_POLICY,
    REMEDIATIONS,
    Action,
    Guard,
    Guards,
    Mode,
    Policy,
    Status,
)
from fleetwarden.core.policy.state import _K, OpKey, PolicyState, PoolKey, _count_since, _Ledger
from fleetwarden.core.policy.warning import warned
from fleetwarden.core.pools import Taint

__all__ = [
    "approve",
    "cancellations",
    "decide",
    "decide_all",
    "fingerprint",
    "pause",
    "record",
]

# --- deciding ------------------------------------------------------------------------------


def decide(
    finding: Finding,
    route: Route,
    state: PolicyState,
    now: datetime,
    mode: Mode = Mode.DRY_RUN,
    *,
    policy: Policy = DEFAULT_POLICY,
    config: str | None = None,
) -> Decision:
    """What to do about ``finding`` now, and why. Reads ``state``; changes nothing.
    ``config``: the ``fingerprint`` of the configuration it is made under (kept on the
    decision, so that a request outlives no change of it)."""
    ref = _FindingRef(finding.id, finding.cluster, finding.pool)  # the id hashes: once
    reasons = [f"route: {route.reason}"]
    rule = next((r for r in policy.rules if r.matches(finding, route)), None)
    sev = f"{finding.severity.value} {finding.layer.value}/{finding.field}"
    if rule is None:
        wanted = Action.ALERT
        reasons.append(f"{sev} (owner {route.owner.value}): no policy rule matches; alerting")
    else:
        wanted = rule.action
        reasons.append(f"{sev} (owner {route.owner.value}) matched rule {rule.describe()}")
    action, target, why = _resolve(wanted, finding, route)
    if why:
        reasons.append(why)
    warn = warned(finding, route, policy.warn) if action in REMEDIATIONS else None
    if warn is not None:  # reported, never healed: whatever the mode
        reasons.append(warn.reason(finding.field))
        action, target = Action.ALERT, None
    did = _decision_id(ref.id, action, mode, now, state.recorded)

    def make(status: Status, **kw: Any) -> Decision:
        return Decision(
            did,
            ref.id,
            ref.cluster,
            ref.pool,
            action,
            mode,
            status,
            tuple(reasons),
            target,
            now,
            config=config,
            **kw,
        )

    if action not in REMEDIATIONS or target is None:
        held = (warn.glob, warn.owner) if warn is not None else None
        return make(Status.PLANNED, notify=action is Action.ALERT, warn=held)

    rehearsal = mode is Mode.DRY_RUN
    ledger = state.ledger(rehearsal=rehearsal)
    if mode is Mode.APPROVAL:
        waiting = _waiting(state, ref.id, (action, target), now)
        if waiting is not None:
            reasons.append(f"already waiting for approval as {waiting}")
            return make(Status.PLANNED, guard=Guard.COALESCED)
    verdict = _check_guards(ref, action, target, ledger, state, now, policy.guards)
    reasons.extend(verdict.reasons)
    if rehearsal and verdict.guard is not None:
        reasons.append("dry-run: nothing would be sent")
    if verdict.guard is Guard.COALESCED:
        return make(Status.PLANNED, guard=verdict.guard)
    if verdict.guard is not None:
        return make(Status.BLOCKED, guard=verdict.guard, notify=verdict.notify)
    g = policy.guards
    if mode is Mode.DRY_RUN:
        reasons.append("dry-run: the intended call is recorded, not sent")
        return make(Status.DRY_RUN)
    if mode is Mode.APPROVAL:
        until = now + g.pending_ttl
        reasons.append(f"approval mode: waiting for `fleetwarden approve {did}` until {_ts(until)}")
        return make(Status.PENDING_APPROVAL, notify=True, expires_at=until)
    return make(Status.EXECUTE, expires_at=now + g.execute_ttl)


def approve(
    decision_id: str,
    state: PolicyState,
    now: datetime,
    *,
    policy: Policy = DEFAULT_POLICY,
    mode: Mode | None = None,
    config: str | None = None,
) -> Decision:
    """The pending decision made executable at ``now`` (guards checked again, against real
    history) — or blocked, with the reason — or cancelled, when it expired or (given the
    current ``mode`` and ``config`` fingerprint) was made under others. Changes nothing:
    ``record`` the result. ``mode`` None skips the mode and configuration checks.
    Raises ``RequestCancelled`` for a request cancelled before, ``UnknownDecision`` when
    nothing with that id waits for approval."""
    pending = state.pending.get(decision_id)
    if pending is None:
        closed = state.closed.get(decision_id)
        if closed is not None:
            raise RequestCancelled(closed)
        raise UnknownDecision(
            f"no decision {decision_id!r} is waiting for approval"
            f" ({len(state.pending)} pending; see the audit log for decided ones)"
        )
    stale = _stale(pending, now, mode, config) if mode is not None else None
    if stale is None and pending.expired(now):
        stale = _expiry(pending)
    if stale is not None:
        guard, why = stale
        return _cancelled(pending, now, guard, f"approval at {_ts(now)} refused: {why}")
    reasons = list(pending.reasons)
    assert pending.target is not None  # pending decisions always have one
    g = policy.guards
    finding = _FindingRef(pending.finding_id, pending.cluster, pending.pool)
    verdict = _check_guards(
        finding, pending.action, pending.target, state.ledger(rehearsal=False), state, now, g
    )
    reasons.extend(verdict.reasons)
    if verdict.guard is not None:
        status = Status.PLANNED if verdict.guard is Guard.COALESCED else Status.BLOCKED
        return replace(
            pending,
            status=status,
            reasons=tuple(reasons),
            guard=verdict.guard,
            notify=verdict.notify,
            approved_at=now,
            expires_at=None,
        )
    until = now + g.approval_ttl
    reasons.append(f"approved at {_ts(now)}; executable until {_ts(until)}")
    return replace(
        pending,
        status=Status.EXECUTE,
        reasons=tuple(reasons),
        notify=False,
        approved_at=now,
        expires_at=until,
    )


def deny(decision_id: str, state: PolicyState, now: datetime, *, by: str) -> Decision:
    """The pending request refused at ``now`` by ``by``: the ``cancelled`` decision (guard
    ``denied``) to ``record`` and audit; nothing runs. Changes nothing. Raises
    ``RequestCancelled`` for a request cancelled before, ``UnknownDecision`` when nothing with
    that id waits for approval (approved already, or never asked)."""
    pending = state.pending.get(decision_id)
    if pending is None:
        closed = state.closed.get(decision_id)
        if closed is not None:
            raise RequestCancelled(closed)
        raise UnknownDecision(f"no decision {decision_id!r} is waiting for approval")
    return _cancelled(pending, now, Guard.DENIED, f"denied at {_ts(now)} by {by}: nothing is done")


def cancellations(
    state: PolicyState, now: datetime, *, mode: Mode, config: str | None
) -> list[Decision]:
    """The requests in ``state`` that can no longer be approved at ``now``, each as the
    ``cancelled`` decision to ``record`` (and audit), oldest first: made in another ``mode``
    than the current one, made under another ``config`` fingerprint (a request from before
    fingerprints were kept counts as another), or expired. Changes nothing."""
    out = []
    for request in sorted(state.pending.values(), key=lambda d: (d.at, d.id)):
        stale = _stale(request, now, mode, config) or (
            _expiry(request) if request.expired(now) else None
        )
        if stale is not None:
            guard, why = stale
            out.append(_cancelled(request, now, guard, f"cancelled at {_ts(now)}: {why}"))
    return out


def fingerprint(policy: Policy = DEFAULT_POLICY, **context: object) -> str:
    """A short, stable hash of what chooses a request's action and target: the policy's rules
    and ``context`` (the shell passes the ownership rules and the remediation endpoints as
    plain values). The guards are left out: ``approve`` checks them again anyway."""
    data = {"rules": _canonical(policy.rules), "context": _canonical(context)}
    if policy.warn:  # (absent: fingerprints made before warn rules existed still hold)
        data["warn"] = _canonical(policy.warn)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pause(decision: Decision, reasons: Iterable[str]) -> Decision:
    """A decision whose field is fought over (``core.fights.blocking``): blocked with guard
    ``fight`` whatever the other guards said (a heal would be one more writer), the fight's
    reasons added as ``paused: ...``, and a human told. A decision that would change nothing
    (an alert, a request already cancelled) is returned as it is. Call it before ``record``:
    a paused heal counts against no guard."""
    if decision.action not in REMEDIATIONS or decision.target is None:
        return decision
    if decision.status is Status.CANCELLED:
        return decision
    return replace(
        decision,
        status=Status.BLOCKED,
        guard=Guard.FIGHT,
        notify=True,
        reasons=(*decision.reasons, *(f"paused: {r}" for r in reasons)),
        expires_at=None,
    )


def record(decision: Decision, state: PolicyState, *, policy: Policy = DEFAULT_POLICY) -> None:
    """Write a decision's consequences into ``state``: actions made executable (or rehearsed)
    count against the guards; pending ones wait; a flap stops the pool."""
    g = policy.guards
    now = decision.effective_at
    state.recorded += 1
    if decision.status is Status.PENDING_APPROVAL:
        state.pending[decision.id] = decision
        state.waiting[decision.finding_id] = decision.id
        if decision.target is not None:
            state.waiting[(decision.action, decision.target)] = decision.id
        return
    if decision.id in state.pending:
        state.forget_pending(decision.id)
    if decision.status is Status.CANCELLED:
        state.closed[decision.id] = decision
        _prune(state.ledger(rehearsal=False), state, now, g)
        return
    rehearsal = decision.mode is Mode.DRY_RUN
    ledger = state.ledger(rehearsal=rehearsal)
    key: PoolKey = (decision.cluster, decision.pool)
    if decision.guard is Guard.FLAP:
        ledger.quarantine[key] = now + g.flap_window
    if decision.status in (Status.EXECUTE, Status.DRY_RUN) and decision.target is not None:
        insort(ledger.fleet, now)
        insort(ledger.by_cluster.setdefault(decision.cluster, []), now)
        heals = ledger.heals.setdefault(key, [])
        if not heals or heals[-1] < now - g.heal_burst:
            insort(heals, now)
        ledger.findings[decision.finding_id] = now
        ledger.ops[(decision.action, decision.target)] = (now, decision.id)
    _prune(ledger, state, now, g)


def decide_all(
    items: Iterable[tuple[Finding, Route]],
    state: PolicyState,
    now: datetime,
    mode: Mode = Mode.DRY_RUN,
    *,
    policy: Policy = DEFAULT_POLICY,
    config: str | None = None,
) -> list[Decision]:
    """``decide`` then ``record``, one finding after the other (a storm arrives in order)."""
    out = []
    for finding, route in items:
        decision = decide(finding, route, state, now, mode, policy=policy, config=config)
        record(decision, state, policy=policy)
        out.append(decision)
    return out


# --- internals -----------------------------------------------------------------------------


def _stale(
    request: Decision, now: datetime, mode: Mode | None, config: str | None
) -> tuple[Guard, str] | None:
    """Why a request may not be approved under ``mode`` and ``config`` (expiry aside)."""
    if mode is not None and request.mode is not mode:
        return Guard.MODE_CHANGED, (
            f"the request was made in {request.mode.value} mode and the service now runs in "
            f"{mode.value} mode; nothing is done (the drift is decided again, in "
            f"{mode.value} mode, when it is next reported)"
        )
    if mode is not None and request.config != config:
        made = request.config or "not recorded"
        return Guard.CONFIG_CHANGED, (
            f"the policy rules or routing changed since the request was made (configuration "
            f"{made}, now {config or 'not recorded'}); nothing is done"
        )
    return None


def _expiry(request: Decision) -> tuple[Guard, str]:
    return Guard.EXPIRED, f"the request expired at {_ts(request.expires_at)} unapproved"


def _cancelled(request: Decision, now: datetime, guard: Guard, why: str) -> Decision:
    return replace(
        request,
        status=Status.CANCELLED,
        reasons=(*request.reasons, why),
        guard=guard,
        notify=False,
        cancelled_at=now,
    )


def _canonical(value: object) -> object:
    """Plain JSON values for hashing: dataclasses by field, enums by value, durations in
    seconds, collections as lists (sets sorted)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return _canonical(value.value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"fingerprint: cannot hash a {describe_type(value)}")


def _waiting(state: PolicyState, finding_id: str, op: OpKey, now: datetime) -> str | None:
    """The request (for this drift, or for the same operation) still waiting for approval.
    An expired one is kept a while only so that approving it says so: it covers nothing."""
    for key in (finding_id, op):
        did = state.waiting.get(key)
        request = state.pending.get(did) if did is not None else None
        if request is not None and not request.expired(now):
            return did
    return None


@dataclass(frozen=True, slots=True)
class _FindingRef:
    id: str
    cluster: str
    pool: str | None


@dataclass(frozen=True, slots=True)
class _Verdict:
    guard: Guard | None
    reasons: tuple[str, ...]
    notify: bool = False


def _check_guards(
    finding: _FindingRef,
    action: Action,
    target: DecisionTarget,
    ledger: _Ledger,
    state: PolicyState,
    now: datetime,
    g: Guards,
) -> _Verdict:
    pool_key: PoolKey = (finding.cluster, finding.pool)
    pool_name = f"{finding.cluster}/{finding.pool}"
    last = ledger.findings.get(finding.id)
    if last is not None and last >= now - g.cooldown:
        return _Verdict(
            Guard.COOLDOWN,
            (
                f"cooldown: this finding was acted on at {_ts(last)}, "
                f"{_span(now - last)} ago (cooldown {_span(g.cooldown)})",
            ),
        )
    op = ledger.ops.get((action, target))
    if op is not None and op[0] >= now - g.cooldown:
        return _Verdict(
            Guard.COALESCED,
            (
                f"coalesced: the same {action.value} of {_describe(target)} was decided as "
                f"{op[1]} at {_ts(op[0])} (within the {_span(g.cooldown)} cooldown)",
            ),
        )
    until = ledger.quarantine.get(pool_key)
    if until is not None and now < until:
        return _Verdict(
            Guard.QUARANTINE,
            (f"flap guard: pool {pool_name} is left alone until {_ts(until)}; alert only",),
            notify=True,
        )
    heals = ledger.heals.get(pool_key, [])
    new_heal = not heals or heals[-1] < now - g.heal_burst
    healed = _count_since(heals, now - g.flap_window)
    if new_heal and healed >= g.flap_heals:
        return _Verdict(
            Guard.FLAP,
            (
                f"flap guard: pool {pool_name} was healed {healed} times in the last "
                f"{_span(g.flap_window)} (limit {g.flap_heals}); stop acting on it for "
                f"{_span(g.flap_window)} and alert",
            ),
            notify=True,
        )
    pools = state.pools.get(finding.cluster, 0)
    c_limit = g.cluster_limit(pools)
    c_used = _count_since(ledger.by_cluster.get(finding.cluster, []), now - g.window)
    basis = (
        f"configured {g.max_per_cluster}"
        if g.max_per_cluster is not None
        else f"{g.fraction:.0%} of {pools} pools, floor {g.floor}"
    )
    if c_used >= c_limit:
        return _Verdict(
            Guard.BLAST_CLUSTER,
            (
                f"blast radius: cluster {finding.cluster} already had {c_used} of {c_limit} "
                f"actions in the last {_span(g.window)} ({basis})",
            ),
            notify=True,
        )
    fleet = state.fleet_pools
    f_limit = g.fleet_limit(fleet)
    f_used = _count_since(ledger.fleet, now - g.window)
    f_basis = (
        f"configured {g.max_fleet}"
        if g.max_fleet is not None
        else f"{g.fraction:.0%} of {fleet} pools, floor {g.floor}"
    )
    if f_used >= f_limit:
        return _Verdict(
            Guard.BLAST_FLEET,
            (
                f"blast radius: the fleet already had {f_used} of {f_limit} actions in the last "
                f"{_span(g.window)} ({f_basis})",
            ),
            notify=True,
        )
    heal_note = (
        f"heal {healed + 1} of at most {g.flap_heals} in {_span(g.flap_window)}"
        if new_heal
        else f"part of the heal started at {_ts(heals[-1])}"
    )
    return _Verdict(
        None,
        (
            f"guards passed: action {c_used + 1} of {c_limit} for cluster {finding.cluster} and "
            f"{f_used + 1} of {f_limit} fleet-wide in {_span(g.window)}; "
            f"pool {pool_name}: {heal_note}",
        ),
    )


def _resolve(
    wanted: Action, finding: Finding, route: Route
) -> tuple[Action, DecisionTarget | None, str]:
    """The action that can actually be taken, its target, and a note when it differs."""
    target = route.target
    if wanted is Action.RESTORE:
        if not route.direct_restore:
            if isinstance(target, ArgoApp):
                return (
                    Action.SYNC,
                    target,
                    (f"direct restore is not allowed here: sync {target.describe()} instead"),
                )
            return (
                Action.ALERT,
                None,
                ("direct restore is not allowed here and no Argo CD application is named: alert"),
            )
        restore, problem = _node_restore(finding)
        if restore is None:
            return Action.ALERT, None, f"cannot restore directly ({problem}): alert"
        return Action.RESTORE, restore, f"restore {restore.describe()}"
    if wanted in (Action.SYNC, Action.ROLLBACK):
        if isinstance(target, ArgoApp):
            return wanted, target, f"{wanted.value} {target.describe()}"
        return (
            Action.ALERT,
            None,
            (
                f"{wanted.value} needs an Argo CD application and the ownership map names none "
                "for this pool: alert"
            ),
        )
    if wanted is Action.RECONCILE:
        if isinstance(target, FluxRef):
            return wanted, target, f"reconcile {target.describe()}"
        return (
            Action.ALERT,
            None,
            ("reconcile needs a Flux object and the ownership map names none for this pool: alert"),
        )
    return wanted, None, ""


def _node_restore(finding: Finding) -> tuple[NodeRestore | None, str]:
    if not finding.nodes:
        return None, "the finding names no node"
    expected = finding.expected
    if expected is not None and not isinstance(expected, str):
        return None, f"expected value {expected!r} is not a label or taint value"
    if finding.layer is Layer.L1 and finding.field.startswith("labels."):
        key = finding.field[len("labels.") :]
        return NodeRestore(
            finding.cluster, finding.pool, finding.nodes, labels=((key, expected),)
        ), ""
    if finding.layer is Layer.L2 and finding.field.startswith("taints."):
        key, sep, effect = finding.field[len("taints.") :].rpartition(":")
        if not sep or not key:
            return None, f"cannot read a taint key and effect from {finding.field!r}"
        taints = () if expected is None else (Taint(key, expected or None, effect),)
        return NodeRestore(
            finding.cluster, finding.pool, finding.nodes, taints=taints, replace=((key, effect),)
        ), ""
    return None, f"{finding.layer.value}/{finding.field} is not a node label or taint"


def _prune(ledger: _Ledger, state: PolicyState, now: datetime, g: Guards) -> None:
    """Forget what no guard looks at any more. Lists are trimmed on every record (cheap:
    they are sorted); maps are swept at most once per cooldown."""
    cutoff = now - g.horizon
    del ledger.fleet[: bisect_left(ledger.fleet, cutoff)]
    if ledger.pruned_at is not None and now < ledger.pruned_at + g.cooldown:
        return
    ledger.pruned_at = now
    ledger.by_cluster = _trimmed(ledger.by_cluster, cutoff)
    ledger.heals = _trimmed(ledger.heals, cutoff)
    recent = now - g.cooldown
    ledger.findings = {k: t for k, t in ledger.findings.items() if t >= recent}
    ledger.ops = {k: v for k, v in ledger.ops.items() if v[0] >= recent}
    ledger.quarantine = {k: t for k, t in ledger.quarantine.items() if t > now}
    # an expired request, or a cancelled one, is kept a while so that a late `approve` says
    # so, not "unknown" (a shell that never cancels must not grow without bound either)
    stale = now - g.pending_ttl
    for did in [d for d, p in state.pending.items() if p.expires_at and p.expires_at < stale]:
        state.forget_pending(did)
    state.closed = {k: d for k, d in state.closed.items() if d.effective_at >= stale}


def _trimmed(times_by: dict[_K, list[datetime]], cutoff: datetime) -> dict[_K, list[datetime]]:
    out = {}
    for k, times in times_by.items():
        del times[: bisect_left(times, cutoff)]
        if times:
            out[k] = times
    return out


def _decision_id(finding_id: str, action: Action, mode: Mode, now: datetime, seq: int) -> str:
    key = f"{finding_id}|{action.value}|{mode.value}|{now.isoformat()}|{seq}"
    return "d-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _describe(target: DecisionTarget) -> str:
    return target.describe()


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60}m"
    return f"{delta.total_seconds():g}s"
