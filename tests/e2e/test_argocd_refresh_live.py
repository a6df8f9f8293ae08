"""Event-targeted Argo CD refresh on a real kube-apiserver (issue 14 item 6).

The real Argo CD CRDs hold an Application whose managed objects live on the same API server;
the Argo CD API simulator (its answers and every request fleetwarden sends validated against
Argo CD's OpenAPI document, ``SpecChecker``) reads those live objects when refreshed. A live
image change of a managed Deployment must refresh exactly that application, which then reports
OutOfSync; a change of an unmanaged Deployment must refresh nothing; each refresh is one audit
record naming its cause, without the Argo CD token.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.argo_refreshing import RefreshSettings
from fleetwarden.core.argo_refresh import RefreshMode
from fleetwarden.core.audit import AuditKind
from tests.adapters.test_argocd_client import CheckingTransport, SpecChecker
from tests.support.argo_refresh_rig import bystander, object_path, rig, wait_for

pytestmark = [pytest.mark.live, pytest.mark.realdata]

ARGO_NS, APP_NS = "argocd-refresh", "refresh-shop"
WITHIN_MS = 5000  # generous: a loaded 2-core machine; typical is tens of ms


async def test_a_managed_change_refreshes_its_app_to_outofsync_and_a_bystander_nothing(
    k8s, realdata, tmp_path
):
    spec = json.loads((realdata / "argocd" / "argocd-api-swagger.json").read_text())
    checker = SpecChecker(spec)
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        async with (
            KubeClient(endpoint) as api,
            rig(
                api,
                endpoint.name,
                endpoint.server,
                realdata / "crds",
                argo_ns=ARGO_NS,
                app_ns=APP_NS,
                settings=RefreshSettings(control_namespace=ARGO_NS, debounce=0.5),
                audit=store,
                wrap=lambda inner: CheckingTransport(inner, checker),
            ) as r,
        ):
            # the tree Argo CD reported makes the Deployment and its ConfigMap members
            tree = {(k.kind, k.name) for k in r.refresher.apps["shop"].resources}
            assert {("Deployment", "web-0"), ("ConfigMap", "web-0-config")} <= tree
            baseline = await r.refresher.refresh("shop", RefreshMode.NORMAL)
            assert (baseline.sync, baseline.error) == ("Synced", None)

            # an object no application owns: its change is seen, and refreshes nothing
            sent = len(r.sim.refreshes)
            path = object_path(bystander(APP_NS))
            await api.patch(
                path,
                {"metadata": {"labels": {"touched": "yes"}}},
                content_type=JSON_MERGE,
            )
            await wait_for(
                lambda: r.seen(
                    bystander(APP_NS), lambda b: b["metadata"]["labels"].get("touched") == "yes"
                ),
                what="the bystander change seen",
            )
            assert r.refresher.scheduler.pending == {}
            assert len(r.sim.refreshes) == sent

            # a managed Deployment drifts: its app is refreshed and reports OutOfSync
            started = time.monotonic()
            await r.set_image(0, "nginx:1.28-drifted")
            result = await wait_for(
                lambda: next((x for x in r.refresher.results if x.sync == "OutOfSync"), None),
                timeout=WITHIN_MS / 1000,
                what="the application refreshed to OutOfSync",
            )
            elapsed_ms = (time.monotonic() - started) * 1000
            assert elapsed_ms < WITHIN_MS
            assert result.app == "shop" and result.mode is RefreshMode.NORMAL
            assert r.sim.refreshes[sent:] == [("shop", "normal")]
            held = r.sim.application("shop")
            statuses = {x["name"]: x["status"] for x in held["status"]["resources"]}
            assert statuses == {"web-0": "OutOfSync", "web-0-config": "Synced"}
            assert "argocd.argoproj.io/refresh" not in (held["metadata"].get("annotations") or {})
            (cause,) = result.causes
            assert (
                cause["basis"] == "resource-tree"
                and "Deployment refresh-shop/web-0" in cause["object"]
            )

            # on demand, hard: the spec's refresh=hard
            r.refresher.request("shop", RefreshMode.HARD, cause="asked by an operator")
            await wait_for(lambda: r.sim.refreshes[-1] == ("shop", "hard"), what="a hard refresh")
            # its result, not only Argo CD's record of it: leaving the rig cancels the refresher,
            # and a refresh cancelled between its audit note and its result counts once only
            await wait_for(
                lambda: any(x.mode is RefreshMode.HARD for x in r.refresher.results),
                what="the hard refresh's result",
            )

        # every request and answer was Argo CD's API as its OpenAPI document defines it
        assert not checker.failures
        gets = [s for op, s in checker.seen if op == "ApplicationService_Get"]
        assert gets and set(gets) == {200}
        records = await store.query(kind=AuditKind.NOTE, limit=50)
        refreshes = [x for x in records if x.payload.get("type") == "argocd.refresh"]
        assert len(refreshes) == len(r.refresher.results) + 1  # + the baseline refresh
        outofsync = [x for x in refreshes if x.payload["sync"] == "OutOfSync"]
        assert outofsync and outofsync[-1].payload["causes"][0]["basis"] == "resource-tree"
        assert outofsync[-1].actor == "fleetwarden" and outofsync[-1].cluster == endpoint.name
        token = r.client._token  # the issued bearer token
        dumped = json.dumps([x.payload for x in records]) + " ".join(x.summary for x in records)
        assert token and token not in dumped
    finally:
        await store.close()
