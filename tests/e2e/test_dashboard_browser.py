"""The web dashboard in a real headless Chromium (Debian's, driven by Playwright): one logs in
through the form (auth.read), the session cookie is out of the page's reach and its fetches
work with it; it shows what the API says, filters, follows the service's event stream as it
changes, a hostile value stays text; logging out closes it again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from datetime import UTC, datetime

import httpx
import pytest

from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.entrypoints.serve_cmd import build_service
from fleetwarden.wiring.running import serve
from fleetwarden.wiring.service_config import load_service_config
from tests.e2e.test_heal_live import _port

pytestmark = pytest.mark.live

CHROMIUM = os.environ.get("FW_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
HOSTILE = '<img src=x onerror="window.__pwned=1">'
READ = "dashboard-read-token"
AUTH = {"authorization": f"Bearer {READ}"}


@pytest.fixture()
async def service(tmp_path, realdata):
    nodes = realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json"
    (tmp_path / "pools.yaml").write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\ncluster: honeycomb\n"
        "pools:\n  general:\n    minSize: 1\n    labels: {team: platform}\n"
    )
    (tmp_path / "shop.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n"
        "  template:\n    spec:\n      containers: [{name: main, image: web:1}]\n"
    )
    port = _port()
    cfg = tmp_path / "svc.yaml"
    cfg.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{port}",
                "queuePath": str(tmp_path / "q.db"),
                "store": f"sqlite:///{tmp_path / 'audit.db'}",
                "desired": [str(tmp_path / "pools.yaml")],
                "nodes": [f"honeycomb={nodes}"],
                "workloads": {"apps": [{"name": "shop", "desired": [str(tmp_path)]}]},
                "auth": {"read": {"bearerToken": READ}},
            }
        )
    )
    svc = build_service(load_service_config(cfg))
    task = asyncio.create_task(serve(svc))
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base) as http:

        async def up() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return (await http.get("/healthz")).status_code == 200
            return False

        for _ in range(200):
            if await up():
                break
            await asyncio.sleep(0.05)
    yield svc, base
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=30)
    assert done, "serve did not stop"


async def test_dashboard_shows_the_api_and_keeps_hostile_values_inert(service):
    from playwright.async_api import async_playwright

    svc, base = service
    async with httpx.AsyncClient(base_url=base, headers=AUTH) as http:
        page_resp = await http.get("/ui/")
        assert page_resp.status_code == 200
        csp = page_resp.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert (await http.get("/ui/../pyproject.toml")).status_code == 404
        findings = (await http.get("/api/findings")).json()
        clusters = (await http.get("/api/clusters")).json()
    assert findings, "the node dump should drift from the pool (the test needs findings)"
    assert [c["cluster"] for c in clusters] == ["honeycomb"]
    assert clusters[0]["findings"] == len(findings) and clusters[0]["source"] == "node dump"

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            # not logged in: the dashboard's address answers with the login form
            await page.goto(base + "/")  # redirects to /ui/
            assert await page.locator("#findings").count() == 0
            await page.fill("#token", "not-the-token")
            async with page.expect_navigation():
                await page.click("#submit")
            assert await page.locator("#error").is_visible()
            await page.fill("#token", READ)
            async with page.expect_navigation():
                await page.click("#submit")
            await page.wait_for_selector("body[data-loaded=true]", timeout=15_000)
            errors.clear()  # Chromium logs each 401 page load (the form) as a console error
            assert page.url == base + "/ui/"
            # the first view: incidents (open findings grouped by cause)
            assert await page.locator("body[data-view=incidents] #incidents li").count() >= 1
            # the session is a cookie the page's script cannot read, sent to this site only
            (cookie,) = await page.context.cookies()
            assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
                "fw_session",
                True,
                "Strict",
            )
            assert READ not in cookie["value"]
            assert await page.evaluate("() => document.cookie") == ""
            card = page.locator('.card[data-name="findings"] b')
            assert await card.inner_text() == str(len(findings))
            await page.click("nav a[data-view=clusters]")
            await page.wait_for_selector("#clusters")
            assert await page.locator("#clusters tbody tr td").first.inner_text() == "honeycomb"
            await page.click("nav a[data-view=apps]")
            await page.wait_for_selector("#app")
            assert await page.locator("#app option").all_inner_texts() == ["shop"]
            await page.click("nav a[data-view=findings]")
            await page.wait_for_selector("#findings")
            rows = page.locator("#findings tbody tr")
            assert await rows.count() == len(findings)

            # the severity filter: only critical ones (none here) -> the "none" row
            await page.select_option("#severity", "critical")
            expected = sum(1 for f in findings if f["severity"] == "critical")
            if expected == 0:
                assert await page.locator("#findings tbody tr.empty").count() == 1
            else:
                assert await rows.count() == expected
            await page.select_option("#severity", "info")

            # a finding appears with a hostile value: shown as text on the next refresh
            hostile = Finding(
                "honeycomb",
                "general",
                Layer.L1,
                "labels.owner",
                "platform",
                HOSTILE,
                Severity.CRITICAL,
                extra={"actor": {"name": "kubectl-edit", "kind": "human", "via": "managedFields"}},
            )
            now = datetime.now(UTC)
            scoped = [f for f in svc.tracker.current() if f.pool == "general"] + [hostile]
            for ev in svc.tracker.update(("honeycomb", "general"), scoped, now=now):
                svc.emit(ev)
            for _ in range(300):  # the page follows /api/stream
                if await rows.count() == len(findings) + 1:
                    break
                await asyncio.sleep(0.05)
            assert await rows.count() == len(findings) + 1
            cell = page.locator("#findings tbody td", has_text="onerror")
            assert await cell.inner_text() == HOSTILE
            assert await page.evaluate("() => window.__pwned") is None
            assert await page.locator("#findings img").count() == 0

            # the text filter
            await page.fill("#filter", "labels.owner")
            assert await rows.count() == 1
            # "changed by": the live finding's actor (issue 14)
            assert await rows.first.locator("td").last.inner_text() == "kubectl-edit"
            assert errors == [], errors

            # a session that ends (expired, token rotated): the reload the next streamed
            # message asks for is a 401, and the page goes back to the form
            await page.context.clear_cookies()
            for ev in svc.tracker.update(("honeycomb", "general"), scoped[:-1], now=now):
                svc.emit(ev)
            await page.wait_for_selector("#token", timeout=15_000)
            await page.fill("#token", READ)
            async with page.expect_navigation():
                await page.click("#submit")
            await page.wait_for_selector("body[data-loaded=true]", timeout=15_000)

            # logging out: back to the form, and the API refuses what the page asks
            await page.click("#logout")
            await page.wait_for_selector("#token", timeout=15_000)
            assert await page.context.cookies() == []
            assert (await page.request.get(base + "/api/findings")).status == 401
            await page.goto(base + "/ui/")
            assert await page.locator("#token").count() == 1
        finally:
            await browser.close()
