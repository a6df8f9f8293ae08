"""The drift report: strict windows, and MTTD / MTTR / MTTN / counts per pool, cluster and
layer from audit records exactly as the healer writes them (``finding_draft`` sealed by
``build_records``), plus the providers' delivery delay from event records."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.audit import AuditDraft, AuditKind, build_records, event_draft
from fleetwarden.core.audit.records import finding_draft
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.reporting import drift_report, parse_window

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
UNITS = {
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


@given(st.integers(1, 520), st.sampled_from(sorted(UNITS)))
def test_a_whole_number_and_a_unit_is_that_many_units(n: int, unit: str) -> None:
    assert parse_window(f"{n}{unit}") == n * UNITS[unit]


@given(st.text(max_size=8))
def test_anything_else_is_refused_with_one_line_naming_the_option(text: str) -> None:
    if re.fullmatch(r"[1-9][0-9]{0,5}[mhdw]", text) and parse_window(text) <= timedelta(days=3650):
        return
    with pytest.raises(ValueError) as err:
        parse_window(text)
    assert str(err.value).startswith(f"--since {text!r}:") and "\n" not in str(err.value)


@pytest.mark.parametrize("bad", ["7", "0d", "-1d", "1.5h", "7 d", "7D", "d", "", "9999999d", "7s"])
def test_typical_mistakes_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="--since"):
        parse_window(bad)


def finding(cluster: str, pool: str, field: str, layer: Layer = Layer.L1, **extra) -> Finding:
    return Finding(cluster, pool, layer, field, "a", "b", Severity.HIGH, nodes=("n1",), extra=extra)


def record(f: Finding, event: str) -> AuditDraft:
    d = finding_draft(
        f, key=f"{f.id}:{event}:{f.extra.get('clearedAt') or f.extra.get('detectedAt')}"
    )
    return AuditDraft(
        kind=d.kind,
        summary=d.summary,
        cluster=d.cluster,
        pool=d.pool,
        payload={**d.payload, "event": event},
        key=d.key,
    )


def seal(drafts: list[AuditDraft], at: datetime = T0):
    return build_records(drafts, prev_hash="0" * 64, next_seq=1, now=at)


def test_counts_and_durations_per_pool_cluster_and_layer() -> None:
    start = T0 - timedelta(minutes=10)
    a = finding(
        "prod-eu-1",
        "general",
        "labels.team",
        startedAt=iso(start),
        detectedAt=iso(start + timedelta(seconds=4)),
    )
    a_cleared = finding(
        "prod-eu-1",
        "general",
        "labels.team",
        startedAt=iso(start),
        detectedAt=iso(start + timedelta(seconds=4)),
        notifiedAt=iso(start + timedelta(seconds=10)),
        clearedAt=iso(start + timedelta(minutes=5)),
        healedAt=iso(start + timedelta(minutes=4)),
    )
    b = finding("prod-eu-1", "gpu", "taints.x:NoSchedule", Layer.L2, detectedAt=iso(start))
    b_cleared = finding(
        "prod-eu-1",
        "gpu",
        "taints.x:NoSchedule",
        Layer.L2,
        detectedAt=iso(start),
        clearedAt=iso(start + timedelta(minutes=1)),
    )
    c = finding(
        "prod-us-1",
        "general",
        "labels.team",
        startedAt=iso(start),
        detectedAt=iso(start + timedelta(seconds=20)),
    )
    drafts = [
        record(a, "finding.appeared"),
        record(b, "finding.appeared"),
        record(c, "finding.appeared"),
        record(a_cleared, "finding.cleared"),
        record(b_cleared, "finding.cleared"),
        dataclasses.replace(record(a, "finding.appeared"), key="replica-2"),
    ]
    # the last record: the same appearance recorded again (another replica): counted once
    report = drift_report(seal(drafts), since=T0 - timedelta(days=1), until=T0 + timedelta(1))
    j = report.to_json()
    assert j["total"]["opened"] == 3 and j["total"]["cleared"] == 2 and j["total"]["healed"] == 1
    assert j["total"]["mttd"] == {
        "count": 2,
        "meanSeconds": 12.0,
        "p50Seconds": 12.0,
        "maxSeconds": 20.0,
    }
    # a's restore from its start (300 s); b's from its detection (60 s), counted as such
    assert j["total"]["mttr"]["count"] == 2 and j["total"]["mttr"]["maxSeconds"] == 300.0
    assert j["total"]["mttr"]["fromDetection"] == 1
    assert j["total"]["mttn"]["p50Seconds"] == 6.0
    pools = {(p["cluster"], p["pool"]): p for p in j["pools"]}
    assert pools[("prod-eu-1", "general")]["healed"] == 1
    assert pools[("prod-eu-1", "gpu")]["mttd"]["count"] == 0  # no start: nothing to measure
    assert {c["cluster"]: c["opened"] for c in j["clusters"]} == {"prod-eu-1": 2, "prod-us-1": 1}
    assert {x["layer"]: x["opened"] for x in j["layers"]} == {"L1": 2, "L2": 1}


def test_the_cluster_glob_and_the_window_select_records() -> None:
    f = finding("prod-us-1", "general", "labels.team", detectedAt=iso(T0))
    g = finding("stage-1", "general", "labels.team", detectedAt=iso(T0))
    records = seal([record(f, "finding.appeared"), record(g, "finding.appeared")])
    assert drift_report(records, since=T0, until=T0 + timedelta(1), cluster="prod-*").to_json()[
        "clusters"
    ] == [
        {
            "cluster": "prod-us-1",
            **drift_report(records[:1], since=T0, until=T0 + timedelta(1)).total.to_json(),
        }
    ]
    assert (
        drift_report(records, since=T0 + timedelta(seconds=1), until=T0 + timedelta(1)).records == 0
    )


def test_the_providers_delivery_delay_is_measured_apart_per_provider() -> None:
    def ev(i: int, provider: EventSource, delay: float) -> ChangeEvent:
        return ChangeEvent(
            id=f"e{i}",
            source="s",
            type="t",
            provider=provider,
            operation=Operation.SCALE,
            cluster="prod-eu-1",
            pool="general",
            time=T0,
            received_at=T0 + timedelta(seconds=delay),
        )

    drafts = [
        event_draft(ev(1, EventSource.AWS, 300)),
        event_draft(ev(2, EventSource.AWS, 100)),
        event_draft(ev(3, EventSource.FLUX, 2)),
    ]
    j = drift_report(seal(drafts), since=T0 - timedelta(1), until=T0 + timedelta(1)).to_json()
    assert j["deliveryDelay"] == [
        {
            "provider": "aws",
            "count": 2,
            "meanSeconds": 200.0,
            "p50Seconds": 200.0,
            "maxSeconds": 300.0,
        },
        {"provider": "flux", "count": 1, "meanSeconds": 2.0, "p50Seconds": 2.0, "maxSeconds": 2.0},
    ]
    assert j["total"]["opened"] == 0  # events are not findings


def test_records_of_other_kinds_and_broken_payloads_add_nothing() -> None:
    drafts = [
        AuditDraft(kind=AuditKind.FINDING, payload={"finding": "x", "event": "finding.appeared"}),
        AuditDraft(
            kind=AuditKind.FINDING, payload={"finding": {"id": "y"}, "event": "finding.changed"}
        ),
        AuditDraft(kind=AuditKind.EVENT, payload={"event": {"id": 1}}),
        AuditDraft(kind=AuditKind.DECISION, payload={"decision": {}}),
    ]
    j = drift_report(seal(drafts), since=T0 - timedelta(1), until=T0 + timedelta(1)).to_json()
    assert j["total"]["opened"] == 0 and j["deliveryDelay"] == [] and j["findingRecords"] == 0


def test_the_delivery_delay_is_receipt_minus_event_time_and_never_negative() -> None:
    def ev(received: datetime | None, time: datetime | None = T0) -> ChangeEvent:
        return ChangeEvent(
            id="e",
            source="s",
            type="t",
            provider=EventSource.GCP,
            operation=Operation.UPDATE,
            time=time,
            received_at=received,
        )

    assert ev(T0 + timedelta(minutes=7)).delivery_delay == 420.0
    assert ev(T0 - timedelta(seconds=3)).delivery_delay == 0.0  # the receiver's clock behind
    assert ev(None).delivery_delay is None and ev(T0, None).delivery_delay is None
