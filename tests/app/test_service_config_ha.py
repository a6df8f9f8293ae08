"""The ``leaderElection`` and ``sharding`` sections of the service config: parsed by their own
parsers into ``ServiceConfig`` (absent: None, today's behaviour), refusals name the field."""

from __future__ import annotations

import pytest

from fleetwarden.entrypoints.service_config import service_config_from
from fleetwarden.formats.errors import FormatError

SECTION = {"context": "mgmt", "namespace": "fleetwarden", "leaseSeconds": 6}


def test_both_sections_are_read_with_their_defaults():
    cfg = service_config_from(
        {"leaderElection": SECTION, "sharding": {**SECTION, "group": "watchers"}},
        source="svc.yaml",
    )
    assert cfg.leader_election is not None and cfg.sharding is not None
    assert (cfg.leader_election.name, cfg.leader_election.context) == ("fleetwarden", "mgmt")
    assert cfg.leader_election.timing.lease_duration == 6
    assert cfg.sharding.group == "watchers" and cfg.sharding.namespace == "fleetwarden"


def test_without_the_sections_every_replica_leads_and_watches_everything():
    cfg = service_config_from({}, source="svc.yaml")
    assert cfg.leader_election is None and cfg.sharding is None


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"leaderElection": {**SECTION, "leaseSecs": 4}}, "leaderElection.leaseSecs"),
        ({"leaderElection": {"namespace": "x"}}, "leaderElection"),
        ({"sharding": {**SECTION, "group": "-bad-"}}, "sharding.group"),
        ({"policy": {"maxActionsPerCluster": 0}}, "policy.maxActionsPerCluster"),
    ],
)
def test_a_bad_section_is_refused_naming_the_field(raw, field):
    with pytest.raises(FormatError) as caught:
        service_config_from(raw, source="svc.yaml")
    assert caught.value.field == field
