"""A week of a real-shaped cluster replayed through the decision core: routine churn gives no
finding; five planted hand edits give exactly five, each with its human actor and start time.

The trace is built from real shapes in ../shared/realdata: the EKS Node objects (with their
managedFields) of ``nodes/honeycomb-eks-nodelist-arm64.json`` as the template of every node,
the EC2 Auto Scaling EventBridge payloads of ``events/aws-autoscaling-event-*.json`` parsed by
``formats.events.aws``, and an EKS CloudTrail ``UpdateNodegroupVersion`` call in the shape the
same parser reads. Over seven days: a node auto-repair every night (an unhealthy
``KernelReady`` condition, then an Auto Scaling terminate and launch), Karpenter scale-ups and
consolidations (``karpenter.sh/disrupted`` taint, ``DisruptionTerminating`` events),
cluster-autoscaler scale-downs (``ToBeDeletedByClusterAutoscaler``), two Karpenter drift
image rotations, and one managed node-group upgrade (surge: new nodes first).

The replay does what the watch shell will: after every step it diffs each pool (the existing
four-layer diff) and reports the finding ids that appeared, attributing each from the changed
node's managedFields before and after (and the audit log when one is given); every node add,
removal or replacement goes through ``churn.classify``, and one that is not churn counts as a
finding too (an unexplained node change).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.core import actors, churn
from fleetwarden.core.actors import ActorKind, AuditEvent, ChangedObject, Via
from fleetwarden.core.churn import Evidence, KubeEvent, NodeChange, NodeChangeKind, NodeSnapshot
from fleetwarden.core.diffing import diff_pool
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.findings import Finding
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Requirement, Taint
from fleetwarden.formats.events import aws
from fleetwarden.formats.nodes import node_from_object

pytestmark = pytest.mark.realdata

START = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)
CLUSTER = "duckboat"
EKS_POOL, KARPENTER_POOL = "custom-1", "default"
HOUND = {"key": "type", "value": "hound", "effect": "NoSchedule"}

SPECS = {
    EKS_POOL: NodePoolSpec(
        name=EKS_POOL,
        cluster=CLUSTER,
        provider=Provisioner.AWS,
        instance_types=("m6gd.2xlarge",),
        min_size=1,
        max_size=8,
        labels={"eks.amazonaws.com/nodegroup": EKS_POOL, "team": "platform"},
        taints=(Taint("type", "hound", "NoSchedule"),),
        kubernetes_version="1.21",
        os_family="amazonlinux2",
    ),
    KARPENTER_POOL: NodePoolSpec(
        name=KARPENTER_POOL,
        cluster=CLUSTER,
        provider=Provisioner.KARPENTER,
        requirements=(
            Requirement("node.kubernetes.io/instance-type", "In", ("m6gd.2xlarge", "m6gd.4xlarge")),
        ),
        labels={"karpenter.sh/nodepool": KARPENTER_POOL, "team": "batch"},
        kubernetes_version="1.21",
        os_family="amazonlinux2",
        heterogeneous=True,
    ),
}


def _write(obj: dict[str, Any], manager: str, at: datetime, trie: dict[str, Any]) -> None:
    """What the API server does with an Update by ``manager`` setting ``trie``'s fields: its
    entry gains them (time now) and every other manager loses them."""
    written = actors.decode_fields(trie)
    entries = []
    mine = None
    for e in obj["metadata"]["managedFields"]:
        fields = actors.decode_fields(e["fieldsV1"])
        if e["manager"] == manager and e["operation"] == "Update" and not e.get("subresource"):
            mine = e
            fields = fields | written
        else:
            fields = fields - written
        if fields:
            e["fieldsV1"] = actors.encode_fields(fields)
            entries.append(e)
    if mine is None:
        mine = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
        }
        mine["fieldsV1"] = trie
        entries.append(mine)
    mine["time"] = at.isoformat().replace("+00:00", "Z")
    obj["metadata"]["managedFields"] = entries


def _label_trie(key: str) -> dict[str, Any]:
    return {"f:metadata": {"f:labels": {f"f:{key}": {}}}}


TAINTS_TRIE = {"f:spec": {"f:taints": {}}}  # Node spec.taints is atomic


@dataclass
class Cluster:
    template: dict[str, Any]
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    appeared: list[tuple[Finding, actors.ActorDecision]] = field(default_factory=list)
    churned: list[churn.ChurnDecision] = field(default_factory=list)
    not_churn: list[churn.ChurnDecision] = field(default_factory=list)
    audit: list[AuditEvent] = field(default_factory=list)
    serial: int = 0
    versions: dict[str, str] = field(
        default_factory=lambda: dict.fromkeys(SPECS, "v1.21.2-13+d2965f0db10712")
    )
    transitions: list[churn.Transition] = field(default_factory=list)

    # --- the shell's part, replayed --------------------------------------------------------

    def pool_of(self, obj: dict[str, Any]) -> str:
        labels = obj["metadata"]["labels"]
        return labels.get("eks.amazonaws.com/nodegroup") or labels["karpenter.sh/nodepool"]

    def observe(self, at: datetime, before: dict[str, dict[str, Any]]) -> None:
        findings: dict[str, Finding] = {}
        for pool, spec in SPECS.items():
            members = [node_from_object(o) for o in self.nodes.values() if self.pool_of(o) == pool]
            for f in diff_pool(spec, members, cluster=CLUSTER):
                passing = churn.explained_by_churn(f, self.churned, now=at)
                if passing is not None:  # a rollout under way: part of its churn
                    self.transitions.append(passing)
                    continue
                findings[f.id] = f
        for fid in sorted(findings.keys() - self.open):
            f = findings[fid]
            self.appeared.append((f, self.actor_of(f, at, before)))
        self.open = set(findings)

    def actor_of(self, f: Finding, at: datetime, before: dict[str, dict[str, Any]]):
        path = actors.finding_field_path(f.field)
        if path is None or not f.nodes:  # pool-level: no single write made it
            return actors.ActorDecision(None, None, (f"{f.field} is pool-level",))
        name = f.nodes[0]
        after = actors.parse_managed_fields(self.nodes[name]["metadata"]["managedFields"])
        prior = before.get(name)
        managed = actors.actor_from_managed_fields(
            after,
            path,
            before=actors.parse_managed_fields(prior["metadata"]["managedFields"])
            if prior
            else None,
        )
        obj = ChangedObject(CLUSTER, "nodes", name, at, pool=f.pool)
        return actors.resolve(obj, managed, audit=self.audit)

    def update(self, at: datetime, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        before = {name: copy.deepcopy(self.nodes[name])}
        change(self.nodes[name])
        self.observe(at, before)

    def nodes_change(
        self,
        at: datetime,
        pool: str,
        *,
        remove: tuple[str, ...] = (),
        add: int = 0,
        events: tuple[KubeEvent, ...] = (),
        cloud: tuple[ChangeEvent, ...] = (),
    ) -> list[str]:
        removed = tuple(self.snapshot(self.nodes.pop(n)) for n in remove)
        added_names = [self.new_node(pool, at) for _ in range(add)]
        added = tuple(self.snapshot(self.nodes[n]) for n in added_names)
        kind = (
            NodeChangeKind.REPLACED
            if removed and added
            else NodeChangeKind.REMOVED
            if removed
            else NodeChangeKind.ADDED
        )
        decision = churn.classify(
            NodeChange(CLUSTER, pool, kind, at, removed, added),
            spec=SPECS[pool],
            evidence=Evidence(events, cloud),
        )
        (self.churned if decision.verdict is churn.Verdict.CHURN else self.not_churn).append(
            decision
        )
        self.observe(at, {})
        return added_names

    @staticmethod
    def snapshot(obj: dict[str, Any]) -> NodeSnapshot:
        return NodeSnapshot(
            node_from_object(obj),
            annotations=obj["metadata"].get("annotations", {}),
            conditions={c["type"]: c["status"] for c in obj["status"]["conditions"]},
        )

    # --- the fleet's part: nodes as the real template, as each provisioner makes them -------

    def new_node(self, pool: str, at: datetime) -> str:
        self.serial += 1
        obj = copy.deepcopy(self.template)
        name = f"ip-10-0-{self.serial // 250}-{self.serial % 250}.ec2.internal"
        meta = obj["metadata"]
        meta["name"] = name
        labels = meta["labels"]
        labels["kubernetes.io/hostname"] = name
        if pool == KARPENTER_POOL:
            del labels["eks.amazonaws.com/nodegroup"], labels["eks.amazonaws.com/capacityType"]
            labels["karpenter.sh/nodepool"] = KARPENTER_POOL
            labels["karpenter.sh/capacity-type"] = "on-demand"
            labels["team"] = "batch"
            obj["spec"]["taints"] = []
        else:
            labels["team"] = "platform"
        obj["status"]["nodeInfo"]["kubeletVersion"] = self.versions[pool]
        stamp = at.isoformat().replace("+00:00", "Z")
        for e in meta["managedFields"]:
            e["time"] = stamp
            if e["manager"] == "kubelet":  # kubelet registers the node with its labels
                known = e["fieldsV1"]["f:metadata"]["f:labels"]
                for key in labels:
                    known.setdefault(f"f:{key}", {})
        self.nodes[name] = obj
        return name

    def in_pool(self, pool: str) -> list[str]:
        return sorted(
            (n for n, o in self.nodes.items() if self.pool_of(o) == pool),
            key=lambda n: (self.nodes[n]["metadata"]["managedFields"][0]["time"], n),
        )


def _asg(realdata: Path, kind: str, at: datetime, pool: str = EKS_POOL) -> ChangeEvent:
    body = json.loads((realdata / "events" / f"aws-autoscaling-event-{kind}.json").read_text())
    body["time"] = at.isoformat().replace("+00:00", "Z")
    body["id"] = f"{kind}-{at.isoformat()}"
    body["detail"]["AutoScalingGroupName"] = f"eks-{pool}-54bea7d1-0c4f-3d3b-a4e3-6f0a3a8c6b1e"
    body["detail"]["Tags"] = [{"Key": "eks:cluster-name", "Value": CLUSTER}]
    (event,) = aws.parse(body, {}, at + timedelta(minutes=4)).events
    return event


def _eks_upgrade(at: datetime) -> ChangeEvent:
    body = {
        "version": "0",
        "id": "b1c2d3e4-0000-4000-8000-upgrade00001",
        "detail-type": "AWS API Call via CloudTrail",
        "source": "aws.eks",
        "account": "111122223333",
        "time": at.isoformat().replace("+00:00", "Z"),
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.08",
            "userIdentity": {
                "type": "AssumedRole",
                "arn": "arn:aws:sts::111122223333:assumed-role/platform-admin/ops",
            },
            "eventTime": at.isoformat().replace("+00:00", "Z"),
            "eventSource": "eks.amazonaws.com",
            "eventName": "UpdateNodegroupVersion",
            "requestParameters": {
                "name": CLUSTER,
                "nodegroupName": EKS_POOL,
                "version": "1.21",
                "releaseVersion": "1.21.14-20221222",
            },
            "responseElements": None,
        },
    }
    (event,) = aws.parse(body, {}, at + timedelta(minutes=6)).events
    return event


def _taint(obj: dict[str, Any], manager: str, at: datetime, taint: dict[str, Any]) -> None:
    obj["spec"]["taints"] = [*obj["spec"].get("taints", []), taint]
    _write(obj, manager, at, TAINTS_TRIE)


HandEdit = Callable[[Cluster, datetime], None]


def _edit_label(pool: str, key: str, value: str | None, *, by: str = "kubectl-edit") -> HandEdit:
    def edit(c: Cluster, at: datetime) -> None:
        name = c.in_pool(pool)[-1]

        def change(obj: dict[str, Any]) -> None:
            labels = obj["metadata"]["labels"]
            if value is None:
                # a patch that only removes: nobody owns the label after it, kubectl-edit
                # records nothing; the audit log names the user
                del labels[key]
                gone = actors.decode_fields(_label_trie(key))
                for e in obj["metadata"]["managedFields"]:
                    e["fieldsV1"] = actors.encode_fields(actors.decode_fields(e["fieldsV1"]) - gone)
                c.audit.append(
                    AuditEvent(
                        id=f"audit-{at.isoformat()}",
                        cluster=CLUSTER,
                        user="oncall@example.com",
                        verb="patch",
                        resource="nodes",
                        name=name,
                        at=at + timedelta(seconds=1),
                        user_agent="kubectl/v1.31.0 (linux/amd64) kubernetes/abcdef0",
                        source_ips=("10.20.30.40",),
                    )
                )
            else:
                labels[key] = value
                _write(obj, by, at, _label_trie(key))

        c.update(at, name, change)

    return edit


def _edit_taint(pool: str, taint: dict[str, Any], *, replace_key: str | None = None) -> HandEdit:
    def edit(c: Cluster, at: datetime) -> None:
        name = c.in_pool(pool)[-1]

        def change(obj: dict[str, Any]) -> None:
            if replace_key:
                obj["spec"]["taints"] = [
                    t for t in obj["spec"]["taints"] if t["key"] != replace_key
                ]
            _taint(obj, "kubectl-edit", at, taint)

        c.update(at, name, change)

    return edit


# the five planted hand edits: (day, hour, edit, the finding field it must produce)
HAND_EDITS: list[tuple[int, int, HandEdit, str]] = [
    (0, 10, _edit_label(EKS_POOL, "team", "oncall"), "labels.team"),
    (
        1,
        11,
        _edit_taint(EKS_POOL, {**HOUND, "value": "manual"}, replace_key="type"),
        "taints.type:NoSchedule",
    ),
    (2, 10, _edit_label(KARPENTER_POOL, "team", "web"), "labels.team"),
    (
        4,
        14,
        _edit_taint(EKS_POOL, {"key": "maintenance", "value": "true", "effect": "NoSchedule"}),
        "taints.maintenance:NoSchedule",
    ),
    (6, 10, _edit_label(KARPENTER_POOL, "team", None), "labels.team"),
]


def replay_week(realdata: Path, *, hand_edits: bool) -> Cluster:
    data = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())
    c = Cluster(template=data["items"][0])
    for _ in range(3):
        c.new_node(EKS_POOL, START)
    for _ in range(2):
        c.new_node(KARPENTER_POOL, START)
    c.observe(START, {})
    edits = {(d, h): e for d, h, e, _ in HAND_EDITS} if hand_edits else {}
    for day in range(7):
        for hour in range(24):
            at = START + timedelta(days=day, hours=hour)
            if (day, hour) in edits:
                edits[(day, hour)](c, at)
            if hour == 3:
                _repair(c, realdata, at)
            elif hour == 6 and day == 3:
                _upgrade(c, at)
            elif hour == 9:
                c.nodes_change(at, KARPENTER_POOL, add=1)
            elif hour == 12 and day in (2, 5):
                _rotate_images(c, at)
            elif hour == 15 and len(c.in_pool(KARPENTER_POOL)) > 2:
                _consolidate(c, at)
            elif hour == 19:
                c.nodes_change(
                    at, EKS_POOL, add=1, cloud=(_asg(realdata, "launch-successful", at),)
                )
            elif hour == 21 and len(c.in_pool(EKS_POOL)) > 3:
                _scale_down(c, realdata, at)
    return c


def _repair(c: Cluster, realdata: Path, at: datetime) -> None:
    """EKS node auto-repair: the node monitoring agent marks the kernel unhealthy (status), the
    node is terminated and a new one launched by the group."""
    sick = c.in_pool(EKS_POOL)[0]

    def unhealthy(obj: dict[str, Any]) -> None:
        obj["status"]["conditions"].append(
            {"type": "KernelReady", "status": "False", "reason": "KernelBug"}
        )

    c.update(at, sick, unhealthy)
    later = at + timedelta(minutes=30)
    events = (
        _asg(realdata, "terminate-successful", later),
        _asg(realdata, "launch-successful", later),
    )
    c.nodes_change(later, EKS_POOL, remove=(sick,), add=1, cloud=events)


def _karpenter_disrupts(c: Cluster, at: datetime, name: str, reason: str, *, replace: bool) -> None:
    c.update(
        at,
        name,
        lambda o: _taint(
            o, "karpenter", at, {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
        ),
    )
    event = KubeEvent("DisruptionTerminating", "karpenter", name, at, f"Disrupting Node: {reason}")
    c.nodes_change(
        at + timedelta(minutes=2), KARPENTER_POOL, remove=(name,), add=int(replace), events=(event,)
    )


def _consolidate(c: Cluster, at: datetime) -> None:
    _karpenter_disrupts(c, at, c.in_pool(KARPENTER_POOL)[0], "Underutilized", replace=False)


def _rotate_images(c: Cluster, at: datetime) -> None:
    """A new AMI in the EC2NodeClass: Karpenter replaces every node as drifted."""
    rotated = {
        "v1.21.2-13+d2965f0db10712": "v1.21.5-eks-bc4871b",
        "v1.21.5-eks-bc4871b": "v1.21.14-eks-fb459a0",
    }
    c.versions[KARPENTER_POOL] = rotated[c.versions[KARPENTER_POOL]]
    for i, name in enumerate(c.in_pool(KARPENTER_POOL)):
        _karpenter_disrupts(c, at + timedelta(minutes=5 * i), name, "Drifted", replace=True)


def _upgrade(c: Cluster, at: datetime) -> None:
    """A managed node-group version update: a surge node first, then old ones drained."""
    event = _eks_upgrade(at)
    c.versions[EKS_POOL] = "v1.21.14-eks-fb459a0"
    old = c.in_pool(EKS_POOL)
    for i, name in enumerate(old):
        step = at + timedelta(minutes=3 * i)
        c.nodes_change(step, EKS_POOL, add=1, cloud=(event,))
        c.nodes_change(step + timedelta(minutes=1), EKS_POOL, remove=(name,), cloud=(event,))


def _scale_down(c: Cluster, realdata: Path, at: datetime) -> None:
    name = c.in_pool(EKS_POOL)[-1]
    c.update(
        at,
        name,
        lambda o: _taint(
            o,
            "cluster-autoscaler",
            at,
            {
                "key": "ToBeDeletedByClusterAutoscaler",
                "value": "1700000000",
                "effect": "NoSchedule",
            },
        ),
    )
    later = at + timedelta(minutes=10)
    c.nodes_change(
        later, EKS_POOL, remove=(name,), cloud=(_asg(realdata, "terminate-successful", later),)
    )


# --- the tests -----------------------------------------------------------------------------


def test_a_week_of_routine_churn_gives_no_finding(realdata):
    c = replay_week(realdata, hand_edits=False)
    assert [f.to_json() for f, _ in c.appeared] == []
    assert [d.reasons for d in c.not_churn] == []
    causes = {cause for d in c.churned for cause in d.causes}
    # the trace really exercised every kind of churn it claims to
    assert {
        churn.ChurnCause.AUTO_REPAIR,
        churn.ChurnCause.NODEGROUP_SCALING,
        churn.ChurnCause.KARPENTER_PROVISIONING,
        churn.ChurnCause.KARPENTER_CONSOLIDATION,
        churn.ChurnCause.KARPENTER_DRIFT,
        churn.ChurnCause.CLUSTER_AUTOSCALER,
        churn.ChurnCause.NODEGROUP_UPDATE,
        churn.ChurnCause.SURGE_UPGRADE,
    } <= causes
    assert len(c.churned) >= 40
    # the rollouts passed through mixed kubelet versions: explained by their churn, not drift
    assert {t.finding.field for t in c.transitions} == {"kubeletVersion.mixed"}


def test_a_rollout_stuck_past_the_window_is_a_finding(realdata):
    """Mixed versions an hour after the pool's last churn are not a transition any more."""
    c = replay_week(realdata, hand_edits=False)
    at = START + timedelta(days=7, hours=2)
    c.versions[EKS_POOL] = "v1.21.2-13+d2965f0db10712"
    c.nodes_change(at, EKS_POOL, add=1, cloud=(_asg(realdata, "launch-successful", at),))
    assert c.appeared == [] and c.not_churn == []  # under way
    c.observe(at + timedelta(hours=2), {})
    assert [f.field for f, _ in c.appeared] == ["kubeletVersion.mixed"]


def test_the_same_week_with_five_hand_edits_gives_exactly_five_findings_by_people(realdata):
    c = replay_week(realdata, hand_edits=True)
    assert sorted(f.field for f, _ in c.appeared) == sorted(field for *_, field in HAND_EDITS)
    assert len(c.appeared) == 5 and c.not_churn == []
    edit_times = sorted(START + timedelta(days=d, hours=h) for d, h, *_ in HAND_EDITS)
    for finding, decision in c.appeared:
        assert decision.actor is not None, (finding.field, decision.reasons)
        assert decision.actor.kind is ActorKind.HUMAN
        # the edit's time: managedFields ``time``, or the audit event's (a second later)
        assert decision.started_at is not None
        assert min(abs(decision.started_at - t) for t in edit_times) <= timedelta(seconds=1)
    by_via = sorted((d.actor.name, d.actor.via) for _, d in c.appeared if d.actor)
    assert by_via == [
        ("kubectl-edit", Via.MANAGED_FIELDS),
        ("kubectl-edit", Via.MANAGED_FIELDS),
        ("kubectl-edit", Via.MANAGED_FIELDS),
        ("kubectl-edit", Via.MANAGED_FIELDS),
        ("oncall@example.com", Via.AUDIT),
    ]


def test_a_node_deleted_by_hand_in_the_week_is_not_churn(realdata):
    """The replay can fail: a removal nothing automated explains is counted."""
    c = replay_week(realdata, hand_edits=False)
    victim = c.in_pool(EKS_POOL)[0]
    c.nodes_change(START + timedelta(days=7, hours=1), EKS_POOL, remove=(victim,))
    assert len(c.not_churn) == 1
    assert c.not_churn[0].verdict is churn.Verdict.UNEXPLAINED
