"""A MachineSet of its own defines nodes: it is a pool (replicas defaulted as CAPI's MachineSet
webhook does, its Machine template's synced labels, its infrastructure template), never a file
skipped as holding no pool. One a MachineDeployment owns is that MachineDeployment's pool."""

from __future__ import annotations

from textwrap import dedent

from fleetwarden.formats import capi
from fleetwarden.formats.documents import PoolsRead, parse_yaml_documents

SET = """\
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineSet
    metadata:
      name: ms
      namespace: fleet%(owner)s
    spec:
      clusterName: c1
      selector: {matchLabels: {set: ms}}
      template:
        metadata:
          labels: {set: ms, node-role.kubernetes.io/batch: ""}
        spec:
          clusterName: c1
          version: v1.31.4
          bootstrap: {dataSecretName: boot}
          infrastructureRef: {kind: AWSMachineTemplate, name: ms}
    ---
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: AWSMachineTemplate
    metadata: {name: ms, namespace: fleet}
    spec:
      template:
        spec: {instanceType: c5.large, spotMarketOptions: {}}
    """
OWNED = """
      ownerReferences:
      - {apiVersion: cluster.x-k8s.io/v1beta1, kind: MachineDeployment, name: md, uid: x}"""


def _read(text: str) -> PoolsRead:
    return capi.read_pools(parse_yaml_documents("ms.yaml", dedent(text)))


def test_a_machine_set_of_its_own_is_a_pool():
    (pool,) = _read(SET % {"owner": ""}).pools
    assert (pool.name, pool.cluster, pool.kubernetes_version) == ("ms", "c1", "v1.31.4")
    assert pool.desired_size == 1
    assert pool.provenance["desiredSize"].startswith("default: CAPI: replicas 1")
    assert pool.instance_types == ("c5.large",)
    # synced label from the Machine template; CAPA spot -> CAPI's interruptible label
    assert dict(pool.labels) == {
        "node-role.kubernetes.io/batch": "",
        "cluster.x-k8s.io/interruptible": "",
    }
    assert [a.path for a in pool.account if a.status.value == "unaccounted"] == []


def test_a_machine_set_a_machine_deployment_owns_is_not_a_second_pool():
    read = _read(SET % {"owner": OWNED})
    assert read.pools == []
    assert "MachineSet" in read.notes["ms.yaml"]
