"""Joining the deprecated-API gauge with the audit log's deprecation annotations: one use per
API, its clients counted once per request, removed at or before the target or not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.actors import AuditEvent
from fleetwarden.core.live_deprecations import ApiRef, collect

T0 = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)
IPS = ApiRef("networking.k8s.io", "v1beta1", "ipaddresses")
VAP = ApiRef("admissionregistration.k8s.io", "v1beta1", "validatingadmissionpolicies")


def call(
    id: str,
    ref: ApiRef,
    user: str = "ci",
    agent: str = "old/1",
    removed: str = "1.37",
    *,
    cluster: str = "c",
    deprecated: bool = True,
    at: datetime = T0,
) -> AuditEvent:
    notes = (("k8s.io/deprecated", "true"),) if deprecated else ()
    if removed:
        notes += (("k8s.io/removed-release", removed),)
    return AuditEvent(
        id, cluster, user, "list", ref.resource, "", at, user_agent=agent,
        api_group=ref.group, api_version=ref.version, annotations=notes,
    )  # fmt: skip


def test_metric_and_audit_join_into_one_use_with_its_clients():
    audit = [
        call("1", IPS),
        call("2", IPS, at=T0 + timedelta(seconds=5)),
        call("2", IPS),  # the same request at another stage: counted once
        call("3", IPS, user="bob", agent="kubectl/v1.30.0"),
        call("4", IPS, deprecated=False),  # not a deprecated call
        call("5", IPS, cluster="other"),
    ]
    (use,) = collect("c", [(IPS, "1.37")], audit, (1, 37))
    assert (use.removed, use.source, use.removed_in) == (True, "metrics+audit", (1, 37))
    assert [(c.user, c.user_agent, c.requests) for c in use.clients] == [
        ("ci", "old/1", 2),
        ("bob", "kubectl/v1.30.0", 1),
    ]
    assert use.clients[0].last_seen == T0 + timedelta(seconds=5)
    assert use.to_json()["apiVersion"] == "networking.k8s.io/v1beta1"


def test_only_deprecated_at_the_target_is_not_removed_and_removed_sorts_first():
    uses = collect("c", [(VAP, "1.37"), (IPS, "1.36")], [], (1, 36))
    assert [(u.api.resource, u.removed, u.source) for u in uses] == [
        ("ipaddresses", True, "metrics"),
        ("validatingadmissionpolicies", False, "metrics"),
    ]


def test_an_api_known_only_from_the_audit_log_is_listed_and_no_removal_planned_is_never_removed():
    (use,) = collect("c", [], [call("1", VAP, removed="")], (9, 99))
    assert (use.source, use.removed_in, use.removed) == ("audit", None, False)


@given(
    st.lists(st.tuples(st.sampled_from([IPS, VAP]), st.sampled_from(["1.35", "1.37", ""]))),
    st.integers(min_value=30, max_value=40),
)
def test_removed_means_a_planned_removal_at_or_before_the_target(metrics, minor):
    for u in collect("c", metrics, [], (1, minor)):
        assert u.removed == (u.removed_in is not None and u.removed_in <= (1, minor))
    assert len(collect("c", metrics, [], (1, minor))) == len({ref for ref, _ in metrics})
