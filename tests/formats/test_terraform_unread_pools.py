"""Terraform: a pool definition that cannot be read is said even when the file has other pools.

A file whose only pools cannot be read gets a note ("no node-pool definition ..."); a file that
also defines readable pools used to lose that note, so the unread pools passed in silence.
Now each is a ``Skip`` naming the definition (``pool``), shown by ``scan`` and ``explain``
without ``--verbose`` and failing ``explain --strict``. A definition switched off on purpose
(``count = 0``, ``create = false``) is no desired pool: it stays a quiet remark.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetwarden.cli.main import app
from fleetwarden.formats.desired import SourceFile, read_desired

GKE = """\
module "gke" {
  source     = "terraform-google-modules/kubernetes-engine/google"
  version    = "~> 30.0"
  project_id = "p"
  name       = "prod"
  regional   = false
  zones      = ["europe-west1-b"]
  node_pools = %s
  windows_node_pools = [
    { name = "win", machine_type = "n2-standard-4", autoscaling = false, node_count = 1 }
  ]
}
"""

AKS_1X_BESIDE_A_POOL = """\
resource "azurerm_kubernetes_cluster" "old" {
  name                = "old"
  location            = "westeurope"
  resource_group_name = "rg"
  dns_prefix          = "old"
  agent_pool_profile {
    name    = "default"
    count   = 2
    vm_size = "Standard_D2_v2"
  }
}

resource "azurerm_kubernetes_cluster_node_pool" "extra" {
  name                  = "extra"
  kubernetes_cluster_id = azurerm_kubernetes_cluster.old.id
  vm_size               = "Standard_D4s_v3"
  node_count            = 1
}
"""

OFF_BESIDE_A_POOL = """\
module "off" {
  source     = "terraform-google-modules/kubernetes-engine/google"
  version    = "~> 30.0"
  count      = 0
  name       = "off"
  node_pools = var.node_pools
}

resource "azurerm_kubernetes_cluster_node_pool" "extra" {
  name                  = "extra"
  kubernetes_cluster_id = azurerm_kubernetes_cluster.old.id
  vm_size               = "Standard_D4s_v3"
  node_count            = 1
}
"""


def run_cli(*args: str):
    return CliRunner().invoke(app, list(args), terminal_width=400, env={"NO_COLOR": "1"})


def _read(text: str):
    return read_desired([SourceFile("infra/main.tf", text.encode())])


def _shown(text: str) -> list[tuple[str | None, str]]:
    return [(s.pool, s.reason) for s in _read(text).skipped if s.shown]


@pytest.mark.parametrize("expression", ["var.node_pools", "local.pools", "module.x.pools"])
def test_an_unreadable_node_pools_list_beside_windows_pools_is_said(expression):
    read = _read(GKE % expression)
    # the module cluster's default-pool takes node_pools[0]'s machine type: not known either
    assert [p.name for p in read.pools] == ["win", "default-pool"]
    default = read.pools[1]
    assert default.instance_types == ()
    assert ("instanceTypes", f"node_pools[0]: {expression}") in [
        (u.field, u.expression) for u in default.unresolved
    ]
    assert _shown(GKE % expression) == [
        ("module.gke.node_pools", f"module.gke.node_pools: {expression} cannot be read")
    ]


def test_an_azurerm_1x_agent_pool_profile_beside_a_node_pool_is_said():
    read = _read(AKS_1X_BESIDE_A_POOL)
    assert [p.name for p in read.pools] == ["extra"]
    [(pool, reason)] = _shown(AKS_1X_BESIDE_A_POOL)
    assert pool == "azurerm_kubernetes_cluster.old"
    assert "agent_pool_profile" in reason and "not compared" in reason


def test_a_definition_switched_off_is_no_unread_pool():
    read = _read(OFF_BESIDE_A_POOL)
    assert [p.name for p in read.pools] == ["extra"]
    assert _shown(OFF_BESIDE_A_POOL) == []


@given(st.sampled_from(["var.a", "local.b", "module.m.out", 'jsondecode(file("p.json"))']))
def test_any_unresolved_pool_list_is_never_silent(expression):
    shown = _shown(GKE % expression)
    assert len(shown) == 1 and shown[0][0] == "module.gke.node_pools"


def test_explain_strict_fails_and_scan_names_the_unread_pools(tmp_path: Path):
    tf = tmp_path / "infra" / "main.tf"
    tf.parent.mkdir()
    tf.write_text(GKE % "var.node_pools")
    got = run_cli("explain", "-d", str(tf.parent), "--strict")
    assert got.exit_code == 1, got.output
    assert "not read (" in got.output and "module.gke.node_pools: var.node_pools" in got.output
    assert run_cli("explain", "-d", str(tf.parent)).exit_code == 0
    nodes = tmp_path / "prod.json"
    nodes.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    got = run_cli("scan", "-d", str(tf.parent), "-n", f"prod={nodes}")
    assert "not compared (" in got.output
    assert "module.gke.node_pools: var.node_pools cannot be read" in got.output
