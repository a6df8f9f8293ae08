"""What a new user saw and tripped over (issue #12, item 9), pinned: the demo's restore does
what the README says restore does, its intro says what it will do, pool-level findings carry
no node count, and the watch table shows values, not Python reprs."""

from __future__ import annotations

import copy
import io
import random
from datetime import UTC, datetime

from rich.console import Console

from fleetwarden.adapters import simulated
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.lifecycle import ClusterHealth, LifecycleEvent, LifecycleType
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.presenting.demo import drift_text
from fleetwarden.presenting.rendering import demo_intro, event_text, findings_table
from fleetwarden.wiring import demo as demo_wiring

AT = datetime(2026, 12, 1, tzinfo=UTC)


def _node(fleet: simulated.SimulatedFleet, cluster: str, pool: str) -> dict:
    return next(n for n in fleet.nodes[cluster] if n["metadata"]["labels"].get("agentpool") == pool)


def test_demo_policy_restore_puts_back_labels_and_taints_only():
    """README: restore patches the Node's labels/taints back. A node whose label was changed
    by hand *and* whose instance type and kubelet changed in the console gets its label back;
    its instance type and kubelet version stay (they are the infrastructure's to fix)."""
    fleet = simulated.build_fleet()
    node = _node(fleet, "prod-asia-1", "ingress")
    simulated._retype(node, "Standard_B2s")
    node["status"]["nodeInfo"]["kubeletVersion"] = "v1.29.9"
    node["metadata"]["labels"]["role"] = "payments"
    before = copy.deepcopy(node)
    restored = ""
    for seed in range(200):  # until the (random) restore picks this node's label
        text = demo_wiring.heal(fleet, random.Random(seed))
        if node["metadata"]["labels"]["role"] == "ingress":
            restored = text
            break
    assert "label role=ingress" in restored, restored
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "Standard_B2s"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.29.9"
    assert node["status"]["allocatable"] == before["status"]["allocatable"]
    assert node["spec"] == before["spec"]


def test_demo_restore_puts_a_lost_taint_back_and_keeps_the_others():
    fleet = simulated.build_fleet()
    node = _node(fleet, "prod-asia-1", "spot")
    node["spec"]["taints"] = [{"key": "example.com/mine", "value": "x", "effect": "NoSchedule"}]
    for seed in range(200):
        demo_wiring.heal(fleet, random.Random(seed))
        if len(node["spec"]["taints"]) == 2:
            break
    assert {t["key"] for t in node["spec"]["taints"]} == {
        "example.com/mine",
        "kubernetes.azure.com/scalesetpriority",
    }


def test_the_demo_says_it_stops_when_it_stops():
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None)
    demo_wiring.run_live(
        console, simulated.scan_demo(), steps=2, interval=0, seed=1, sleep=lambda _: None
    )
    text = out.getvalue()
    assert "simulating 2 changes" in text and "then stopping" in text
    assert "Ctrl-C stops" not in text
    assert demo_intro(0, 1.5) == "simulating changes, one every 1.5 s, until Ctrl-C"


def test_demo_lines_carry_no_repr_and_no_zero_node_count():
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None)
    demo_wiring.run_live(
        console, simulated.scan_demo(), steps=14, interval=0, seed=7, sleep=lambda _: None
    )
    text = out.getvalue()
    events = [x for x in text.splitlines() if x.startswith("   ")]
    assert any("actual (none)" in x for x in events)  # a lost taint: no value, in words
    assert not [x for x in events if "None" in x or "'" in x]
    assert "on 0 node" not in text
    count = Finding(
        cluster="c", pool="spot", layer=Layer.COUNT, field="nodeCount", expected="3..10",
        actual=1, severity=Severity.HIGH, nodes=(),
    )  # fmt: skip
    assert drift_text(count) == "expected 3..10, actual 1 (pool-level)"


def test_watch_event_lines_show_values_not_reprs():
    health = LifecycleEvent(
        LifecycleType.HEALTH,
        "prod",
        AT,
        {"from": ClusterHealth.UNKNOWN.value, "to": ClusterHealth.HEALTHY.value, "reason": None},
    )
    text = event_text(health.to_json())
    assert text.endswith("prod Unknown → Healthy"), text
    taint = Finding(
        cluster="prod", pool="custom-1", layer=Layer.L2, field="taints.type:NoSchedule",
        expected="hound", actual=None, severity=Severity.HIGH, nodes=("n1",),
    )  # fmt: skip
    event = FindingEvent(FindingEventType.APPEARED, taint, AT)
    text = event_text(event.to_json(), event.finding)
    assert text.endswith("taints.type:NoSchedule: hound → (none)"), text
    assert "'" not in text and "None" not in text


def test_findings_table_renders_structured_values_for_people():
    f = Finding(
        cluster="c", pool="p", layer=Layer.COUNT, field="x", expected={"from": "a", "to": "b"},
        actual=["u", "v"], severity=Severity.LOW, nodes=(),
    )  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(findings_table([f]))
    assert "a → b" in out.getvalue() and "u, v" in out.getvalue()
    assert "{" not in out.getvalue()
