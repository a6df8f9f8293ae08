"""The dashboard as an SRE uses it, in a real headless Chromium (Debian's, driven by
Playwright) against the real ``serve`` on a 500-cluster fleet (node dumps + one native desired
file, ``tests/support/big_fleet.py``): the heatmap paints every cluster and pool, a cell opens
the pool, the back button and shared URLs restore the view and its filters, a change reaches
the open page over the event stream (no polling), a request waiting for approval is approved
with the admin token, and the strict CSP is never violated."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest

from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from tests.e2e.test_dashboard_browser import ARGS, CHROMIUM
from tests.support.big_fleet import TOKENS, running_service

pytestmark = pytest.mark.live

CLUSTERS = 500
HOSTILE = '<img src=x onerror="window.__pwned=1">'
# counted before any page script runs: CSP violations and what the console says
WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


async def _browser_page(pw, base):
    browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.add_init_script(WATCH)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(base + "/ui/login")
    await page.fill("#token", TOKENS["read"])
    async with page.expect_navigation():
        await page.click("#submit")
    await page.wait_for_selector("body[data-loaded=true]", timeout=15_000)
    return browser, page, errors


async def _healer_settled(svc, quiet: float = 1.0, timeout: float = 30.0) -> None:
    """Until the healer's decisions (their ids and states) stay the same for ``quiet`` s."""

    def state():
        return {d.id: d.guard for d in svc.healer.decisions.values()}, {
            d.id for d in svc.healer.pending()
        }

    seen, since = state(), time.monotonic()
    deadline = since + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        now = state()
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def _emit(svc, cluster, pool, extra):
    """A finding appears on a pool, as the watcher or an inspection reports it."""
    now = datetime.now(UTC)
    scoped = [f for f in svc.tracker.current() if (f.cluster, f.pool) == (cluster, pool)]
    for ev in svc.tracker.update((cluster, pool), scoped + extra, now=now):
        svc.emit(ev)


async def test_heatmap_of_500_clusters_click_through_filters_and_live_findings(tmp_path):
    from playwright.async_api import async_playwright

    async with running_service(tmp_path, CLUSTERS) as (svc, base), async_playwright() as pw:
        browser, page, errors = await _browser_page(pw, base)
        try:
            # the heatmap: every cluster a row, every pool a cell, coloured by worst severity
            start = time.perf_counter()
            await page.goto(base + "/ui/?view=fleet")
            await page.wait_for_selector("#heatmap", timeout=15_000)
            first_paint = time.perf_counter() - start
            assert await page.locator("#heatmap").get_attribute("data-rows") == str(CLUSTERS)
            cells = page.locator("#heatmap a.cell")
            assert await cells.count() == CLUSTERS * 4
            # c000: general has a hand-set label (high), memory a resized node (critical)
            c0 = page.locator('#heatmap a.cell[data-cluster="c000"]')
            classes = {await c.get_attribute("data-pool"): await c.get_attribute("class")
                       for c in await c0.all()}  # fmt: skip
            assert "sev-critical" in classes["memory"] and "sev-high" in classes["general"]
            assert "sev-ok" in classes["system"]
            assert first_paint < 5, f"500 clusters took {first_paint:.2f} s to show"

            # the severity filter: only clusters whose worst is critical (every 11th)
            await page.select_option("#severity", "critical")
            assert "sev=critical" in page.url
            expected = len([i for i in range(CLUSTERS) if i % 11 == 0])
            assert await page.locator("#heatmap").get_attribute("data-rows") == str(expected)

            # click-through: a cell opens its pool (its URL can be shared)
            await page.click('#heatmap a.cell[data-cluster="c011"][data-pool="memory"]')
            await page.wait_for_selector("#pool")
            assert (
                "view=pool" in page.url and "cluster=c011" in page.url and "pool=memory" in page.url
            )
            assert "c011 / memory" in await page.locator("#pool h2").inner_text()
            facts = await page.locator("#facts tbody tr td:first-child").all_inner_texts()
            assert "instanceTypes" in facts
            origin = page.locator("#facts tbody tr", has_text="instanceTypes").locator("td").last
            assert "fleet.yaml" in await origin.inner_text()  # the provenance of the value
            nodes = await page.locator("#nodes tbody tr td:first-child").all_inner_texts()
            assert nodes == ["c011-memory-0", "c011-memory-1"]

            # the back button: the heatmap again, with its filter
            await page.go_back()
            await page.wait_for_selector("#heatmap")
            assert await page.locator("#severity").input_value() == "critical"
            assert await page.locator("#heatmap").get_attribute("data-rows") == str(expected)

            # a shared URL opens the same view with the same filters
            shared = await browser.new_page()
            await shared.context.add_cookies(await page.context.cookies())
            await shared.goto(base + "/ui/?view=findings&sev=critical&q=c022")
            await shared.wait_for_selector("#findings")
            rows = await shared.locator("#findings tbody tr").count()
            assert rows == sum(
                1 for f in svc.findings() if f.cluster == "c022" and f.severity is Severity.CRITICAL
            )
            assert rows >= 1
            assert await shared.locator("#filter").input_value() == "c022"
            await shared.close()

            # live: a finding appears in the open pool view over the event stream
            await page.goto(base + "/ui/?view=pool&cluster=c001&pool=system")
            await page.wait_for_selector("#pool")
            await page.wait_for_selector("body[data-live=open]")
            assert await page.locator("#pool table", has_text="labels.owner").count() == 0
            hostile = Finding(
                "c001", "system", Layer.L1, "labels.owner", "platform", HOSTILE, Severity.HIGH,
                extra={"actor": {"name": "kubectl-edit", "kind": "human", "via": "managedFields"},
                       "startedAt": "2026-12-01T00:00:00Z"},
            )  # fmt: skip
            t0 = time.perf_counter()
            _emit(svc, "c001", "system", [hostile])
            cell = page.locator("#pool td", has_text="onerror")
            await cell.wait_for(timeout=5_000)
            seen = time.perf_counter() - t0
            assert await cell.inner_text() == HOSTILE
            row = page.locator("#pool tr", has_text="labels.owner")
            assert "kubectl-edit" in await row.inner_text()  # the actor of the finding
            assert await page.locator("#pool-events li", has_text="appeared").count() >= 1
            assert await page.evaluate("() => window.__pwned") is None
            assert seen < 3, f"the finding took {seen:.2f} s to show"

            # the drift timeline: the findings opened (the initial scan's and this one) as
            # SVG bars, the pool's MTTD from the finding's start
            await page.click("nav a[data-view=timeline]")
            await page.wait_for_selector("#timeline svg")
            assert await page.locator("#timeline svg rect.opened").count() >= 1
            row = page.locator("#mttx tr", has_text="c001/system")
            assert "h" in (await row.locator("td").nth(2).inner_text())  # started hours ago

            assert await page.evaluate("() => window.__csp") == []
            assert errors == [], errors
        finally:
            await browser.close()


async def test_approve_and_deny_waiting_requests_with_the_admin_token(tmp_path):
    """Approval mode: a label drift makes a restore request; the page shows it as a row with
    a status badge, a one-line target, folded reasons; approving needs the admin token (the
    read session is not enough), and the approval is on record; denying another one cancels
    it, on record, with nothing run."""
    from playwright.async_api import async_playwright

    async with (
        running_service(tmp_path, 20, mode="approval") as (svc, base),
        async_playwright() as pw,
    ):
        for _ in range(200):  # the healer decides the initial findings
            if svc.healer.pending():
                break
            await asyncio.sleep(0.05)
        pending = svc.healer.pending()
        assert pending, "a label drift in approval mode waits for approval"
        await _healer_settled(svc)  # every initial finding decided
        browser, page, errors = await _browser_page(pw, base)
        try:
            await page.goto(base + "/ui/?view=decisions")
            waiting = page.locator('#decisions li.decision[data-status="pending-approval"]')
            await waiting.first.wait_for(timeout=15_000)
            decision_id = await waiting.first.get_attribute("data-id")
            row = page.locator(f'#decisions li[data-id="{decision_id}"]')
            assert await row.locator(".badge").first.inner_text() == "pending-approval"
            target = await row.locator(".target").inner_text()
            assert target.startswith("restore label team=") and "node(s) of c0" in target
            assert "{" not in target  # a summary, not raw JSON
            assert not await row.locator("details.reasons ul").is_visible()  # folded
            await row.locator("details.reasons summary").click()
            assert await row.locator("details.reasons li").count() >= 1
            await row.evaluate("(li) => { li.dataset.drawn = 'before'; }")

            # without the admin token: refused, nothing approved
            await row.locator("button.approve").click()
            note = page.locator("#decision-note")
            assert "needs the admin token" in await note.inner_text()
            await page.fill("#admin-token", "not-the-admin-token")
            # From here the page redraws as the healer's records arrive, and a redraw can
            # move a row under the mouse between Playwright's aim and its click: the buttons
            # get their click event directly (their handlers are what is tested here).
            await row.locator("button.approve").dispatch_event("click")
            await page.wait_for_function(
                "() => document.querySelector('#decision-note').textContent.includes('401')"
            )
            assert decision_id in {d.id for d in svc.healer.pending()}
            # the refusal reloaded the list: a new row, its reasons still unfolded
            redrawn = f'#decisions li[data-id="{decision_id}"]:not([data-drawn])'
            await page.locator(redrawn).wait_for()
            assert await row.locator("details.reasons ul").is_visible()

            await page.fill("#admin-token", TOKENS["admin"])
            approve = page.locator(f'#decisions li[data-id="{decision_id}"] button.approve')
            await approve.dispatch_event("click")
            await page.wait_for_function(
                "(id) => document.querySelector('#decision-note').textContent.startsWith("
                "`approved ${id}`)",
                arg=decision_id,
            )
            assert decision_id not in {d.id for d in svc.healer.pending()}
            notes = await svc.healer.audit.query(ref=decision_id, kind=AuditKind.NOTE)
            assert [n.summary.split(":")[0] for n in notes] == ["approved"]

            # deny: another request is refused, on record as a cancellation, nothing runs.
            # The approved restore re-diffs its pool, and the healer may replace the requests
            # still waiting: one is taken from the healer once it is done, as the page shows it
            await _healer_settled(svc)
            denied_id = svc.healer.pending()[0].id
            deny = page.locator(f'#decisions li[data-id="{denied_id}"] button.deny')
            await deny.wait_for(timeout=15_000)
            await deny.dispatch_event("click")
            await page.wait_for_function(
                "(id) => document.querySelector('#decision-note').textContent"
                ".startsWith(`denied ${id}: cancelled`)",
                arg=denied_id,
            )
            assert denied_id not in {d.id for d in svc.healer.pending()}
            assert svc.healer.decisions[denied_id].guard.value == "denied"
            notes = await svc.healer.audit.query(ref=denied_id, kind=AuditKind.NOTE)
            assert [n.summary.split(" ")[0] for n in notes] == ["cancelled"]
            assert "(denied)" in notes[0].summary
            assert await page.evaluate("() => window.__csp") == []
            errors = [e for e in errors if "401" not in e]  # the refused approval, on purpose
            assert errors == [], errors
        finally:
            await browser.close()
