"""The Argo CD port: what the app asks of an Argo CD API server, and the errors it may raise.

``adapters/argocd`` implements it over Argo CD's REST API (the grpc-gateway in front of
argocd-server) and maps every transport failure to the errors below; no httpx exception reaches
the app. Payloads are Argo CD's own JSON shapes (see the ``TypedDict`` aliases), unparsed except
for the operation state, which the app needs to decide what happened.

Error model (``retryable`` says whether the same call may succeed later):

* ``ArgoUnavailable``   5xx, timeouts, connection failures after the adapter's own retries;
  ``ArgoOutcomeUnknown`` when a sync/rollback may or may not have been applied.
* ``ArgoConflict``      another operation is in progress (HTTP 409, or Argo CD's usual
  400 FailedPrecondition "another operation is already in progress"): wait or terminate it.
* ``ArgoUnauthorized``  401: bad or expired token, wrong username/password.
* ``ArgoForbidden``     403: RBAC (Argo CD also answers 403 for apps the caller may not see).
* ``ArgoNotFound``      404: no such application / history id.
* ``ArgoError``         any other refusal (400 InvalidArgument, 412, ...); the base class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Protocol, TypedDict

__all__ = [
    "Application",
    "ApplicationTree",
    "ArgoCD",
    "ArgoConflict",
    "ArgoError",
    "ArgoForbidden",
    "ArgoNotFound",
    "ArgoOutcomeUnknown",
    "ArgoUnauthorized",
    "ArgoUnavailable",
    "CallRecord",
    "Cluster",
    "ManifestResponse",
    "OperationPhase",
    "OperationState",
    "Refresh",
    "ResourceDiff",
    "SyncResource",
    "SyncResult",
    "SyncStrategy",
    "parse_time",
]

Refresh = Literal["normal", "hard"]
SyncStrategy = Literal["apply", "hook"]


# --- raw payloads (Argo CD's JSON; swagger definitions named in each docstring) --------------


class Application(TypedDict, total=False):
    """``v1alpha1Application``."""

    metadata: dict[str, Any]
    spec: dict[str, Any]
    status: dict[str, Any]
    operation: dict[str, Any]


class ApplicationTree(TypedDict, total=False):
    """``v1alpha1ApplicationTree``."""

    nodes: list[dict[str, Any]]
    orphanedNodes: list[dict[str, Any]]
    hosts: list[dict[str, Any]]
    shardsCount: int


class ResourceDiff(TypedDict, total=False):
    """One item of ``applicationManagedResourcesResponse`` (``v1alpha1ResourceDiff``)."""

    group: str
    kind: str
    namespace: str
    name: str
    targetState: str
    liveState: str
    normalizedLiveState: str
    predictedLiveState: str
    diff: str
    hook: bool
    modified: bool
    resourceVersion: str


class ManifestResponse(TypedDict, total=False):
    """``repositoryManifestResponse``: rendered manifests are JSON strings, one per object."""

    manifests: list[str]
    namespace: str
    server: str
    revision: str
    sourceType: str
    commands: list[str]
    verifyResult: str


class Cluster(TypedDict, total=False):
    """One item of ``v1alpha1ClusterList`` (``v1alpha1Cluster``); Argo CD redacts its config."""

    name: str
    server: str
    namespaces: list[str]
    project: str
    labels: dict[str, str]
    annotations: dict[str, str]
    config: dict[str, Any]
    connectionState: dict[str, Any]
    info: dict[str, Any]
    serverVersion: str
    shard: int
    clusterResources: bool


# --- values ----------------------------------------------------------------------------------


class OperationPhase(StrEnum):
    """``status.operationState.phase`` (gitops-engine's ``OperationPhase``)."""

    RUNNING = "Running"
    TERMINATING = "Terminating"
    FAILED = "Failed"
    ERROR = "Error"
    SUCCEEDED = "Succeeded"


_DONE = frozenset({OperationPhase.FAILED, OperationPhase.ERROR, OperationPhase.SUCCEEDED})


@dataclass(frozen=True, slots=True)
class SyncResource:
    """A resource to include in a selective sync (``v1alpha1SyncOperationResource``)."""

    kind: str
    name: str
    group: str = ""
    namespace: str = ""

    def key(self) -> tuple[str, str, str, str]:
        return (self.group, self.kind, self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class OperationState:
    """What ``status.operationState`` says about the last (or running) operation.

    ``phase`` is kept as Argo CD's string (compare with ``OperationPhase``) so an unknown future
    phase does not break parsing. ``revision`` is the resolved revision of the sync result when
    there is one, else the requested revision.
    """

    phase: str
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    revision: str = ""
    requested_revision: str = ""
    initiated_by: str = ""
    automated: bool = False
    dry_run: bool = False
    prune: bool = False

    @property
    def completed(self) -> bool:
        return self.phase in _DONE

    @property
    def succeeded(self) -> bool:
        return self.phase == OperationPhase.SUCCEEDED

    @classmethod
    def from_application(cls, app: Mapping[str, Any]) -> OperationState | None:
        """The state in ``app["status"]["operationState"]``, or None if there is none."""
        status = app.get("status")
        state = status.get("operationState") if isinstance(status, Mapping) else None
        if not isinstance(state, Mapping) or not state.get("phase"):
            return None
        operation = _mapping(state.get("operation"))
        sync = _mapping(operation.get("sync"))
        initiator = _mapping(operation.get("initiatedBy"))
        result = _mapping(state.get("syncResult"))
        requested = str(sync.get("revision") or "")
        return cls(
            phase=str(state["phase"]),
            message=str(state.get("message") or ""),
            started_at=parse_time(state.get("startedAt")),
            finished_at=parse_time(state.get("finishedAt")),
            revision=str(result.get("revision") or requested),
            requested_revision=requested,
            initiated_by=str(initiator.get("username") or ""),
            automated=bool(initiator.get("automated")),
            dry_run=bool(sync.get("dryRun")),
            prune=bool(sync.get("prune")),
        )


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The answer to a sync or rollback.

    ``state`` is the operation state when it already belongs to this request (Argo CD's
    controller may not have picked the operation up yet: then it is None and the app polls
    ``get_application``). ``verified`` is True when the request's own answer was lost (timeout,
    5xx) and the adapter established from the application that it had been applied.
    """

    application: str
    app: Application
    state: OperationState | None
    attempts: int = 1
    verified: bool = False


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One API call as the audit sees it: never a credential, never a request body.

    ``outcomes`` lists each attempt ("HTTP 500", "timeout", "HTTP 200", ...); ``note`` says how
    an ambiguous sync/rollback was resolved.
    """

    method: str
    path: str
    status: int | None
    attempts: int
    duration: float
    error: str | None = None
    outcomes: tuple[str, ...] = ()
    note: str | None = None


# --- errors ----------------------------------------------------------------------------------


class ArgoError(Exception):
    """Argo CD refused or failed a call. ``status`` is the HTTP status (None without an answer),
    ``grpc_code`` the gRPC code from the error body, ``retryable`` whether trying again later
    may succeed."""

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        grpc_code: int | None = None,
        retryable: bool | None = None,
    ) -> None:
        self.status, self.grpc_code = status, grpc_code
        if retryable is not None:
            self.retryable = retryable
        super().__init__(message)


class ArgoUnauthorized(ArgoError):
    """401: the token is invalid or expired, or the username/password are wrong."""


class ArgoForbidden(ArgoError):
    """403: RBAC denies the call (or hides the application)."""


class ArgoNotFound(ArgoError):
    """404: no such application, history id or cluster."""


class ArgoConflict(ArgoError):
    """Another operation is already in progress on the application: wait, or terminate it."""

    retryable = True


class ArgoUnavailable(ArgoError):
    """No usable answer after the adapter's retries: 5xx, timeouts, connection failures."""

    retryable = True


class ArgoOutcomeUnknown(ArgoUnavailable):
    """A sync/rollback got no answer and the application could not be read to tell whether it
    was applied. Read the application before trying again."""


# --- the port --------------------------------------------------------------------------------


class ArgoCD(Protocol):
    """An Argo CD API server. Every method raises only ``ArgoError`` subclasses."""

    async def get_application(
        self, name: str, *, refresh: Refresh | None = None, project: str | None = None
    ) -> Application:
        """The application; ``refresh`` asks Argo CD to reconcile first (``hard``: no cache)."""
        ...

    async def list_applications(
        self, *, project: str | None = None, selector: str | None = None
    ) -> list[Application]: ...

    async def sync(
        self,
        name: str,
        *,
        revision: str | None = None,
        prune: bool = False,
        dry_run: bool = False,
        resources: Sequence[SyncResource] | None = None,
        sync_options: Sequence[str] = (),
        strategy: SyncStrategy | None = None,
        force: bool = False,
    ) -> SyncResult:
        """Start a sync. Never applied twice: a lost answer is resolved by reading the app."""
        ...

    async def rollback(
        self, name: str, history_id: int, *, prune: bool = False, dry_run: bool = False
    ) -> SyncResult:
        """Sync to the revision of ``status.history[id]`` (auto-sync must be off)."""
        ...

    async def terminate_operation(self, name: str) -> bool:
        """Ask the running operation to stop. False when no operation was running."""
        ...

    async def managed_resources(self, name: str) -> list[ResourceDiff]: ...

    async def resource_tree(self, name: str) -> ApplicationTree: ...

    async def list_clusters(self) -> list[Cluster]: ...

    async def manifests(self, name: str, revision: str | None = None) -> ManifestResponse:
        """The manifests Argo CD renders for the app (at ``revision``, else its target)."""
        ...

    async def aclose(self) -> None: ...


def parse_time(value: object) -> datetime | None:
    """An Argo CD ``v1Time`` ("2024-03-05T07:33:03Z") as an aware datetime; None if absent/bad."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
