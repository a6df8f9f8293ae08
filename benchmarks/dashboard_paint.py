"""The dashboard in Chromium (Debian's, driven by Playwright) against the real ``serve`` on a
fleet of N clusters (node dumps + one native desired file: ``tests/support/big_fleet.py``).

Two figures (issue 13, item 5):

* first paint of the fleet page: a fresh page opens ``/ui/?view=fleet`` (logged in); the page
  marks ``fw-painted`` in the animation frame after it drew the heatmap; the figure is that
  mark's ``startTime`` (ms from navigation start, the browser's own clock). The incidents view
  (the first view) is measured the same way in the same run, for a side-by-side ratio.
* change -> finding visible: a finding is put on a pool that has none (``tracker.update`` +
  ``emit``, what a watcher or an inspection does); the time from that call until the open
  heatmap shows the cell in the finding's severity, read in the page (``Date.now()`` in a
  ``requestAnimationFrame`` poll) against the emitter's ``time.time()`` -- one machine, one
  clock. It covers the event stream, the page's reload and the redraw.

    .venv/bin/python benchmarks/dashboard_paint.py --clusters 500 --runs 15
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

from tests.support.big_fleet import TOKENS, cluster_name, running_service

from fleetwarden.core.findings import Finding, Layer, Severity

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
CHROMIUM = os.environ.get("FW_CHROMIUM") or "/usr/bin/chromium"


def _summary(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"{name}: median {statistics.median(ordered):.0f} ms, p95 {p95:.0f} ms, "
        f"max {ordered[-1]:.0f} ms (n={len(ordered)})"
    )


async def _paint(context, base: str, view: str) -> float:
    page = await context.new_page()
    try:
        await page.goto(f"{base}/ui/?view={view}")
        await page.wait_for_selector("body[data-painted=true]", timeout=30_000)
        mark = await page.evaluate("() => performance.getEntriesByName('fw-painted')[0].startTime")
        return float(mark)
    finally:
        await page.close()


async def measure(clusters: int, runs: int) -> None:
    from playwright.async_api import async_playwright

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        async with running_service(Path(tmp), clusters) as (svc, base), async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = await browser.new_context(viewport={"width": 1400, "height": 900})
            login = await context.new_page()
            await login.goto(base + "/ui/login")
            await login.fill("#token", TOKENS["read"])
            async with login.expect_navigation():
                await login.click("#submit")
            await login.wait_for_selector("body[data-loaded=true]")
            await login.close()
            await _paint(context, base, "fleet")  # warm: the scripts and the server's caches

            fleet, incidents = [], []
            for _ in range(runs):  # interleaved: both see the same load
                fleet.append(await _paint(context, base, "fleet"))
                incidents.append(await _paint(context, base, "incidents"))

            page = await context.new_page()
            await page.goto(base + "/ui/?view=fleet")
            await page.wait_for_selector("body[data-live=open]", timeout=30_000)
            await page.wait_for_selector("#heatmap")
            latencies = []
            for i in range(runs):
                cluster = cluster_name(1 + i)  # system pools carry no planted drift
                selector = f'#heatmap a.cell[data-cluster="{cluster}"][data-pool="system"]'
                assert "sev-ok" in (await page.get_attribute(selector, "class") or "")
                waiting = asyncio.ensure_future(
                    page.wait_for_function(
                        "(s) => { const c = document.querySelector(s);"
                        " return c && c.classList.contains('sev-critical') && Date.now(); }",
                        arg=selector,
                        polling="raf",
                        timeout=30_000,
                    )
                )
                await asyncio.sleep(0.2)  # the poll is installed
                finding = Finding(
                    cluster, "system", Layer.SPEC, "instanceType", "m5.large", f"t3.bench{i}",
                    Severity.CRITICAL,
                )  # fmt: skip
                emitted = time.time()
                for ev in svc.tracker.update((cluster, "system"), [finding], now=datetime.now(UTC)):
                    svc.emit(ev)
                seen_ms = await (await waiting).json_value()
                latencies.append(seen_ms - emitted * 1000)
            await browser.close()
    load_after = os.getloadavg()
    print(f"dashboard_paint: {clusters} clusters x 4 pools, {runs} runs each, Chromium headless")
    print(
        _summary("first paint, fleet heatmap", fleet),
        f"| {_summary('first paint, incidents view', incidents)}",
    )
    ratio = statistics.median(fleet) / statistics.median(incidents)
    print(f"heatmap / incidents first paint (medians): {ratio:.2f}x")
    print(_summary("change -> finding visible in the open page", latencies))
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (2 cores)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=int, default=500)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    asyncio.run(measure(args.clusters, args.runs))


if __name__ == "__main__":
    main()
