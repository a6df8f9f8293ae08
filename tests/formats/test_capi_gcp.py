"""CAPG pools (GKE node pools, Compute Engine VMs) are read: every value CAPG or GKE applies is
a desired value with its provenance, so one drift per default is found and nodes exactly as GKE
creates them give no finding (before, a GCP object was ignored wholesale: its machine type,
disk, OS, labels and taints never compared)."""

from __future__ import annotations

import copy
from textwrap import dedent
from typing import Any

import pytest

from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.pools import FieldStatus, NodePoolSpec, Taint
from fleetwarden.core.rules import DiffOptions
from fleetwarden.formats import capi
from fleetwarden.formats.capi.gcp import family_of_gcp_image
from fleetwarden.formats.documents import parse_yaml_documents
from fleetwarden.formats.errors import FormatError
from tests.support.nodes import node, observed

COS = "Container-Optimized OS from Google"
KUBELET = "v1.31.4-gke.1256000"


def _tree(infra: str, *, replicas: str = "replicas: 3", kind: str = "GCPManagedMachinePool"):
    return dedent(
        f"""\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: MachinePool
        metadata: {{name: pool-0, namespace: fleet}}
        spec:
          clusterName: gke
          {replicas}
          template:
            spec:
              clusterName: gke
              version: v1.31.4
              bootstrap: {{dataSecretName: ""}}
              infrastructureRef: {{kind: {kind}, name: pool-0}}
        ---
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: {kind}
        metadata: {{name: pool-0, namespace: fleet}}
        """
    ) + dedent(infra)


def _pool(infra: str, **kw: Any) -> NodePoolSpec:
    (pool,) = capi.read_pools(parse_yaml_documents("gke.yaml", _tree(infra, **kw))).pools
    assert [a.path for a in pool.account if a.status is FieldStatus.UNACCOUNTED] == []
    return pool


PINNED = "spec: {nodeLocations: [europe-west1-b]}\n"  # a field CAPG has from v1.6


def test_a_gke_pool_stating_nothing_gets_gke_s_and_capg_s_defaults():
    pool = _pool(PINNED)
    assert pool.name == "pool-0"  # nodes: cloud.google.com/gke-nodepool=pool-0
    assert pool.instance_types == ("e2-medium",)
    assert pool.disk_size_gib == 100
    assert pool.os_family == "cos"
    # CAPG >= v1.6 turns GKE autoscaling on, 0..1 nodes in all, whatever the replicas
    assert (pool.min_size, pool.max_size, pool.desired_size) == (0, 1, 3)
    assert pool.requirements[0].values == ("europe-west1-b",)
    for fact in ("instanceTypes", "diskSizeGiB", "osImage", "minSize", "maxSize", "name"):
        assert pool.provenance[fact].startswith("default: "), fact
    assert "v1.6" in pool.provenance["maxSize"]


def test_without_a_v1_6_field_both_releases_counts_are_accepted():
    """Up to CAPG v1.5 a pool without scaling kept the MachinePool's replicas."""
    pool = _pool("spec: {}\n")
    assert (pool.min_size, pool.max_size) == (0, 3)
    assert "release not stated" in pool.provenance["maxSize"]


@pytest.mark.parametrize(
    ("spec", "bounds"),
    [
        ("spec: {nodeLocations: [a], scaling: {minCount: 1, maxCount: 4}}", (1, 4)),
        ("spec: {nodeLocations: [a], scaling: {maxCount: 4}}", (0, 4)),
        ("spec: {scaling: {minCount: 1, maxCount: 4}}", (1, 12)),  # v1.5: per zone, 3 zones
        ("spec: {scaling: {enableAutoscaling: false, minCount: 1}}", (None, None)),
    ],
)
def test_gke_autoscaling_counts_are_totals_from_capg_1_6(spec, bounds):
    pool = _pool(spec + "\n")
    assert (pool.min_size, pool.max_size) == bounds
    assert pool.desired_size == 3


def test_stated_gke_values_win_as_capg_sends_them():
    pool = _pool(
        """\
        spec:
          nodePoolName: general
          machineType: e2-standard-2
          instanceType: n2-standard-4
          diskSizeGb: 50
          diskSizeGB: 200
          imageType: UBUNTU_CONTAINERD
          maxPodsPerNode: 64
          spot: true
          kubernetesLabels: {team: ml}
          kubernetesTaints: [{key: dedicated, value: ml, effect: NoSchedule}]
          scaling: {minCount: 2, maxCount: 6}
        """
    )
    assert pool.name == "general"
    assert pool.instance_types == ("n2-standard-4",)
    assert pool.disk_size_gib == 200
    assert pool.os_family == "ubuntu"
    assert dict(pool.allocatable) == {"pods": "64"}
    assert dict(pool.labels) == {"team": "ml", "cloud.google.com/gke-spot": "true"}
    assert pool.taints == (Taint("dedicated", "ml", "NoSchedule"),)
    assert (pool.min_size, pool.max_size) == (2, 6)
    ignored = {a.path.split(": ")[1] for a in pool.account if a.status is FieldStatus.IGNORED}
    assert {"spec.machineType", "spec.diskSizeGb"} <= ignored


def test_gke_s_own_taints_are_tolerated_never_asserted():
    pool = _pool("spec: {machineType: t2a-standard-2, imageType: WINDOWS_LTSC_CONTAINERD}\n")
    assert pool.taints == ()
    assert set(pool.startup_taints) == {
        Taint("kubernetes.io/arch", "arm64", "NoSchedule"),
        Taint("node.kubernetes.io/os", "windows", "NoSchedule"),
    }


def test_a_max_count_below_the_min_count_is_an_error():
    with pytest.raises(FormatError, match="maxCount 1 is below minCount 3") as caught:
        _pool("spec: {scaling: {minCount: 3, maxCount: 1}}\n")
    assert caught.value.field == "GCPManagedMachinePool/pool-0: spec.scaling.maxCount"


def _gke_node(name: str, **kw: Any) -> dict[str, Any]:
    labels = {"cloud.google.com/gke-nodepool": "pool-0", "topology.kubernetes.io/zone": "b"}
    args: dict[str, Any] = {
        "instance_type": "e2-medium",
        "os_image": COS,
        "kubelet": KUBELET,
        "disk_gib": 100,
    }
    args.update(kw)
    return node(name, labels=labels, **args)


def _findings(spec: NodePoolSpec, nodes: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    found = diff_cluster("gke", [spec], observed(*nodes), options=DiffOptions()).findings
    return [(f.field, f.expected) for f in found]


def test_nodes_as_gke_creates_them_give_no_finding_and_each_default_finds_its_drift():
    spec = _pool("spec: {nodeLocations: [b]}\n")
    assert _findings(spec, [_gke_node("n0")]) == []
    assert _findings(spec, [_gke_node("n0", instance_type="e2-standard-4")]) == [
        ("instanceType", "e2-medium")
    ]
    assert _findings(spec, [_gke_node("n0", os_image="Ubuntu 22.04.5 LTS")]) == [("osImage", "cos")]
    assert _findings(spec, [_gke_node("n0", disk_gib=50)]) == [("diskSize", 100)]
    assert _findings(spec, [_gke_node("n0"), copy.deepcopy(_gke_node("n1"))]) == [
        ("nodeCount", "0..1")
    ]


@pytest.mark.parametrize("kind", ["GCPMachineTemplate", "GCPMachinePool"])
def test_gcp_vms_read_machine_type_image_and_disk(kind):
    spec = "spec:\n  template:\n    spec:\n" if kind == "GCPMachineTemplate" else "spec:\n"
    pad = "      " if kind == "GCPMachineTemplate" else "  "
    pool = _pool(
        spec
        + f"{pad}instanceType: n2-standard-2\n"
        + f"{pad}imageFamily: projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts\n"
        + f"{pad}rootDeviceSize: 60\n"
        + f"{pad}preemptible: true\n",
        kind=kind,
    )
    assert pool.instance_types == ("n2-standard-2",)
    assert pool.os_family == "ubuntu-22.04"
    assert pool.disk_size_gib == 60
    assert pool.disk_type == "pd-standard"
    assert pool.provenance["diskType"].startswith("default: CAPG")
    assert "cluster.x-k8s.io/interruptible" not in pool.labels  # CAPG sets no such status


def test_a_gcp_vm_without_an_image_boots_capg_s_ubuntu_family():
    pool = _pool(
        "spec: {template: {spec: {instanceType: n2-standard-2}}}\n", kind="GCPMachineTemplate"
    )
    assert pool.os_family == "ubuntu"
    assert "capi-ubuntu-1804" in pool.provenance["osImage"]
    assert pool.disk_size_gib is None  # 0 is sent: the image's size


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("projects/cos-cloud/global/images/family/cos-stable", "cos"),
        ("projects/p/global/images/capi-ubuntu-2404-k8s-v1-31-4", "ubuntu-24.04"),
        ("projects/rhel-cloud/global/images/family/rhel-9", "rhel"),
        ("projects/windows-cloud/global/images/family/windows-2022-core", "windows-2022"),
        ("projects/p/global/images/my-golden-image", None),
        ("projects/p/global/images/macos-like", None),
    ],
)
def test_gcp_image_names_say_the_os_when_they_name_one(name, family):
    assert family_of_gcp_image(name) == family
