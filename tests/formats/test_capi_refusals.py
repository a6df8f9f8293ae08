"""Cluster API objects the controllers refuse are errors naming the file, the object and the
field -- never a pool compared as if the file were right (each case cites the CAPI / provider
check that refuses it)."""

from __future__ import annotations

from textwrap import dedent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats import capi
from fleetwarden.formats.capi.machines import semantic_version
from fleetwarden.formats.capi.objects import go_int32
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


_EKS_POOL = """\
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachinePool
    metadata: {name: ng, namespace: fleet}
    spec:
      clusterName: c1
      replicas: 2
      template:
        spec:
          clusterName: c1
          version: v1.31.4
          bootstrap: {dataSecretName: ""}
          infrastructureRef: {kind: AWSManagedMachinePool, name: ng}
    ---
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: AWSManagedMachinePool
    metadata: {name: ng, namespace: fleet}
    spec:
"""


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        (
            "  instanceType: m5.large\n  awsLaunchTemplate: {instanceType: m5.xlarge}",
            "spec.instanceType",
            "beside awsLaunchTemplate",
        ),
        (
            "  diskSize: 80\n  awsLaunchTemplate: {rootVolume: {size: 100}}",
            "spec.diskSize",
            "beside awsLaunchTemplate",
        ),
        ("  scaling: {minSize: 5, maxSize: 2}", "spec.scaling.maxSize", "below minSize 5"),
    ],
)
def test_an_eks_node_group_capa_refuses_is_an_error(spec: str, field: str, says: str) -> None:
    """exp/webhooks/awsmanagedmachinepool_webhook.go: validateLaunchTemplate ("InstanceType
    cannot be specified when LaunchTemplate is specified", DiskSize likewise) and
    validateScaling (maxSize "must be greater than field spec.scaling.minSize")."""
    error = _refused(dedent(_EKS_POOL) + spec)
    assert error.field == f"AWSManagedMachinePool/ng: {field}"
    assert says in error.reason


def test_a_custom_ami_type_takes_the_os_of_the_launch_template_s_lookup() -> None:
    """amiType CUSTOM with a launch template: CAPA puts the AMI it looks up (here the
    EKS-optimised AL2023 one) in the launch template; that is the nodes' OS, not dropped."""
    (pool,) = _pools(
        dedent(_EKS_POOL) + "  amiType: CUSTOM\n"
        "  awsLaunchTemplate: {instanceType: c6i.xlarge, ami: {eksLookupType: AmazonLinux2023},"
        " enclaveOptions: {enabled: true}}"
    ).values()
    assert pool.os_family == "amazonlinux2023"
    assert pool.instance_types == ("c6i.xlarge",)
    unknown = [a.path for a in pool.account if a.status.value == "unaccounted"]
    assert unknown == []


@pytest.mark.parametrize("control_plane", ["{}", "{localAPIEndpoint: {bindPort: 6443}}"])
def test_a_worker_bootstrap_with_control_plane_join_settings_is_an_error(
    control_plane: str,
) -> None:
    """bootstrap/kubeadm kubeadmconfig_controller.go: "Machine is a Worker, but
    JoinConfiguration.ControlPlane is set in the KubeadmConfig object" -- no node joins."""
    tree = dedent(_owner("MachineDeployment")).replace(
        "bootstrap: {dataSecretName: boot}",
        "bootstrap: {configRef: {kind: KubeadmConfigTemplate, name: pool}}",
    ) + dedent(
        f"""\
        ---
        apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
        kind: KubeadmConfigTemplate
        metadata: {{name: pool}}
        spec:
          template:
            spec:
              joinConfiguration:
                controlPlane: {control_plane}
        """
    )
    error = _refused(tree)
    assert error.field == (
        "KubeadmConfigTemplate/pool: spec.template.spec.joinConfiguration.controlPlane"
    )
    assert "no node joins" in error.reason


_numbers = st.integers(min_value=0, max_value=10**6).map(str)


@settings(max_examples=300, deadline=None)
@given(_numbers, _numbers, _numbers, st.sampled_from(["", "-rc.1", "-alpha.0", "+build.01"]))
def test_versions_capi_accepts_are_read_with_a_v(major, minor, patch, tail):
    """blang/semver Parse after CAPI's defaulting prepends "v"."""
    bare = f"{major}.{minor}.{patch}{tail}"
    assert semantic_version(bare) == semantic_version(f"v{bare}") == f"v{bare}"


@settings(max_examples=300, deadline=None)
@given(_numbers, _numbers, _numbers, st.integers(0, 4))
def test_versions_capi_refuses_are_refused(major, minor, patch, how):
    text = [
        f"v{major}.{minor}",  # no patch
        f"v0{major}.{minor}.{patch}",  # a leading zero
        f"v{major}.{minor}.{patch}-rc.01",  # a numeric pre-release with a leading zero
        f"vv{major}.{minor}.{patch}",
        f" v{major}.{minor}.{patch}",
    ][how]
    assert semantic_version(text) is None


@pytest.mark.parametrize("version", ["latest", "v1.30", "1.31.04", "stable-1.31"])
def test_a_version_capi_refuses_is_an_error_not_a_silent_comparison(version: str) -> None:
    """core/webhooks/admission (MachineDeployment, MachinePool, Cluster topology): "must be a
    valid semantic version". ``latest`` used to be compared, and matched no node silently."""
    tree = dedent(_owner("MachineDeployment")).replace(
        "clusterName: c1\n      bootstrap",
        f"clusterName: c1\n      version: '{version}'\n      bootstrap",
    )
    assert f"version: '{version}'" in tree
    error = _refused(tree)
    assert error.field == "MachineDeployment/pool: spec.template.spec.version"
    assert "semantic version" in error.reason


def _go_parse_int_32(text: str) -> int | None:
    """An independent model of Go's strconv.ParseInt(text, 10, 32) over Python's int()."""
    if not text.isascii() or text != text.strip() or "_" in text:
        return None
    try:
        number = int(text, 10)
    except ValueError:
        return None
    return number if -(2**31) <= number <= 2**31 - 1 else None


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.text(alphabet="+-0123456789 _.\t٣²", max_size=12),
        st.integers(min_value=-(2**33), max_value=2**33).map(str),
    )
)
def test_annotation_counts_are_parsed_as_go_parses_them(text: str) -> None:
    assert go_int32(text) == _go_parse_int_32(text)


_ANNOTATED = """\
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineDeployment
    metadata:
      name: pool
      annotations:
        cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: %(low)s
        cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "5"
    spec:
      clusterName: c1
      template:
        spec:
          clusterName: c1
          bootstrap: {dataSecretName: boot}
          infrastructureRef: {kind: DockerMachineTemplate, name: pool}
    """


def test_a_signed_autoscaler_annotation_is_read_as_capi_reads_it() -> None:
    """CAPI's webhook (strconv.ParseInt) reads "+2" as 2; fleetwarden refused the file."""
    (pool,) = _pools(_ANNOTATED % {"low": '"+2"'}).values()
    assert (pool.min_size, pool.max_size) == (2, 5)


@pytest.mark.parametrize("low", ['" 2"', '"2.0"', '"-1"', '"2147483648"', '"2_0"'])
def test_an_autoscaler_annotation_capi_cannot_read_is_an_error(low: str) -> None:
    """calculateMachineDeploymentReplicas: "could not parse the value of the ... annotation"
    (a space used to be stripped and the file accepted); a negative size is refused too."""
    error = _refused(_ANNOTATED % {"low": low})
    assert error.field == (
        "MachineDeployment/pool: "
        "metadata.annotations.cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
    )


def test_a_quoted_number_in_an_integer_field_is_an_error() -> None:
    """The API server refuses ``replicas: "3"`` (an integer field); it was read as 3."""
    error = _refused(_owner("MachineDeployment").replace("replicas: 1", 'replicas: "3"'))
    assert error.field == "MachineDeployment/pool: spec.replicas"
    assert "got the string '3'" in error.reason


_AWS_MD = """\
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineDeployment
    metadata: {name: md}
    spec:
      clusterName: c1
      replicas: 1
      template:
        spec:
          clusterName: c1
          bootstrap: {dataSecretName: boot}
          infrastructureRef: {kind: AWSMachineTemplate, name: md}
    ---
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: AWSMachineTemplate
    metadata: {name: md}
    spec:
      template:
        spec:
          instanceType: m5.large
          %s
    """


@pytest.mark.parametrize(
    ("volume", "says"),
    [("rootVolume: {size: 4}", "below 8 GiB"), ("rootVolume: {type: gp3}", "without a size")],
)
def test_a_root_volume_capa_s_crd_refuses_is_an_error(volume: str, says: str) -> None:
    """api/v1beta2/types.go Volume: ``size`` is required, ``Minimum=8``."""
    error = _refused(_AWS_MD % volume)
    assert error.field == "AWSMachineTemplate/md: spec.template.spec.rootVolume.size"
    assert says in error.reason


def test_a_v1beta1_failure_domain_in_an_aws_machine_template_is_accounted_for() -> None:
    """CAPA's own e2e templates put failureDomain (v1beta1 only) in a v1beta2 template: it
    was listed as unknown to fleetwarden (explain --strict exit 1)."""
    (pool,) = _pools(_AWS_MD % "failureDomain: us-west-2a").values()
    entry = next(a for a in pool.account if a.path.endswith("spec.failureDomain"))
    assert entry.status.value == "ignored"
    assert "v1beta1" in entry.detail
