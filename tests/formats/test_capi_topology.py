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


AKS = """\
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: c1}
spec:
  topology:
    class: aks
    version: v1.31.4
    workers:
      machinePools:
      - {class: system, name: mp-0, replicas: 2}
      - {class: user, name: mp-1, replicas: 1}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata: {name: aks}
spec:
  workers:
    machinePools:
    - class: system
      template:
        bootstrap: {ref: {kind: KubeadmConfigTemplate, name: boot}}
        infrastructure: {ref: {kind: AzureManagedMachinePoolTemplate, name: pool0}}
    - class: user
      template:
        bootstrap: {ref: {kind: KubeadmConfigTemplate, name: boot}}
        infrastructure: {ref: {kind: AzureManagedMachinePoolTemplate, name: userpool}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: AzureManagedMachinePoolTemplate
metadata: {name: pool0}
spec: {template: {spec: {mode: System, name: sys0, sku: Standard_D2s_v3}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: AzureManagedMachinePoolTemplate
metadata: {name: userpool}
spec: {template: {spec: {mode: User, sku: Standard_D4s_v3}}}
"""


def test_an_aks_pool_of_a_topology_is_named_as_its_template_names_it():
    """Every cluster's clone of an AzureManagedMachinePoolTemplate copies spec.name, which
    CAPZ's template webhook defaults to the template's name: nodes carry
    kubernetes.azure.com/agentpool=<it>. The pool was left unnamed, so never compared."""
    pools = {p.name: p for p in capi.read_pools(parse_yaml_documents("t.yaml", AKS)).pools}
    assert set(pools) == {"sys0", "userpool"}
    assert all(u.field != "name" for p in pools.values() for u in p.unresolved)
    assert pools["sys0"].instance_types == ("Standard_D2s_v3",)
    assert pools["userpool"].provenance["name"].startswith("default: CAPZ")
