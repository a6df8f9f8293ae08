"""The Elector's shell over an in-memory Lease (compare-and-swap like the API server): it
announces leadership once per change, stops leading at the renew deadline when the store
hangs or fails, loses races cleanly, releases only a lease it still holds, and the Fence
refuses stale tokens. Short real durations; waits are on events with timeouts."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from fleetwarden.app.electing import Elector, Fence, FenceRefused, default_identity
from fleetwarden.core.leadership import ElectionTiming, LeaseRecord
from fleetwarden.ports.kube import Conflict, Transient
from fleetwarden.ports.leases import LeaseStore

TIMING = ElectionTiming(lease_duration=1, renew_deadline=0.5, retry_period=0.1)


class MemoryLease:
    """One Lease in memory; ``mode`` "ok" | "hang" (calls never answer) | "fail" (Transient)."""

    where = "memory/ns/lease"

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.mode = "ok"
        self.writes: list[LeaseRecord] = []

    async def _gate(self) -> None:
        if self.mode == "hang":
            await asyncio.Event().wait()
        if self.mode == "fail":
            raise Transient("memory", "connection refused")

    async def read(self) -> tuple[LeaseRecord, str] | None:
        await self._gate()
        return None if self.record is None else (self.record, str(self.version))

    async def create(self, record: LeaseRecord) -> str:
        await self._gate()
        if self.record is not None:
            raise Conflict("memory", "already exists", status=409)
        return self._put(record)

    async def update(self, record: LeaseRecord, version: str) -> str:
        await self._gate()
        if self.record is None or version != str(self.version):
            raise Conflict("memory", "the object has been modified", status=409)
        return self._put(record)

    def _put(self, record: LeaseRecord) -> str:
        self.record, self.version = record, self.version + 1
        self.writes.append(record)
        return str(self.version)


def elector(store: LeaseStore, name: str, log: list[tuple[str, Any]], **kw: Any) -> Elector:
    return Elector(
        store,
        identity=name,
        timing=kw.pop("timing", TIMING),
        on_started_leading=lambda t: log.append((f"{name} started", t)),
        on_stopped_leading=lambda why: log.append((f"{name} stopped", why)),
        **kw,
    )


async def until(cond: Callable[[], Any], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)


async def test_a_hanging_api_server_makes_the_leader_stop_at_its_renew_deadline():
    store, log = MemoryLease(), []
    e = elector(store, "a", log)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(e.run())
        await asyncio.wait_for(e.leading_event.wait(), 2)
        store.mode = "hang"
        hung = time.monotonic()
        await asyncio.wait_for(e.following_event.wait(), 2)
        took = time.monotonic() - hung
        assert not e.leading and e.fencing_token is None
        task.cancel()
    assert took <= TIMING.renew_deadline + 0.05
    assert log == [("a started", 0), ("a stopped", log[1][1])]
    assert "renew deadline" in log[1][1]
    assert store.record is not None and store.record.holder_identity == "a", (
        "a lapsed leader must not write a release"
    )


async def test_failing_requests_lapse_the_term_and_a_new_term_gets_a_new_token():
    store, log = MemoryLease(), []
    e = elector(store, "a", log)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(e.run())
        await asyncio.wait_for(e.leading_event.wait(), 2)
        store.mode = "fail"
        await asyncio.wait_for(e.following_event.wait(), 2)
        assert "connection refused" in e.last_reason
        store.mode = "ok"
        await asyncio.wait_for(e.leading_event.wait(), 2)
        assert e.fencing_token == 1, "the lease named a, but a's old term had lapsed"
        task.cancel()
    assert [entry[0] for entry in log] == ["a started", "a stopped", "a started", "a stopped"]
    assert store.record is not None and store.record.holder_identity == ""
    assert store.record.lease_transitions == 1


class View:
    """One replica's connection to the shared lease; ``cut`` makes its calls hang."""

    where = "memory/ns/lease"

    def __init__(self, lease: MemoryLease) -> None:
        self.lease, self.cut = lease, False

    async def _gate(self) -> None:
        if self.cut:
            await asyncio.Event().wait()

    async def read(self) -> tuple[LeaseRecord, str] | None:
        await self._gate()
        return await self.lease.read()

    async def create(self, record: LeaseRecord) -> str:
        await self._gate()
        return await self.lease.create(record)

    async def update(self, record: LeaseRecord, version: str) -> str:
        await self._gate()
        return await self.lease.update(record, version)


async def test_a_cut_off_leader_stops_before_the_other_starts_after_the_lease():
    lease, log = MemoryLease(), []
    view_a = View(lease)
    a, b = elector(view_a, "a", log), elector(View(lease), "b", log)
    async with asyncio.TaskGroup() as tg:
        ta = tg.create_task(a.run())
        await asyncio.wait_for(a.leading_event.wait(), 2)
        tb = tg.create_task(b.run())
        await until(lambda: b.last_reason.startswith("held by 'a'"), 2)
        view_a.cut = True
        cut = time.monotonic()
        await asyncio.wait_for(b.leading_event.wait(), 3)
        took = time.monotonic() - cut
        ta.cancel()
        tb.cancel()
    assert [entry[0] for entry in log[:3]] == ["a started", "a stopped", "b started"]
    assert log[2][1] == 1
    assert TIMING.lease_duration - TIMING.retry_period <= took <= TIMING.lease_duration + 0.5


async def test_a_lost_race_gives_no_term():
    store, log = MemoryLease(), []
    store.record, store.version = LeaseRecord("", 1, None, None, 4), 7
    e = elector(store, "a", log)
    original = store.update

    async def racing(record: LeaseRecord, version: str) -> str:
        store.version += 1  # someone wrote just before us
        return await original(record, version)

    store.update = racing  # type: ignore[method-assign]
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(e.run())
        await until(lambda: "wrote the lease first" in e.last_reason, 2)
        assert not e.leading and log == []
        task.cancel()


async def test_fence_refuses_when_not_leading_and_when_the_lease_moved():
    store, log = MemoryLease(), []
    slow = ElectionTiming(lease_duration=30, renew_deadline=20, retry_period=15)
    e = elector(store, "a", log, timing=slow)
    fence = Fence(e)
    with pytest.raises(FenceRefused, match="not the leader"):
        await fence.check(0)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(e.run())
        await asyncio.wait_for(e.leading_event.wait(), 2)
        await fence.check(0)
        assert store.record is not None
        store._put(replace(store.record, holder_identity="b", lease_transitions=1))
        with pytest.raises(FenceRefused, match="changed hands"):
            await fence.check(0)
        store.mode = "fail"
        with pytest.raises(FenceRefused, match="cannot read the lease"):
            await fence.check(0)
        store.mode = "ok"
        task.cancel()
    assert store.record is not None and store.record.holder_identity == "b"


def test_identity_is_the_pod_name_or_host_and_pid():
    assert default_identity({"POD_NAME": "fw-7d9-x"}) == "fw-7d9-x"
    assert default_identity({}) == f"{socket.gethostname()}_{os.getpid()}"
