"""A finding's typed subject (node pool, workload object, app): built where findings are made,
serialised beside ``pool``, and never part of a finding's id (audit records and approvals hold
ids made before subjects existed: the ids below were computed on main before this change)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from fleetwarden.core import workloads as wl
from fleetwarden.core.diffing import diff_pool
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.fleet import coverage_findings
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import SeverityRule, apply_rules
from fleetwarden.core.schedulability import PlannedWorkload, PoolState, check_schedulability
from fleetwarden.core.subjects import AppRef, NodePoolRef, WorkloadRef

SPEC = NodePoolSpec(name="general", cluster="prod-eu", min_size=2, max_size=5)


def deployment(image: str, replicas: int, *, namespace: str | None = "shop") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "api"}
    if namespace is not None:
        meta["namespace"] = namespace
    container = {"name": "api", "image": image}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [container]}}},
    }


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (
            NodePoolRef("prod-eu", "general"),
            {"kind": "nodePool", "cluster": "prod-eu", "pool": "general"},
        ),
        (NodePoolRef("prod-eu", None), {"kind": "nodePool", "cluster": "prod-eu", "pool": None}),
        (
            WorkloadRef("prod-eu", "shop", "Deployment", "api"),
            {
                "kind": "workload",
                "cluster": "prod-eu",
                "namespace": "shop",
                "objectKind": "Deployment",
                "name": "api",
            },
        ),
        (AppRef("shop", "prod-eu"), {"kind": "app", "cluster": "prod-eu", "name": "shop"}),
        (AppRef("shop"), {"kind": "app", "cluster": None, "name": "shop"}),
    ],
)
def test_each_kind_of_subject_serialises_to_its_json_shape(subject, expected):
    finding = Finding(
        cluster="prod-eu",
        pool="general",
        layer=Layer.L1,
        field="labels.team",
        expected="payments",
        actual=None,
        severity=Severity.HIGH,
        subject=subject,
    )
    out = finding.to_json()
    assert out["subject"] == expected
    assert out["pool"] == "general"  # the contract's pool stays as it was
    assert json.loads(json.dumps(out))["subject"] == expected


def test_a_finding_made_without_a_subject_is_about_its_node_pool():
    f = Finding("prod-eu", "general", Layer.L2, "taints", [], [], Severity.LOW)
    assert f.subject == NodePoolRef("prod-eu", "general")
    assert f.to_json()["subject"] == {"kind": "nodePool", "cluster": "prod-eu", "pool": "general"}


def test_the_subject_changes_neither_the_id_nor_equality():
    """Ids pinned from main before subjects existed: stored records and approvals keep working."""
    base = Finding(
        cluster="prod-eu",
        pool="Deployment/shop/api",
        layer=Layer.WORKLOAD,
        field="image.api",
        expected="api:1.2",
        actual="api:1.3",
        severity=Severity.HIGH,
    )
    typed = dataclasses.replace(base, subject=WorkloadRef("prod-eu", "shop", "Deployment", "api"))
    assert base.id == typed.id == "af93dea06ee997c9"
    assert base == typed and hash(base) == hash(typed)


def test_node_pool_findings_carry_their_pool_and_keep_their_ids():
    [count] = diff_pool(SPEC, [], cluster="prod-eu")
    assert count.subject == NodePoolRef("prod-eu", "general")
    assert (count.pool, count.field, count.id) == ("general", "nodeCount", "a307bcd8628c245f")
    [coverage] = coverage_findings([SPEC], ["another-cluster"])
    assert coverage.subject == NodePoolRef("prod-eu", None)
    assert (coverage.pool, coverage.id) == (None, "19b40acad0141571")


def test_workload_findings_carry_the_object_and_keep_their_ids():
    want = wl.workload_from(deployment("registry.example/api:1.2", 3))
    have = wl.workload_from(deployment("registry.example/api:1.3", 2))
    found = {f.field: f for f in wl.diff_workload(want, have, cluster="prod-eu")}
    assert {f: x.id for f, x in found.items()} == {
        "replicas": "02664d0038a87067",
        "image.api": "2b2425250d8b4a4e",
    }
    for f in found.values():
        assert f.subject == WorkloadRef("prod-eu", "shop", "Deployment", "api")
        assert isinstance(f.subject, WorkloadRef) and f.subject.ref == f.pool


def test_app_diff_presence_findings_are_about_the_paired_object():
    """A desired object without a namespace is paired under the default one: the subject names
    the object as paired, exactly as ``pool`` does."""
    desired = wl.ObjectIndex()
    desired.add(deployment("registry.example/api:1.2", 3, namespace=None), source="git/app.yaml")
    result = wl.diff_app("prod-eu", "shop", desired, wl.ObjectIndex())
    [missing] = result.findings
    assert missing.pool == "Deployment/default/api"
    assert missing.subject == WorkloadRef("prod-eu", "default", "Deployment", "api")


def test_severity_overrides_keep_the_subject():
    subject = WorkloadRef("prod-eu", "shop", "Deployment", "api")
    f = Finding("prod-eu", subject.ref, Layer.WORKLOAD, "replicas", 3, 2, Severity.MEDIUM)
    f = dataclasses.replace(f, subject=subject)
    [out] = apply_rules([f], severities=(SeverityRule("WORKLOAD/*", Severity.LOW),), ignores=())
    assert out.severity is Severity.LOW and out.subject == subject


def test_schedulability_findings_name_the_workload():
    heavy = deployment("registry.example/api:1.2", 1)
    heavy["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "gpu"}
    w = wl.workload_from(heavy)
    check = check_schedulability(
        "prod-eu", [PlannedWorkload(w, w.key.ref)], [PoolState("general", ())]
    )
    [finding] = check.findings
    assert finding.subject == WorkloadRef("prod-eu", "shop", "Deployment", "api")
    assert finding.pool == "Deployment/shop/api"
