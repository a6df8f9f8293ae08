"""Flux requests and node restores against a real kube-apiserver (scripts/k8s-test-env).

Flux: the real HelmRelease CRD from the corpus (fluxcd/helm-controller's
``helm.toolkit.fluxcd.io_helmreleases.yaml``) is installed and the corpus's podinfo HelmRelease
created; a reconcile request sets ``reconcile.fluxcd.io/requestedAt``, suspend/resume toggle
``spec.suspend``. The same on real Kustomization and GitRepository objects (the corpus's
``crds/`` from fluxcd/kustomize-controller and fluxcd/source-controller, and their config
samples); an object that does not exist fails cleanly as ``NotFound``.

Nodes: a label and a taint removed by hand are put back on a real Node by the policy's own
decisions, while a transient taint stays; a concurrent write between read and write is met
with a real 409 and one retry.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwarden.adapters.flux import REQUESTED_AT, FluxClient, object_path, rfc3339
from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.kube.restore import KubeNodeRestorer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import FluxKind, FluxRef, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Action, Mode, PolicyState, Status, decide
from fleetwarden.core.pools import Taint
from fleetwarden.ports.kube import Conflict, NotFound
from fleetwarden.ports.remediation import OutcomeStatus
from fleetwarden.ports.sources import FixedClock
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.live, pytest.mark.realdata]

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
HR_CRD = "flux-crd-helmreleases-with-driftdetection.yaml"
PODINFO = FluxRef(FluxKind.HELM_RELEASE, "podinfo", "podinfo")
NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
TRANSIENT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
POOL_TAINT = {"key": "dedicated", "value": "general", "effect": "NoSchedule"}


@pytest.fixture()
async def api(k8s):
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[-1]
    async with KubeClient(endpoint) as client:
        yield client


async def install_crd(api: KubeClient, path: Path) -> str:
    crd = yaml.safe_load(path.read_text())
    name = crd["metadata"]["name"]
    with contextlib.suppress(Conflict):  # already there from an earlier test
        await api.request("POST", CRDS, body=crd)

    async def established() -> bool:
        obj = await api.get(f"{CRDS}/{name}")
        conds = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    await wait_for(established, what=f"CRD {name} Established")
    return name


async def create_podinfo(api: KubeClient, realdata: Path) -> dict[str, Any]:
    with contextlib.suppress(Conflict):
        await api.request(
            "POST", "/api/v1/namespaces", body={"metadata": {"name": PODINFO.namespace}}
        )
    release = yaml.safe_load(
        (realdata / "flux" / "flux-example-helmrelease-podinfo.yaml").read_text()
    )
    collection = object_path(PODINFO).rsplit("/", 1)[0]
    with contextlib.suppress(NotFound):
        await api.request("DELETE", object_path(PODINFO))

    async def created() -> Any:
        try:
            return await api.request("POST", collection, body=release)
        except (NotFound, Conflict):  # the new API is not served yet / the old one not gone
            return None

    return await wait_for(created, what="the podinfo HelmRelease to be created")


async def test_helmrelease_reconcile_suspend_resume_on_the_real_crd(api, realdata):
    await install_crd(api, realdata / "flux" / HR_CRD)
    created = await create_podinfo(api, realdata)
    assert created["spec"]["releaseName"] == "podinfo"
    assert REQUESTED_AT not in (created["metadata"].get("annotations") or {})
    flux = FluxClient(api, clock=FixedClock(NOW))

    result = await flux.reconcile(PODINFO)
    live = await api.get(object_path(PODINFO))
    assert live["metadata"]["annotations"][REQUESTED_AT] == "2026-03-01T12:00:00.123456Z"
    assert result["requestedAt"] == rfc3339(NOW) and result["suspend"] is False
    assert live["spec"]["chart"] == created["spec"]["chart"]  # nothing else touched

    await flux.suspend(PODINFO)
    assert (await api.get(object_path(PODINFO)))["spec"]["suspend"] is True
    later = FluxClient(api, clock=FixedClock(NOW.replace(minute=5)))
    result = await later.resume(PODINFO)
    live = await api.get(object_path(PODINFO))
    assert live["spec"]["suspend"] is False and result["suspend"] is False
    assert live["metadata"]["annotations"][REQUESTED_AT] == "2026-03-01T12:05:00.123456Z"


async def test_policy_decision_reconciles_the_owning_helmrelease(api, realdata):
    """Seed 000's incident: the instance type drifted; ownership routes it to Flux; the
    decision is carried out as a reconcile request on the real object."""
    await install_crd(api, realdata / "flux" / HR_CRD)
    await create_podinfo(api, realdata)
    omap = OwnershipMap([OwnershipRule(flux=FluxRef(FluxKind.HELM_RELEASE, "podinfo", "{pool}"))])
    finding = Finding(
        api.cluster,
        "podinfo",
        Layer.SPEC,
        "instanceType",
        "m5.large",
        "t3.medium",
        Severity.CRITICAL,
    )
    d = decide(finding, omap.route(finding), PolicyState({api.cluster: 5}), NOW, Mode.ENFORCE)
    assert (d.action, d.status) == (Action.RECONCILE, Status.EXECUTE)
    remediator = Remediator(flux=lambda cluster: FluxClient(api), clock=FixedClock(NOW))
    out = await remediator.carry_out(d)
    assert out.status is OutcomeStatus.OK, out.to_json()
    live = await api.get(object_path(PODINFO))
    assert live["metadata"]["annotations"][REQUESTED_AT] == out.calls[0].result["requestedAt"]


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        (
            FluxKind.KUSTOMIZATION,
            "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/ns/kustomizations/x",
        ),
        (FluxKind.HELM_RELEASE, "/apis/helm.toolkit.fluxcd.io/v2/namespaces/ns/helmreleases/x"),
        (
            FluxKind.GIT_REPOSITORY,
            "/apis/source.toolkit.fluxcd.io/v1/namespaces/ns/gitrepositories/x",
        ),
    ],
)
def test_flux_object_paths_use_the_served_api_versions(kind, path):
    """Flux 2.3+: kustomize v1, helm v2, source v1 (the kinds' CRDs in fluxcd's repos)."""
    assert object_path(FluxRef(kind, "ns", "x")) == path


REAL_KINDS = [
    (FluxKind.KUSTOMIZATION, "flux-kustomization-crd.yaml", "flux-kustomization-sample.yaml"),
    (FluxKind.GIT_REPOSITORY, "flux-gitrepository-crd.yaml", "flux-gitrepository-sample.yaml"),
]


async def create_sample(api: KubeClient, ref: FluxRef, body: dict[str, Any]) -> dict[str, Any]:
    with contextlib.suppress(Conflict):
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ref.namespace}})
    with contextlib.suppress(NotFound):
        await api.request("DELETE", object_path(ref))
    body = {**body, "metadata": {**body["metadata"], "namespace": ref.namespace}}
    collection = object_path(ref).rsplit("/", 1)[0]

    async def created() -> Any:
        try:
            return await api.request("POST", collection, body=body)
        except (NotFound, Conflict):  # the new API is not served yet / the old one not gone
            return None

    return await wait_for(created, what=f"the {ref.kind.value} to be created")


@pytest.mark.parametrize(("kind", "crd", "sample"), REAL_KINDS)
async def test_reconcile_suspend_resume_on_real_kustomization_and_gitrepository(
    api, realdata, kind, crd, sample
):
    """The annotation and ``spec.suspend`` are written on the real object, through the CRD's
    own schema (a field the schema does not know would be pruned), and nothing else moves."""
    await install_crd(api, realdata / "crds" / crd)
    body = next(d for d in yaml.safe_load_all((realdata / "flux" / sample).read_text()) if d)
    ref = FluxRef(kind, "flux-system", body["metadata"]["name"], api.cluster)
    created = await create_sample(api, ref, body)
    assert REQUESTED_AT not in (created["metadata"].get("annotations") or {})
    assert "suspend" not in created["spec"]

    result = await FluxClient(api, clock=FixedClock(NOW)).reconcile(ref)
    live = await api.get(object_path(ref))
    assert live["metadata"]["annotations"][REQUESTED_AT] == "2026-03-01T12:00:00.123456Z"
    assert result == {
        "cluster": api.cluster,
        "kind": kind.value,
        "namespace": "flux-system",
        "name": ref.name,
        "resourceVersion": live["metadata"]["resourceVersion"],
        "requestedAt": "2026-03-01T12:00:00.123456Z",
        "suspend": False,
    }
    assert live["spec"] == created["spec"]  # only the annotation changed

    suspended = await FluxClient(api).suspend(ref)
    live = await api.get(object_path(ref))
    assert live["spec"]["suspend"] is True and suspended["suspend"] is True
    assert live["metadata"]["annotations"][REQUESTED_AT] == "2026-03-01T12:00:00.123456Z"

    later = NOW.replace(minute=7)
    resumed = await FluxClient(api, clock=FixedClock(later)).resume(ref)
    live = await api.get(object_path(ref))
    assert live["spec"]["suspend"] is False and resumed["suspend"] is False
    assert live["metadata"]["annotations"][REQUESTED_AT] == "2026-03-01T12:07:00.123456Z"
    assert {k: v for k, v in live["spec"].items() if k != "suspend"} == created["spec"]


@pytest.mark.parametrize(("kind", "crd", "sample"), REAL_KINDS)
async def test_a_missing_flux_object_fails_as_not_found(api, realdata, kind, crd, sample):
    await install_crd(api, realdata / "crds" / crd)
    ref = FluxRef(kind, "flux-system", "no-such-object", api.cluster)
    with pytest.raises(NotFound, match=object_path(ref)):
        await FluxClient(api).reconcile(ref)


# --- nodes ------------------------------------------------------------------------------------


def node_body(name: str, taints: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"eks.amazonaws.com/nodegroup": "general", "team": "platform"},
        },
        "spec": {"taints": taints},
    }


@pytest.fixture()
async def node(api):
    name = f"fw-restore-{time.monotonic_ns()}"
    await api.request("POST", "/api/v1/nodes", body=node_body(name, [POOL_TAINT, TRANSIENT]))
    yield name
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"/api/v1/nodes/{name}")


async def test_restore_puts_back_a_removed_label_and_taint_keeping_the_transient_one(api, node):
    path = f"/api/v1/nodes/{node}"
    # drift by hand: `kubectl label node team-` and the pool taint removed
    await api.patch(path, {"metadata": {"labels": {"team": None}}})
    await api.patch(path, {"spec": {"taints": [TRANSIENT]}}, content_type=JSON_MERGE)
    drifted = await api.get(path)
    assert "team" not in drifted["metadata"]["labels"]

    state = PolicyState({api.cluster: 10})
    route = OwnershipMap().route
    findings = [
        Finding(
            api.cluster,
            "general",
            Layer.L1,
            "labels.team",
            "platform",
            None,
            Severity.HIGH,
            (node,),
        ),
        Finding(
            api.cluster,
            "general",
            Layer.L2,
            "taints.dedicated:NoSchedule",
            "general",
            None,
            Severity.HIGH,
            (node,),
        ),
    ]
    decisions = [decide(f, route(f), state, NOW, Mode.ENFORCE) for f in findings]
    assert [d.action for d in decisions] == [Action.RESTORE, Action.RESTORE]
    remediator = Remediator(nodes=lambda cluster: KubeNodeRestorer(api), clock=FixedClock(NOW))
    outcomes = await remediator.carry_out_all(decisions)
    assert [o.status for o in outcomes] == [OutcomeStatus.OK] * 2, [o.to_json() for o in outcomes]

    healed = await api.get(path)
    assert healed["metadata"]["labels"]["team"] == "platform"
    assert healed["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "general"
    assert sorted((t["key"], t.get("value")) for t in healed["spec"]["taints"]) == [
        ("dedicated", "general"),
        ("node.kubernetes.io/unschedulable", None),
    ]
    # a second restore finds nothing to change
    again = await KubeNodeRestorer(api).patch_taints(
        node, [Taint("dedicated", "general", "NoSchedule")], replace=[("dedicated", "NoSchedule")]
    )
    assert again["changed"] is False


async def test_full_taint_restore_drops_foreign_taints_but_not_transient_ones(api, node):
    path = f"/api/v1/nodes/{node}"
    rogue = {"key": "rogue", "value": "x", "effect": "NoExecute"}
    await api.patch(path, {"spec": {"taints": [rogue, TRANSIENT]}}, content_type=JSON_MERGE)
    result = await KubeNodeRestorer(api).patch_taints(
        node, [Taint("dedicated", "general", "NoSchedule")]
    )
    assert result["changed"] is True
    live = (await api.get(path))["spec"]["taints"]
    assert sorted(t["key"] for t in live) == ["dedicated", "node.kubernetes.io/unschedulable"]


class Interfering:
    """The real client, but someone else writes the node right after each of our reads."""

    def __init__(self, api: KubeClient, times: int) -> None:
        self.api, self.times, self.cluster = api, times, api.cluster

    async def get(self, path: str, **params: Any) -> Any:
        obj = await self.api.get(path, **params)
        if self.times > 0:
            self.times -= 1
            await self.api.patch(path, {"metadata": {"labels": {"touched": str(self.times)}}})
        return obj

    async def patch(self, path: str, body: Any, *, content_type: str) -> Any:
        return await self.api.patch(path, body, content_type=content_type)


async def test_taint_write_is_conditional_on_the_read_version_and_retried_once(api, node):
    path = f"/api/v1/nodes/{node}"
    await api.patch(path, {"spec": {"taints": [TRANSIENT]}}, content_type=JSON_MERGE)
    want = [Taint("dedicated", "general", "NoSchedule")]
    once = KubeNodeRestorer(Interfering(api, times=1))  # type: ignore[arg-type]
    result = await once.patch_taints(node, want, replace=[("dedicated", "NoSchedule")])
    assert result["attempts"] == 2 and result["changed"] is True
    assert {t["key"] for t in (await api.get(path))["spec"]["taints"]} == {
        "dedicated",
        "node.kubernetes.io/unschedulable",
    }
    # interfered with twice: the 409 is reported, the node is left as the other writer made it
    await api.patch(path, {"spec": {"taints": [TRANSIENT]}}, content_type=JSON_MERGE)
    twice = KubeNodeRestorer(Interfering(api, times=2))  # type: ignore[arg-type]
    with pytest.raises(Conflict):
        await twice.patch_taints(node, want, replace=[("dedicated", "NoSchedule")])
    assert (await api.get(path))["spec"]["taints"] == [TRANSIENT]
