"""Incidents: one root cause (one commit, or one actor making one change) groups findings across
pools and clusters; incidents rank by nodes, clusters, then age; ids do not move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.actors import Actor, ActorKind, Via
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.incidents import Cause, group_incidents

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
EDIT = Actor("kubectl-edit", ActorKind.HUMAN, Via.MANAGED_FIELDS)


def finding(cluster, pool, *, field="labels.team", actual="oncall", nodes=("n1",)):
    return Finding(
        cluster=cluster,
        pool=pool,
        layer=Layer.L1,
        field=field,
        expected="platform",
        actual=actual,
        severity=Severity.HIGH,
        nodes=tuple(nodes),
    )


def test_the_same_actor_making_the_same_change_across_clusters_is_one_incident():
    causes = [
        Cause(finding("prod-eu", "general"), EDIT, T0),
        Cause(finding("prod-us", "general"), EDIT, T0 + timedelta(minutes=1)),
        Cause(finding("prod-us", "gpu", nodes=("g1", "g2")), EDIT, T0 + timedelta(minutes=2)),
    ]
    (incident,) = group_incidents(causes)
    assert incident.clusters == ("prod-eu", "prod-us")
    assert incident.nodes == 4 and incident.started_at == T0
    assert incident.actor == EDIT and len(incident.reasons) == 3
    out = incident.to_json(T0 + timedelta(hours=1))
    assert out["ageSeconds"] == 3600 and out["actor"] == EDIT.to_json()
    assert out["pools"] == ["prod-eu/general", "prod-us/general", "prod-us/gpu"]


def test_a_different_change_or_a_different_actor_is_another_incident():
    causes = [
        Cause(finding("a", "p"), EDIT, T0),
        Cause(finding("a", "p", actual="web"), EDIT, T0),
        Cause(
            finding("b", "p"), Actor("argocd-controller", ActorKind.GITOPS, Via.MANAGED_FIELDS), T0
        ),
        # an unknown actor is no common cause: two findings, two incidents
        Cause(finding("c", "p"), Actor("Go-http-client", ActorKind.UNKNOWN, Via.MANAGED_FIELDS)),
        Cause(finding("d", "p"), Actor("Go-http-client", ActorKind.UNKNOWN, Via.MANAGED_FIELDS)),
    ]
    assert len(group_incidents(causes)) == 5


def test_one_commit_groups_every_finding_it_produced():
    causes = [
        Cause(finding("a", "p", field="labels.x"), commit="3f2c1ab"),
        Cause(finding("b", "q", field="taints.y:NoSchedule"), EDIT, commit="3f2c1ab"),
        Cause(finding("c", "r")),
    ]
    ranked = group_incidents(causes)
    assert [len(i.findings) for i in ranked] == [2, 1]
    assert ranked[0].commit == "3f2c1ab" and "3f2c1ab" in ranked[0].root_cause


def test_incidents_rank_by_nodes_then_clusters_then_age():
    wide = [Cause(finding(c, "p", actual="w", nodes=("x",)), EDIT, T0) for c in ("a", "b")]
    big = [Cause(finding("a", "p", actual="big", nodes=("1", "2", "3")), EDIT, T0)]
    old = [Cause(finding("z", "p", actual="old", nodes=("1", "2")), EDIT, T0 - timedelta(days=1))]
    new = [Cause(finding("y", "p", actual="new", nodes=("1", "2")), EDIT, T0)]
    ranked = group_incidents([*new, *old, *wide, *big])
    assert [i.findings[0].actual for i in ranked] == ["big", "w", "old", "new"]


_cause = st.builds(
    lambda c, p, v, who, n, src: Cause(
        finding(c, p, actual=v, nodes=tuple(f"n{i}" for i in range(n))),
        Actor(who, ActorKind.HUMAN, Via.AUDIT) if who else None,
        T0 + timedelta(minutes=n),
        source=src,
    ),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["p", "q"]),
    st.sampled_from(["x", "y"]),
    st.sampled_from(["alice", "bob", None]),  # None: no actor known (a node dump)
    st.integers(0, 4),
    st.sampled_from([None, "base/eksctl.yaml", "prod.tf"]),
)


@given(st.lists(_cause, max_size=20), st.randoms())
def test_grouping_is_a_partition_with_ids_independent_of_order_and_membership(causes, rnd):
    ranked = group_incidents(causes)
    ids = {c.finding.id for c in causes}
    grouped = [f.id for i in ranked for f in i.findings]
    assert sorted(grouped) == sorted(ids)  # every finding once
    shuffled = list(causes)
    rnd.shuffle(shuffled)
    again = group_incidents(shuffled)
    assert [i.id for i in again] == [i.id for i in ranked]
    # an incident keeps its id when some of its findings clear
    for incident in ranked:
        keep = [c for c in causes if c.finding.id == incident.findings[0].id]
        assert group_incidents(keep)[0].id == incident.id


def test_one_desired_value_not_applied_across_clusters_is_one_incident_when_no_actor_is_known():
    src = "clusters/base/eksctl.yaml"
    causes = [
        Cause(finding("a", "p", field="kubeletVersion", actual="v1.29"), source=src),
        Cause(finding("b", "q", field="kubeletVersion", actual="v1.29"), source=src),
        # another source, another value, or an actor known: other incidents
        Cause(finding("c", "p", field="kubeletVersion", actual="v1.29"), source="other.tf"),
        Cause(finding("a", "p", field="kubeletVersion", actual="v1.28"), source=src),
        Cause(finding("d", "p", field="kubeletVersion", actual="v1.29"), EDIT, source=src),
        # no source: on its own, as before
        Cause(finding("e", "p", field="kubeletVersion", actual="v1.29")),
    ]
    ranked = group_incidents(causes)
    assert sorted(len(i.findings) for i in ranked) == [1, 1, 1, 1, 2]
    (pair,) = [i for i in ranked if len(i.findings) == 2]
    assert pair.clusters == ("a", "b") and src in pair.root_cause and "v1.29" in pair.root_cause
