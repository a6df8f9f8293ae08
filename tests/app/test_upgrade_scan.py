"""Issue 15 item 5: a control-plane upgrade scans the rendered manifests of the Argo CD
applications that target the cluster (Argo CD REST simulator), without ``--manifests``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.app.deprecating import table_for
from fleetwarden.app.upgrade_scan import (
    UpgradeScanner,
    apps_targeting,
    scan_findings,
    scan_rendered,
)
from fleetwarden.core.applications import ClusterRef
from fleetwarden.core.deprecations import parse_minor
from fleetwarden.core.findings import Layer, Severity
from fleetwarden.core.lifecycle import LifecycleEvent
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.formats.argocd_apps import application_from_object
from fleetwarden.ports.sources import FixedClock
from tests.adapters.test_argocd_client import SPEC_FILE, CheckingTransport, SpecChecker

SERVER = "https://prod.example:6443"
PDB_V1BETA1 = {
    "apiVersion": "policy/v1beta1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "web", "namespace": "shop"},
}
PSP = {"apiVersion": "policy/v1beta1", "kind": "PodSecurityPolicy", "metadata": {"name": "p"}}
DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
AT = datetime(2026, 12, 1, tzinfo=UTC)


def app(app_name: str, /, **destination: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": app_name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://git.example/fleet", "targetRevision": "main"},
            "destination": {"namespace": "shop", **destination},
        },
        "status": {},
    }


def test_scan_rendered_sorts_removed_from_deprecated_and_skips_junk() -> None:
    table = table_for(["k8s"])
    a = application_from_object(app("shop", server=SERVER))
    rendered = [json.dumps(PDB_V1BETA1), json.dumps(DEPLOY), "not json", "[1]"]
    at_125 = scan_rendered(a, rendered, parse_minor("1.25"), table)  # type: ignore[arg-type]
    assert [(r["apiVersion"], r["kind"], r["name"]) for r in at_125.removed] == [
        ("policy/v1beta1", "PodDisruptionBudget", "web")
    ]
    assert at_125.removed[0]["replacement"] == "policy/v1"
    at_122 = scan_rendered(a, rendered, parse_minor("1.22"), table)  # type: ignore[arg-type]
    assert at_122.removed == ()
    assert [d["kind"] for d in at_122.deprecated] == ["PodDisruptionBudget"]


def test_apps_targeting_matches_by_server_and_by_name() -> None:
    apps = [
        application_from_object(app("by-server", server=SERVER + "/")),
        application_from_object(app("by-name", name="prod")),
        application_from_object(app("elsewhere", server="https://other:6443")),
    ]
    names = [a.name for a in apps_targeting(apps, ClusterRef("prod", SERVER))]
    assert names == ["by-name", "by-server"]


def test_a_finding_per_app_using_a_removed_api_only() -> None:
    table = table_for(["k8s"])
    target = parse_minor("1.25")
    assert target is not None
    using = scan_rendered(
        application_from_object(app("old", server=SERVER)), [json.dumps(PDB_V1BETA1)], target, table
    )
    clean = scan_rendered(
        application_from_object(app("new", server=SERVER)), [json.dumps(DEPLOY)], target, table
    )
    (f,) = scan_findings("prod", "1.25", [using, clean])
    assert (f.layer, f.severity) == (Layer.WORKLOAD, Severity.HIGH)
    assert f.pool == "Application/argocd/old"
    assert f.actual == ["policy/v1beta1 PodDisruptionBudget"]
    assert "old" in f.message and "1.25" in f.message


@pytest.mark.realdata
async def test_the_scanner_reads_manifests_from_the_argocd_api(realdata: Path) -> None:
    """Without a live inventory the apps come from the API's list; every request and answer is
    checked against Argo CD's own OpenAPI document (``SpecChecker``)."""
    sim = ArgoCDSimulator(
        [app("old", server=SERVER), app("new", name="prod"), app("other", server="https://x")],
        tokens=["tok"],
    )
    sim.set_manifests("old", [PDB_V1BETA1, PSP, DEPLOY])
    sim.set_manifests("new", [DEPLOY])
    sim.set_manifests("other", [PDB_V1BETA1])
    events: list[object] = []
    checker = SpecChecker(json.loads((realdata / SPEC_FILE).read_text(encoding="utf-8")))
    transport = CheckingTransport(httpx.ASGITransport(app=sim), checker)
    async with ArgoCDClient(
        "http://argocd.test", token="tok", transport=transport, retries=0
    ) as client:
        scanner = UpgradeScanner(
            client,
            events.append,
            table=table_for(["k8s"]),
            server_of={"prod": SERVER}.get,
            clock=FixedClock(AT),
        )
        await scanner("prod", "v1.25.3")
    (scan,) = [e for e in events if isinstance(e, LifecycleEvent)]
    out = scan.to_json()
    assert (out["type"], out["cluster"], out["version"]) == ("cluster.upgrade_scan", "prod", "1.25")
    by_app = {a["name"]: a for a in out["apps"]}
    assert set(by_app) == {"old", "new"}  # "other" targets another cluster
    assert sorted(r["kind"] for r in by_app["old"]["removed"]) == [
        "PodDisruptionBudget",
        "PodSecurityPolicy",
    ]
    assert by_app["new"]["removed"] == [] and by_app["new"]["deprecated"] == []
    findings = [e for e in events if isinstance(e, FindingEvent)]
    assert [e.finding.pool for e in findings] == ["Application/argocd/old"]
    assert sim.count("GET", "/other/manifests") == 0
    assert not checker.failures
    assert [r.url.path for r in transport.sent] == [
        "/api/v1/applications",
        "/api/v1/applications/new/manifests",
        "/api/v1/applications/old/manifests",
    ]


async def test_a_failing_manifests_call_is_reported_and_spares_the_others() -> None:
    sim = ArgoCDSimulator([app("a", server=SERVER), app("b", server=SERVER)], tokens=["tok"])
    sim.set_manifests("b", [PDB_V1BETA1])
    sim.fail_next(1, status=500, path="/api/v1/applications/a/manifests")
    events: list[object] = []
    called: list[tuple[str, str]] = []

    async def then(cluster: str, version: str) -> None:
        called.append((cluster, version))

    async with ArgoCDClient(
        "http://argocd.test", token="tok", transport=httpx.ASGITransport(app=sim), retries=0
    ) as client:
        scanner = UpgradeScanner(
            client, events.append, table=table_for(["k8s"]), server_of={"prod": SERVER}.get,
            then=then,
        )  # fmt: skip
        await scanner("prod", "1.25")
    (scan,) = [e for e in events if isinstance(e, LifecycleEvent)]
    by_app = {a["name"]: a for a in scan.details["apps"]}
    assert "error" in by_app["a"] and by_app["b"]["removed"]
    assert called == [("prod", "1.25")]  # the --manifests hook still runs


async def test_serve_with_the_argocd_api_scans_upgrades_into_its_findings_and_events() -> None:
    """``serve`` wires the scanner when its Argo CD client can read manifests: an upgrade's
    findings land in the shared tracker (``/api/findings``) and its event in the event list."""
    from fleetwarden.app.serving import Serving, ServingSettings
    from fleetwarden.app.upgrade_scan import UpgradeScanner

    sim = ArgoCDSimulator([app("old", name="prod")], tokens=["tok"])
    sim.set_manifests("old", [PDB_V1BETA1])

    class Queue:
        async def close(self) -> None: ...

    async with ArgoCDClient(
        "http://argocd.test", token="tok", transport=httpx.ASGITransport(app=sim), retries=0
    ) as client:
        serving = Serving(
            ServingSettings(), [], Queue(), client_factory=lambda _e: None, argocd=client
        )  # type: ignore[arg-type]
        hook = serving.fleet.on_upgrade
        assert isinstance(hook, UpgradeScanner)
        await hook("prod", "v1.25.0")
    (event,) = [e for e in serving.events if e["type"] == "cluster.upgrade_scan"]
    assert [a["name"] for a in event["apps"]] == ["old"]
    assert [f.pool for f in serving.findings()] == ["Application/argocd/old"]
    assert any(e["type"] == "finding.appeared" for e in serving.events)
