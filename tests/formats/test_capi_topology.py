"""ClusterClass topology workers: what CAPI's topology controller computes for the generated
MachineDeployment (exp/topology/desiredstate/desired_state.go) is what is expected."""

from __future__ import annotations

from fleetwarden.core.pools import FieldStatus
from fleetwarden.formats import capi
from fleetwarden.formats.documents import parse_yaml_documents

TREE = """\
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: c1}
spec:
  topology:
    class: cc
    version: v1.31.4
    workers:
      machineDeployments:
      - class: worker
        name: md-0
        replicas: 1
        metadata:
          labels: {node-role.kubernetes.io/tier: from-topology}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata: {name: cc}
spec:
  workers:
    machineDeployments:
    - class: worker
      template:
        metadata:
          labels: {node-role.kubernetes.io/tier: from-class, node-role.kubernetes.io/extra: x}
        bootstrap:
          ref: {kind: KubeadmConfigTemplate, name: w}
        infrastructure:
          ref: {kind: DockerMachineTemplate, name: w}
"""


def test_a_worker_label_wins_over_its_class_label_of_the_same_key():
    """util.MergeMap(topology labels, class labels): the first map wins. The class value used
    to overwrite the worker's, so nodes labelled as CAPI labels them were reported drifted."""
    (pool,) = capi.read_pools(parse_yaml_documents("t.yaml", TREE)).pools
    assert dict(pool.labels) == {
        "node-role.kubernetes.io/tier": "from-topology",
        "node-role.kubernetes.io/extra": "x",
    }
    assert pool.provenance["labels.node-role.kubernetes.io/tier"] == "t.yaml:14"
    replaced = next(
        a
        for a in pool.account
        if a.path.endswith("metadata.labels.node-role.kubernetes.io/tier")
        and a.path.startswith("ClusterClass/")
    )
    assert replaced.status is FieldStatus.IGNORED
    assert "replaces it" in replaced.detail
