"""GKE resources: a pool's version is compared only when the pool does not auto-upgrade.

``google_container_node_pool``'s ``management.auto_upgrade`` defaults to true (the provider's
``Default: true``); a cluster's default-pool has no ``management`` and auto-upgrades (GKE's
default); a cluster on a release channel forces auto-upgrade. With auto-upgrade GKE moves the
nodes past the stated version, so comparing it would be false drift: it is listed as ignored
with the reason. The module readers (``gke_module``) follow the same rule.
"""

from __future__ import annotations

from fleetwarden.core.pools import FieldStatus, NodePoolSpec, Unresolved
from fleetwarden.formats.terraform import TfFile, read_pools

_FILES = """
resource "google_container_cluster" "c" {
  name         = "prod"
  location     = "europe-west1-b"
  node_version = "1.29.1-gke.1"
  %s
}
resource "google_container_node_pool" "p" {
  name    = "p"
  cluster = google_container_cluster.c.id
  version = "1.29.1-gke.1"
  %s
}
"""
_OFF = "management {\n    auto_upgrade = false\n  }"


def _pools(cluster: str = "", pool: str = "") -> dict[str, NodePoolSpec]:
    read = read_pools([TfFile("m/main.tf", _FILES % (cluster, pool))])
    return {p.name: p for p in read.pools}


def _account(spec: NodePoolSpec) -> dict[str, tuple[str, str]]:
    return {a.path: (a.status.value, a.detail) for a in spec.account}


def _unaccounted(spec: NodePoolSpec) -> list[str]:
    return [a.path for a in spec.account if a.status is FieldStatus.UNACCOUNTED]


def test_a_node_pool_without_management_auto_upgrades_its_version_is_ignored() -> None:
    p = _pools()["p"]
    assert p.kubernetes_version is None
    status, why = _account(p)["version"]
    assert status == "ignored" and "auto_upgrade, default true" in why
    assert _unaccounted(p) == []


def test_a_node_pool_with_auto_upgrade_true_ignores_its_version() -> None:
    p = _pools(pool="management {\n    auto_upgrade = true\n  }")["p"]
    assert p.kubernetes_version is None
    assert _account(p)["version"][0] == "ignored"
    assert _account(p)["management[0].auto_upgrade"][0] == "ignored"
    assert _unaccounted(p) == []


def test_a_node_pool_with_auto_upgrade_off_compares_its_version() -> None:
    p = _pools(pool=_OFF)["p"]
    assert p.kubernetes_version == "1.29.1-gke.1"
    assert _account(p)["version"][0] == "compared"
    assert _unaccounted(p) == []


def test_a_release_channel_forces_auto_upgrade_even_when_the_pool_turns_it_off() -> None:
    p = _pools('release_channel {\n    channel = "REGULAR"\n  }', _OFF)["p"]
    assert p.kubernetes_version is None
    status, why = _account(p)["version"]
    assert status == "ignored" and "release channel REGULAR" in why
    assert _unaccounted(p) == []


def test_release_channel_unspecified_leaves_auto_upgrade_off() -> None:
    p = _pools('release_channel {\n    channel = "UNSPECIFIED"\n  }', _OFF)["p"]
    assert p.kubernetes_version == "1.29.1-gke.1"


def test_an_auto_upgrade_that_is_not_known_leaves_the_version_unresolved() -> None:
    p = _pools(pool="management {\n    auto_upgrade = var.upgrade\n  }")["p"]
    assert p.kubernetes_version is None
    assert p.unresolved == (Unresolved("kubernetesVersion", "var.upgrade"),)
    assert _unaccounted(p) == []


def test_the_default_pool_node_version_is_ignored_gke_auto_upgrades_it() -> None:
    pool = _pools()["default-pool"]
    assert pool.kubernetes_version is None
    status, why = _account(pool)["node_version"]
    assert status == "ignored" and "default-pool" in why
    assert _unaccounted(pool) == []


def test_an_inline_node_pool_block_follows_the_same_rule() -> None:
    inline = 'node_pool {\n    name = "i"\n    version = "1.29.1-gke.1"\n  %s\n  }'
    off = _pools(inline % _OFF)["i"]
    on = _pools(inline % "")["i"]
    assert (off.kubernetes_version, on.kubernetes_version) == ("1.29.1-gke.1", None)
