"""`fleet diff|versions` and `gate` on live sources: the observed side read from a real
kube-apiserver (--kubeconfig, --in-cluster), the desired side from Argo CD's rendered
manifests (--argocd-app, the simulator over real HTTP, seeded with real manifests)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.core import workloads as wl
from tests.e2e.test_cli_fleet import invoke
from tests.e2e.test_workloads_live import (
    _ensure_namespace,
    apply_like_argocd,
    desired_objects,
    endpoint,  # noqa: F401  (the fixture)
    set_image,
)
from tests.e2e.test_workloads_watch_live import _delete_namespace_objects
from tests.support.asgi_server import serve_asgi

pytestmark = pytest.mark.live

NS = "sources-live"
APP = "shop"


def context_of(kubeconfig: Path, cluster: str) -> str:
    doc = yaml.safe_load(kubeconfig.read_text())
    return next(c["name"] for c in doc["contexts"] if c["context"]["cluster"] == cluster)


@pytest.fixture()
def live_app(endpoint, realdata):  # noqa: F811
    """The app applied as in Git, then one image changed by hand in the cluster."""
    docs = desired_objects(realdata)

    async def setup() -> None:
        async with KubeClient(endpoint) as api:
            await _ensure_namespace(api, NS)
            await _delete_namespace_objects(api, NS)
            for obj in docs:
                await apply_like_argocd(api, obj, namespace=NS)
            await set_image(api, NS, "loadgenerator", "loadgenerator:v0.10.7")

    async def teardown() -> None:
        async with KubeClient(endpoint) as api:
            await _delete_namespace_objects(api, NS)

    asyncio.run(setup())
    yield docs
    asyncio.run(teardown())


@pytest.fixture()
def argocd(live_app):
    sim = ArgoCDSimulator(
        [
            {
                "metadata": {"name": APP},
                "spec": {
                    "source": {
                        "repoURL": "https://git.example.com/shop.git",
                        "targetRevision": "main",
                    },
                    "destination": {"server": "https://kubernetes.default.svc", "namespace": NS},
                },
            }
        ]
    )
    # what repo-server renders from Git: the manifests as they sit there (no namespace)
    sim.set_manifests(APP, live_app)
    with serve_asgi(sim) as url:
        yield sim, url


def test_fleet_diff_and_versions_from_argocd_and_a_live_cluster(
    endpoint,  # noqa: F811
    k8s,
    argocd,
    monkeypatch,
):
    sim, url = argocd
    token = sim.issue_token()
    kubeconfig = Path(k8s["kubeconfig"])
    live = [
        "--argocd-app", APP, "--argocd-server", url,
        "--kubeconfig", str(kubeconfig), "--context", context_of(kubeconfig, endpoint.name),
        "--namespace", NS, "-o", "json",
    ]  # fmt: skip
    monkeypatch.setenv("ARGOCD_AUTH_TOKEN", token)
    diff = invoke("fleet", "diff", "--app", APP, *live)
    versions = invoke("fleet", "versions", "--app", APP, *live)
    assert diff.exit_code == 1, diff.output
    doc = json.loads(diff.stdout)
    found = [(f["cluster"], f["pool"], f["field"], f["actual"]) for f in doc["findings"]]
    assert found == [
        (endpoint.name, f"Deployment/{NS}/loadgenerator", "image.main", "loadgenerator:v0.10.7")
    ]
    assert doc["summary"]["objects"] == len(argocd_objects(argocd))
    assert token not in diff.output
    assert ("GET", f"/api/v1/applications/{APP}/manifests") in sim.requests

    assert versions.exit_code == 1, versions.output
    rows = json.loads(versions.stdout)["rows"]
    drift = [r for r in rows if r["drift"]]
    assert [(r["workload"], r["container"], r["image"]) for r in drift] == [
        ("loadgenerator", "main", "loadgenerator:v0.10.7")
    ]


def argocd_objects(argocd: tuple[ArgoCDSimulator, str]) -> list[Any]:
    sim, _ = argocd
    return [d for d in sim._rendered[APP] if d.get("kind") in wl.KINDS]


def test_live_sources_fail_clearly(endpoint, k8s, argocd, monkeypatch):  # noqa: F811
    sim, url = argocd
    kubeconfig = Path(k8s["kubeconfig"])
    base = ["fleet", "diff", "--app", APP, "--argocd-app", APP, "--kubeconfig", str(kubeconfig)]
    monkeypatch.setenv("ARGOCD_AUTH_TOKEN", "")
    r = invoke(*base, "--argocd-server", url)
    assert r.exit_code == 2 and "ARGOCD_AUTH_TOKEN" in r.output
    monkeypatch.setenv("ARGOCD_AUTH_TOKEN", "not-a-valid-token")
    r = invoke(*base, "--argocd-server", url)
    assert r.exit_code == 2 and "argocd:shop" in r.output and "not-a-valid-token" not in r.output
    monkeypatch.setenv("ARGOCD_AUTH_TOKEN", sim.issue_token())
    r = invoke(*base, "--argocd-server", url, "--context", "no-such-context")
    assert r.exit_code == 2 and "no-such-context" in r.output
    r = invoke("fleet", "diff", "--app", APP, "--kubeconfig", str(kubeconfig))
    assert r.exit_code == 2 and "--argocd-app" in r.output  # no desired state at all
