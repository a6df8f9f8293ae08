"""Taints sort, whatever their values: readers sort a pool's taints to compare them."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.pools import Taint

_TAINTS = st.builds(
    Taint,
    st.sampled_from(["a", "b"]),
    st.one_of(st.none(), st.sampled_from(["", "1"])),
    st.sampled_from(["NoSchedule", "NoExecute"]),
)


def test_taints_of_one_key_with_and_without_a_value_sort():
    """a:NoSchedule beside a=1:NoExecute made sorted() raise TypeError (None < str)."""
    taints = {Taint("a", "1", "NoExecute"), Taint("a", None, "NoSchedule")}
    assert sorted(taints) == [Taint("a", None, "NoSchedule"), Taint("a", "1", "NoExecute")]


@given(st.lists(_TAINTS))
def test_sorting_is_a_total_order(taints):
    ordered = sorted(taints)
    assert all(x <= y and not y < x for x, y in itertools.pairwise(ordered))
    assert sorted(reversed(ordered)) == ordered
