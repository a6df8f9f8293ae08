"""Fights: alternating writers on one field within the window start a fight; a field calm for
the window clears it; memory stays bounded; the healer's question has the right answer."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import actors, fights
from fleetwarden.core.fights import FightKey, FightOptions, FightState, FightStatus, Write
from fleetwarden.core.findings import Finding, Layer, Severity

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = FightKey("prod", "Node/ip-10-0-1-2", "labels.role", pool="general")
WINDOW = timedelta(minutes=10)


def run(writers_and_gaps, state=None, key=KEY):
    state = state or FightState()
    now, decisions = T0, []
    for writer, gap in writers_and_gaps:
        now += gap
        state, d = fights.observe(state, Write(key, writer, now), now)
        decisions.append(d)
    return state, decisions, now


def test_three_alternating_writes_start_a_fight_and_pause_healing():
    m = timedelta(minutes=1)
    state, ds, now = run([("argocd-controller", m), ("kubectl-edit", m), ("argocd-controller", m)])
    assert [d.status for d in ds] == [FightStatus.NONE, FightStatus.NONE, FightStatus.STARTED]
    fight = ds[-1].fight
    assert fight is not None
    assert fight.writers == ("argocd-controller", "kubectl-edit") and fight.writes == 3
    assert (fight.first, fight.last) == (T0 + m, T0 + 3 * m)
    assert fights.in_fight(state, KEY, now).fighting
    assert not fights.in_fight(state, FightKey("prod", "Node/other", "labels.role"), now).fighting


def test_repeated_writes_by_one_writer_are_not_a_fight():
    m = timedelta(minutes=1)
    _, ds, _ = run([("a", m), ("a", m), ("b", m), ("b", m)])
    assert all(d.status is FightStatus.NONE for d in ds)


def test_a_fight_clears_when_the_field_is_calm_for_the_window():
    m = timedelta(minutes=1)
    state, _, now = run([("a", m), ("b", m), ("a", m)])
    still, cleared = fights.expire(state, now + WINDOW)
    assert cleared == () and fights.in_fight(still, KEY, now + WINDOW).fighting
    calm, cleared = fights.expire(state, now + WINDOW + timedelta(seconds=1))
    assert [d.status for d in cleared] == [FightStatus.CLEARED]
    assert not fights.in_fight(calm, KEY, now + WINDOW + timedelta(seconds=1)).fighting
    assert len(calm) == 0  # the writes expired too


def test_a_fight_finding_has_layer_fight_every_writer_and_a_stable_id():
    m = timedelta(minutes=1)
    _, ds, _ = run([("a", m), ("b", m), ("a", m)])
    _, more, _ = run([("a", m), ("b", m), ("a", m), ("c", m)])
    first = fights.fight_finding(ds[-1].fight)
    later = fights.fight_finding(more[-1].fight)
    assert first.layer is Layer.FIGHT and first.field == "labels.role"
    assert first.nodes == ("ip-10-0-1-2",)
    assert first.to_json()["actors"] == ["a", "b"] and later.to_json()["actors"] == ["a", "b", "c"]
    assert first.to_json()["layer"] == "FIGHT"
    assert first.id == later.id


def test_memory_is_bounded_per_field_and_in_fields():
    opts = FightOptions(max_writes=4, max_fields=50)
    state = FightState(opts)
    now = T0
    for i in range(500):
        now += timedelta(milliseconds=10)
        key = FightKey("prod", f"Node/n{i % 120}", "labels.role")
        state, _ = fights.observe(state, Write(key, f"w{i % 2}", now), now)
    assert len(state) <= 50
    assert all(len(h) <= 4 for h in state.writes.values())


# --- properties ----------------------------------------------------------------------------

_steps = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]), st.integers(0, 900).map(lambda s: timedelta(seconds=s))
    ),
    max_size=40,
)


def _oracle(steps):
    """Fighting after each write, from the definition: 3+ alternations among the writes in the
    window, or a fight already on whose previous write is within the window."""
    out, times, writers, active = [], [], [], False
    now = T0
    for writer, gap in steps:
        now += gap
        previous = times[-1] if times else None
        times.append(now)
        writers.append(writer)
        recent = [w for t, w in zip(times, writers, strict=True) if now - t <= WINDOW]
        alive = active and previous is not None and now - previous <= WINDOW
        active = fights.alternations(tuple(recent)) >= 3 or alive
        out.append(active)
    return out


@settings(max_examples=300)
@given(_steps)
def test_fighting_matches_the_definition_after_every_write(steps):
    _, ds, _ = run(steps)
    assert [d.fighting for d in ds] == _oracle(steps)


@given(_steps)
def test_everything_expires_one_window_after_the_last_write(steps):
    state, _, now = run(steps)
    later = now + WINDOW + timedelta(microseconds=1)
    calm, cleared = fights.expire(state, later)
    assert not calm.fights and len(calm) == 0
    assert len(cleared) == len(state.fights)
    assert fights.in_fight(state, KEY, later).status in (FightStatus.NONE, FightStatus.CLEARED)


@given(_steps)
def test_writes_further_apart_than_the_window_never_fight(steps):
    spaced = [(w, WINDOW + timedelta(seconds=1) + gap) for w, gap in steps]
    _, ds, _ = run(spaced)
    assert not any(d.fighting for d in ds)


@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=30))
def test_alternations_count_writer_changes_plus_one(writers):
    expected = (1 + sum(x != y for x, y in itertools.pairwise(writers))) if writers else 0
    assert fights.alternations(tuple(writers)) == expected


# --- from Node updates to writes, and the healer's guard -----------------------------------


def _set_label(obj, manager, at, key, value):
    """An Update by ``manager`` setting one label: it owns the label from now on."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["labels"][key] = value
    path = actors.decode_fields({"f:metadata": {"f:labels": {f"f:{key}": {}}}})
    kept = []
    for e in obj["metadata"]["managedFields"]:
        if e["manager"] != manager:
            rest = actors.decode_fields(e["fieldsV1"]) - path
            if rest:
                kept.append({**e, "fieldsV1": actors.encode_fields(rest)})
    mine = {"f:metadata": {"f:labels": {f"f:{key}": {}}}}
    stamp = at.isoformat().replace("+00:00", "Z")
    kept.append({"manager": manager, "operation": "Update", "time": stamp, "fieldsV1": mine})
    obj["metadata"]["managedFields"] = kept
    return obj


@pytest.mark.realdata
def test_argo_and_a_person_rewriting_a_real_nodes_label_become_a_fight_that_blocks_healing(
    realdata,
):
    node = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())[
        "items"
    ][0]
    state, now, statuses = FightState(), T0, []
    for i, (manager, value) in enumerate(
        [
            ("argocd-controller", "platform"),
            ("kubectl-edit", "oncall"),
            ("argocd-controller", "platform"),
        ]
    ):
        now = T0 + timedelta(minutes=i)
        after = _set_label(node, manager, now, "team", value)
        (write,) = fights.node_writes("duckboat", "custom-1", node, after, now=now)
        assert (write.writer, write.at, write.key.field) == (manager, now, "labels.team")
        state, decision = fights.observe(state, write, now)
        statuses.append(decision.status)
        node = after
    assert statuses[-1] is FightStatus.STARTED
    drift = Finding(
        cluster="duckboat",
        pool="custom-1",
        layer=Layer.L1,
        field="labels.team",
        expected="platform",
        actual="oncall",
        severity=Severity.HIGH,
        nodes=("duckboat-01",),
    )
    held = fights.blocking(state, drift, now)
    assert held is not None and "kubectl-edit" in held.reasons[0]
    elsewhere = dataclasses.replace(drift, field="labels.zone")
    assert fights.blocking(state, elsewhere, now) is None
    assert fights.blocking(state, drift, now + WINDOW + timedelta(seconds=1)) is None
    assert fights.node_writes("duckboat", "custom-1", node, node, now=now) == ()
