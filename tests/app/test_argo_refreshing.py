"""ArgoRefresher against the Argo CD simulator (real client over ASGI) and a real SQLite audit
store: what it refreshes, how (normal/hard, debounced), what it records, how it fails.
The live path on a real API server is tests/e2e/test_argocd_refresh_live.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.argo_refreshing import ArgoRefresher, RefreshSettings, parse_refresh_settings
from fleetwarden.core.argo_refresh import RefreshMode, TrackingMethod
from fleetwarden.core.audit import AuditKind
from fleetwarden.formats.errors import FormatError

DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "annotations": {"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:shop/web"},
    },
    "spec": {"replicas": 2},
}


class Cluster:
    """The live objects the simulated controller reads (a dict here; a real API server in
    the e2e test)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {"web": json.loads(json.dumps(DEPLOY))}

    async def read(self, desired: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any] | None]:
        return [self.objects.get(d["metadata"]["name"]) for d in desired]


@contextlib.asynccontextmanager
async def setup(
    tmp_path: Path, settings: RefreshSettings, **client_options: Any
) -> AsyncIterator[tuple[ArgoRefresher, ArgoCDSimulator, Cluster, Any]]:
    cluster = Cluster()
    sim = ArgoCDSimulator(
        [{"metadata": {"name": "shop"}, "spec": {"destination": {"namespace": "shop"}}}],
        live=cluster.read,
    )
    sim.set_manifests("shop", [DEPLOY])
    token = sim.issue_token()
    options = {"timeout": 2.0, "retries": 0} | client_options
    client = ArgoCDClient(
        "http://argocd.test", token=token, transport=httpx.ASGITransport(app=sim), **options
    )
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    refresher = ArgoRefresher(client, settings=settings, audit=store)
    refresher.follow("shop", cluster="c1")
    task = asyncio.create_task(refresher.run())
    try:
        yield refresher, sim, cluster, store
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()
        await store.close()


async def until(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_touched_object_refreshes_its_app_hard_when_configured_and_is_audited(tmp_path):
    async with setup(tmp_path, RefreshSettings(mode=RefreshMode.HARD, debounce=0.1)) as (
        refresher,
        sim,
        cluster,
        store,
    ):
        cluster.objects["web"]["spec"]["replicas"] = 5  # drifted from Git's 2
        await refresher.on_object("c1", cluster.objects["web"], "MODIFIED")
        await until(lambda: refresher.results)
        (result,) = refresher.results
        assert (result.app, result.mode, result.sync) == ("shop", RefreshMode.HARD, "OutOfSync")
        assert sim.refreshes == [("shop", "hard")]
        (record,) = [
            r
            for r in await store.query(kind=AuditKind.NOTE)
            if r.payload["type"] == "argocd.refresh"
        ]
        assert record.payload["causes"][0]["basis"] == "tracking-id"
        assert record.payload["causes"][0]["cause"] == "live modified of apps/Deployment shop/web"
        assert record.summary == "argocd hard refresh of shop: OutOfSync"
        stored = json.dumps(record.payload) + record.summary
        assert refresher.argocd._token not in stored  # type: ignore[attr-defined]


async def test_changes_within_the_debounce_fold_into_one_trailing_refresh(tmp_path):
    async with setup(tmp_path, RefreshSettings(debounce=1.0)) as (refresher, sim, cluster, _):
        cluster.objects["web"]["spec"]["replicas"] = 3
        await refresher.on_object("c1", cluster.objects["web"], "MODIFIED")
        await until(lambda: refresher.results)  # the first change: refreshed at once
        for replicas in (4, 5, 2):  # within the window; the last one restores Git's value
            cluster.objects["web"]["spec"]["replicas"] = replicas
            await refresher.on_object("c1", cluster.objects["web"], "MODIFIED")
        assert len(sim.refreshes) == 1  # waiting for the window to end
        await until(lambda: len(refresher.results) == 2)
        assert [r.sync for r in refresher.results] == ["OutOfSync", "Synced"]
        assert len(refresher.results[1].causes) == 3  # the three folded changes, each named
        assert sim.refreshes == [("shop", "normal")] * 2


async def test_an_object_of_another_app_or_cluster_refreshes_nothing(tmp_path):
    async with setup(tmp_path, RefreshSettings(debounce=0.0)) as (refresher, sim, cluster, _):
        other = json.loads(json.dumps(DEPLOY))
        other["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] = (
            "billing:apps/Deployment:shop/web"
        )
        await refresher.on_object("c1", other, "MODIFIED")
        await refresher.on_object("c2", cluster.objects["web"], "MODIFIED")  # other cluster
        assert refresher.scheduler.pending == {}
        await refresher.on_object("c1", cluster.objects["web"], "DELETED")  # control: it works
        await until(lambda: sim.refreshes)
        assert sim.refreshes == [("shop", "normal")]


async def test_a_failed_refresh_is_recorded_not_raised(tmp_path):
    async with setup(tmp_path, RefreshSettings(debounce=0.0)) as (refresher, sim, cluster, store):
        sim.fail_next(status=503, path="/applications/shop")
        await refresher.on_object("c1", cluster.objects["web"], "MODIFIED")
        await until(lambda: refresher.results)
        (result,) = refresher.results
        assert result.sync is None and result.error and "ArgoUnavailable" in result.error
        (record,) = await store.query(kind=AuditKind.NOTE)
        assert record.payload["error"] == result.error
        assert record.summary.startswith("argocd normal refresh of shop failed")


async def test_disabled_refresh_decides_but_sends_nothing(tmp_path):
    async with setup(tmp_path, parse_refresh_settings(False)) as (refresher, sim, cluster, _):
        await refresher.on_object("c1", cluster.objects["web"], "MODIFIED")
        assert refresher.scheduler.pending == {} and sim.refreshes == []


@pytest.mark.parametrize(
    ("raw", "field", "reason"),
    [
        ("soft", "argocd.refresh.mode", "'soft' is not one of normal, hard"),
        ({"debounce": -1}, "argocd.refresh.debounce", "expected a number >= 0"),
        ({"rate": 0}, "argocd.refresh.rate", "expected a number > 0"),
        ({"burst": 0}, "argocd.refresh.burst", "expected an integer >= 1"),
        ({"trackingMethod": "uid"}, "argocd.refresh.trackingMethod", "'uid' is not one of"),
        ({"every": 3}, "argocd.refresh", "unknown key(s) every (expected: burst, "),
        (3, "argocd.refresh", "expected normal, hard, true, false or a mapping"),
    ],
)
def test_bad_settings_name_the_file_and_field(raw, field, reason):
    with pytest.raises(FormatError) as caught:
        parse_refresh_settings(raw, source="serve.yaml")
    assert caught.value.field == field and caught.value.reason.startswith(reason)
    assert str(caught.value).startswith(f"serve.yaml: {field}: ")


def test_settings_read_the_documented_forms():
    assert parse_refresh_settings("hard").mode is RefreshMode.HARD
    assert parse_refresh_settings(None) == RefreshSettings()
    custom = parse_refresh_settings(
        {"mode": "normal", "debounce": 0, "trackingMethod": "label", "instanceLabel": "team/app"}
    )
    assert (custom.debounce, custom.method, custom.instance_label) == (
        0.0,
        TrackingMethod.LABEL,
        "team/app",
    )
