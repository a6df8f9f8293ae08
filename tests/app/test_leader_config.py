"""The ``leaderElection`` config section: defaults derived from leaseSeconds as client-go's
15/10/2, and every refusal naming the file, the field and the reason."""

from __future__ import annotations

import pytest

from fleetwarden.app.leader_config import LeaderElectionConfig, leader_election_from
from fleetwarden.core.leadership import ElectionTiming
from fleetwarden.formats.errors import FormatError


def test_absent_section_means_no_election():
    assert leader_election_from(None, source="fw.yaml") is None


def test_defaults_follow_client_go_proportions():
    got = leader_election_from({"inCluster": True, "namespace": "fw"}, source="fw.yaml")
    assert got == LeaderElectionConfig(
        namespace="fw", name="fleetwarden", in_cluster=True, timing=ElectionTiming(15, 10, 2)
    )


def test_short_lease_with_explicit_timing():
    raw = {
        "context": "mgmt",
        "namespace": "fw",
        "name": "fw-leader",
        "leaseSeconds": 4,
        "renewDeadlineSeconds": 2.5,
        "retryPeriodSeconds": 0.5,
    }
    got = leader_election_from(raw, source="fw.yaml")
    assert got is not None and got.context == "mgmt" and not got.in_cluster
    assert got.timing == ElectionTiming(4, 2.5, 0.5)


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        ([], "leaderElection", "must be a mapping"),
        ({"namespace": "fw"}, "leaderElection", "exactly one of them"),
        ({"context": "a", "inCluster": True, "namespace": "fw"}, "leaderElection", "exactly one"),
        ({"context": "a", "namespace": "fw", "lease": 3}, "leaderElection.lease", "unknown field"),
        ({"context": "a"}, "leaderElection.namespace", "required"),
        ({"context": "a", "namespace": "Fw_1"}, "leaderElection.namespace", "RFC 1123"),
        ({"context": "a", "namespace": "fw", "name": "A B"}, "leaderElection.name", "Lease name"),
        ({"inCluster": "yes", "namespace": "fw"}, "leaderElection.inCluster", "true or false"),
        (
            {"context": "a", "namespace": "fw", "leaseSeconds": 2.5},
            "leaderElection.leaseSeconds",
            "whole",
        ),
        (
            {"context": "a", "namespace": "fw", "leaseSeconds": 5, "renewDeadlineSeconds": 5},
            "leaderElection.renewDeadlineSeconds",
            "must be shorter than leaseSeconds (5)",
        ),
        (
            {"context": "a", "namespace": "fw", "renewDeadlineSeconds": -1},
            "leaderElection.renewDeadlineSeconds",
            "positive",
        ),
        (
            {
                "context": "a",
                "namespace": "fw",
                "leaseSeconds": 5,
                "renewDeadlineSeconds": 2,
                "retryPeriodSeconds": 2,
            },
            "leaderElection.retryPeriodSeconds",
            "1.2 x retryPeriod",
        ),
    ],
)
def test_refusals_name_file_field_and_reason(raw, field, says):
    with pytest.raises(FormatError) as err:
        leader_election_from(raw, source="fw.yaml")
    assert err.value.path == "fw.yaml" and err.value.field == field
    assert says in err.value.reason
