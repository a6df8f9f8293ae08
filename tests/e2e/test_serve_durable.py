"""``serve`` as a process over its durable store: ``/api/events`` and ``/api/decisions`` are
read from the audit store (the same listing after a restart, an event sent twice listed once
and counted), dedupe is namespaced by route, the queue file lives beside the store, and a store
that is new is never starved by an old queue or event log."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.formats.errors import FormatError
from fleetwarden.wiring.service_config import service_config_from
from tests.support.serve_process import ServeProcess, free_port

TOKEN = "durable-token"
CE_TOKEN = "cloudevents-sender-token"
ALICE = "arn:aws:iam::123456789012:user/alice"


def aws_event(event_id: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "AWS API Call via CloudTrail",
        "source": "aws.eks",
        "account": "123456789012",
        "time": "2026-12-01T10:00:00Z",
        "region": "eu-west-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.08",
            "eventSource": "eks.amazonaws.com",
            "userIdentity": {"arn": ALICE},
            "eventName": "UpdateNodegroupConfig",
            "awsRegion": "eu-west-1",
            "eventTime": "2026-12-01T10:00:00Z",
            "requestParameters": {
                "name": "duckboat",
                "nodegroupName": "custom-1",
                "scalingConfig": {"desiredSize": 2},
            },
        },
    }


class Service:
    def __init__(self, tmp: Path, realdata: Path, **overrides: Any) -> None:
        self.tmp = tmp
        (tmp / "desired.yaml").write_text(
            "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
            "metadata: {name: duckboat}\n"
            "managedNodeGroups:\n  - {name: custom-1, instanceType: m5.large}\n"
        )
        nodes = realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json"
        port = free_port()
        config: dict[str, Any] = {
            "listen": f"127.0.0.1:{port}",
            "queuePath": str(tmp / "queue.db"),
            "store": f"sqlite:///{tmp / 'audit.db'}",
            "eventLog": str(tmp / "events.jsonl"),
            "desired": [str(tmp / "desired.yaml")],
            "nodes": [f"duckboat={nodes}"],
            "auth": {"aws": {"bearerToken": TOKEN}, "cloudevents": {"bearerToken": CE_TOKEN}},
            "debounceSeconds": 0.05,
        }
        config.update(overrides)
        path = tmp / "svc.json"
        path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
        self.process = ServeProcess(path, port)
        self.base = self.process.base

    def post(self, route: str, body: Any, token: str = TOKEN, **headers: str) -> httpx.Response:
        return httpx.post(
            f"{self.base}/events/{route}",
            json=body,
            headers={"Authorization": f"Bearer {token}", **headers},
            timeout=5,
        )

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", params=params, timeout=5)

    def listing(self, path: str, limit: int, **params: Any) -> list[dict[str, Any]]:
        """Every page, following the Link header."""
        items: list[dict[str, Any]] = []
        r = self.get(path, limit=limit, **params)
        while True:
            assert r.status_code == 200, r.text
            items += r.json()
            if "next" not in r.links:
                return items
            r = httpx.get(f"{self.base}{r.links['next']['url']}", timeout=5)


@pytest.fixture
def service(tmp_path: Path, realdata: Path) -> Iterator[Service]:
    svc = Service(tmp_path, realdata)
    try:
        yield svc
    finally:
        svc.process.stop()


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)


def listed_ids(svc: Service, **params: Any) -> list[str]:
    return [e["id"] for e in svc.get("/api/events", limit=1000, **params).json()]


def test_events_and_decisions_are_listed_from_the_store_the_same_after_a_restart(
    service: Service,
) -> None:
    svc = service
    svc.process.start()
    for i in range(7):
        assert svc.post("aws", aws_event(f"evt-{i}")).status_code == 202
    wait_for(lambda: len(listed_ids(svc)) == 7, "7 events stored")
    wait_for(lambda: svc.get("/api/decisions").json() != [], "a decision recorded")
    events = svc.listing("/api/events", limit=3)
    decisions = svc.listing("/api/decisions", limit=1)
    assert [e["id"] for e in events] == [f"evt-{i}" for i in reversed(range(7))], "newest first"
    assert {e["route"] for e in events} == {"aws"} and events[0]["actor"] == ALICE
    svc.process.stop()
    svc.process.start()
    assert svc.listing("/api/events", limit=3) == events
    after = svc.listing("/api/decisions", limit=1)
    # a restart may decide again about the findings it sees again: newer decisions, in front
    assert after[len(after) - len(decisions) :] == decisions
    assert (
        svc.get("/api/events", cluster="duckboat", actor="*:user/alice", limit=2).json()
        == (events[:2])
    )
    assert svc.get("/api/events", cluster="elsewhere").json() == []
    assert svc.get("/api/decisions", cluster="duckboat").json() == after[:100]
    for bad in ({"limit": "²"}, {"limit": "0"}, {"limit": "1001"}, {"cursor": "x"}):
        r = svc.get("/api/events", **bad)
        assert r.status_code == 400 and r.json()["error"], bad


def test_an_event_sent_twice_is_listed_once_and_counted_as_a_duplicate(service: Service) -> None:
    svc = service
    svc.process.start()
    assert svc.post("aws", aws_event("twice")).status_code == 202
    wait_for(lambda: listed_ids(svc) == ["twice"], "stored")
    assert svc.post("aws", aws_event("twice")).status_code == 202  # the source retries
    wait_for(
        lambda: svc.process.metric("fleetwarden_events_duplicate_total") == 1,
        "the redelivery counted",
    )
    assert svc.post("aws", aws_event("later")).status_code == 202
    wait_for(lambda: listed_ids(svc) == ["later", "twice"], "listed once")


def test_a_forged_cloudevent_cannot_make_the_genuine_aws_event_vanish(service: Service) -> None:
    """A CloudEvents sender (its own token) claims source aws.eks and the id the EventBridge
    event will carry, and a forged actor. Both are stored; the AWS event keeps its actor."""
    svc = service
    svc.process.start()
    forged = {
        "specversion": "1.0",
        "id": "predictable-1",
        "source": "aws.eks",
        "type": "aws.eks.UpdateNodegroupConfig",
        "cluster": "duckboat",
        "nodepool": "custom-1",
        "actor": "arn:aws:iam::123456789012:user/mallory",
        "data": {},
    }
    ce = {"content-type": "application/cloudevents+json"}
    assert svc.post("cloudevents", forged, token=CE_TOKEN, **ce).status_code == 202
    assert svc.post("aws", aws_event("predictable-1")).status_code == 202
    wait_for(lambda: len(listed_ids(svc, source="aws.eks")) == 2, "both stored")
    (genuine,) = svc.get("/api/events", route="aws").json()
    (fake,) = svc.get("/api/events", route="cloudevents").json()
    assert (genuine["id"], genuine["source"], genuine["actor"]) == (
        "predictable-1",
        "aws.eks",
        ALICE,
    )
    assert fake["actor"].endswith("user/mallory") and fake["id"] == "predictable-1"
    assert svc.process.metric("fleetwarden_events_duplicate_total") == 0


def test_a_new_store_gets_the_events_an_old_queue_and_event_log_had_seen(
    tmp_path: Path, realdata: Path
) -> None:
    """The first store is lost; the queue file and the event log stay. Sources send the same
    events again: the new store gets them (the queue keeps no processed marks, and the event
    log's keys are its own)."""
    first = Service(tmp_path, realdata)
    first.process.start()
    try:
        for i in range(3):
            assert first.post("aws", aws_event(f"evt-{i}")).status_code == 202
        wait_for(lambda: len(listed_ids(first)) == 3, "stored in the first store")
    finally:
        first.process.stop()
    second = Service(tmp_path, realdata, store=f"sqlite:///{tmp_path / 'restored.db'}")
    second.process.start()
    try:
        assert listed_ids(second) == []
        for i in range(3):
            assert second.post("aws", aws_event(f"evt-{i}")).status_code == 202
        wait_for(lambda: len(listed_ids(second)) == 3, "stored in the new store")
    finally:
        second.process.stop()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["id"] for x in lines) == ["evt-0", "evt-1", "evt-2"]


def test_the_queue_file_defaults_beside_the_store_not_the_working_directory(
    tmp_path: Path, realdata: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    svc = Service(tmp_path, realdata, queuePath=None, store=f"sqlite:///{data / 'audit.db'}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    svc.process.cwd = elsewhere
    svc.process.start()
    try:
        assert svc.post("aws", aws_event("beside")).status_code == 202
        wait_for(lambda: listed_ids(svc) == ["beside"], "stored")
    finally:
        svc.process.stop()
    assert (data / "audit-queue.db").is_file()
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"store": "postgresql://fw@db/fleetwarden"}, "queuePath"),
        ({"store": "sqlite://"}, "queuePath"),
        (
            {"notify": [{"name": "s", "kind": "slack", "url": "https://x/y", "events": True}]},
            "notify.s",
        ),
    ],
)
def test_config_refusals_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(FormatError) as exc:
        service_config_from(raw, source="svc.yaml")
    assert exc.value.field == field


def test_a_postgresql_store_with_a_nats_queue_needs_no_queue_file() -> None:
    cfg = service_config_from(
        {"store": "postgresql://fw@db/fleetwarden", "queue": "nats://127.0.0.1:4222"},
        source="svc.yaml",
    )
    assert cfg.queue.startswith("nats://")
    # the defaults live in a state directory, never the working directory
    cfg = service_config_from({}, source="svc.yaml", env={"FLEETWARDEN_STATE_DIR": "/srv/fw"})
    assert (cfg.store, cfg.queue_path) == (
        "sqlite:////srv/fw/fleetwarden.db",
        "/srv/fw/fleetwarden-queue.db",
    )
    xdg = service_config_from({}, source="svc.yaml", env={"XDG_STATE_HOME": "/var/state"})
    assert xdg.store == "sqlite:////var/state/fleetwarden/fleetwarden.db"
