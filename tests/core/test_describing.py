"""Values named for people: messages and tables never show a Python repr or "on 0 node(s)"."""

from __future__ import annotations

import pytest

from fleetwarden.core.describing import describe_drift, show_change, show_details, show_value


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
