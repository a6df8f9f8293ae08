"""Event rules: unknown clusters and pools are flagged (never dropped); coalescing keys."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.eventrules import coalesce_key, flag_unknown, known_flags
from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation
from fleetwarden.core.subjects import NodePoolRef

KNOWN = {"prod-eu": {"general", "gpu"}, "prod-us": set()}


def event(cluster: str | None, pool: str | None = None, *flags: EventFlag) -> ChangeEvent:
    return ChangeEvent(
        id="e-1",
        source="aws.eks",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster=cluster,
        pool=pool,
        flags=flags,
    )


@pytest.mark.parametrize(
    ("cluster", "pool", "flags"),
    [
        ("prod-eu", "general", ()),
        ("prod-eu", None, ()),
        ("prod-eu", "spot", (EventFlag.UNKNOWN_POOL,)),
        ("prod-us", "any", (EventFlag.UNKNOWN_POOL,)),
        ("staging", "general", (EventFlag.UNKNOWN_CLUSTER,)),
        ("staging", None, (EventFlag.UNKNOWN_CLUSTER,)),
        (None, None, (EventFlag.NO_CLUSTER,)),
        (None, "general", (EventFlag.NO_CLUSTER,)),
    ],
)
def test_flags_follow_the_known_clusters_and_pools(cluster, pool, flags):
    flagged = flag_unknown(event(cluster, pool), KNOWN)
    assert flagged.flags == flags
    assert replace(flagged, flags=()) == event(cluster, pool)  # kept whole, only flagged


def test_payload_flags_are_kept_and_not_duplicated():
    failed = event("staging", "x", EventFlag.FAILED)
    assert flag_unknown(failed, KNOWN).flags == (EventFlag.FAILED, EventFlag.UNKNOWN_CLUSTER)
    no_cluster = event(None, None, EventFlag.NO_CLUSTER)
    assert flag_unknown(no_cluster, KNOWN) is no_cluster


def test_reflagging_against_a_newer_known_set_drops_stale_unknown_flags():
    stale = flag_unknown(event("staging", "general", EventFlag.FAILED), KNOWN)
    assert EventFlag.UNKNOWN_CLUSTER in stale.flags
    known_now = {**KNOWN, "staging": {"general"}}
    assert flag_unknown(stale, known_now).flags == (EventFlag.FAILED,)


def test_an_event_already_right_is_returned_as_is():
    fine = event("prod-eu", "gpu")
    assert flag_unknown(fine, KNOWN) is fine


def test_no_known_clusters_means_every_named_cluster_is_unknown():
    assert flag_unknown(event("prod-eu", "gpu"), {}).flags == (EventFlag.UNKNOWN_CLUSTER,)


@pytest.mark.parametrize(
    ("cluster", "pool", "key"),
    [
        ("prod-eu", "general", NodePoolRef("prod-eu", "general")),
        ("prod-eu", None, NodePoolRef("prod-eu", None)),
        (None, "general", None),
        (None, None, None),
    ],
)
def test_coalesce_key_is_the_cluster_and_pool_to_inspect(cluster, pool, key):
    assert coalesce_key(event(cluster, pool)) == key


def test_events_on_one_pool_share_a_key_whatever_else_differs():
    a = event("prod-eu", "gpu")
    b = replace(a, id="e-2", operation=Operation.UPGRADE, flags=(EventFlag.FAILED,))
    assert coalesce_key(a) == coalesce_key(b) != coalesce_key(event("prod-eu", "general"))


names = st.sampled_from(["prod-eu", "prod-us", "staging", "general", "gpu", "spot"])
known_sets = st.dictionaries(names, st.sets(names, max_size=3), max_size=4)
flag_sets = st.lists(st.sampled_from(list(EventFlag)), max_size=4, unique=True).map(tuple)


@settings(max_examples=500)
@given(st.none() | names, st.none() | names, flag_sets, known_sets)
def test_flagging_is_idempotent_and_never_loses_the_event(cluster, pool, flags, known):
    original = event(cluster, pool, *flags)
    once = flag_unknown(original, known)
    assert flag_unknown(once, known) == once
    assert (once.id, once.cluster, once.pool) == (original.id, cluster, pool)
    kept = {EventFlag.FAILED, EventFlag.NO_CLUSTER} & set(flags)
    assert kept <= set(once.flags)
    unknown = {EventFlag.UNKNOWN_CLUSTER, EventFlag.UNKNOWN_POOL} & set(once.flags)
    assert len(unknown) <= 1
    assert (EventFlag.UNKNOWN_CLUSTER in once.flags) == (
        cluster is not None and cluster not in known
    )
    assert len(set(once.flags)) == len(once.flags)


@settings(max_examples=500)
@given(
    st.none() | names,
    st.none() | names,
    st.lists(st.sampled_from(list(EventFlag)), max_size=4).map(tuple),  # repeats too
    known_sets,
    st.sampled_from(["aws", "cloudevents"]),
)
def test_the_gateway_s_one_copy_equals_routing_then_flagging(cluster, pool, flags, known, route):
    """``via(route, flags=known_flags(...))`` -- the gateway's single copy of each event --
    is exactly ``flag_unknown(via(route))``, the two copies it replaced; key included."""
    original = event(cluster, pool, *flags)
    one = original.via(route, flags=known_flags(original, known))
    two = flag_unknown(original.via(route), known)
    assert one == two and one.key == two.key and one.route == route
    assert one.replaced(flags=one.flags) == one
