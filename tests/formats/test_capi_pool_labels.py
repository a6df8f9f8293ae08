"""MachinePool template labels: CAPI (>= 1.5) copies them onto the MachinePool Machines of an
infrastructure pool whose provider makes such Machines, and syncs the node-role /
node-restriction / node.cluster.x-k8s.io ones to their Nodes like any Machine's -- so those
are desired labels there; on every other pool each label is ignored saying why, never compared
and never dropped without a reason."""

from __future__ import annotations

from textwrap import dedent

import pytest

from fleetwarden.core.pools import FieldStatus, NodePoolSpec
from fleetwarden.formats import capi
from fleetwarden.formats.documents import parse_yaml_documents

_LABELS = """\
                node-role.kubernetes.io/worker: ''
                tier.node.cluster.x-k8s.io/class: web
                team: payments"""
_SYNCED = {"node-role.kubernetes.io/worker": "", "tier.node.cluster.x-k8s.io/class": "web"}


def _machine_pool(infra_kind: str) -> str:
    return f"""\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: MachinePool
        metadata: {{name: mp}}
        spec:
          clusterName: c1
          replicas: 2
          template:
            metadata:
              labels:
{_LABELS}
            spec:
              clusterName: c1
              version: v1.31.4
              bootstrap: {{dataSecretName: boot}}
              infrastructureRef: {{kind: {infra_kind}, name: mp}}
        """


def _pool(text: str) -> NodePoolSpec:
    (pool,) = capi.read_pools(parse_yaml_documents("tree.yaml", dedent(text))).pools
    return pool


def _label_notes(pool: NodePoolSpec) -> dict[str, tuple[FieldStatus, str]]:
    return {
        a.path.rpartition("labels.")[2]: (a.status, a.detail)
        for a in pool.account
        if "metadata.labels." in a.path
    }


@pytest.mark.parametrize(
    "kind", ["AzureMachinePool", "GCPManagedMachinePool", "DockerMachinePool", "DevMachinePool"]
)
def test_synced_labels_of_a_pool_with_machinepool_machines_are_desired(kind):
    pool = _pool(_machine_pool(kind))
    assert {k: pool.labels[k] for k in _SYNCED if k in pool.labels} == _SYNCED
    assert "team" not in pool.labels
    notes = _label_notes(pool)
    assert notes["team"][0] is FieldStatus.IGNORED
    assert notes["team"][1].startswith("Machine template label not synced to Nodes")
    assert {notes[k][0] for k in _SYNCED} == {FieldStatus.COMPARED}


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("AWSMachinePool", "MachinePoolMachines feature gate"),
        ("AzureManagedMachinePool", "AzureManagedMachinePool makes no MachinePool Machines"),
        ("AWSManagedMachinePool", "AWSManagedMachinePool makes no MachinePool Machines"),
        ("GCPMachinePool", "GCPMachinePool makes no MachinePool Machines"),
    ],
)
def test_labels_of_a_pool_without_machinepool_machines_are_ignored_saying_why(kind, says):
    pool = _pool(_machine_pool(kind))
    assert not set(_SYNCED) & set(pool.labels) and "team" not in pool.labels
    notes = _label_notes(pool)
    assert set(notes) == {*_SYNCED, "team"}
    assert all(status is FieldStatus.IGNORED and says in why for status, why in notes.values())


TOPOLOGY = """\
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    metadata: {name: c1}
    spec:
      topology:
        class: dev
        version: v1.31.4
        workers:
          machinePools:
          - class: pool
            name: mp-0
            metadata:
              labels:
                node-role.kubernetes.io/worker: ''
                team: payments
    ---
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: ClusterClass
    metadata: {name: dev}
    spec:
      workers:
        machinePools:
        - class: pool
          template:
            metadata:
              labels: {tier.node.cluster.x-k8s.io/class: web}
            bootstrap:
              ref: {kind: KubeadmConfigTemplate, name: pool}
            infrastructure:
              ref: {kind: INFRA, name: pool}
    """


def test_a_topology_machine_pool_follows_its_class_infrastructure_template():
    synced = _pool(TOPOLOGY.replace("INFRA", "DockerMachinePoolTemplate"))
    assert {k: synced.labels.get(k) for k in _SYNCED} == _SYNCED
    assert "team" not in synced.labels
    managed = _pool(TOPOLOGY.replace("INFRA", "AzureManagedMachinePoolTemplate"))
    assert not set(_SYNCED) & set(managed.labels)
    notes = _label_notes(managed)
    assert notes and all(s is FieldStatus.IGNORED for s, _ in notes.values())
