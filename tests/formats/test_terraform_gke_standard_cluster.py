"""Terraform: the kubernetes-engine module's ``gke-standard-cluster`` sub-module (v38+).

It makes one ``google_container_cluster`` from its variables; its only pool is GKE's
``default-pool``, kept when ``remove_default_node_pool`` is false (the module's default: true).
Its ``node_pool`` list cannot be used: every release (v38.0.0-v44.2.0) reads
``node_pool.value.version``, which the variable's object type does not declare, so Terraform
refuses any pool in it. Every input is compared, unresolved or ignored with a reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetwarden.cli.main import app
from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.pools import FieldStatus, NodePoolSpec
from fleetwarden.formats.desired import DesiredRead, SourceFile, read_desired
from tests.support.nodes import node, observed

COS = "Container-Optimized OS from Google"

STANDARD = """\
module "gke" {
  source     = "terraform-google-modules/kubernetes-engine/google//modules/gke-standard-cluster"
  version    = "~> 44.0"
  project_id = var.project_id
  name       = "prod"
  location   = "europe-west1-b"
  network    = "vpc"
  subnetwork = "nodes"
%s}
"""
KEPT = "  remove_default_node_pool = false\n  initial_node_count       = 2\n"

# every variable of modules/gke-standard-cluster/variables.tf, v38.0.0 to v44.2.0 (``project``
# was v38's name of ``project_id``)
VARIABLES = [
    "addons_config",
    "authenticator_groups_config",
    "binary_authorization",
    "cluster_autoscaling",
    "cluster_ipv4_cidr",
    "cluster_telemetry",
    "confidential_nodes",
    "control_plane_endpoints_config",
    "cost_management_config",
    "database_encryption",
    "datapath_provider",
    "default_max_pods_per_node",
    "default_snat_status",
    "deletion_protection",
    "description",
    "disable_l4_lb_firewall_reconciliation",
    "dns_config",
    "enable_cilium_clusterwide_network_policy",
    "enable_fqdn_network_policy",
    "enable_intranode_visibility",
    "enable_k8s_beta_apis",
    "enable_kubernetes_alpha",
    "enable_l4_ilb_subsetting",
    "enable_legacy_abac",
    "enable_multi_networking",
    "enable_shielded_nodes",
    "enable_tpu",
    "enterprise_config",
    "fleet",
    "gateway_api_config",
    "identity_service_config",
    "in_transit_encryption_config",
    "initial_node_count",
    "ip_allocation_policy",
    "location",
    "logging_config",
    "logging_service",
    "maintenance_policy",
    "master_auth",
    "master_authorized_networks_config",
    "mesh_certificates",
    "min_master_version",
    "monitoring_config",
    "monitoring_service",
    "name",
    "network",
    "network_policy",
    "node_config",
    "node_locations",
    "node_pool",
    "node_pool_auto_config",
    "node_pool_defaults",
    "node_version",
    "notification_config",
    "pod_autoscaling",
    "pod_security_policy_config",
    "private_ipv6_google_access",
    "project",
    "project_id",
    "protect_config",
    "release_channel",
    "remove_default_node_pool",
    "resource_labels",
    "resource_usage_export_config",
    "secret_manager_config",
    "secret_sync_config",
    "security_posture_config",
    "service_external_ips_config",
    "subnetwork",
    "timeouts",
    "vertical_pod_autoscaling",
    "workload_alts_config",
    "workload_identity_config",
]


def _read(text: str) -> DesiredRead:
    return read_desired([SourceFile("infra/main.tf", text.encode())])


def _specs(text: str) -> list[NodePoolSpec]:
    return _read(text).pools


def _default_pool(extra: str = KEPT) -> NodePoolSpec:
    (spec,) = _specs(STANDARD % extra)
    assert spec.name == "default-pool"
    return spec


def _account(spec: NodePoolSpec) -> dict[str, tuple[str, str]]:
    return {a.path: (a.status.value, a.detail) for a in spec.account}


def _unaccounted(spec: NodePoolSpec) -> list[str]:
    return [a.path for a in spec.account if a.status is FieldStatus.UNACCOUNTED]


def _refusal(text: str) -> str:
    read = _read(text)
    (skip,) = read.skipped
    assert skip.problem and read.pools == []
    return skip.reason


def _nodes(count: int, machine: str = "e2-medium", **labels: str) -> list[dict[str, Any]]:
    """As GKE creates default-pool's nodes: COS, 100 GB, 110 pods."""
    return [
        node(
            f"gke-prod-default-pool-{i}",
            labels={"cloud.google.com/gke-nodepool": "default-pool", **labels},
            instance_type=machine,
            os_image=COS,
            disk_gib=100,
        )
        for i in range(count)
    ]


def _findings(text: str, nodes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    found = diff_cluster("prod", _specs(text), observed(*nodes)).findings
    return [(f.pool, f.field, f.expected, f.actual) for f in found]


# -- default-pool: whether it exists --------------------------------------------------------------


@pytest.mark.parametrize(
    "removal", ["", "  remove_default_node_pool = true\n", '  remove_default_node_pool = "true"\n']
)
def test_the_module_removes_the_default_pool_unless_told_not_to(removal):
    """variables.tf (v38-v44): ``remove_default_node_pool`` defaults to true, unlike the root
    module's false: no pool, and the file's note says why (not that the module is not read)."""
    read = _read(STANDARD % (removal + "  initial_node_count = 1\n"))
    assert read.pools == []
    said = str(read.skipped)
    assert "removes GKE's default-pool" in said and "is not read" not in said
    if not removal:
        assert "default true" in said


@pytest.mark.parametrize("kept", ["false", '"false"'])
def test_the_default_pool_is_read_when_kept(kept):
    spec = _default_pool(f"  remove_default_node_pool = {kept}\n  initial_node_count = 2\n")
    assert (spec.cluster, spec.desired_size, spec.min_size, spec.max_size) == (
        "prod",
        2,
        None,
        None,
    )
    assert _account(spec)["module.gke: remove_default_node_pool"] == ("compared", "false")
    assert _unaccounted(spec) == []


def test_a_removal_that_is_not_known_leaves_the_pools_existence_unresolved():
    spec = _default_pool("  remove_default_node_pool = var.remove\n  initial_node_count = 1\n")
    assert ("count", "var.remove") in [(u.field, u.expression) for u in spec.unresolved]


def test_an_older_major_does_not_have_the_sub_module():
    reason = _refusal((STANDARD % KEPT).replace("~> 44.0", "~> 37.0"))
    assert (
        reason == "module.gke.version: the gke-standard-cluster sub-module exists from v38, not v37"
    )


# -- default-pool: what it is ---------------------------------------------------------------------


def test_the_default_pool_takes_gke_defaults_where_the_module_passes_null():
    """``node_config`` defaults to null: GKE's e2-medium, 100 GB, COS_CONTAINERD, each with the
    provider as its provenance; ``default_max_pods_per_node`` 110 is the module's own."""
    spec = _default_pool()
    assert (spec.instance_types, spec.disk_size_gib, spec.os_family) == (("e2-medium",), 100, "cos")
    assert spec.labels == {} and spec.taints == ()
    assert spec.allocatable == {"pods": "110"}
    for fact in ("instanceTypes", "diskSizeGiB", "osImage"):
        assert spec.provenance[fact].startswith("default: Google provider / GKE"), fact
    assert spec.provenance["allocatable.pods"] == (
        "default: terraform-google-modules/kubernetes-engine gke-standard-cluster v44: "
        "default_max_pods_per_node 110"
    )
    assert spec.provenance["desiredSize"] == "infra/main.tf:10"
    assert spec.kubernetes_version is None


def test_the_default_pool_reads_what_node_config_states():
    spec = _default_pool(
        KEPT
        + """  default_max_pods_per_node = 64
  node_locations = ["europe-west1-c", "europe-west1-d"]
  node_config = {
    machine_type    = "n2-standard-8"
    disk_size_gb    = 200
    image_type      = "UBUNTU_CONTAINERD"
    spot            = true
    labels          = { team = "data" }
    taint           = [{ key = "dedicated", value = "data", effect = "NO_SCHEDULE" }]
    service_account = var.sa
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
  }
"""
    )
    assert spec.desired_size == 6  # 2 per zone x (the cluster's zone + 2 node locations)
    assert (spec.instance_types, spec.disk_size_gib) == (("n2-standard-8",), 200)
    assert spec.os_family is not None and spec.os_family.startswith("ubuntu")
    assert spec.labels == {"team": "data", "cloud.google.com/gke-spot": "true"}
    assert [(t.key, t.value, t.effect) for t in spec.taints] == [
        ("dedicated", "data", "NoSchedule")
    ]
    assert spec.allocatable == {"pods": "64"}
    account = _account(spec)
    assert account["module.gke: node_config.service_account"][0] == "ignored"
    assert account["module.gke: node_config.machine_type"] == ("compared", "n2-standard-8")
    assert _unaccounted(spec) == []


def test_a_node_config_from_a_known_local_is_read_in_place():
    text = (STANDARD % (KEPT + "  node_config = local.nodes\n")) + (
        'locals {\n  nodes = { machine_type = "c3-standard-4" }\n}\n'
    )
    (spec,) = _specs(text)
    assert spec.instance_types == ("c3-standard-4",)
    assert _unaccounted(spec) == []


def test_a_node_config_that_is_not_known_leaves_its_facts_unresolved_not_defaulted():
    """``node_config = var.nodes`` may set any machine type: e2-medium would be a guess."""
    spec = _default_pool(KEPT + "  node_config = var.nodes\n")
    assert (spec.instance_types, spec.disk_size_gib, spec.os_family) == ((), None, None)
    unresolved = {u.field for u in spec.unresolved if u.expression == "var.nodes"}
    assert {"instanceTypes", "diskSizeGiB", "osImage", "labels", "taints"} <= unresolved
    assert "instanceTypes" not in spec.provenance
    assert _unaccounted(spec) == []


@pytest.mark.parametrize(
    "count", ["", "  initial_node_count = 0\n", "  initial_node_count = null\n"]
)
def test_no_initial_nodes_leaves_the_count_open(count):
    """GKE refuses a cluster with no node pool and 0 initial nodes, and the module ignores later
    changes: a cluster that exists was created with a count the files do not say."""
    extra = "  remove_default_node_pool = false\n" + count
    spec = _default_pool(extra)
    assert spec.desired_size is None
    (entry,) = [a for a in spec.account if a.fact == "desiredSize"]
    assert entry.status is FieldStatus.IGNORED and "greater than zero" in entry.detail
    assert _unaccounted(spec) == []
    assert _findings(STANDARD % extra, _nodes(3)) == []


def test_a_regional_cluster_without_node_locations_leaves_the_count_unresolved():
    """GKE picks a regional cluster's zones: 2 per zone is no known total."""
    (spec,) = _specs((STANDARD % KEPT).replace('"europe-west1-b"', '"europe-west1"'))
    assert spec.desired_size is None
    assert "desiredSize" in spec.unresolved_fields
    (spec,) = _specs(
        (STANDARD % (KEPT + '  node_locations = ["europe-west1-b", "europe-west1-c"]\n')).replace(
            '"europe-west1-b"\n', '"europe-west1"\n'
        )
    )
    assert spec.desired_size == 4


def test_node_locations_that_are_not_known_leave_the_count_open():
    spec = _default_pool(KEPT + "  node_locations = var.zones\n")
    assert spec.desired_size is None
    assert "desiredSize" in spec.unresolved_fields
    assert _unaccounted(spec) == []


def test_the_node_version_is_not_compared_the_pool_auto_upgrades():
    spec = _default_pool(KEPT + '  node_version = "1.30.5-gke.1014001"\n')
    assert spec.kubernetes_version is None
    status, why = _account(spec)["module.gke: node_version"]
    assert status == "ignored" and "auto-upgraded with the cluster" in why


def test_default_pool_nodes_match_and_drift_is_found():
    text = STANDARD % KEPT
    assert _findings(text, _nodes(2)) == []
    drifted = _nodes(2, "n2-standard-4")
    assert _findings(text, drifted) == [
        ("default-pool", "instanceType", "e2-medium", "n2-standard-4")
    ]
    assert _findings(text, _nodes(1)) == [("default-pool", "nodeCount", 2, 1)]


# -- node_pool ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pools",
    [
        '[{ name = "general" }]',
        '[{ name = "general", autoscaling = { min_node_count = 1, max_node_count = 3 } }]',
        '[{ name = "a", node_config = { machine_type = "n2-standard-4" } }, { name = "b" }]',
        "[var.pool]",
    ],
)
@pytest.mark.parametrize("removal", ["true", "false"])
def test_any_node_pool_in_the_list_is_refused_as_terraform_refuses_it(pools, removal):
    """main.tf reads ``node_pool.value.version``; the variable declares ``kubernetes_version``:
    "Unsupported attribute" at plan, whatever the pool says."""
    extra = f"  remove_default_node_pool = {removal}\n  node_pool = {pools}\n"
    reason = _refusal(STANDARD % extra)
    assert reason.startswith("module.gke.node_pool: Terraform refuses node pools in this module")
    assert "gke-node-pool" in reason


def test_an_empty_node_pool_list_makes_no_pool():
    spec = _default_pool(KEPT + "  node_pool = []\n")
    assert _unaccounted(spec) == []
    assert _specs(STANDARD % "  node_pool = []\n") == []


@pytest.mark.parametrize("removal", ["true", "false"])
def test_a_node_pool_list_that_is_not_known_is_said(removal):
    text = STANDARD % f"  remove_default_node_pool = {removal}\n  node_pool = var.pools\n"
    read = _read(text)
    unread = "module.gke.node_pool: var.pools cannot be read"
    if removal == "false":  # beside a pool: said on its own
        said = [(s.pool, s.reason) for s in read.skipped if s.shown]
        assert said == [("module.gke.node_pool", unread)]
        assert [p.name for p in read.pools] == ["default-pool"]
    else:  # no pool: the file's note says it
        assert read.pools == [] and unread in str(read.skipped)
    for spec in read.pools:
        assert _unaccounted(spec) == []


# -- every input is accounted for ----------------------------------------------------------------


@pytest.mark.parametrize("variable", VARIABLES)
def test_every_input_of_the_module_is_compared_unresolved_or_ignored(variable):
    """Each variable given as an expression: the default-pool's account has it, none
    unaccounted (``node_pool``'s is said as a remark too)."""
    kept = {"remove_default_node_pool": "false", "initial_node_count": "1"}
    lines = [f"  {k} = {v}\n" for k, v in kept.items() if k != variable]
    text = STANDARD.replace(f"  {variable} ", f"  # {variable} ")  # one given here: not twice
    (spec,) = _read(text % "".join([*lines, f"  {variable} = var.x\n"])).pools
    assert _unaccounted(spec) == []
    assert any(a.path.startswith(f"module.gke: {variable}") for a in spec.account), variable


# the attributes of variables.tf's node_config object (v38-v44)
NODE_CONFIG_KEYS = [
    "boot_disk_kms_key",
    "confidential_nodes",
    "containerd_config",
    "disk_size_gb",
    "disk_type",
    "enable_confidential_storage",
    "ephemeral_storage_config",
    "ephemeral_storage_local_ssd_config",
    "fast_socket",
    "flex_start",
    "gcfs_config",
    "guest_accelerator",
    "gvnic",
    "image_type",
    "kubelet_config",
    "labels",
    "linux_node_config",
    "local_nvme_ssd_block_config",
    "local_ssd_count",
    "local_ssd_encryption_mode",
    "logging_variant",
    "machine_type",
    "max_run_duration",
    "metadata",
    "min_cpu_platform",
    "node_group",
    "oauth_scopes",
    "preemptible",
    "reservation_affinity",
    "resource_labels",
    "resource_manager_tags",
    "sandbox_config",
    "secondary_boot_disks",
    "service_account",
    "shielded_instance_config",
    "sole_tenant_config",
    "spot",
    "storage_pools",
    "tags",
    "taint",
    "windows_node_config",
    "workload_metadata_config",
]


def test_every_attribute_of_node_config_is_compared_unresolved_or_ignored():
    given = "".join(f"    {k} = var.x\n" for k in NODE_CONFIG_KEYS)
    spec = _default_pool(KEPT + "  node_config = {\n" + given + "  }\n")
    assert _unaccounted(spec) == []
    paths = {a.path for a in spec.account}
    assert all(f"module.gke: node_config.{k}" in paths for k in NODE_CONFIG_KEYS), paths


# -- explain --------------------------------------------------------------------------------------


def _explain(tmp_path: Path, text: str, *args: str) -> Any:
    tf = tmp_path / "infra" / "main.tf"
    tf.parent.mkdir(exist_ok=True)
    tf.write_text(text)
    return CliRunner().invoke(
        app, ["explain", "-d", str(tf.parent), *args], terminal_width=400, env={"NO_COLOR": "1"}
    )


def test_explain_accounts_for_every_field_of_the_default_pool(tmp_path):
    text = STANDARD % (
        KEPT
        + """  node_version = "1.30.5-gke.1014001"
  deletion_protection = false
  node_config = {
    machine_type    = var.machine
    labels          = { team = "data" }
    service_account = var.sa
  }
"""
    )
    got = _explain(tmp_path, text, "-o", "json")
    assert got.exit_code == 0, got.output
    out = json.loads(got.output)
    (pool,) = out["pools"]
    assert (pool["pool"], pool["cluster"]) == ("default-pool", "prod")
    by_path = {(f["path"], f.get("fact")): f for f in pool["fields"]}
    # compared from the file, with file:line
    team = by_path[("module.gke: node_config.labels.team", "labels.team")]
    assert (team["status"], team["origin"]) == ("compared", f"{tmp_path}/infra/main.tf:15")
    # the provider's defaults and the module's, said as defaults
    defaults = {
        f["fact"]: f["origin"] for f in pool["fields"] if f.get("origin", "").startswith("default:")
    }
    assert set(defaults) == {"diskSizeGiB", "osImage", "allocatable.pods"}
    # unresolved: the machine type, never defaulted to e2-medium
    unresolved = [
        (f["path"], f["expression"]) for f in pool["fields"] if f["status"] == "unresolved"
    ]
    assert unresolved == [("module.gke: node_config.machine_type", "var.machine")]
    ignored = {f["path"] for f in pool["fields"] if f["status"] == "ignored"}
    assert {
        "module.gke: node_version",
        "module.gke: deletion_protection",
        "module.gke: node_config.service_account",
        "module.gke: project_id",
        "module.gke: network",
    } <= ignored
    assert out["summary"]["fields"] == {
        "compared": 8,
        "defaults": 3,
        "unresolved": 1,
        "ignored": len([f for f in pool["fields"] if f["status"] == "ignored"]),
        "unaccounted": 0,
    }
    assert _explain(tmp_path, text, "--strict").exit_code == 0


def test_explain_strict_fails_on_a_node_pool_list_that_is_not_known(tmp_path):
    text = STANDARD % (KEPT + "  node_pool = var.pools\n")
    got = _explain(tmp_path, text, "--strict")
    assert got.exit_code == 1, got.output
    assert "module.gke.node_pool: var.pools cannot be read" in got.output
