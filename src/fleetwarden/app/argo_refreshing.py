"""Event-targeted Argo CD refresh: a live change refreshes exactly the applications owning it.

``ArgoRefresher`` holds what ownership needs (``core.argo_refresh.AppTracking`` per Argo CD
application: the fleet cluster its destination is, its tracking method and the nodes of its
last resource tree) and, for every touched object -- a live workload change
(``on_object``, the ``WorkloadWatcher``'s hook) or a change event naming an object
(``touched``) -- asks ``core.argo_refresh.owners_of`` which applications own it and queues a
refresh of those, spaced by ``RefreshScheduler`` (per-app debounce, fleet-wide token bucket).
``run`` sends the due refreshes (``GET /api/v1/applications/{name}?refresh=normal|hard``
through the ``ArgoCD`` port: argocd-server answers once the controller has compared), at most
``concurrency`` at a time, each under ``timeout``; the application's resource tree is
re-read after its refresh (so a newly managed object is known next time).

Every refresh sent becomes one ``note`` record in the audit store (``argocd.refresh``: the
application, normal or hard, what triggered it and why each object was judged owned, the
sync status Argo CD then reported, or the error). The Argo CD token stays inside the client:
nothing here sees it, logs it or stores it. A failed refresh is recorded, not retried: Argo
CD's own poll still comes.

Not done here: syncing (healing decides that), refreshing on Git changes (Argo CD's webhook).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fleetwarden.core.applications import Application
from fleetwarden.core.argo_refresh import (
    AppTracking,
    Ownership,
    OwnershipIndex,
    RefreshMode,
    RefreshScheduler,
    TouchedObject,
    TrackingMethod,
    touched_by_event,
    tracking_from_tree,
)
from fleetwarden.core.audit import AuditDraft, AuditKind
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.workloads.objects import INSTANCE_LABEL
from fleetwarden.formats.argocd_apps import application_from_object
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.argocd import Application as AppPayload
from fleetwarden.ports.argocd import ApplicationTree, ArgoError, Refresh
from fleetwarden.ports.audit import AuditStore, AuditStoreError
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = [
    "ArgoRefresher",
    "RefreshResult",
    "RefreshSettings",
    "Refreshable",
    "parse_refresh_settings",
]


@runtime_checkable  # serving checks its Argo CD can do this (isinstance checks the names)
class Refreshable(Protocol):
    """The part of the ``ports.argocd.ArgoCD`` port a refresh needs."""

    async def get_application(
        self, name: str, *, refresh: Refresh | None = None, project: str | None = None
    ) -> AppPayload: ...

    async def resource_tree(self, name: str) -> ApplicationTree: ...


@runtime_checkable
class Listable(Protocol):
    async def list_applications(
        self, *, project: str | None = None, selector: str | None = None
    ) -> list[AppPayload]: ...


ACTOR = "fleetwarden"
_MAX_CAUSES = 10  # per refresh, in the audit record: the first ones and a count


@dataclass(frozen=True)
class RefreshSettings:
    """``argocd.refresh`` of the service config (see ``parse_refresh_settings``)."""

    enabled: bool = True
    mode: RefreshMode = RefreshMode.NORMAL
    debounce: float = 2.0
    rate: float = 5.0  # refreshes per second, all applications together
    burst: int = 10
    concurrency: int = 4
    timeout: float = 30.0
    method: TrackingMethod = TrackingMethod.ANNOTATION
    instance_label: str = INSTANCE_LABEL
    control_namespace: str = "argocd"


def parse_refresh_settings(
    raw: Any, *, source: str = "config", where: str = "argocd.refresh"
) -> RefreshSettings:
    """``normal`` / ``hard`` / ``true`` / ``false``, or a mapping ``{mode, debounce, rate,
    burst, concurrency, timeout, trackingMethod, instanceLabel, controlNamespace}``.
    ``FormatError`` names the file (``source``) and the field."""

    def bad(key: str | None, reason: str) -> FormatError:
        return FormatError(source, reason, field=f"{where}.{key}" if key else where)

    if raw is None or raw is True:
        return RefreshSettings()
    if raw is False:
        return RefreshSettings(enabled=False)
    if isinstance(raw, str):
        raw = {"mode": raw}
    if not isinstance(raw, Mapping):
        raise bad(None, "expected normal, hard, true, false or a mapping")
    unknown = sorted(set(map(str, raw)) - _KEYS)
    if unknown:
        raise bad(
            None, f"unknown key(s) {', '.join(unknown)} (expected: {', '.join(sorted(_KEYS))})"
        )
    values: dict[str, Any] = {}
    for key, name, kind in (
        ("mode", "mode", RefreshMode),
        ("trackingMethod", "method", TrackingMethod),
    ):
        if key in raw:
            try:
                values[name] = kind(str(raw[key]).strip().lower())
            except ValueError:
                names = ", ".join(m.value for m in kind)
                raise bad(key, f"{raw[key]!r} is not one of {names}") from None
    for key, name in (
        ("instanceLabel", "instance_label"),
        ("controlNamespace", "control_namespace"),
    ):
        if key in raw:
            if not isinstance(raw[key], str) or not raw[key]:
                raise bad(key, "expected a non-empty string")
            values[name] = raw[key]
    for key in ("debounce", "rate", "timeout"):
        if key in raw:
            value, least = raw[key], ">= 0" if key == "debounce" else "> 0"
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise bad(key, f"expected a number {least}")
            if value < 0 or (key != "debounce" and value == 0):
                raise bad(key, f"expected a number {least}")
            values[key] = float(value)
    for key in ("burst", "concurrency"):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise bad(key, "expected an integer >= 1")
            values[key] = value
    return RefreshSettings(**values)


_KEYS = {"mode", "debounce", "rate", "burst", "concurrency", "timeout"}
_KEYS |= {"trackingMethod", "instanceLabel", "controlNamespace"}


@dataclass(frozen=True)
class RefreshResult:
    """One refresh sent: to which app, how, why, and what Argo CD answered."""

    app: str
    mode: RefreshMode
    causes: tuple[Mapping[str, Any], ...]
    sync: str | None = None  # status.sync.status after the refresh
    error: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        causes = list(self.causes[:_MAX_CAUSES])
        out: dict[str, Any] = {
            "type": "argocd.refresh",
            "application": self.app,
            "mode": self.mode.value,
            "causes": causes,
            "sync": self.sync,
            "seconds": round(self.seconds, 4),
        }
        if len(self.causes) > len(causes):
            out["moreCauses"] = len(self.causes) - len(causes)
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class ArgoRefresher:
    """See the module docstring. ``on_refreshed`` hears every result (metrics, tests)."""

    argocd: Refreshable
    settings: RefreshSettings = field(default_factory=RefreshSettings)
    audit: AuditStore | None = None
    clock: Clock = SYSTEM_CLOCK
    on_refreshed: Callable[[RefreshResult], Awaitable[None] | None] | None = None
    # whether this replica refreshes (serve: the leader, or every shard for its clusters)
    active: Callable[[], bool] = lambda: True
    apps: OwnershipIndex = field(default_factory=OwnershipIndex)
    results: list[RefreshResult] = field(default_factory=list)
    audit_errors: int = 0

    def __post_init__(self) -> None:
        s = self.settings
        self.scheduler = RefreshScheduler(debounce=s.debounce, rate=s.rate, burst=s.burst)
        self._causes: dict[str, list[Mapping[str, Any]]] = {}
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(s.concurrency)

    # --- what is known ---------------------------------------------------------------------

    def follow(self, name: str, *, cluster: str | None, namespace: str | None = None) -> None:
        """An application (its tree is read by ``load_tree``); a known one keeps its tree."""
        s = self.settings
        old = self.apps.get(name)
        self.apps[name] = AppTracking(
            name,
            namespace or s.control_namespace,
            cluster,
            old.resources if old is not None else frozenset(),
            s.method,
            s.instance_label,
            s.control_namespace,
        )

    def forget(self, name: str) -> None:
        self.apps.pop(name, None)

    async def follow_inventory(
        self, apps: Iterable[Application], cluster_of: Callable[[Application], str | None]
    ) -> None:
        """Follow exactly the applications Argo CD has (e.g. an ``ArgoWatcher``'s inventory,
        on each change), ``cluster_of`` naming the fleet cluster of each destination; the
        trees of new or re-targeted applications are read."""
        apps = list(apps)
        for gone in set(self.apps) - {a.name for a in apps}:
            self.forget(gone)
        for app in apps:
            old = self.apps.get(app.name)
            cluster = cluster_of(app)
            self.follow(app.name, cluster=cluster, namespace=app.namespace)
            if old is None or old.cluster != cluster:
                await self.load_tree(app.name)

    async def load_tree(self, name: str) -> None:
        """Re-read an application's resource tree (its nodes become tree members)."""
        app = self.apps.get(name)
        if app is None:
            return
        try:
            async with asyncio.timeout(self.settings.timeout):
                tree = await self.argocd.resource_tree(name)
        except (ArgoError, TimeoutError):
            return  # the old tree stays; tracking annotations and labels still work
        self.apps[name] = tracking_from_tree(app, tree.get("nodes") or ())

    async def follow_api(
        self, cluster_of: Callable[[Application], str | None], *, every: float = 180.0
    ) -> None:
        """Without a watch of the Argo CD cluster: list the applications through the Argo CD
        API now and every ``every`` seconds, and follow them (until cancelled). A list that
        fails keeps what is known; an application that does not parse is left out."""
        lister = self.argocd
        if not isinstance(lister, Listable):
            return
        while True:
            try:
                async with asyncio.timeout(self.settings.timeout):
                    items = await lister.list_applications()
            except (ArgoError, TimeoutError):
                items = None
            if items is not None:
                apps = []
                for item in items:
                    try:
                        apps.append(application_from_object(item))
                    except FormatError:
                        continue  # the Argo CD watch reports these; here: not followed
                await self.follow_inventory(apps, cluster_of)
            await asyncio.sleep(every)

    # --- what changed ----------------------------------------------------------------------

    def touched(self, obj: TouchedObject, *, cause: str) -> Ownership:
        """Queue a refresh of the applications owning ``obj``; returns the ownership."""
        ownership = self.apps.owners(obj)
        if not self.settings.enabled or not self.active():
            return ownership
        now = self.clock.monotonic()
        for claim in ownership.claims:
            self.scheduler.request(claim.app.name, now, self.settings.mode)
            self._causes.setdefault(claim.app.name, []).append(
                {"cause": cause, "object": obj.key.describe(), "cluster": obj.cluster}
                | {"basis": claim.basis.value, "reason": claim.reason}
            )
        if ownership.claims:
            self._wake.set()
        return ownership

    async def on_object(self, cluster: str, obj: Mapping[str, Any], change: str) -> None:
        """The ``WorkloadWatcher`` hook: a live object was added, changed or deleted."""
        touched = TouchedObject.from_object(cluster, obj)
        if touched is not None:
            self.touched(touched, cause=f"live {change.lower()} of {touched.key.describe()}")

    def event(self, event: ChangeEvent) -> None:
        """An accepted change event (the inspector's, once recorded as new)."""
        for touched in touched_by_event(event):
            self.touched(touched, cause=f"event {event.source} {event.type} {event.id}")

    def request(self, name: str, mode: RefreshMode, *, cause: str) -> None:
        """On demand (e.g. a hard refresh asked by a person), spaced like the others."""
        self.scheduler.request(name, self.clock.monotonic(), mode)
        self._causes.setdefault(name, []).append({"cause": cause})
        self._wake.set()

    # --- sending ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Send due refreshes until cancelled."""
        async with asyncio.TaskGroup() as tg:
            while True:
                now = self.clock.monotonic()
                for name, mode in self.scheduler.due(now):
                    await self._slots.acquire()
                    tg.create_task(self._send(name, mode), name=f"argocd-refresh:{name}")
                nxt = self.scheduler.next_at(now)
                self._wake.clear()
                wait = None if nxt is None else max(0.0, nxt - self.clock.monotonic())
                try:
                    async with asyncio.timeout(wait):
                        await self._wake.wait()
                except TimeoutError:
                    pass

    async def _send(self, name: str, mode: RefreshMode) -> None:
        try:
            result = await self._refresh(name, mode, self._causes.pop(name, []))
            self.results.append(result)
            if self.on_refreshed is not None and (r := self.on_refreshed(result)) is not None:
                await r
            if result.error is None:  # after the result is out: it does not delay it
                await self.load_tree(name)
        finally:
            self._slots.release()

    async def refresh(
        self, name: str, mode: RefreshMode, *, causes: Iterable[Mapping[str, Any]] = ()
    ) -> RefreshResult:
        """Refresh one application now, audit it, re-read its tree; never raises ArgoError."""
        result = await self._refresh(name, mode, causes)
        if result.error is None:
            await self.load_tree(name)
        return result

    async def _refresh(
        self, name: str, mode: RefreshMode, causes: Iterable[Mapping[str, Any]]
    ) -> RefreshResult:
        started = self.clock.monotonic()
        sync = error = None
        try:
            async with asyncio.timeout(self.settings.timeout):
                app = await self.argocd.get_application(name, refresh=mode.value)
            sync = ((app.get("status") or {}).get("sync") or {}).get("status")
        except ArgoError as exc:
            error = f"{type(exc).__name__}: {exc}"
        except TimeoutError:
            error = f"no answer within {self.settings.timeout:g} s"
        result = RefreshResult(
            name, mode, tuple(causes), sync, error, self.clock.monotonic() - started
        )
        await self._record(result)
        return result

    async def _record(self, result: RefreshResult) -> None:
        if self.audit is None:
            return
        app = self.apps.get(result.app)
        summary = f"argocd {result.mode.value} refresh of {result.app}" + (
            f": {result.sync}" if result.sync else f" failed: {result.error}"
        )
        draft = AuditDraft(
            AuditKind.NOTE,
            summary=summary,
            cluster=app.cluster if app is not None else None,
            actor=ACTOR,
            payload=result.to_json(),
        )
        try:
            await self.audit.append_many([draft])
        except AuditStoreError:
            self.audit_errors += 1  # the refresh happened; the store's own alerts say why
