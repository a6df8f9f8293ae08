"""Warn mode per field on a real kube-apiserver with the real Flux Kustomization CRD: a Node's
pool config is owned by a real ``Kustomization`` (``webapp-dev`` from the corpus's sample); the
policy warns on ``metadata.labels.team`` for ``webapp-*``. In enforce mode the healer restores
the unwarned label of the same Node and reconciles the Kustomization for an unwarned spec
field, while the warned label is reported (``mode: warn``, a decision saying why) and never
patched."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwarden.adapters.flux import REQUESTED_AT, FluxClient, object_path
from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.kube.restore import KubeNodeRestorer
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import FluxKind, FluxRef, Owner, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import (
    DEFAULT_POLICY_RULES,
    Action,
    Guards,
    Mode,
    Policy,
    PolicyRule,
    Status,
    parse_warn,
)
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.kube import Conflict, NotFound
from tests.e2e.test_flux_and_restore_live import install_crd, wait_for

pytestmark = [pytest.mark.live, pytest.mark.realdata]

WARN = [
    {
        "owner": {"kind": "Kustomization", "name": "webapp-*"},
        "fields": ["metadata.labels.team", "spec.replicas"],
    }
]


@pytest.fixture()
async def api(k8s):
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[-1]
    async with KubeClient(endpoint) as client:
        yield client


async def kustomization(api: KubeClient, realdata: Path) -> FluxRef:
    await install_crd(api, realdata / "crds" / "flux-kustomization-crd.yaml")
    body = next(
        d
        for d in yaml.safe_load_all(
            (realdata / "flux" / "flux-kustomization-sample.yaml").read_text()
        )
        if d
    )
    ref = FluxRef(FluxKind.KUSTOMIZATION, "flux-system", body["metadata"]["name"], api.cluster)
    with contextlib.suppress(Conflict):
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ref.namespace}})
    with contextlib.suppress(NotFound):
        await api.request("DELETE", object_path(ref))
    body["metadata"]["namespace"] = ref.namespace
    collection = object_path(ref).rsplit("/", 1)[0]

    async def created() -> Any:
        try:
            return await api.request("POST", collection, body=body)
        except (NotFound, Conflict):  # not served yet / the old one not gone yet
            return None

    await wait_for(created, what="the Kustomization to be created")
    return ref


@pytest.fixture()
async def node(api):
    name = f"fw-warn-{time.monotonic_ns()}"
    labels = {"eks.amazonaws.com/nodegroup": "general"}  # team and env removed by hand
    await api.request("POST", "/api/v1/nodes", body={"metadata": {"name": name, "labels": labels}})
    yield name
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"/api/v1/nodes/{name}")


async def test_enforce_heals_the_unwarned_fields_and_only_reports_the_warned_one(
    api, realdata, node, tmp_path
):
    ref = await kustomization(api, realdata)
    assert "webapp" in ref.name and ref.name.startswith("webapp-")
    before = await api.get(object_path(ref))
    assert REQUESTED_AT not in (before["metadata"].get("annotations") or {})
    owners = OwnershipMap([OwnershipRule(owner=Owner.INFRASTRUCTURE, flux=ref)])
    rules = (
        PolicyRule(Action.RESTORE, Severity.HIGH, layer="L1", owner=Owner.INFRASTRUCTURE),
        *DEFAULT_POLICY_RULES,
    )
    policy = Policy(
        rules=rules, guards=Guards(max_per_cluster=100, max_fleet=100), warn=parse_warn(WARN)
    )
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    healer = Healer(
        ownership=owners,
        remediator=Remediator(
            flux=lambda c: FluxClient(api), nodes=lambda c: KubeNodeRestorer(api)
        ),
        audit=store,
        policy=policy,
        mode=Mode.ENFORCE,
    )
    healer.set_pool_counts({api.cluster: 10})

    def drift(layer: Layer, field: str, expected: str, actual: str | None) -> FindingEvent:
        f = Finding(api.cluster, "general", layer, field, expected, actual, Severity.HIGH, (node,))
        return FindingEvent(FindingEventType.APPEARED, f, datetime.now(UTC))

    team = drift(Layer.L1, "labels.team", "platform", None)  # warned
    env = drift(Layer.L1, "labels.env", "prod", None)  # the same Node, not warned
    itype = drift(Layer.SPEC, "instanceType", "m5.large", "t3.medium")  # the Kustomization's
    try:
        decisions = {d.finding_id: d for d in await healer.process([team, env, itype])}
        warned = decisions[team.finding.id]
        assert (warned.action, warned.status) == (Action.ALERT, Status.PLANNED)
        assert warned.warn == ("metadata.labels.team", ref.describe())
        assert any(
            r.startswith(f"warn mode for labels.team (owner {ref.describe()}")
            for r in warned.reasons
        ), warned.reasons
        assert decisions[env.finding.id].action is Action.RESTORE
        assert decisions[itype.finding.id].action is Action.RECONCILE
        assert (
            decisions[env.finding.id].status is decisions[itype.finding.id].status is Status.EXECUTE
        )

        live = (await api.get(f"/api/v1/nodes/{node}"))["metadata"]["labels"]
        assert live.get("env") == "prod", "the unwarned label of the same Node is healed"
        assert "team" not in live, "the warned label is never patched, even in enforce"
        after = await api.get(object_path(ref))
        assert REQUESTED_AT in after["metadata"]["annotations"]  # the Kustomization reconciled

        # on record: the warned finding says so; no action refers to its decision
        records = await store.query(limit=100)
        findings = {
            r.payload["finding"]["field"]: r.payload["finding"]
            for r in records
            if r.kind is AuditKind.FINDING
        }
        assert findings["labels.team"]["mode"] == "warn"
        assert findings["labels.team"]["warn"] == {
            "field": "metadata.labels.team",
            "owner": ref.describe(),
        }
        assert "mode" not in findings["labels.env"]
        acted = {ref_id for r in records if r.kind is AuditKind.ACTION for ref_id in r.refs}
        assert acted == {decisions[env.finding.id].id, decisions[itype.finding.id].id}
    finally:
        await store.close()
