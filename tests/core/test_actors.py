"""Actors: fieldsV1 decoding over every real managedFields entry in the corpus, the writer of a
field from managedFields, and which evidence (managedFields, cloud event, audit) names it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core import actors
from fleetwarden.core.actors import (
    Actor,
    ActorKind,
    AuditEvent,
    ChangedObject,
    ElementKind,
    PathElement,
    Via,
)
from fleetwarden.core.events import ChangeEvent, EventSource, Operation

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _node_objects(realdata: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((realdata / "nodes").glob("*.json")):
        data = json.loads(path.read_text())
        for item in data.get("items", [data]):
            out.append((path.name, item))
    return out


def _all_entries(realdata: Path) -> list[dict[str, Any]]:
    return [
        mf for _, obj in _node_objects(realdata) for mf in obj["metadata"].get("managedFields", [])
    ]


# --- fieldsV1 ------------------------------------------------------------------------------


@pytest.mark.realdata
def test_every_real_fieldsv1_decodes_and_encodes_back_to_the_same_trie(realdata):
    entries = _all_entries(realdata)
    assert len(entries) >= 20  # the node dumps carry managedFields
    for mf in entries:
        trie = mf["fieldsV1"]
        assert actors.encode_fields(actors.decode_fields(trie)) == trie, mf["manager"]


@pytest.mark.realdata
def test_real_keys_decode_to_their_kinds(realdata):
    kinds: set[ElementKind] = set()
    for mf in _all_entries(realdata):
        for path in actors.decode_fields(mf["fieldsV1"]):
            kinds.update(e.kind for e in path)
    # f: everywhere, k:{"type":...} for conditions, v:"10.244.0.0/24" for podCIDRs
    assert {ElementKind.FIELD, ElementKind.KEY, ElementKind.VALUE} <= kinds


def test_decoding_separates_the_map_itself_from_its_keys():
    trie = {"f:metadata": {"f:labels": {".": {}, "f:team": {}}}, "f:spec": {"f:taints": {}}}
    paths = actors.decode_fields(trie)
    labels = (PathElement.field("metadata"), PathElement.field("labels"))
    assert labels in paths  # "." : the map itself
    assert (*labels, PathElement.field("team")) in paths
    assert (PathElement.field("spec"), PathElement.field("taints")) in paths
    assert (PathElement.field("metadata"),) not in paths  # no "." there


def test_key_elements_are_canonical_whatever_the_json_spelling():
    a = PathElement.decode('k:{"key": "dedicated", "effect": "NoSchedule"}')
    b = PathElement.decode('k:{"effect":"NoSchedule","key":"dedicated"}')
    assert a == b == PathElement.key(key="dedicated", effect="NoSchedule")
    assert a.encode() == 'k:{"effect":"NoSchedule","key":"dedicated"}'
    assert PathElement.decode("i:03") == PathElement(ElementKind.INDEX, "3")


@pytest.mark.parametrize(
    "raw", ["x:foo", "nocolon", 'k:["a"]', "k:{not json", "i:-1", "v:{bad"], ids=str
)
def test_malformed_keys_are_refused_by_name(raw):
    with pytest.raises(ValueError, match="fieldsV1 key"):
        PathElement.decode(raw)


def test_a_malformed_entry_names_its_position():
    with pytest.raises(ValueError, match=r"managedFields\[1\]"):
        actors.parse_managed_fields(
            [{"manager": "a", "fieldsV1": {}}, {"manager": "b", "fieldsV1": {"bad": {}}}]
        )


_names = st.text(alphabet="abcdefgh./-:{}\"' 0", min_size=1, max_size=8)
_json_values = st.one_of(st.integers(-5, 5), st.text(max_size=5), st.booleans(), st.none())
_elements = st.one_of(
    _names.map(PathElement.field),
    st.dictionaries(
        st.sampled_from(["key", "effect", "name", "type"]), _json_values, min_size=1
    ).map(lambda d: PathElement.key(**d)),
    _json_values.map(lambda v: PathElement(ElementKind.VALUE, actors._compact(v))),
    st.integers(0, 50).map(lambda i: PathElement(ElementKind.INDEX, str(i))),
)
_field_sets = st.frozensets(st.lists(_elements, min_size=1, max_size=4).map(tuple), max_size=12)


@given(_field_sets)
def test_any_field_set_survives_encode_then_decode(paths):
    trie = actors.encode_fields(paths)
    # the wire form is JSON: it must survive serialisation too
    assert actors.decode_fields(json.loads(json.dumps(trie))) == paths


@given(_field_sets)
def test_encoding_is_canonical(paths):
    trie = actors.encode_fields(paths)
    assert actors.encode_fields(actors.decode_fields(trie)) == trie


# --- coverage and the writer of a field ----------------------------------------------------


def test_an_atomic_taint_list_owner_owns_every_taint_but_a_map_owner_not_every_key():
    owned = actors.decode_fields(
        {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"f:taints": {}}}
    )
    assert actors.covers(owned, actors.finding_field_path("taints.dedicated:NoSchedule"))
    assert actors.covers(owned, actors.finding_field_path("labels.a"))
    assert not actors.covers(owned, actors.finding_field_path("labels.b"))


@pytest.mark.parametrize(
    ("field", "encoded"),
    [
        ("labels.team", ["f:metadata", "f:labels", "f:team"]),
        ("labels.node.kubernetes.io/pool", ["f:metadata", "f:labels", "f:node.kubernetes.io/pool"]),
        ("taints.a/b:NoSchedule", ["f:spec", "f:taints", 'k:{"effect":"NoSchedule","key":"a/b"}']),
        ("annotations.x", ["f:metadata", "f:annotations", "f:x"]),
        ("allocatable.cpu", None),
    ],
)
def test_finding_fields_map_to_object_paths(field, encoded):
    path = actors.finding_field_path(field)
    assert (None if path is None else [e.encode() for e in path]) == encoded


@pytest.mark.realdata
def test_real_node_labels_and_taints_have_their_real_writers(realdata):
    objs = dict(_node_objects(realdata))
    minikube = actors.parse_managed_fields(
        objs["regolibrary-minikube-node-v1.23.json"]["metadata"]["managedFields"]
    )
    d = actors.actor_from_managed_fields(
        minikube, actors.finding_field_path("labels.minikube.k8s.io/version")
    )
    assert d.actor == Actor("kubectl-label", ActorKind.HUMAN, Via.MANAGED_FIELDS)
    assert d.started_at == datetime(2022, 4, 26, 5, 54, 21, tzinfo=UTC)
    eks = actors.parse_managed_fields(
        objs["honeycomb-eks-nodelist-arm64.json"]["metadata"]["managedFields"]
    )
    taint = actors.actor_from_managed_fields(
        eks, actors.finding_field_path("taints.type:NoSchedule")
    )
    assert taint.actor == Actor("kube-controller-manager", ActorKind.PROVIDER, Via.MANAGED_FIELDS)
    label = actors.actor_from_managed_fields(
        eks, actors.finding_field_path("labels.eks.amazonaws.com/nodegroup")
    )
    assert label.actor is not None and label.actor.name == "kubelet"
    assert label.started_at == datetime(2021, 12, 8, 1, 47, 21, tzinfo=UTC)


def _entry(manager: str, at: datetime, trie: dict[str, Any]) -> actors.ManagedFieldsEntry:
    return actors.parse_managed_fields(
        [
            {
                "manager": manager,
                "operation": "Update",
                "time": at.isoformat(),
                "fieldsV1": trie,
            }
        ]
    )[0]


KUBELET_LABELS = {"f:metadata": {"f:labels": {".": {}, "f:role": {}, "f:zone": {}}}}


def test_before_and_after_name_the_entry_that_changed_and_owns_the_field():
    before = [_entry("kubelet", T0, KUBELET_LABELS)]
    after = [
        _entry("kubelet", T0, {"f:metadata": {"f:labels": {".": {}, "f:zone": {}}}}),
        _entry(
            "kubectl-edit", T0 + timedelta(hours=1), {"f:metadata": {"f:labels": {"f:role": {}}}}
        ),
    ]
    path = actors.finding_field_path("labels.role")
    d = actors.actor_from_managed_fields(after, path, before=before)
    assert d.actor == Actor("kubectl-edit", ActorKind.HUMAN, Via.MANAGED_FIELDS)
    assert d.started_at == T0 + timedelta(hours=1)
    assert any("wrote and owns" in r for r in d.reasons)


def test_a_removed_field_is_blamed_on_the_entry_that_changed_when_nobody_owns_it_after():
    before = [_entry("kubelet", T0, KUBELET_LABELS), _entry("kubectl-edit", T0, {"f:metadata": {}})]
    after = [
        _entry("kubelet", T0, {"f:metadata": {"f:labels": {".": {}, "f:zone": {}}}}),
        _entry("kubectl-edit", T0 + timedelta(minutes=5), {"f:metadata": {"f:annotations": {}}}),
    ]
    d = actors.actor_from_managed_fields(
        after, actors.finding_field_path("labels.role"), before=before
    )
    assert d.actor is not None and d.actor.name == "kubectl-edit"
    assert d.started_at == T0 + timedelta(minutes=5)
    # without the before state, nobody owns a removed field: no actor, and it says so
    alone = actors.actor_from_managed_fields(after, actors.finding_field_path("labels.role"))
    assert alone.actor is None and "no managedFields entry owns" in alone.reasons[0]


def test_a_removal_by_a_manager_that_owns_nothing_after_it_names_no_actor():
    """kubectl edit removing a label sends a patch that sets nothing: no kubectl-edit entry is
    left, and kubelet, which lost the label, is the victim, not the writer."""
    before = [_entry("kubelet", T0, KUBELET_LABELS)]
    after = [_entry("kubelet", T0, {"f:metadata": {"f:labels": {".": {}, "f:zone": {}}}})]
    d = actors.actor_from_managed_fields(
        after, actors.finding_field_path("labels.role"), before=before
    )
    assert d.actor is None and "audit" in d.reasons[0]


def test_the_newest_owner_wins_without_a_before_state():
    entries = [
        _entry("argocd-controller", T0, KUBELET_LABELS),
        _entry("kubectl-label", T0 + timedelta(seconds=1), KUBELET_LABELS),
    ]
    d = actors.actor_from_managed_fields(entries, actors.finding_field_path("labels.role"))
    assert d.actor is not None and d.actor.name == "kubectl-label"


@pytest.mark.parametrize(
    ("manager", "kind"),
    [
        ("kubectl-edit", ActorKind.HUMAN),
        ("kubectl-taint", ActorKind.HUMAN),
        ("kubectl-rollout", ActorKind.HUMAN),
        ("argocd-controller", ActorKind.GITOPS),
        ("kustomize-controller", ActorKind.GITOPS),
        ("helm", ActorKind.GITOPS),
        ("karpenter", ActorKind.AUTOSCALER),
        ("cluster-autoscaler", ActorKind.AUTOSCALER),
        ("eks-node-monitoring-agent", ActorKind.PROVIDER),
        ("digitalocean-cloud-controller-manager", ActorKind.PROVIDER),
        ("kubelet", ActorKind.PROVIDER),
        ("Go-http-client", ActorKind.UNKNOWN),
    ],
)
def test_field_managers_have_kinds(manager, kind):
    assert actors.kind_of_manager(manager) is kind


# --- evidence: audit, cloud event, managedFields -------------------------------------------

NODE = ChangedObject("prod", "nodes", "ip-10-0-1-2", T0, pool="general")


def _managed(manager: str) -> actors.ActorDecision:
    entries = [_entry(manager, T0, KUBELET_LABELS)]
    return actors.actor_from_managed_fields(entries, actors.finding_field_path("labels.role"))


def _cloud(actor: str, at: datetime, *, pool: str | None = "general") -> ChangeEvent:
    return ChangeEvent(
        id=f"ct-{actor}",
        source="aws.eks",
        type="aws.eks.UpdateNodegroupVersion",
        provider=EventSource.AWS,
        operation=Operation.UPGRADE,
        time=at,
        cluster="prod",
        pool=pool,
        actor=actor,
    )


def _audit(
    user: str,
    at: datetime,
    *,
    agent: str = "kubectl/v1.31.0",
    name: str = "ip-10-0-1-2",
    field_manager: str | None = "kubectl-edit",
):
    return AuditEvent(
        field_manager=field_manager,
        id=f"audit-{user}",
        cluster="prod",
        user=user,
        verb="patch",
        resource="nodes",
        name=name,
        at=at,
        user_agent=agent,
        source_ips=("10.1.2.3",),
    )


def test_an_audit_event_of_the_same_object_names_the_user_behind_the_tool():
    d = actors.resolve(
        NODE,
        _managed("kubectl-edit"),
        audit=[_audit("alice@example.com", T0 + timedelta(seconds=2))],
    )
    assert d.actor == Actor("alice@example.com", ActorKind.HUMAN, Via.AUDIT)
    assert d.manager == "kubectl-edit" and d.started_at == T0
    assert any("10.1.2.3" in r for r in d.reasons)


def test_audit_events_of_other_objects_or_outside_the_window_do_not_count():
    d = actors.resolve(
        NODE,
        _managed("kubectl-edit"),
        audit=[
            _audit("bob", T0, name="another-node"),
            _audit("carol", T0 + timedelta(hours=1)),
        ],
    )
    assert d.actor is not None and d.actor.via is Via.MANAGED_FIELDS


def test_a_cloud_event_explains_a_change_the_providers_agent_made_but_not_a_kubectl_edit():
    event = _cloud("arn:aws:sts::111122223333:assumed-role/Admin/dave", T0 + timedelta(minutes=2))
    by_kubelet = actors.resolve(NODE, _managed("kubelet"), cloud=[event])
    assert by_kubelet.actor == Actor(event.actor or "", ActorKind.HUMAN, Via.CLOUD_EVENT)
    by_hand = actors.resolve(NODE, _managed("kubectl-edit"), cloud=[event])
    assert by_hand.actor is not None and by_hand.actor.name == "kubectl-edit"
    assert any("kept" in r for r in by_hand.reasons)
    elsewhere = actors.resolve(
        NODE, _managed("kubelet"), cloud=[_cloud("x:user/y", T0, pool="gpu")]
    )
    assert elsewhere.actor is not None and elsewhere.actor.name == "kubelet"


def test_a_late_cloud_event_updates_the_actor_of_an_open_finding_once():
    first = actors.resolve(NODE, _managed("kubelet"))
    assert first.actor is not None and first.actor.via is Via.MANAGED_FIELDS
    late = _cloud("arn:aws:iam::111122223333:user/erin", T0 + timedelta(minutes=9))
    updated = actors.refine(first, NODE, cloud=[late])
    assert updated is not None and updated.actor is not None
    assert updated.actor.via is Via.CLOUD_EVENT and updated.manager == "kubelet"
    # the same event again: nothing new to record
    assert actors.refine(updated, NODE, cloud=[late]) is None
    # an audit event arriving later still is stronger
    audit = actors.refine(
        updated,
        NODE,
        audit=[
            _audit("system:serviceaccount:kube-system:x", T0, field_manager="kubectl-edit"),
            _audit("system:node:x", T0, agent="kubelet/v1.31.0 (linux/amd64)", field_manager=None),
        ],
    )
    assert audit is not None and audit.actor is not None and audit.actor.via is Via.AUDIT
    assert audit.actor.name == "system:node:x"  # kubectl-edit's write is not kubelet's


@pytest.mark.parametrize(
    ("principal", "kind"),
    [
        (
            "arn:aws:iam::1:role/aws-service-role/eks.amazonaws.com/AWSServiceRoleForAmazonEKS",
            ActorKind.PROVIDER,
        ),
        ("autoscaling.amazonaws.com", ActorKind.AUTOSCALER),
        ("service-1@container-engine-robot.iam.gserviceaccount.com", ActorKind.PROVIDER),
        ("arn:aws:sts::1:assumed-role/Admin/frank", ActorKind.HUMAN),
        ("grace@example.com", ActorKind.HUMAN),
        ("0f8fad5b-d9cb-469f-a165-70867728950e", ActorKind.UNKNOWN),
    ],
)
def test_cloud_principals_have_kinds(principal, kind):
    assert actors.kind_of_principal(principal) is kind


@pytest.mark.parametrize(
    ("user", "agent", "kind"),
    [
        (
            "system:serviceaccount:argocd:argocd-application-controller",
            "argocd-application-controller/v2.9",
            ActorKind.GITOPS,
        ),
        ("system:serviceaccount:karpenter:karpenter", "karpenter/v1.0", ActorKind.AUTOSCALER),
        ("system:node:ip-10-0-1-2", "kubelet/v1.30", ActorKind.PROVIDER),
        ("alice", "kubectl/v1.31.0 (linux/amd64)", ActorKind.HUMAN),
        ("ci-bot", "helm/v3.14", ActorKind.GITOPS),
    ],
)
def test_audit_users_have_kinds(user, agent, kind):
    assert actors.kind_of_audit_user(_audit(user, T0, agent=agent)) is kind


def test_a_decision_gives_the_finding_its_actor_and_start_in_the_contract_shape():
    d = _managed("kubectl-edit")
    assert d.to_json() == {
        "actor": {"name": "kubectl-edit", "kind": "human", "via": "managedFields"},
        "startedAt": "2026-11-30T12:00:00Z",
    }
    assert actors.ActorDecision(None, None, ("nothing",)).to_json() == {}
