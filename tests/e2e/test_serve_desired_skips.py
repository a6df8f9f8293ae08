"""``fleetwarden serve`` (in this process, over HTTP) says what of the desired state it compares
in no cluster, as ``watch`` and ``scan`` do: a desired file it could not read, a file that
defines no pool, a pool whose cluster is not known, and a desired cluster it has no access to
(no context, no Argo CD cluster Secret, no node dump names it). Before, serve dropped all of
them without a word: its heatmap even showed the unreachable cluster's pools green "ok".

- the event stream (``/api/stream``, and the recent events): ``file.skipped`` and
  ``pool.not_compared`` (``cluster`` null) as the service starts, in ``scan``'s ``skipped[]``
  shape, and ``cluster.not_compared`` for the cluster (``reason``, ``pools``, ``source``);
- ``/healthz``: ``desired.skipped`` (scan's entries) and ``desired.clustersNotCompared``;
- the dashboard's API: the cluster's row in ``/api/clusters`` (``source: "not found"``, why),
  its heatmap row and cells ``notCompared``, its pool's detail ``skipped`` with the reason."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_watch_desired_skips_live import NO_CLUSTER
from tests.support.big_fleet import TOKENS, running_service

pytestmark = pytest.mark.live
READ = {"authorization": f"Bearer {TOKENS['read']}"}
ELSEWHERE = {
    "apiVersion": "fleetwarden.io/v1alpha1",
    "kind": "NodePools",
    "cluster": "c999",
    "pools": {"general": {"instanceTypes": ["m5.large"], "minSize": 2}},
}


def _more(root: Path) -> Path:
    more = root / "more"
    more.mkdir()
    (more / "broken.yaml").write_text("a: [\n")
    (more / "readme.yaml").write_text("hello: world\n")
    (more / "spot.yaml").write_text(NO_CLUSTER)
    (more / "elsewhere.yaml").write_text(json.dumps(ELSEWHERE))
    return more


async def _said(resp: httpx.Response, n: int) -> list[dict]:
    """The first ``n`` messages of the stream that say something was not compared."""
    wanted = ("file.skipped", "pool.not_compared", "cluster.not_compared")
    said: list[dict] = []

    async def read() -> None:
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                if isinstance(data, dict) and data.get("type") in wanted:
                    said.append(data)
                    if len(said) == n:
                        return

    await asyncio.wait_for(read(), 20)
    return said


async def test_serve_says_the_desired_state_it_compares_in_no_cluster(tmp_path):
    more = _more(tmp_path)
    extra = {"desired": [str(tmp_path / "fleet.yaml"), str(more)]}
    async with (
        running_service(tmp_path, 2, extra=extra) as (svc, base),
        httpx.AsyncClient(base_url=base, timeout=10, headers=READ) as http,
    ):
        # the stream from its start: the skips, then the cluster no one gave
        async with http.stream("GET", "/api/stream?lastEventId=0") as resp:
            said = await _said(resp, 4)
        files = [e for e in said if e["type"] == "file.skipped"]
        assert {e["path"]: bool(e.get("problem")) for e in files} == {
            str(more / "broken.yaml"): True,
            str(more / "readme.yaml"): False,
        }
        (spot,) = [e for e in said if e["type"] == "pool.not_compared"]
        assert spot["cluster"] is None and spot["pool"] == "spot"
        assert "cluster unknown" in spot["reason"]
        (c999,) = [e for e in said if e["type"] == "cluster.not_compared"]
        assert c999["cluster"] == "c999" and c999["pools"] == ["general"]
        assert c999["source"] == str(more / "elsewhere.yaml")
        reason = "no cluster watched is named 'c999': its 1 pools were not compared"
        assert c999["reason"] == reason
        assert [e["type"] for e in svc.events].count("cluster.not_compared") == 1

        health = (await http.get("/healthz")).json()
        assert health["status"] == "ok"
        skipped = health["desired"]["skipped"]
        assert {s["path"] for s in skipped} == {
            str(more / n) for n in ("broken.yaml", "readme.yaml", "spot.yaml")
        }
        (missing,) = health["desired"]["clustersNotCompared"]
        assert missing == {"cluster": "c999", "reason": reason, "pools": ["general"],
                           "source": str(more / "elsewhere.yaml")}  # fmt: skip

        clusters = {c["cluster"]: c for c in (await http.get("/api/clusters")).json()}
        assert clusters["c999"]["source"] == "not found"
        assert clusters["c999"]["notCompared"] == reason
        assert clusters["c000"]["source"] == "node dump"

        grid = (await http.get("/api/fleet/grid")).json()
        rows = {r["cluster"]: r for r in grid["rows"]}
        cells = dict(zip(grid["pools"], rows["c999"]["cells"], strict=True))
        assert cells["general"] == ["notCompared", 0] and rows["c999"]["worst"] == "notCompared"
        c001 = dict(zip(grid["pools"], rows["c001"]["cells"], strict=True))
        assert c001["general"] == ["ok", 0]  # compared from its dump

        pool = await http.get("/api/pools/c999/general")
        assert pool.status_code == 200
        doc = pool.json()
        assert doc["desired"] is None
        assert doc["skipped"] == [
            {"path": str(more / "elsewhere.yaml"), "reason": reason, "pool": "general"}
        ]
