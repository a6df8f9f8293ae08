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
