"""Leader election on a real kube-apiserver (scripts/k8s-test-env): two and three electors
(asyncio tasks with their own clients, and separate OS processes) never have two leaders at a
sampled instant; kill -9 of the leader hands over within leaseSeconds + 5 s; a leader cut
from the API server steps down before its lease could expire and another takes over; a
fencing token from before a takeover is refused."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.kube.lease import KubeLeaseStore, parse_micro_time
from fleetwarden.app.electing import Elector, Fence, FenceRefused
from fleetwarden.core.leadership import ElectionTiming
from tests.support.lease_elector import spawn
from tests.support.waiting import wait_for

pytestmark = pytest.mark.live

NS = "default"
LEASE, DEADLINE, RETRY = 4, 2.5, 0.5
TIMING = ElectionTiming(LEASE, DEADLINE, RETRY)


@pytest.fixture()
def endpoint(k8s):
    return load_kubeconfig(Path(k8s["kubeconfig"]))[0]


@pytest.fixture()
def lease_name() -> str:
    return f"fw-test-{uuid.uuid4().hex[:8]}"


def wait_sync(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := cond():
            return got
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.parametrize("replicas", [2, 3])
async def test_task_electors_have_one_leader_at_every_instant_and_hand_over(
    endpoint, lease_name, replicas
):
    """Two or three electors, each with its own client: sampled every 10 ms, never two
    leaders; cancelling the leader releases the Lease and another leads within a retry."""
    clients = [KubeClient(endpoint) for _ in range(replicas)]
    electors = [
        Elector(
            KubeLeaseStore(c, namespace=NS, name=lease_name), identity=f"task-{i}", timing=TIMING
        )
        for i, c in enumerate(clients)
    ]
    tasks: dict[str, asyncio.Task[None]] = {}
    samples: list[list[str]] = []
    try:
        async with asyncio.TaskGroup() as tg:
            for e in electors:
                tasks[e.identity] = tg.create_task(e.run())

            def sample() -> list[str]:
                leading = [e.identity for e in electors if e.leading]
                samples.append(leading)
                return leading

            first = (await wait_for(sample, 10, "a first leader"))[0]
            end = time.monotonic() + 3
            while time.monotonic() < end:  # hold steady: renewals keep one leader
                assert sample() == [first]
                await asyncio.sleep(0.01)
            token = next(e for e in electors if e.identity == first).fencing_token
            tasks[first].cancel()  # graceful: stops leading, then releases
            handed = time.monotonic()
            second = (
                await wait_for(
                    lambda: [x for x in sample() if x != first], 3 * RETRY + 2, "a second leader"
                )
            )[0]
            took = time.monotonic() - handed
            print(f"\nrelease handover: {took:.3f}s (retry period {RETRY}s)")
            assert took < 1.2 * RETRY + 1.0
            new = next(e for e in electors if e.identity == second).fencing_token
            assert token is not None and new == token + 1
            end = time.monotonic() + 2
            while time.monotonic() < end:
                assert len(sample()) <= 1
                await asyncio.sleep(0.01)
            for t in tasks.values():
                t.cancel()
    finally:
        for c in clients:
            await c.aclose()
    assert max(len(s) for s in samples) == 1, "two electors led at one sampled instant"
    assert len(samples) > 300


async def test_release_on_shutdown_clears_the_holder_and_keeps_transitions(endpoint, lease_name):
    async with KubeClient(endpoint) as api:
        store = KubeLeaseStore(api, namespace=NS, name=lease_name)
        stopped: list[str] = []
        elector = Elector(store, identity="solo", timing=TIMING, on_stopped_leading=stopped.append)
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(elector.run())
            await asyncio.wait_for(elector.leading_event.wait(), 10)
            assert elector.fencing_token == 0
            task.cancel()
        got = await store.read()
        assert got is not None
        record, _ = got
        assert record.holder_identity == "" and record.lease_duration_seconds == 1
        assert record.lease_transitions == 0 and stopped == ["shutting down"]
        raw = await api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease_name}")
        # MicroTime on the wire: six fractional digits, UTC
        assert len(raw["spec"]["renewTime"].split(".")[1]) == len("000000Z")
        assert parse_micro_time(raw["spec"]["renewTime"]) == record.renew_time


async def test_a_token_from_before_a_takeover_is_refused(endpoint, lease_name):
    """The leader's own term has not lapsed yet (a long retry period), but another replica
    took the Lease meanwhile: the fence reads the Lease and refuses the old token."""
    slow = ElectionTiming(30, 20, 15)
    async with KubeClient(endpoint) as api_a, KubeClient(endpoint) as api_b:
        a = Elector(KubeLeaseStore(api_a, namespace=NS, name=lease_name), identity="a", timing=slow)
        fence = Fence(a)
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(a.run())
            await asyncio.wait_for(a.leading_event.wait(), 10)
            token = a.fencing_token
            assert token == 0
            await fence.check(token)  # the current term passes
            with pytest.raises(FenceRefused, match="term is now 0"):
                await fence.check(token + 1)
            # another replica takes over (as one would after a's partition): leaseTransitions+1
            b_store = KubeLeaseStore(api_b, namespace=NS, name=lease_name)
            got = await b_store.read()
            assert got is not None
            record, version = got
            taken = type(record)("b", 30, record.acquire_time, record.renew_time, token + 1)
            await b_store.update(taken, version)
            assert a.leading  # a's clock has not told it yet...
            with pytest.raises(FenceRefused, match="changed hands") as refused:
                await fence.check(token)  # ...but the fence reads the Lease
            assert refused.value.token == token
            task.cancel()
        got = await b_store.read()
        assert got is not None and got[0].holder_identity == "b", "a released b's lease"


# --- separate OS processes --------------------------------------------------------------


class Proc:
    """An elector process and the JSON lines it printed (read by a thread)."""

    def __init__(self, name: str, popen: subprocess.Popen[str]) -> None:
        self.name, self.popen = name, popen
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with contextlib.suppress(ValueError):
                self.events.append(json.loads(line))

    def last(self, event: str) -> dict[str, Any] | None:
        found = [e for e in self.events if e["event"] == event]
        return found[-1] if found else None

    @property
    def leading(self) -> bool:
        kinds = [e["event"] for e in self.events if e["event"] in ("started", "stopped")]
        return bool(kinds) and kinds[-1] == "started" and self.popen.poll() is None

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)


@pytest.fixture()
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


def start(procs: list[Proc], k8s, endpoint, lease_name: str, who: str, **kw: Any) -> Proc:
    p = Proc(
        who,
        spawn(
            k8s["kubeconfig"],
            endpoint.name,
            NS,
            lease_name,
            who,
            lease=LEASE,
            deadline=DEADLINE,
            retry=RETRY,
            **kw,
        ),
    )
    procs.append(p)
    return p


def intervals(p: Proc, *, until: float) -> list[tuple[float, float]]:
    """(started, stopped) wall times of each term the process announced."""
    out, opened = [], None
    for e in p.events:
        if e["event"] == "started":
            opened = e["t"]
        elif e["event"] == "stopped" and opened is not None:
            out.append((opened, e["t"]))
            opened = None
    if opened is not None:
        out.append((opened, until))
    return out


def assert_no_overlap(ps: list[Proc], until: float) -> None:
    terms = sorted((s, e, p.name) for p in ps for s, e in intervals(p, until=until))
    for (_s1, e1, n1), (s2, _e2, n2) in itertools.pairwise(terms):
        assert s2 >= e1, f"{n1} led until {e1} but {n2} started at {s2}"


def test_kill_9_of_the_leader_process_hands_over_within_lease_plus_5s(
    procs, k8s, endpoint, lease_name
):
    ps = [start(procs, k8s, endpoint, lease_name, f"proc-{i}") for i in range(3)]
    leader = wait_sync(lambda: [p for p in ps if p.leading], 20, "a leader process")
    assert len(leader) == 1
    leader = leader[0]
    end = time.monotonic() + 2
    while time.monotonic() < end:
        assert sum(p.leading for p in ps) == 1
        time.sleep(0.01)
    os.kill(leader.popen.pid, signal.SIGKILL)
    killed = time.time()
    leader.popen.wait(10)
    others = [p for p in ps if p is not leader]
    nxt = wait_sync(lambda: [p for p in others if p.leading], LEASE + 5, "a takeover")[0]
    started = nxt.last("started")
    assert started is not None
    took = started["t"] - killed
    print(f"\nkill -9 takeover: {took:.3f}s (leaseSeconds {LEASE}, budget {LEASE + 5}s)")
    assert took <= LEASE + 5
    assert took >= LEASE - 1, "took over before the dead leader's lease could have run out"
    assert sum(p.leading for p in others) == 1
    assert_no_overlap(others, until=time.time())


def test_sigterm_releases_and_a_process_takes_over_at_its_next_retry(
    procs, k8s, endpoint, lease_name
):
    ps = [start(procs, k8s, endpoint, lease_name, f"proc-{i}") for i in range(2)]
    leader = wait_sync(lambda: [p for p in ps if p.leading], 20, "a leader process")[0]
    other = next(p for p in ps if p is not leader)
    leader.popen.terminate()
    sent = time.time()
    assert leader.popen.wait(10) == 0
    assert leader.last("released") is not None
    wait_sync(lambda: other.leading, LEASE + 5, "the other process to lead")
    started = other.last("started")
    assert started is not None
    took = started["t"] - sent
    print(f"\nSIGTERM (release) takeover: {took:.3f}s")
    assert took < LEASE, "the release did not shorten the takeover"
    assert_no_overlap(ps, until=time.time())


class Proxy:
    """A TCP relay to the API server that the test can blackhole: afterwards it forwards
    nothing in either direction and holds every connection open (a silent partition)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.cut = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._socks: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not self.cut.is_set():
                    dst.sendall(data)

    def close(self) -> None:
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()


def test_a_leader_cut_from_the_api_server_steps_down_before_its_lease_ends(
    procs, k8s, endpoint, lease_name
):
    host, _, port = endpoint.server.removeprefix("https://").rpartition(":")
    proxy = Proxy((host, int(port)))
    try:
        cut_off = start(
            procs,
            k8s,
            endpoint,
            lease_name,
            "behind-proxy",
            server=f"https://{host}:{proxy.port}",
        )
        wait_sync(lambda: cut_off.leading, 20, "the proxied process to lead")
        other = start(procs, k8s, endpoint, lease_name, "direct")
        wait_sync(lambda: other.last("ready"), 20, "the second process to start")
        assert cut_off.leading and not other.leading
        proxy.cut.set()
        cut = time.time()
        wait_sync(lambda: not cut_off.leading, LEASE, "the cut-off leader to step down")
        stopped = cut_off.last("stopped")
        assert stopped is not None
        step_down = stopped["t"] - cut
        wait_sync(lambda: other.leading, LEASE + 5, "the other process to take over")
        started = other.last("started")
        assert started is not None
        takeover = started["t"] - cut
        print(
            f"\npartition: stepped down after {step_down:.3f}s (renewDeadline {DEADLINE}s), "
            f"other led after {takeover:.3f}s (leaseSeconds {LEASE}s)"
        )
        assert step_down < LEASE
        assert stopped["t"] < started["t"], "the cut-off leader still led when the other started"
        assert takeover <= LEASE + 5
        assert_no_overlap([cut_off, other], until=time.time())
    finally:
        proxy.close()
