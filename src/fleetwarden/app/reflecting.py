"""List-then-watch one resource of one cluster, for ever: the loop every watcher shares.

``reflect`` keeps a cache in step with the API server the way client-go's reflector does:
list (the caller replaces its cache and returns the list's resourceVersion), then watch from
that version with bookmarks; every event moves the version on, so a dropped stream resumes
where it stopped and nothing is missed or seen twice. A 410 Gone (the version was compacted
away) lists again. Errors back off with full jitter; a refusal (401/403/404: RBAC, a missing
API) waits at least ``refused_delay`` and is reported once through ``on_refused`` until the
resource answers again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwarden.ports.kube import ApiError, Gone, KubeApi, Transient
from fleetwarden.ports.notify import Backoff

__all__ = ["Reflection", "reflect"]


@dataclass
class Reflection:
    """Where one reflector stands (read by tests, metrics and the status API)."""

    path: str
    resource_version: str | None = None
    relists: int = 0
    events: int = 0
    refused: str | None = None  # the last refusal, until the resource answers again


async def reflect(
    client: KubeApi,
    path: str,
    *,
    relist: Callable[[], Awaitable[str]],
    apply: Callable[[str, Mapping[str, Any]], Awaitable[None]],
    state: Reflection | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    watch_timeout: int = 300,
    refused_delay: float = 5.0,
    on_refused: Callable[[str], Awaitable[None]] | None = None,
) -> None:
    """Run until cancelled. ``relist()`` lists ``path`` into the caller's cache and returns
    the list's resourceVersion; ``apply(type, object)`` takes one ADDED/MODIFIED/DELETED.
    ``field_selector`` is passed to the watch (the caller's ``relist`` lists with the same
    one); an object that stops matching it arrives as DELETED."""
    state = state or Reflection(path)
    backoff = Backoff()
    while True:
        try:
            if state.resource_version is None:
                state.resource_version = await relist()
                state.relists += 1
                state.refused = None
            selectors: dict[str, str] = {}
            if field_selector is not None:  # passed only when set: a KubeApi need not take it
                selectors["field_selector"] = field_selector
            async for ev in client.watch(
                path,
                resource_version=state.resource_version,
                label_selector=label_selector,
                timeout_seconds=watch_timeout,
                **selectors,
            ):
                state.resource_version = ev.resource_version or state.resource_version
                if ev.type != "BOOKMARK":
                    state.events += 1
                    await apply(ev.type, ev.object)
                backoff.reset()
        except Gone:
            state.resource_version = None  # too old: list again, then resume
        except (Transient, ApiError) as exc:
            delay = backoff.next()
            if isinstance(exc, ApiError):
                delay = max(delay, refused_delay)  # 401/403 will not heal in milliseconds
                message = str(exc)
                if on_refused is not None and state.refused != message:
                    await on_refused(message)
                state.refused = message
            await asyncio.sleep(delay)
