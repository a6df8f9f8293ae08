"""Remediation ports: the calls that carry out a decision, and the outcome values they yield.

Three small protocols, each satisfiable by a thin adapter:

* ``ArgoSync`` — sync or roll back an Argo CD Application (``adapters/argocd``);
* ``FluxReconciler`` — request a reconcile of, suspend or resume a Flux object
  (``adapters/flux.py``, through the Kubernetes API);
* ``NodeRestorer`` — put a node's labels and taints back (``adapters/kube/restore.py``).

Flux and node ports are per cluster (one API server each); the remediator is given a factory
that picks the one for a cluster. Adapters raise their documented errors (``ports.kube``
errors for Kubernetes); the remediator turns every error into an ``Outcome``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from fleetwarden.core.ownership import FluxRef
from fleetwarden.core.pools import Taint

__all__ = [
    "ArgoSync",
    "Call",
    "CallResult",
    "FluxReconciler",
    "NodeRestorer",
    "Outcome",
    "OutcomeStatus",
]


class ArgoSync(Protocol):
    """The three calls remediation needs from Argo CD — a subset of ``ports.argocd.ArgoCD``,
    so ``adapters.argocd.client.ArgoCDClient`` satisfies it as is. Positional-only names and
    ``object`` results keep it satisfiable by any adapter; the remediator summarises what it
    gets back (a mapping, or a dataclass such as ``SyncResult``) for the audit."""

    async def sync(
        self,
        app: str,
        /,
        *,
        revision: str | None,
        resources: list[Any] | None,
        dry_run: bool,
    ) -> object:
        """Start a sync of ``app`` (all resources when ``resources`` is None)."""
        ...

    async def rollback(self, app: str, history_id: int, /) -> object:
        """Roll ``app`` back to ``status.history[].id == history_id``."""
        ...

    async def get_application(self, app: str, /) -> Mapping[str, Any]:
        """The Application object (to find the history entry a rollback goes back to)."""
        ...


class FluxReconciler(Protocol):
    async def reconcile(self, ref: FluxRef) -> dict[str, Any]:
        """Ask the Flux controller to reconcile ``ref`` now."""
        ...

    async def suspend(self, ref: FluxRef) -> dict[str, Any]: ...

    async def resume(self, ref: FluxRef) -> dict[str, Any]: ...


class NodeRestorer(Protocol):
    async def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        """Set these labels on the node (``None``: remove the label); others are untouched."""
        ...

    async def patch_taints(
        self,
        node: str,
        taints: Sequence[Taint],
        *,
        replace: Collection[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        """Make the node carry ``taints``. ``replace``: the (key, effect) pairs this call owns
        (taints with those are removed unless in ``taints``); ``None``: every taint except
        the transient ones. Other taints are kept."""
        ...


class OutcomeStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    CONFLICT = "conflict"  # the object changed under us (HTTP 409) or an operation is running
    DRY_RUN = "dry-run"  # the call was recorded, not sent
    SKIPPED = "skipped"  # nothing to carry out (planned, blocked, pending decisions)
    EXPIRED = "expired"  # the decision's execution window had passed


@dataclass(frozen=True, slots=True)
class Call:
    """One port call: ``port`` (argocd | flux | nodes), its method, the cluster it goes to
    (None for Argo CD) and its arguments as plain JSON values."""

    port: str
    method: str
    cluster: str | None
    args: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "method": self.method,
            "cluster": self.cluster,
            "args": dict(self.args),
        }


@dataclass(frozen=True, slots=True)
class CallResult:
    call: Call
    status: OutcomeStatus
    result: Mapping[str, Any] | None = None
    error_class: str | None = None
    error_message: str | None = None
    seconds: float = 0.0
    retryable: bool = False  # the same call may succeed later (an outage, a timeout, a 409)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"call": self.call.to_json(), "status": self.status.value}
        if self.result is not None:
            out["result"] = dict(self.result)
        if self.error_class:
            out["error"] = {
                "class": self.error_class,
                "message": self.error_message,
                "retryable": self.retryable,
            }
        out["seconds"] = round(self.seconds, 6)
        return out


@dataclass(frozen=True, slots=True)
class Outcome:
    """What carrying out one decision did: for the audit store."""

    decision_id: str
    status: OutcomeStatus
    calls: tuple[CallResult, ...]
    started_at: datetime
    finished_at: datetime
    detail: str = ""

    @property
    def errors(self) -> list[CallResult]:
        return [c for c in self.calls if c.status in (OutcomeStatus.ERROR, OutcomeStatus.CONFLICT)]

    @property
    def retryable(self) -> bool:
        """It failed, and only in ways that may pass: carrying the decision out again later
        may succeed."""
        errors = self.errors
        return bool(errors) and all(c.retryable for c in errors)

    def to_json(self) -> dict[str, Any]:
        return {
            "decisionId": self.decision_id,
            "status": self.status.value,
            "calls": [c.to_json() for c in self.calls],
            "startedAt": self.started_at.isoformat().replace("+00:00", "Z"),
            "finishedAt": self.finished_at.isoformat().replace("+00:00", "Z"),
            "detail": self.detail,
        }
