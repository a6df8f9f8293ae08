"""Stamping live findings: the writer of the field from managedFields, the start and detection
times, kept by the tracker for as long as the finding lasts."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetwarden.app.stamping import (
    cause_of,
    refine_open,
    stamp,
    stamp_events,
    timeline_seconds,
)
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.tracking import FindingTracker
from fleetwarden.presenting.incidents import incidents_json

NOW = datetime(2026, 5, 1, 12, 0, 5, tzinfo=UTC)


def label(actual: str, nodes: tuple[str, ...] = ("n-1",)) -> Finding:
    return Finding(
        "c", "general", Layer.L1, "labels.team", "platform", actual, Severity.HIGH, nodes
    )


def entry(manager: str, time: str, *labels: str) -> dict:
    return {
        "manager": manager,
        "operation": "Update",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}}},
    }


BEFORE = [entry("kubelet", "2026-05-01T10:00:00Z", "team", "zone")]
AFTER = [
    entry("kubelet", "2026-05-01T10:00:00Z", "zone"),
    entry("kubectl-edit", "2026-05-01T12:00:01Z", "team"),
]


def test_the_writer_in_this_update_is_the_actor_and_its_write_time_the_start():
    out = stamp(label("x"), NOW, managed={"n-1": AFTER}.get, changed=("n-1", BEFORE))
    assert out == {
        "detectedAt": "2026-05-01T12:00:05Z",
        "actor": {"name": "kubectl-edit", "kind": "human", "via": "managedFields"},
        "startedAt": "2026-05-01T12:00:01Z",
    }


def test_without_the_previous_object_the_newest_owner_is_named():
    out = stamp(label("x"), NOW, managed={"n-1": AFTER}.get)
    assert out["actor"]["name"] == "kubectl-edit"


def test_a_fact_no_write_sets_gets_only_its_detection_time():
    f = Finding("c", "general", Layer.L4, "kubeletVersion", "1.36", "1.35", Severity.HIGH, ("n-1",))
    assert stamp(f, NOW, managed={"n-1": AFTER}.get) == {"detectedAt": "2026-05-01T12:00:05Z"}


def test_malformed_managed_fields_name_no_one():
    out = stamp(label("x"), NOW, managed={"n-1": [{"operation": "Update"}]}.get)
    assert "actor" not in out


def test_the_tracker_keeps_the_stamp_when_the_finding_changes_and_clears():
    tracker = FindingTracker()
    events = tracker.update(("c", "general"), [label("x")], now=NOW)
    (appeared,) = stamp_events(
        tracker, ("c", "general"), events, managed={"n-1": AFTER}.get, changed=("n-1", BEFORE)
    )
    assert appeared.finding.extra["actor"]["name"] == "kubectl-edit"
    # a second node shows the same drift: changed, with the first writer still named
    (changed,) = tracker.update(("c", "general"), [label("x", ("n-1", "n-2"))], now=NOW)
    assert changed.type.value == "finding.changed"
    assert changed.to_json()["finding"]["actor"]["name"] == "kubectl-edit"
    assert changed.to_json()["finding"]["detectedAt"] == "2026-05-01T12:00:05Z"
    (cleared,) = tracker.update(("c", "general"), [], now=NOW)
    assert cleared.to_json()["finding"]["startedAt"] == "2026-05-01T12:00:01Z"


def _cloud_event() -> ChangeEvent:
    return ChangeEvent(
        "ct-9",
        "aws.eks",
        "UpdateNodegroupConfig",
        EventSource.AWS,
        Operation.UPDATE,
        time=NOW,
        cluster="c",
        pool="general",
        actor="arn:aws:iam::1:user/alice",
    )


def test_a_late_cloud_event_never_replaces_a_human_tool_named_by_managed_fields():
    tracker = FindingTracker()
    events = tracker.update(("c", "general"), [label("x")], now=NOW)
    stamp_events(
        tracker, ("c", "general"), events, managed={"n-1": AFTER}.get, changed=("n-1", BEFORE)
    )
    assert refine_open(tracker, ("c", "general"), _cloud_event(), now=NOW) == []
    assert tracker.current()[0].extra["actor"]["name"] == "kubectl-edit"


def test_a_late_cloud_event_names_the_actor_of_a_finding_no_write_explained():
    tracker = FindingTracker()
    f = Finding("c", "general", Layer.L4, "kubeletVersion", "1.36", "1.35", Severity.HIGH, ("n-1",))
    events = tracker.update(("c", "general"), [f], now=NOW)
    stamp_events(tracker, ("c", "general"), events, managed={"n-1": AFTER}.get)
    (changed,) = refine_open(tracker, ("c", "general"), _cloud_event(), now=NOW)
    assert changed.type.value == "finding.changed"
    assert changed.finding.extra["actor"] == {
        "name": "arn:aws:iam::1:user/alice",
        "kind": "human",
        "via": "cloudEvent",
    }
    assert refine_open(tracker, ("c", "general"), _cloud_event(), now=NOW) == []


def test_detect_and_restore_times_are_measured_from_the_start_of_the_change():
    tracker = FindingTracker()
    events = tracker.update(("c", "general"), [label("x")], now=NOW)
    (appeared,) = stamp_events(
        tracker, ("c", "general"), events, managed={"n-1": AFTER}.get, changed=("n-1", BEFORE)
    )
    assert timeline_seconds(appeared) == ("detect", 4.0)
    later = NOW.replace(minute=10)
    (cleared,) = stamp_events(
        tracker,
        ("c", "general"),
        tracker.update(("c", "general"), [], now=later),
        managed={}.get,
    )
    assert cleared.to_json()["finding"]["clearedAt"] == "2026-05-01T12:10:05Z"
    assert timeline_seconds(cleared) == ("restore", 604.0)


def test_a_finding_with_no_known_start_is_not_measured():
    tracker = FindingTracker()
    (appeared,) = tracker.update(("c", "general"), [label("x")], now=NOW)
    assert timeline_seconds(appeared) is None


def test_the_same_tool_making_the_same_change_in_two_clusters_is_one_incident():
    edit = {"name": "kubectl-edit", "kind": "human", "via": "managedFields"}
    stamped = {"actor": edit, "startedAt": "2026-05-01T12:00:01Z"}
    a = Finding(
        "eu",
        "general",
        Layer.L1,
        "labels.team",
        "platform",
        "x",
        Severity.HIGH,
        ("n-1",),
        extra=stamped,
    )
    b = Finding(
        "us",
        "general",
        Layer.L1,
        "labels.team",
        "platform",
        "x",
        Severity.HIGH,
        ("n-9",),
        extra=stamped,
    )
    other = label("y")  # no actor: an incident of its own
    assert cause_of(a).actor is not None and cause_of(a).actor.name == "kubectl-edit"
    incidents = incidents_json([a, b, other], NOW)
    assert len(incidents) == 2
    first = incidents[0]  # the bigger blast radius ranks first
    assert (first["clusters"], first["nodes"], first["actor"]) == (["eu", "us"], 2, edit)
