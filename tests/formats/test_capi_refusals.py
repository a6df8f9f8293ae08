"""Cluster API objects the controllers refuse are errors naming the file, the object and the
field -- never a pool compared as if the file were right (each case cites the CAPI / provider
check that refuses it)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats import capi
from fleetwarden.formats.documents import parse_yaml_documents
from fleetwarden.formats.errors import FormatError


def _pools(text: str) -> dict[str, NodePoolSpec]:
    docs = parse_yaml_documents("tree.yaml", dedent(text))
    return {p.name: p for p in capi.read_pools(docs).pools}


def _refused(text: str) -> FormatError:
    with pytest.raises(FormatError) as caught:
        _pools(text)
    assert caught.value.path == "tree.yaml"
    assert caught.value.field is not None
    return caught.value


def _owner(kind: str, *, cluster: str = "c1", inner: str = "c1") -> str:
    return f"""\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: {kind}
        metadata: {{name: pool}}
        spec:
          clusterName: {cluster}
          replicas: 1
          template:
            spec:
              clusterName: {inner}
              bootstrap: {{dataSecretName: boot}}
              infrastructureRef: {{kind: DockerMachineTemplate, name: pool}}
        """


@pytest.mark.parametrize("kind", ["MachineDeployment", "MachinePool"])
def test_two_different_cluster_names_are_an_error(kind: str) -> None:
    """core/webhooks/admission/machinedeployment.go and machinepool.go: "spec.clusterName and
    spec.template.spec.clusterName must be set to the same value"."""
    error = _refused(_owner(kind, cluster="prod", inner="staging"))
    assert error.field == f"{kind}/pool: spec.template.spec.clusterName"
    assert "'staging'" in error.reason and "'prod'" in error.reason


@pytest.mark.parametrize(
    ("cluster", "inner"), [("c1", "c1"), ("${CLUSTER_NAME}", "${CLUSTER_NAME}"), ("${A}", "b")]
)
def test_equal_or_unresolved_cluster_names_are_read(cluster: str, inner: str) -> None:
    (pool,) = _pools(_owner("MachineDeployment", cluster=cluster, inner=inner)).values()
    assert pool.cluster == (None if "${" in cluster else cluster)
