"""Rendezvous sharding: balance, minimal movement on loss and join, the same answer in every
process, and liveness judged on the observer's clock as leadership judges a lease."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime

from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetwarden.core import sharding
from fleetwarden.core.leadership import LeaseRecord
from fleetwarden.core.sharding import (
    Assignment,
    ListedLease,
    assign,
    gone_leases,
    live_members,
    member_lease_name,
    observe_members,
    owned_by,
    owner_of,
    weight,
)

WALL = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
CLUSTERS = [f"cluster-{i:03d}" for i in range(100)]

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=30)
member_sets = st.lists(names, min_size=1, max_size=8, unique=True)
cluster_lists = st.lists(names, min_size=1, max_size=120, unique=True)


def test_all_is_exported():
    for name in sharding.__all__:
        assert hasattr(sharding, name)


@settings(max_examples=200)
@given(st.lists(names, min_size=3, max_size=3, unique=True))
@example(["0", "9iv9", "pa5f1x4ponnpln235wc39avd4jnfm7"])  # 54: beyond 4 sigma, within 6
def test_100_clusters_over_3_members_are_balanced_within_a_bound(members):
    """Expected 33.3 each, standard deviation 4.7: every member gets 5..61 (6 sigma). A 4-sigma
    bound (15..52) is crossed by about one member set in 5,000, and hypothesis found one, so
    the test failed on some runs though the hashing was right; 6 sigma is about 1 in 10^8."""
    counts = {m: 0 for m in members}
    for owner in assign(CLUSTERS, members).values():
        counts[owner] += 1
    assert sum(counts.values()) == 100
    assert all(5 <= n <= 61 for n in counts.values()), counts


def test_the_pod_names_of_a_statefulset_split_100_clusters_evenly_enough():
    counts: dict[str, int] = {}
    for owner in assign(CLUSTERS, ["fleetwarden-0", "fleetwarden-1", "fleetwarden-2"]).values():
        counts[owner] = counts.get(owner, 0) + 1
    print(f"\n100 clusters over 3 members: {sorted(counts.values())}")
    assert sorted(counts) == ["fleetwarden-0", "fleetwarden-1", "fleetwarden-2"]
    assert min(counts.values()) >= 15


@given(cluster_lists, member_sets.filter(lambda m: len(m) >= 2), st.data())
def test_removing_a_member_moves_exactly_its_clusters(clusters, members, data):
    gone = data.draw(st.sampled_from(members))
    before = assign(clusters, members)
    after = assign(clusters, [m for m in members if m != gone])
    moved = {c for c in clusters if before[c] != after[c]}
    assert moved == {c for c in clusters if before[c] == gone}
    assert gone not in after.values()


@given(cluster_lists, member_sets, names)
def test_adding_a_member_moves_only_clusters_to_it(clusters, members, new):
    before = assign(clusters, members)
    after = assign(clusters, [*members, new])
    for c in clusters:
        if before[c] != after[c]:
            assert after[c] == new


@given(cluster_lists, member_sets, st.randoms())
def test_the_map_does_not_depend_on_the_order_of_members_or_clusters(clusters, members, rnd):
    shuffled_m, shuffled_c = list(members), list(clusters)
    rnd.shuffle(shuffled_m)
    rnd.shuffle(shuffled_c)
    assert assign(clusters, members) == assign(shuffled_c, shuffled_m)


@given(cluster_lists, member_sets)
def test_owned_by_is_the_members_share_of_the_map(clusters, members):
    full = assign(clusters, members)
    union: set[str] = set()
    for m in members:
        mine = owned_by(m, clusters, members)
        assert mine == {c for c, o in full.items() if o == m}
        assert not (union & mine)
        union |= mine
    assert union == set(clusters)


def test_no_members_own_nothing():
    assert assign(CLUSTERS, []) == {}
    assert owner_of("c", []) is None


def test_weights_are_length_prefixed():
    assert weight("ab", "c") != weight("a", "bc")


def test_the_map_is_the_same_in_another_process_with_another_hash_seed():
    """Python's ``hash`` is salted per process: a stable hash gives every replica one map."""
    members = ["fleetwarden-0", "fleetwarden-1", "fleetwarden-2"]
    here = assign(CLUSTERS, members)
    code = (
        "import json; from fleetwarden.core.sharding import assign; "
        f"print(json.dumps(assign({CLUSTERS!r}, {members!r})))"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert json.loads(out) == here
    # a pinned value: the hash must not change between releases (replicas of two versions
    # side by side during a rolling upgrade must agree on every owner)
    assert weight("fleetwarden-0", "cluster-000") == 17456433777376569923


def lease(name: str, holder: str, version: str, duration: int = 10) -> ListedLease:
    return ListedLease(name, LeaseRecord(holder, duration, WALL, WALL, 0), version)


def test_a_member_is_live_until_its_lease_stays_unchanged_for_its_duration():
    seen = observe_members({}, [lease("m-a", "a", "1"), lease("m-b", "b", "1")], now=100.0)
    assert live_members(seen, now=100.0) == {"a", "b"}
    # a renews (new version) at 105, b does not
    seen = observe_members(seen, [lease("m-a", "a", "2"), lease("m-b", "b", "1")], now=105.0)
    assert live_members(seen, now=109.9) == {"a", "b"}
    assert live_members(seen, now=110.0) == {"a"}, "b unchanged for its 10 s"
    assert live_members(seen, now=114.9) == {"a"}
    assert live_members(seen, now=115.0) == frozenset()


def test_first_sight_starts_the_clock_whatever_the_wall_times_say():
    """A newcomer cannot tell how old a record is: it waits the whole duration."""
    seen = observe_members({}, [lease("m-a", "a", "7")], now=5000.0)
    assert live_members(seen, now=5009.0) == {"a"}
    assert live_members(seen, now=5010.0) == frozenset()


def test_a_released_or_deleted_lease_is_gone_at_once():
    seen = observe_members({}, [lease("m-a", "a", "1"), lease("m-b", "b", "1")], now=0.0)
    seen = observe_members(seen, [lease("m-a", "", "2")], now=1.0)
    assert live_members(seen, now=1.0) == frozenset()
    assert set(seen) == {"m-a"}


def test_an_assignment_names_what_to_start_and_stop():
    change = Assignment.between(frozenset({"a", "b"}), frozenset({"b", "c"}))
    assert change.owned == {"b", "c"}
    assert change.added == {"c"} and change.removed == {"a"}


@given(st.text(min_size=1, max_size=300))
def test_member_lease_names_are_valid_object_names_and_distinct(identity):
    name = member_lease_name(identity)
    assert name.startswith("fleetwarden-member-") and len(name) <= 63
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name
    assert member_lease_name(identity + "_") != name, "two identities share a Lease"


def test_a_pod_name_is_kept_and_host_pid_is_made_a_name():
    assert member_lease_name("fleetwarden-0") == "fleetwarden-member-fleetwarden-0"
    assert member_lease_name("web_42").startswith("fleetwarden-member-web-42-")


def test_gone_leases_are_the_released_and_the_expired_at_the_version_judged():
    seen = observe_members(
        {}, [lease("m-a", "a", "1"), lease("m-b", "b", "1"), lease("m-c", "", "4")], now=0.0
    )
    seen = observe_members(
        seen, [lease("m-a", "a", "2"), lease("m-b", "b", "1"), lease("m-c", "", "4")], now=5.0
    )
    assert [g.name for g in gone_leases(seen, now=5.0)] == ["m-c"]
    assert [(g.name, g.version) for g in gone_leases(seen, now=10.0)] == [
        ("m-b", "1"),
        ("m-c", "4"),
    ]
