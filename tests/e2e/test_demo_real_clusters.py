"""``fleetwarden demo`` on real kube-apiservers (issue 13: "real kube-apiservers when the
cached binaries are present"): one API server per demo cluster, started through
scripts/k8s-test-env, loaded with the fleet's Node objects; serve watches them live, the
simulated cloud's changes are patches on them (managedFields name the editor before the
provider's event arrives), and everything started is stopped on the way out."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.entrypoints.serve_cmd import build_service
from fleetwarden.wiring import demo_clusters, demo_service

pytestmark = pytest.mark.live


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def binaries() -> None:
    if not demo_clusters.available():
        if os.environ.get("FW_REQUIRE_REALDATA") == "1":  # CI builds them before pytest
            pytest.fail("scripts/k8s-test-env has no cached binaries here")
        pytest.skip("no cached kube-apiserver/etcd binaries (scripts/k8s-test-env build)")


async def test_the_demo_runs_on_real_api_servers_and_stops_them(binaries):
    seen: dict[str, Any] = {}
    runner = asyncio.create_task(
        demo_service.run(
            port=_free_port(), interval=0.3, seed=5, steps=6, real=True, build=build_service,
            on_ready=lambda url, tokens, svc: seen.update(svc=svc),
        )
    )  # fmt: skip
    try:
        for _ in range(1200):  # the API servers start (a few seconds each), then the service
            if "svc" in seen and len(seen["svc"].fleet.running) == 3:
                break
            await asyncio.sleep(0.05)
        svc = seen["svc"]
        kubeconfig = svc.config.kubeconfig
        assert kubeconfig is not None and not svc.config.nodes  # watched, not node dumps
        assert sorted(svc.fleet.running) == ["prod-asia-1", "prod-eu-1", "prod-us-1"]
        # the planted drift is found on the live clusters, with a managedFields actor
        for _ in range(600):
            live = [f for f in svc.findings() if (f.extra.get("actor") or {}).get("via")]
            if live:
                break
            await asyncio.sleep(0.05)
        assert live, [f.to_json() for f in svc.findings()][:3]
        assert {f.extra["actor"]["via"] for f in live} <= {"managedFields", "cloudEvent", "audit"}
        # the nodes are Node objects on the API servers
        (ep,) = load_kubeconfig(Path(kubeconfig), contexts=["prod-eu-1"])
        async with KubeClient(ep) as api:
            nodes = (await api.list("/api/v1/nodes")).items
        assert len(nodes) >= 10
        server = ep.server
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    # stopped on the way out: the API server no longer answers, its state directory is gone
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server}/readyz", verify=False, timeout=2)
    assert not Path(kubeconfig).exists()
