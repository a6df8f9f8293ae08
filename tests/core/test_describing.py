"""Values named for people: messages and tables never show a Python repr or "on 0 node(s)"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetwarden.core.describing import (
    decision_summary,
    describe_drift,
    show_change,
    show_details,
    show_value,
)
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Decision, Mode, PolicyState, Status, decide, record


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "(none)"),
        ("hound", "hound"),
        ("", '""'),
        (True, "true"),
        (3, "3"),
        (0.5, "0.5"),
        (["a", "b"], "a, b"),
        ([], "(none)"),
        ({"from": "Unknown", "to": "Ready"}, "Unknown → Ready"),
        ({"cpu": "2", "memory": None}, "cpu=2"),
    ],
)
def test_values_are_shown_as_people_read_them(value, text):
    assert show_value(value) == text


def test_a_change_from_nothing_reads_none_arrow_value():
    assert show_change(None, "hound") == "(none) → hound"


def test_event_details_put_the_change_first_and_the_reason_last():
    assert show_details({"from": "Unknown", "to": "Healthy", "reason": None}) == (
        "Unknown → Healthy"
    )
    assert show_details({"from": "Healthy", "to": "Unreachable", "reason": "refused"}) == (
        "Healthy → Unreachable (refused)"
    )
    assert show_details({"pool": "general", "from": 3, "to": 5}) == "pool general: 3 → 5"
    assert show_details({"server": "https://k", "pools": 3}) == "server=https://k, pools=3"


def test_a_pool_level_finding_gives_no_node_count():
    assert describe_drift("3..10", 1, []) == "expected 3..10, actual 1 (pool-level)"
    assert "node" not in describe_drift("3..10", 1, ())


def test_node_counts_are_singular_and_plural():
    assert describe_drift("m5.large", "t3.medium", ["a"]).endswith("on 1 node")
    assert describe_drift("m5.large", "t3.medium", ["a", "b"]).endswith("on 2 nodes")


# --- decisions ---------------------------------------------------------------------------

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _label(pool: str) -> Finding:
    return Finding(
        "prod", pool, Layer.L1, "labels.team", "platform", "payments", Severity.HIGH,
        nodes=("n-1",),
    )  # fmt: skip


def _decide_two(mode: Mode) -> tuple[Decision, Decision]:
    """Two label drifts in a 5-pool cluster: the blast radius (1 action) lets one through."""
    state, owners = PolicyState({"prod": 5}), OwnershipMap()
    first = decide(_label("a"), owners.route(_label("a")), state, T0, mode)
    record(first, state)
    second = decide(_label("b"), owners.route(_label("b")), state, T0, mode)
    return first, second


def test_a_blocked_dry_run_decision_is_summarised_by_the_guard_that_stopped_it():
    first, second = _decide_two(Mode.DRY_RUN)
    assert second.status is Status.BLOCKED
    assert second.reasons[-1] == "dry-run: nothing would be sent"  # what the summary showed
    text = decision_summary(second)
    assert text.startswith("blocked (dry-run): restore — blast radius: cluster prod already had")
    assert decision_summary(first) == "dry-run: restore label team=platform on 1 node(s) of prod/a"


def test_an_enforced_decision_says_what_it_does():
    first, second = _decide_two(Mode.ENFORCE)
    assert decision_summary(first) == "execute: restore label team=platform on 1 node(s) of prod/a"
    assert decision_summary(second).startswith("blocked: restore — blast radius:")
