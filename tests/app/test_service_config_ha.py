"""The ``leaderElection`` and ``sharding`` sections of the service config: parsed by their own
parsers into ``ServiceConfig`` (absent: None, today's behaviour), refusals name the field; and
what a service without them says about leadership (/healthz, ``fleetwarden_leader``)."""

from __future__ import annotations

import httpx
import pytest

from fleetwarden.entrypoints.serve_cmd import build_service
from fleetwarden.formats.errors import FormatError
from fleetwarden.wiring.service_config import service_config_from

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


@pytest.mark.parametrize(("role", "leader"), [("gateway", False), ("worker", True), ("all", True)])
async def test_healthz_and_the_metric_say_leader_only_where_healing_runs(tmp_path, role, leader):
    """Without leaderElection a worker always leads; a gateway never heals, so never leads."""
    cfg = service_config_from(
        {
            "role": role,
            "queuePath": str(tmp_path / "q.db"),
            "store": f"sqlite:///{tmp_path / 'a.db'}",
        },
        source="svc.yaml",
    )
    service = build_service(cfg)
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        health = (await client.get("/healthz")).json()
        metrics = (await client.get("/metrics")).text
    await service.queue.close()
    assert health["leader"] is leader
    assert f"fleetwarden_leader {float(leader)}" in metrics


async def test_serve_feeds_the_cloud_delivery_delay_histogram(tmp_path):
    """The composition root hands the inspector the histogram of the provider's own delivery
    delay (event time -> received): what it observes is on /metrics, by provider."""
    cfg = service_config_from(
        {"queuePath": str(tmp_path / "q.db"), "store": f"sqlite:///{tmp_path / 'a.db'}"},
        source="svc.yaml",
    )
    service = build_service(cfg)
    hook = service.inspector.on_delivery_delay
    assert hook is not None
    hook("aws", 42.0)
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        metrics = (await client.get("/metrics")).text
    await service.queue.close()
    assert 'fleetwarden_event_delivery_delay_seconds_count{provider="aws"} 1.0' in metrics
