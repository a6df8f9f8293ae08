"""Carrying out policy decisions through the remediation ports, and reporting each outcome.

The policy (``core.policy``) decides; this module only acts, and only on what the decision
says: an ``execute`` decision whose window has not passed is turned into port calls; a
``dry-run`` decision into the same calls, recorded and *not* sent; anything else is skipped.
Every call has a timeout; every error — a timeout, a conflict, an adapter error — becomes an
``Outcome`` value for the audit store instead of an exception. Nothing is fire-and-forget:
concurrent calls run in a ``TaskGroup`` and are awaited before the outcome is returned.
No retries here: each failed call says whether it may pass (``CallResult.retryable``: a
timeout, an unavailable or busy server); the healer decides a drift again later when its heal
failed only in such ways (guards and cooldown included).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef
from fleetwarden.core.policy import Action, Decision, NodeRestore, Status
from fleetwarden.core.pools import Taint
from fleetwarden.ports.argocd import ArgoConflict
from fleetwarden.ports.kube import Conflict, Transient
from fleetwarden.ports.remediation import (
    ArgoSync,
    Call,
    CallResult,
    FluxReconciler,
    NodeRestorer,
    Outcome,
    OutcomeStatus,
)
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["Remediator", "plan_calls", "previous_history_id"]


def plan_calls(decision: Decision) -> list[Call]:
    """The port calls that carry out ``decision`` (whatever its status): what dry-run records."""
    target = decision.target
    if decision.action in (Action.SYNC, Action.ROLLBACK) and isinstance(target, ArgoApp):
        if decision.action is Action.SYNC:
            args: dict[str, Any] = {
                "app": target.name,
                "revision": None,
                "resources": None,
                "dry_run": False,
            }
            return [Call("argocd", "sync", None, args)]
        return [Call("argocd", "rollback", None, {"app": target.name, "history_id": None})]
    if decision.action is Action.RECONCILE and isinstance(target, FluxRef):
        return [Call("flux", "reconcile", target.cluster or decision.cluster, target.to_json())]
    if decision.action is Action.RESTORE and isinstance(target, NodeRestore):
        calls: list[Call] = []
        for node in target.nodes:
            if target.labels:
                calls.append(
                    Call(
                        "nodes",
                        "patch_labels",
                        target.cluster,
                        {"node": node, "labels": dict(target.labels)},
                    )
                )
            if target.replace or target.taints:
                taints = [
                    {"key": t.key, "value": t.value, "effect": t.effect} for t in target.taints
                ]
                args = {
                    "node": node,
                    "taints": taints,
                    "replace": [list(p) for p in target.replace],
                }
                calls.append(Call("nodes", "patch_taints", target.cluster, args))
        return calls
    return []


class Remediator:
    """Carries out decisions. ``flux``/``nodes`` give the port for a cluster (raise
    ``KeyError`` for an unknown one); a port left ``None`` makes its calls fail as outcomes."""

    def __init__(
        self,
        *,
        argocd: ArgoSync | None = None,
        flux: Callable[[str], FluxReconciler] | None = None,
        nodes: Callable[[str], NodeRestorer] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        timeout: float = 10.0,
        concurrency: int = 8,
    ) -> None:
        if timeout <= 0 or concurrency < 1:
            raise ValueError("timeout must be > 0 and concurrency >= 1")
        self._argocd = argocd
        self._flux = flux
        self._nodes = nodes
        self._clock = clock
        self.timeout = timeout
        self._limit = asyncio.Semaphore(concurrency)

    async def carry_out(self, decision: Decision) -> Outcome:
        started = self._clock.now()
        calls = plan_calls(decision)
        if decision.status is Status.DRY_RUN:
            results = tuple(CallResult(c, OutcomeStatus.DRY_RUN) for c in calls)
            return Outcome(
                decision.id, OutcomeStatus.DRY_RUN, results, started, started, "dry-run: not sent"
            )
        if decision.status is not Status.EXECUTE or not calls:
            why = f"decision is {decision.status.value}" if calls else "no call to make"
            return Outcome(decision.id, OutcomeStatus.SKIPPED, (), started, started, why)
        if decision.expired(started):
            results = tuple(CallResult(c, OutcomeStatus.EXPIRED) for c in calls)
            assert decision.expires_at is not None
            detail = f"executable until {decision.expires_at.isoformat()}; not sent"
            return Outcome(decision.id, OutcomeStatus.EXPIRED, results, started, started, detail)

        if len(calls) == 1:
            results = (await self._send(calls[0]),)
        else:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(self._send(c)) for c in calls]
            results = tuple(t.result() for t in tasks)
        statuses = {r.status for r in results}
        if OutcomeStatus.ERROR in statuses:
            status = OutcomeStatus.ERROR
        elif OutcomeStatus.CONFLICT in statuses:
            status = OutcomeStatus.CONFLICT
        else:
            status = OutcomeStatus.OK
        failed = sum(r.status is not OutcomeStatus.OK for r in results)
        detail = f"{len(results) - failed} of {len(results)} call(s) succeeded"
        return Outcome(decision.id, status, results, started, self._clock.now(), detail)

    async def carry_out_all(self, decisions: Iterable[Decision]) -> list[Outcome]:
        """Every decision's outcome, in order; calls run concurrently (bounded)."""
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self.carry_out(d)) for d in decisions]
        return [t.result() for t in tasks]

    async def _send(self, call: Call) -> CallResult:
        """One call with a timeout. Never raises (cancellation aside): errors are results."""
        t0 = time.perf_counter()
        async with self._limit:
            try:
                async with asyncio.timeout(self.timeout):
                    result = await self._dispatch(call)
            except TimeoutError:
                return CallResult(
                    call,
                    OutcomeStatus.ERROR,
                    error_class="TimeoutError",
                    error_message=f"no answer within {self.timeout:g}s",
                    seconds=time.perf_counter() - t0,
                    retryable=True,
                )
            # Every failure must reach the audit log as an outcome, whatever raised it;
            # cancellation (BaseException) still propagates.
            except Exception as exc:
                status = OutcomeStatus.CONFLICT if _is_conflict(exc) else OutcomeStatus.ERROR
                return CallResult(
                    call,
                    status,
                    error_class=type(exc).__name__,
                    error_message=str(exc)[:500],
                    seconds=time.perf_counter() - t0,
                    retryable=_is_retryable(exc),
                )
        return CallResult(call, OutcomeStatus.OK, result, seconds=time.perf_counter() - t0)

    async def _dispatch(self, call: Call) -> dict[str, Any]:
        a = call.args
        if call.port == "argocd":
            if self._argocd is None:
                raise LookupError("no Argo CD client is configured")
            if call.method == "sync":
                result = await self._argocd.sync(
                    a["app"], revision=a["revision"], resources=a["resources"], dry_run=a["dry_run"]
                )
                return _summarise(result)
            history_id = a["history_id"]
            if history_id is None:
                history_id = previous_history_id(await self._argocd.get_application(a["app"]))
                if history_id is None:
                    raise LookupError(
                        f"application {a['app']} has no earlier deployment to roll back to"
                    )
            return {
                "historyId": history_id,
                **_summarise(await self._argocd.rollback(a["app"], history_id)),
            }
        assert call.cluster is not None
        if call.port == "flux":
            if self._flux is None:
                raise LookupError("no Flux client is configured")
            ref = FluxRef(FluxKind(a["kind"]), a["namespace"], a["name"], a["cluster"])
            return _summarise(await self._flux(call.cluster).reconcile(ref))
        if self._nodes is None:
            raise LookupError("no node restorer is configured")
        port = self._nodes(call.cluster)
        if call.method == "patch_labels":
            return await port.patch_labels(a["node"], a["labels"])
        taints = [Taint(t["key"], t["value"], t["effect"]) for t in a["taints"]]
        replace = [(k, e) for k, e in a["replace"]]
        return await port.patch_taints(a["node"], taints, replace=replace)


def previous_history_id(app: Mapping[str, Any]) -> int | None:
    """The deployment before the current one in ``status.history`` (what ``argocd app
    rollback APP`` goes back to), or None when there is none."""
    status = app.get("status")
    history = status.get("history") if isinstance(status, Mapping) else None
    if not isinstance(history, list) or len(history) < 2:
        return None
    ids = [h.get("id") for h in history if isinstance(h, Mapping)]
    ids = [i for i in ids if isinstance(i, int) and not isinstance(i, bool)]
    return ids[-2] if len(ids) >= 2 else None


def _summarise(result: object) -> dict[str, Any]:
    """A small JSON view of what a port returned, for the audit: scalars only, one level of
    nesting (an Argo CD ``SyncResult`` gives its application, attempts and operation phase)."""
    items: list[tuple[str, Any]]
    if isinstance(result, Mapping):
        items = [(str(k), v) for k, v in result.items()]
    elif dataclasses.is_dataclass(result) and not isinstance(result, type):
        items = [(f.name, getattr(result, f.name)) for f in dataclasses.fields(result)]
    else:
        return {"result": None if result is None else str(result)[:200]}
    out: dict[str, Any] = {}
    for key, value in items:
        if value is None or isinstance(value, str | int | float | bool):
            out[key] = value
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            out[key] = {
                f.name: getattr(value, f.name)
                for f in dataclasses.fields(value)
                if isinstance(getattr(value, f.name), str | int | float | bool)
            }
        elif isinstance(value, list | tuple) and all(isinstance(v, str | int) for v in value):
            out[key] = list(value)
    return out


def _is_retryable(exc: Exception) -> bool:
    """Argo CD errors say so themselves; Kubernetes' transient failures and conflicts pass."""
    said = getattr(exc, "retryable", None)
    if isinstance(said, bool):
        return said
    return isinstance(exc, Transient | Conflict | TimeoutError)


def _is_conflict(exc: Exception) -> bool:
    return isinstance(exc, Conflict | ArgoConflict) or getattr(exc, "status", None) == 409
