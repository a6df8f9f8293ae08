"""GKE ``google_container_node_pool``: per-zone counts (``node_count``, autoscaling
``min_node_count`` / ``max_node_count``) are multiplied by the pool's own ``node_locations``
when given, else by the cluster's zones; a pool ``node_locations`` that is not known leaves the
totals unresolved, naming it, and every attribute stays accounted for."""

from __future__ import annotations

from fleetwarden.core.pools import FieldStatus, NodePoolSpec, Unresolved
from fleetwarden.formats.terraform import TfFile, read_pools

_FILES = """
resource "google_container_cluster" "c" {
  name                     = "prod"
  location                 = "europe-west1"
  remove_default_node_pool = true
  node_locations           = ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
}
resource "google_container_node_pool" "p" {
  name       = "p"
  cluster    = google_container_cluster.c.id
  location   = "europe-west1"
  node_count = 2
  autoscaling {
    min_node_count = 1
    max_node_count = 3
  }
  %s
}
"""


def _pool(extra: str = "") -> NodePoolSpec:
    (pool,) = read_pools([TfFile("m/main.tf", _FILES % extra)]).pools
    return pool


def _account(spec: NodePoolSpec) -> dict[str, tuple[str, str]]:
    return {a.path: (a.status.value, a.detail) for a in spec.account}


def test_counts_multiply_by_the_cluster_zones_when_the_pool_names_none() -> None:
    pool = _pool()
    assert (pool.min_size, pool.max_size, pool.desired_size) == (3, 9, 6)


def test_the_pool_node_locations_override_the_cluster_zones() -> None:
    pool = _pool('node_locations = ["europe-west1-b", "europe-west1-c"]')
    assert (pool.min_size, pool.max_size, pool.desired_size) == (2, 6, 4)
    assert _account(pool)["node_locations"] == ("compared", "2")
    assert "2 zones" in _account(pool)["node_count"][1]


def test_pool_node_locations_not_known_leave_every_total_unresolved() -> None:
    pool = _pool("node_locations = var.zones")
    assert (pool.min_size, pool.max_size, pool.desired_size) == (None, None, None)
    assert Unresolved("zones", "var.zones") in pool.unresolved
    assert {u.field for u in pool.unresolved} == {"zones", "minSize", "maxSize", "desiredSize"}
    assert _account(pool)["node_locations"][0] == "unresolved"
    assert [a.path for a in pool.account if a.status is FieldStatus.UNACCOUNTED] == []
