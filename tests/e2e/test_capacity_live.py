"""Capacity after scaling on a real kube-apiserver: pending pods, the field-selected watch, bytes.

The test API server has no scheduler and no kubelet: pods stay Pending, and the test writes
what kube-scheduler would (``PodScheduled=False``, reason ``Unschedulable``) and what a kubelet
would (``phase: Running``) through the status subresource. The bytes every response carried on
the wire are counted by a transport around each client: the watcher's (field selector
``status.phase=Pending``) and an unfiltered list+watch of the same pods over the same activity.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient, ssl_context
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.app.capacity_watching import CapacityWatcher
from fleetwarden.app.reflecting import reflect
from fleetwarden.core.findings import Layer
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.kube import Conflict
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.live]

RUNNING, PENDING = 40, 3
_namespaces = itertools.count(1)


class _Counted(httpx.AsyncByteStream):
    def __init__(self, inner: Any, owner: CountingTransport) -> None:
        self.inner, self.owner = inner, owner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.owner.bytes += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts the bytes of every response body as they arrive (before decompression)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner, self.bytes = inner, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_Counted(resp.stream, self),
            extensions=resp.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def make_pod(api: KubeClient, ns: str, name: str) -> None:
    await api.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "metadata": {"name": name, "labels": {"app": name.rsplit("-", 1)[0]}},
            "spec": {
                "automountServiceAccountToken": False,
                "containers": [{"name": "c", "image": "registry.example/app:1"}],
            },
        },
    )


async def set_status(api: KubeClient, ns: str, name: str, status: dict[str, Any]) -> None:
    await api.patch(
        f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": status}, content_type=JSON_MERGE
    )


def unschedulable(at: datetime) -> dict[str, Any]:
    return {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 Insufficient cpu.",
                "lastTransitionTime": rfc3339(at),
            }
        ],
    }


def running(at: datetime) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(at)}
        ],
    }


async def test_pods_pending_after_a_scale_down_are_one_finding_and_the_filtered_watch_costs_less(
    k8s: dict[str, Any],
) -> None:
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    ns = f"capacity-{next(_namespaces)}"
    filtered = CountingTransport(httpx.AsyncHTTPTransport(verify=ssl_context(endpoint)))
    unfiltered = CountingTransport(httpx.AsyncHTTPTransport(verify=ssl_context(endpoint)))
    events: list[FindingEvent] = []
    async with (
        KubeClient(endpoint) as api,
        KubeClient(endpoint, transport=filtered) as watched,
        KubeClient(endpoint, transport=unfiltered) as everything,
    ):
        await api.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        with contextlib.suppress(Conflict):  # no controller-manager: no default ServiceAccount
            await api.create(
                f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "default"}}
            )
        start = datetime.now(UTC) - timedelta(seconds=5)
        for i in range(RUNNING):
            await make_pod(api, ns, f"web-{i}")
            await set_status(api, ns, f"web-{i}", running(start))
        for i in range(PENDING):
            await make_pod(api, ns, f"batch-{i}")

        watcher = CapacityWatcher("fw-test-1", watched, events.append, namespace=ns)
        path = f"/api/v1/namespaces/{ns}/pods"
        seen_all: dict[str, int] = {"events": 0}

        async def relist_all() -> str:
            return (await everything.list(path)).resource_version

        async def count_all(kind: str, obj: Any) -> None:
            seen_all["events"] += 1

        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(watcher.run()),
                tg.create_task(reflect(everything, path, relist=relist_all, apply=count_all)),
            ]
            await wait_for(lambda: watcher.reflection.relists == 1, what="watcher listed")
            assert set(watcher.pods) == {f"{ns}/batch-{i}" for i in range(PENDING)}

            # the pool is scaled down, then the scheduler gives up on the batch pods
            scaled_at = datetime.now(UTC) - timedelta(seconds=2)
            await watcher.observe(
                LifecycleEvent(
                    LifecycleType.SCALED,
                    "fw-test-1",
                    scaled_at,
                    {"pool": "general", "from": 3, "to": 2},
                )
            )
            for i in range(PENDING):
                await set_status(api, ns, f"batch-{i}", unschedulable(datetime.now(UTC)))
            await wait_for(
                lambda: watcher.findings() and watcher.findings()[0].actual == PENDING,
                what="the capacity finding naming every pending pod",
            )
            [finding] = watcher.findings()
            assert (finding.layer, finding.pool) == (Layer.CAPACITY, "general")
            assert finding.extra["pods"] == [f"{ns}/batch-{i}" for i in range(PENDING)]
            assert finding.extra["scaledDown"]["from"] == 3

            # churn among the running pods: the unfiltered watch hears all of it
            for round_ in range(3):
                for i in range(RUNNING):
                    await api.patch(
                        f"{path}/web-{i}",
                        {"metadata": {"annotations": {"round": str(round_)}}},
                        content_type=JSON_MERGE,
                    )
            await wait_for(lambda: seen_all["events"] >= RUNNING * 3, what="unfiltered events")

            # capacity comes back: the pods schedule and start, and leave the field selector
            for i in range(PENDING):
                await set_status(api, ns, f"batch-{i}", running(datetime.now(UTC)))
            await wait_for(lambda: not watcher.findings(), what="the finding cleared")
            for t in tasks:
                t.cancel()
    kinds = [e.type for e in events]
    assert kinds[0] is FindingEventType.APPEARED and kinds[-1] is FindingEventType.CLEARED
    print(
        f"\ncapacity watch bytes: field-selected {filtered.bytes}, unfiltered {unfiltered.bytes} "
        f"({RUNNING} running pods x 3 updates, {PENDING} pending)"
    )
    assert filtered.bytes * 5 < unfiltered.bytes
