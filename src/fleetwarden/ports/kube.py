"""The Kubernetes port: what the app needs from an API server, and the errors it may raise.

Adapters (``adapters/kube``) implement it over HTTP and map every transport failure to these
errors; third-party exceptions never reach the app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fleetwarden.core.clusters import ClusterEndpoint

__all__ = [
    "RESOURCES",
    "ApiError",
    "ClientFactory",
    "Conflict",
    "CredentialError",
    "Forbidden",
    "Gone",
    "KubeApi",
    "KubeError",
    "ListResult",
    "NotFound",
    "ObjectApi",
    "Resource",
    "Transient",
    "Unauthorized",
    "WatchEvent",
]


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: dict[str, Any]

    @property
    def resource_version(self) -> str | None:
        meta = self.object.get("metadata")
        return meta.get("resourceVersion") if isinstance(meta, Mapping) else None


class KubeApi(Protocol):
    cluster: str

    async def list(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        limit: int = 500,
        field_selector: str | None = None,
    ) -> ListResult: ...

    def watch(
        self,
        path: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        field_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]: ...

    async def get(self, path: str, **params: Any) -> Any: ...

    async def patch(self, path: str, body: Any, *, content_type: str = ...) -> Any: ...

    async def readyz(self, *, timeout: float = 5.0) -> tuple[bool, str]: ...

    async def version(self, *, timeout: float = 5.0) -> str: ...

    async def aclose(self) -> None: ...


class ObjectApi(Protocol):
    """Read and write whole objects (leader-election and membership Leases): ``create`` POSTs
    to the collection path, ``replace`` PUTs the object with its ``metadata.resourceVersion``
    — the server answers ``Conflict`` when that version is no longer current; ``list`` reads
    a collection by label selector; ``delete`` with a ``resource_version`` removes only that
    version (``Conflict`` otherwise, ``NotFound`` when it is gone already)."""

    cluster: str

    async def get(self, path: str, **params: Any) -> Any: ...

    async def list(
        self, path: str, *, label_selector: str | None = None, limit: int = 500
    ) -> ListResult: ...

    async def create(self, path: str, body: Any, *, timeout: float | None = None) -> Any: ...

    async def replace(self, path: str, body: Any, *, timeout: float | None = None) -> Any: ...

    async def delete(
        self, path: str, *, resource_version: str | None = None, timeout: float | None = None
    ) -> Any: ...


ClientFactory = Callable[[ClusterEndpoint], KubeApi]


class KubeError(Exception):
    """Anything that went wrong talking to an API server. ``cluster`` names it."""

    def __init__(self, cluster: str, message: str, *, status: int | None = None) -> None:
        self.cluster, self.status = cluster, status
        super().__init__(f"{cluster}: {message}")


class Transient(KubeError):
    """Connection refused/reset, timeouts, 429 and 5xx: retry with back-off."""


class ApiError(KubeError):
    """A permanent answer (4xx) that retrying will not change."""


class Unauthorized(ApiError):
    pass


class CredentialError(ApiError):
    """The cluster's exec credential plugin gave no usable credential: missing, failed, timed
    out, needs a terminal, or printed something that is not an ExecCredential. ``reason``
    names where the plugin was configured and its command (without the cluster prefix); it
    never holds a secret."""

    def __init__(self, cluster: str, reason: str) -> None:
        self.reason = reason
        super().__init__(cluster, reason)


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class Gone(ApiError):
    """410: the resourceVersion is too old; the caller must list again."""


@dataclass(frozen=True, slots=True)
class Resource:
    """A workload kind the watchers list and watch, and where its API lives."""

    kind: str
    api_version: str
    plural: str

    def path(self, namespace: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


RESOURCES = (
    Resource("Deployment", "apps/v1", "deployments"),
    Resource("StatefulSet", "apps/v1", "statefulsets"),
    Resource("DaemonSet", "apps/v1", "daemonsets"),
    Resource("ConfigMap", "v1", "configmaps"),
    Resource("Secret", "v1", "secrets"),
    Resource("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers"),
)
