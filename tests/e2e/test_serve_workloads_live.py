"""`fleetwarden serve` with `workloads:` on a real kube-apiserver: the watchers keep the app's
objects warm, /api/fleet/{versions,diff,apps} answer from that cache, a drift made by hand is
a finding with its author, and when Git catches up (the desired files change) the next
refresh clears it."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import httpx
import pytest
import yaml

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.entrypoints.serve_cmd import build_service
from fleetwarden.wiring.running import serve
from fleetwarden.wiring.service_config import load_service_config
from tests.e2e.test_fleet_live_sources import context_of
from tests.e2e.test_heal_live import _port, _until
from tests.e2e.test_workloads_live import (
    _ensure_namespace,
    apply_like_argocd,
    desired_objects,
    endpoint,  # noqa: F401  (the fixture)
    set_image,
)
from tests.e2e.test_workloads_watch_live import _delete_namespace_objects

pytestmark = pytest.mark.live

NS = "serve-live"
NEW_IMAGE = "loadgenerator:v0.10.7"


def _with_image(docs: list[dict], image: str) -> list[dict]:
    out = copy.deepcopy(docs)
    gen = next(d for d in out if d["metadata"]["name"] == "loadgenerator")
    gen["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return out


async def test_serve_follows_an_app_and_answers_from_the_warm_cache(
    endpoint,  # noqa: F811
    k8s,
    realdata,
    tmp_path,
):
    docs = desired_objects(realdata)
    rendered = tmp_path / "rendered"
    rendered.mkdir()
    (rendered / "shop.yaml").write_text(yaml.safe_dump_all(docs))
    kubeconfig = Path(k8s["kubeconfig"])
    port = _port()
    cfg = tmp_path / "svc.yaml"
    cfg.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{port}",
                "queuePath": str(tmp_path / "q.db"),
                "store": f"sqlite:///{tmp_path / 'audit.db'}",
                "clusters": {
                    "kubeconfig": str(kubeconfig),
                    "contexts": [context_of(kubeconfig, endpoint.name)],
                    "probeIntervalSeconds": 5,
                },
                "workloads": {
                    "apps": [{"name": "shop", "desired": [str(rendered)]}],
                    "namespaces": [NS],
                    "refreshSeconds": 5,
                },
                "fleet": {"namespace": NS},
            }
        )
    )
    async with KubeClient(endpoint) as api:
        await _ensure_namespace(api, NS)
        await _delete_namespace_objects(api, NS)
        for obj in docs:
            await apply_like_argocd(api, obj, namespace=NS)
        await set_image(api, NS, "loadgenerator", NEW_IMAGE)

        service = build_service(load_service_config(cfg))
        task = asyncio.create_task(serve(service))
        base = f"http://127.0.0.1:{port}"
        try:
            w = await _until(
                lambda: (
                    (c := service.fleet.watcher(endpoint.name))
                    and c.workloads is not None
                    and c.workloads.synced.is_set()
                    and c.workloads
                ),
                timeout=30,
            )
            # no keep-alive: the waits below outlast uvicorn's 5 s idle timeout, and a request
            # sent on a connection the server is closing just then fails (client-side race)
            no_reuse = httpx.Limits(max_keepalive_connections=0)
            async with httpx.AsyncClient(base_url=base, timeout=10, limits=no_reuse) as http:
                r = await http.get("/api/fleet/versions", params={"app": "shop"})
                assert r.status_code == 200, r.text
                doc = r.json()
                drift = [
                    (x["cluster"], x["workload"], x["image"]) for x in doc["rows"] if x["drift"]
                ]
                assert drift == [(endpoint.name, "loadgenerator", NEW_IMAGE)]
                assert doc["summary"]["clustersDivergingFromGit"] == [endpoint.name]

                r = await http.get("/api/fleet/diff", params={"app": "shop"})
                assert r.status_code == 200
                findings = r.json()["findings"]
                assert [(f["field"], f["actual"]) for f in findings] == [("image.main", NEW_IMAGE)]
                assert findings[0]["changedBy"]["manager"] == "kubectl-set"

                everything = (await http.get("/api/findings")).json()
                assert any(f["field"] == "image.main" for f in everything)

                apps = (await http.get("/api/fleet/apps")).json()
                assert apps["apps"][0]["objects"] == len(docs)
                assert apps["apps"][0]["error"] is None
                assert apps["clusters"][endpoint.name]["synced"] is True

                assert (await http.get("/api/fleet/versions")).status_code == 400
                missing = await http.get("/api/fleet/diff", params={"app": "nope"})
                assert missing.status_code == 404 and missing.json()["followed"] == ["shop"]

                # Git catches up with the cluster: the next refresh clears the finding
                caught_up = yaml.safe_dump_all(_with_image(docs, NEW_IMAGE))
                (rendered / "shop.yaml").write_text(caught_up)
                # the image finding clears (the shared test API server may hold other tests'
                # nodes, whose own findings are not this test's business)
                await _until(
                    lambda: not [f for f in w.tracker.current() if f.field == "image.main"],
                    timeout=45,
                )
                r = await http.get("/api/fleet/diff", params={"app": "shop"})
                assert r.json()["findings"] == []

                # a broken desired file keeps the last good state and says why
                (rendered / "shop.yaml").write_text("kind: [unclosed\n")
                await _until(lambda: service.workloads.failures.get("shop"), timeout=20)
                apps = (await http.get("/api/fleet/apps")).json()
                assert "shop.yaml" in apps["apps"][0]["error"]
                assert apps["apps"][0]["objects"] == len(docs)
                assert (await http.get("/api/fleet/diff", params={"app": "shop"})).json()[
                    "findings"
                ] == []
        finally:
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=60)
            await _delete_namespace_objects(api, NS)
            # once under a loaded CI run this took over 30 s: say what was still running
            assert done, "serve did not stop within 60 s of being cancelled; still running: " + (
                "; ".join(
                    f"{t.get_name()} at {t.get_stack(limit=1)}"
                    for t in asyncio.all_tasks()
                    if not t.done() and t is not asyncio.current_task()
                )
            )
