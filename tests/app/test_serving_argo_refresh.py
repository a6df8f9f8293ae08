"""The serve pipeline's Argo CD refresh wiring (app.serving + app.argo_refreshing): with
``argocd.refresh`` and an Argo CD API client, the fleet's live workload changes and new change
events reach the refresher; apps from the Argo CD inventory map to fleet clusters; the
service config reads the section and refuses a bad one naming the field."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.app.argo_refreshing import RefreshSettings
from fleetwarden.app.argo_watching import ArgoInventory
from fleetwarden.app.serving import Serving, ServingSettings
from fleetwarden.core.applications import Application, Destination
from fleetwarden.core.argo_refresh import AppTracking, RefreshMode, touched_by_event
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.leadership import ElectionTiming
from fleetwarden.formats.errors import FormatError
from fleetwarden.wiring.service_config import service_config_from

POOLS_APP = {
    "metadata": {"name": "pools"},
    "spec": {"destination": {"server": "https://c1.example.com", "namespace": "karpenter"}},
    "status": {
        "resources": [
            {"group": "karpenter.sh", "version": "v1", "kind": "NodePool", "name": "general"}
        ]
    },
}


class Queue:  # built, not run: nothing is queued
    async def close(self) -> None: ...


class Recorded:
    """The recorder's answer: which events are new (the inspector's dedupe)."""

    def __init__(self, new: list[bool]) -> None:
        self.new = new

    async def record(self, events: Any) -> list[bool]:
        return self.new


def serving(client: ArgoCDClient | None, refresh: RefreshSettings | None) -> Serving:
    s = Serving(
        ServingSettings(argocd_refresh=refresh),
        [],
        Queue(),  # type: ignore[arg-type]
        client_factory=lambda _e: None,  # type: ignore[arg-type,return-value]
        argocd=client,  # type: ignore[arg-type]
    )
    s.fleet.known["c1"] = ClusterEndpoint("c1", "https://c1.example.com/")
    return s


def pool_event(new_id: str) -> ChangeEvent:
    return ChangeEvent(
        id=new_id,
        source="aws.eks",
        type="UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="c1",
        pool="general",
    )


async def test_a_new_pool_event_refreshes_the_app_whose_tree_holds_the_nodepool():
    sim = ArgoCDSimulator([POOLS_APP])
    async with ArgoCDClient(
        "http://argocd.test", token=sim.issue_token(), transport=httpx.ASGITransport(app=sim)
    ) as client:
        s = serving(client, RefreshSettings(debounce=0.0))
        assert s.refresher is not None and s.fleet.on_object == s.refresher.on_object
        inventory = ArgoInventory()
        inventory.apps.items[("argocd", "pools")] = Application(
            "argocd", "pools", "default", Destination(server="https://c1.example.com")
        )
        await s._follow_argo_apps(inventory)  # what the fleet's Argo CD watcher calls
        assert s.refresher.apps["pools"].cluster == "c1"  # server, trailing slash aside
        s.recorder = Recorded([False, True])  # type: ignore[assignment]
        task = asyncio.create_task(s.refresher.run())
        try:
            await s._record([pool_event("seen-before"), pool_event("new")])
            deadline = time.monotonic() + 5
            while not s.refresher.results:
                assert time.monotonic() < deadline, "no refresh"
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    (result,) = s.refresher.results
    assert (result.app, result.mode) == ("pools", RefreshMode.NORMAL)
    assert [c["cause"] for c in result.causes] == ["event aws.eks UpdateNodegroupConfig new"]
    assert sim.refreshes == [("pools", "normal")]


def test_without_the_setting_or_an_argo_client_there_is_no_refresher():
    assert serving(None, RefreshSettings()).refresher is None
    sim = ArgoCDSimulator([POOLS_APP])
    client = ArgoCDClient("http://argocd.test", token="t", transport=httpx.ASGITransport(app=sim))
    assert serving(client, None).refresher is None
    assert serving(client, RefreshSettings(enabled=False)).refresher is None


def test_the_service_config_reads_argocd_refresh():
    base = {"url": "https://argocd.example.com"}
    assert service_config_from({}, source="s.yaml").argocd_refresh is None
    on = service_config_from({"argocd": base}, source="s.yaml").argocd_refresh
    assert on == RefreshSettings()
    hard = service_config_from({"argocd": {**base, "refresh": "hard"}}, source="s.yaml")
    assert hard.argocd_refresh is not None and hard.argocd_refresh.mode is RefreshMode.HARD
    with pytest.raises(FormatError) as caught:
        service_config_from({"argocd": {**base, "refresh": {"rate": -2}}}, source="s.yaml")
    assert caught.value.field == "argocd.refresh.rate" and caught.value.path == "s.yaml"


async def test_without_an_argo_cluster_watch_the_apps_come_from_the_argo_api():
    """follow_api lists the applications through the API (spec-shaped answers), maps their
    destinations to fleet clusters, reads their trees, and leaves out one that does not parse."""
    broken = {"metadata": {"name": "broken"}, "spec": {"destination": "not-a-mapping"}}
    sim = ArgoCDSimulator([POOLS_APP, broken])
    async with ArgoCDClient(
        "http://argocd.test", token=sim.issue_token(), transport=httpx.ASGITransport(app=sim)
    ) as client:
        s = serving(client, RefreshSettings())
        assert s.refresher is not None
        task = asyncio.create_task(s.refresher.follow_api(s._cluster_of, every=3600))
        try:
            deadline = time.monotonic() + 5
            while not ("pools" in s.refresher.apps and s.refresher.apps["pools"].resources):
                assert time.monotonic() < deadline, "apps not followed"
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert list(s.refresher.apps) == ["pools"]
    pools = s.refresher.apps["pools"]
    assert pools.cluster == "c1" and {k.kind for k in pools.resources} == {"NodePool"}


class Elector:  # what Serving and the healer read of an elector
    def __init__(self) -> None:
        self.leading = False
        self.fencing_token = None
        self.on_started_leading = None
        self.timing = ElectionTiming()


def test_with_leader_election_only_the_leader_refreshes():
    """Every replica watches every cluster without sharding: one refresh per change, the
    leader's."""
    sim = ArgoCDSimulator([POOLS_APP])
    client = ArgoCDClient("http://argocd.test", token="t", transport=httpx.ASGITransport(app=sim))
    elector = Elector()
    s = Serving(
        ServingSettings(argocd_refresh=RefreshSettings()),
        [],
        Queue(),  # type: ignore[arg-type]
        client_factory=lambda _e: None,  # type: ignore[arg-type,return-value]
        argocd=client,
        elector=elector,  # type: ignore[arg-type]
    )
    assert s.refresher is not None
    (nodepool,) = touched_by_event(pool_event("x"))
    s.refresher.apps["pools"] = AppTracking(
        "pools", cluster="c1", resources=frozenset({nodepool.key})
    )
    s.refresher.event(pool_event("follower"))
    assert s.refresher.scheduler.pending == {}
    elector.leading = True
    s.refresher.event(pool_event("leader"))
    assert s.refresher.scheduler.pending == {"pools": RefreshMode.NORMAL}
