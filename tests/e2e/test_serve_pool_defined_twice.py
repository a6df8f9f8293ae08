"""``fleetwarden serve`` (in this process, over HTTP) with pool ``general`` of cluster ``c000``
defined in two files: as ``scan``, neither definition is compared -- no finding on its nodes
(c000's ``general`` carries planted drift against the first file, and matches neither), none
saying they are outside the desired state -- and the API says the pool was not compared: the
heatmap cell is ``notCompared``, not ``ok``, and the pool's detail gives scan's ``skipped[]``
entries instead of one definition's facts."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.big_fleet import TOKENS, running_service

pytestmark = pytest.mark.live
READ = {"authorization": f"Bearer {TOKENS['read']}"}


def _second(root: Path) -> Path:
    path = root / "c000-general.yaml"
    doc = {
        "apiVersion": "fleetwarden.io/v1alpha1",
        "kind": "NodePools",
        "cluster": "c000",
        "pools": {"general": {"instanceTypes": ["m5.xlarge"], "minSize": 2}},
    }
    path.write_text(json.dumps(doc))
    return path


async def test_serve_compares_neither_definition_and_its_api_says_the_pool_was_not_compared(
    tmp_path,
):
    first, second = tmp_path / "fleet.yaml", _second(tmp_path)
    extra = {"desired": [str(first), str(second)]}
    async with (
        running_service(tmp_path, 2, extra=extra) as (_svc, base),
        httpx.AsyncClient(base_url=base, timeout=10, headers=READ) as http,
    ):
        findings = (await http.get("/api/findings")).json()
        c000 = {f["pool"] for f in findings if f["cluster"] == "c000"}
        assert "general" not in c000 and {"memory", "batch"} <= c000, findings
        grid = (await http.get("/api/fleet/grid")).json()
        rows = {
            r["cluster"]: dict(zip(grid["pools"], r["cells"], strict=True)) for r in grid["rows"]
        }
        assert rows["c000"]["general"] == ["notCompared", 0]
        assert rows["c001"]["general"] == ["ok", 0]  # compared there: one definition
        pool = await http.get("/api/pools/c000/general")
        assert pool.status_code == 200
        doc = pool.json()
        assert doc["desired"] is None and doc["layers"] == {}
        assert {s["path"] for s in doc["skipped"]} == {str(first), str(second)}
        for s in doc["skipped"]:
            assert s["pool"] == "general" and "defined 2 times" in s["reason"]
        other = (await http.get("/api/pools/c001/general")).json()
        assert other["skipped"] == [] and other["desired"]["source"] == str(first)


async def test_the_dashboard_shows_the_pool_as_not_compared(tmp_path):
    """In the browser: the heatmap cell of c000/general is painted ``notCompared`` (not the
    green of a pool compared and clean), and the pool's page says "Not compared" with each
    file's reason, not one definition's facts."""
    from playwright.async_api import async_playwright

    from tests.e2e.test_dashboard_fleet_browser import _browser_page

    first, second = tmp_path / "fleet.yaml", _second(tmp_path)
    extra = {"desired": [str(first), str(second)]}
    async with running_service(tmp_path, 2, extra=extra) as (_svc, base), async_playwright() as pw:
        browser, page, errors = await _browser_page(pw, base)
        try:
            await page.goto(base + "/ui/?view=fleet")
            await page.wait_for_selector("#heatmap")
            cell = page.locator('#heatmap a.cell[data-cluster="c000"][data-pool="general"]')
            assert "sev-notCompared" in (await cell.get_attribute("class") or "")
            other = page.locator('#heatmap a.cell[data-cluster="c001"][data-pool="general"]')
            assert "sev-ok" in (await other.get_attribute("class") or "")
            await cell.click()
            await page.wait_for_selector("#pool")
            text = await page.locator("#pool").inner_text()
            assert "Not compared" in text and "no desired state names this pool" not in text
            assert str(first) in text and str(second) in text and "defined 2 times" in text
            assert await page.locator("#facts").count() == 0
            assert errors == []
        finally:
            await browser.close()


async def test_serve_watching_a_live_cluster_compares_neither_definition(k8s, tmp_path):
    """The live side of serve, on a real kube-apiserver: its first pass compared neither
    definition, but then the watcher took over and compared the last one read (``team:
    payments``: node g-1 was a labels.team finding against it). Now a label changed on g-1
    is no finding either; ``web`` (defined once, its node w-1 added after that change) is
    compared, and the service's events say ``pool.not_compared`` for both files."""
    import asyncio
    import contextlib

    from fleetwarden.adapters.kube.client import KubeClient
    from fleetwarden.adapters.kube.config import load_kubeconfig
    from fleetwarden.entrypoints.serve_cmd import build_service
    from fleetwarden.wiring.running import serve
    from fleetwarden.wiring.service_config import load_service_config
    from tests.e2e.test_heal_live import _config, _node, _until
    from tests.e2e.test_watch_live import _clean

    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    cfg = _config(tmp_path, k8s["kubeconfig"], ep.name, "dry-run")
    second = tmp_path / "general.yaml"
    second.write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n"
        f"cluster: {ep.name}\npools:\n  general:\n    minSize: 1\n"
        "    labels: {team: payments}\n  web:\n    minSize: 1\n    labels: {team: web}\n"
    )
    raw = json.loads(cfg.read_text())
    raw["desired"].append(str(second))
    cfg.write_text(json.dumps(raw))
    service = build_service(load_service_config(cfg))
    async with KubeClient(ep) as api:
        await _clean(api)
        await api.request("POST", "/api/v1/nodes", body=_node("g-1", team="platform"))
        task = asyncio.create_task(serve(service))
        try:
            await _until(
                lambda: (w := service.fleet.watcher(ep.name)) is not None and w.synced.is_set(),
                timeout=30,
            )
            await api.patch("/api/v1/nodes/g-1", {"metadata": {"labels": {"team": "ops"}}})
            web = _node("w-1", team="by-hand")
            web["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] = "web"
            await api.request("POST", "/api/v1/nodes", body=web)
            await _until(lambda: [f for f in service.findings() if f.pool == "web"], timeout=30)
            assert [f.pool for f in service.findings()] == ["web"]
            said = [e for e in service.events if e["type"] == "pool.not_compared"]
            assert {(e["cluster"], e["pool"], e["path"]) for e in said} == {
                (ep.name, "general", str(tmp_path / "desired.yaml")),
                (ep.name, "general", str(second)),
            }
            events = [e for e in service.events if e["type"].startswith("finding.")]
            assert {e["finding"]["pool"] for e in events} == {"web"}
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await _clean(api)
