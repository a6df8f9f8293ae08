"""eksctl files read as eksctl reads them: what eksctl refuses is refused (naming the field),
templates' variables are unresolved, and the labels a custom AMI's nodes carry follow what eksctl
and EKS write for it (eksctl v0.230.0: pkg/eks/api.go, pkg/apis/eksctl.io/v1alpha5,
pkg/nodebootstrap)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import FieldStatus
from fleetwarden.formats import eksctl
from fleetwarden.formats.documents import parse_yaml_documents
from fleetwarden.formats.errors import FormatError

_HEAD = "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
_META = "metadata: {name: c1, region: us-west-2, version: '1.31'}\n"


def _pools(body: str, *, head: str = _HEAD, meta: str = _META):
    return eksctl.read_pools(parse_yaml_documents("c.yaml", head + meta + body)).pools


def _pool(body: str, **kw):
    (pool,) = _pools(body, **kw)
    return pool


def _status(pool, attr: str) -> dict[str, FieldStatus]:
    """The status of every account entry whose attribute or fact names ``attr``."""
    return {f"{a.path}|{a.fact}": a.status for a in pool.account if attr in f"{a.path}{a.fact}"}


@pytest.mark.parametrize(
    ("body", "meta", "field", "says"),
    [
        (
            "nodeGroups: [{name: a}]\n",
            "metadata: {name: c1, version: 1.30}\n",
            "metadata.version",
            "quote",
        ),
        (
            "nodeGroups: [{name: a}]\n",
            "metadata: {name: c1, version: '1.3O'}\n",
            "metadata.version",
            "not a Kubernetes version",
        ),
        ("managedNodeGroups: [{name: a, spot: 'true'}]\n", _META, "[0].spot", "true or false"),
        (
            "nodeGroups: [{name: a, volumeSize: '100'}]\n",
            _META,
            "[0].volumeSize",
            "expected an integer",
        ),
        ("nodeGroups: [{name: a, labels: {tier: 1}}]\n", _META, "labels.tier", "string"),
        (
            "nodeGroups: [{name: a, maxSize: 99999999999999999999999}]\n",
            _META,
            "[0].maxSize",
            "out of range",
        ),
        (
            "nodeGroups: [{name: a, minSize: 5, desiredCapacity: 2}]\n",
            _META,
            "[0].desiredCapacity",
            "below minSize",
        ),
        (
            "nodeGroups: [{name: a, desiredCapacity: 4, maxSize: 3}]\n",
            _META,
            "[0].desiredCapacity",
            "above maxSize",
        ),
        (
            "nodeGroups: [{name: a, minSize: 5, maxSize: 2}]\n",
            _META,
            "[0].maxSize",
            "minSize (5) is above maxSize (2)",
        ),
        ("nodeGroups: [{name: a, maxSize: 1}]\n", _META, "[0].maxSize", "minSize (2,"),
        (
            "nodeGroups: [{name: a, amiFamily: AmazonLinx2023}]\n",
            _META,
            "[0].amiFamily",
            "not one eksctl knows",
        ),
        (
            "nodeGroups: [{name: a, amiFamily: AmazonLinux2}]\n",
            "metadata: {name: c1, version: '1.33'}\n",
            "[0].amiFamily",
            "not supported",
        ),
        (
            "nodeGroups: [{name: a}]\nmanagedNodeGroups: [{name: a}]\n",
            _META,
            "managedNodeGroups[0].name",
            "used twice",
        ),
        (
            "nodeGroups: [{name: a, instanceTypes: [m5.large]}]\n",
            _META,
            "nodeGroups[0].instanceTypes",
            "managedNodeGroups",
        ),
        (
            "managedNodeGroups: [{name: a, taints: {k: 'v:NoSchedule'}}]\n",
            _META,
            "managedNodeGroups[0].taints",
            "list",
        ),
        (
            "nodeGroups: [{name: a, taints: [{key: k, effect: NO_SCHEDULE}]}]\n",
            _META,
            "[0].taints[0].effect",
            "NoSchedule",
        ),
    ],
)
def test_what_eksctl_refuses_is_refused_naming_the_field(body, meta, field, says):
    with pytest.raises(FormatError) as err:
        _pools(body, meta=meta)
    assert field in str(err.value)
    assert says in str(err.value)


@pytest.mark.parametrize("api", ["eksctl.io/v1alpha4", "eksctl.io/v9"])
def test_only_the_version_eksctl_serves_is_read(api):
    with pytest.raises(FormatError, match="apiVersion"):
        _pools("nodeGroups: [{name: a}]\n", head=f"apiVersion: {api}\nkind: ClusterConfig\n")


def test_what_eksctl_accepts_still_reads():
    pool = _pool(
        "nodeGroups: [{name: a, amiFamily: amazonlinux2023, minSize: 1, maxSize: 3,"
        " taints: {k: 'v:NoSchedule'}}]\n"  # eksctl matches families ignoring case
    )
    assert pool.os_family == "amazonlinux2023"
    assert (pool.min_size, pool.max_size, pool.desired_size) == (1, 3, 1)
    assert [t.effect for t in pool.taints] == ["NoSchedule"]


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("latest", "newest Kubernetes version"),
        ("auto", "default Kubernetes version"),
        ("${K8S_VERSION}", "${K8S_VERSION}"),
    ],
)
def test_a_version_eksctl_resolves_itself_is_unresolved_not_compared(version, says):
    pool = _pool(
        "nodeGroups: [{name: a}]\n", meta=f"metadata: {{name: c1, version: '{version}'}}\n"
    )
    assert pool.kubernetes_version is None
    assert [u.expression for u in pool.unresolved if u.field == "kubernetesVersion"] == [
        next(u.expression for u in pool.unresolved if says in u.expression)
    ]


def test_a_templates_variables_are_unresolved_never_compared():
    pool = _pool(
        "managedNodeGroups:\n"
        "  - {name: ng, instanceType: '${TYPE}', desiredCapacity: '${N}', minSize: 1,"
        " volumeSize: '${GIB}', labels: {team: '${TEAM}', tier: web}}\n",
        meta="metadata: {name: '${CLUSTER}', version: '1.31'}\n",
    )
    assert pool.cluster is None
    assert pool.instance_types == ()
    assert (pool.min_size, pool.max_size, pool.desired_size) == (None, None, None)
    assert pool.disk_size_gib is None
    assert dict(pool.labels) == {
        "alpha.eksctl.io/nodegroup-name": "ng",
        "tier": "web",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }
    unresolved = {u.field: u.expression for u in pool.unresolved}
    assert unresolved == {
        "instanceTypes": "${TYPE}",
        "desiredSize": "${N}",
        "diskSizeGiB": "${GIB}",
        "labels.team": "${TEAM}",
    }
    assert FieldStatus.UNRESOLVED in _status(pool, "cluster").values()


def test_a_group_named_by_a_variable_is_never_matched_to_nodes():
    pool = _pool("nodeGroups: [{name: '${NG_NAME}'}]\n")
    assert pool.unknown_name == "${NG_NAME}"
    assert _status(pool, "name")["name|name"] == FieldStatus.UNRESOLVED


def test_an_outposts_control_plane_leaves_the_instance_type_to_the_outpost():
    pool = _pool(
        "outpost: {controlPlaneOutpostARN: 'arn:aws:outposts:us-west-2:1:outpost/op-1'}\n"
        "nodeGroups: [{name: a}]\n"
    )
    assert pool.instance_types == ()
    assert set(_status(pool, "instanceType").values()) == {FieldStatus.IGNORED}


def test_a_custom_ami_on_amazon_linux_2023_keeps_eksctls_labels_but_not_ekss():
    pool = _pool(
        "managedNodeGroups: [{name: ng, ami: ami-0123456789abcdef0,"
        " amiFamily: AmazonLinux2023, spot: true}]\n"
    )
    assert pool.labels["alpha.eksctl.io/nodegroup-name"] == "ng"  # the NodeConfig eksctl writes
    assert pool.labels["alpha.eksctl.io/cluster-name"] == "c1"
    assert "eks.amazonaws.com/capacityType" not in pool.labels
    assert _status(pool, "spot") == {"spot|None": FieldStatus.IGNORED}


def test_a_custom_ami_on_amazon_linux_2_has_only_the_labels_its_bootstrap_passes():
    pool = _pool(
        "managedNodeGroups:\n  - name: ng\n    ami: ami-0123456789abcdef0\n"
        "    amiFamily: AmazonLinux2\n    overrideBootstrapCommand: |\n"
        "      /etc/eks/bootstrap.sh c1 --kubelet-extra-args"
        " '--node-labels=eks.amazonaws.com/nodegroup=ng'\n"
    )
    assert dict(pool.labels) == {"eks.amazonaws.com/nodegroup": "ng"}
    statuses = _status(pool, "alpha.eksctl.io")
    assert statuses and set(statuses.values()) == {FieldStatus.IGNORED}  # listed, with why
    assert set(_status(pool, "capacityType").values()) == {FieldStatus.IGNORED}


def test_ubuntu_managed_nodes_carry_eksctls_labels_and_no_capacity_type():
    pool = _pool("managedNodeGroups: [{name: ng, amiFamily: Ubuntu2204}]\n")
    assert pool.labels["alpha.eksctl.io/nodegroup-name"] == "ng"
    assert "eks.amazonaws.com/capacityType" not in pool.labels
    plain = _pool("managedNodeGroups: [{name: ng}]\n")
    assert plain.labels["eks.amazonaws.com/capacityType"] == "ON_DEMAND"


# eksctl's validateLabels: a label the kubelet may not set is refused for both kinds of group

_WELL_KNOWN = {
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
}
_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
_RESTRICTED_KEYS = st.builds(
    lambda sub, domain, name: f"{sub + '.' if sub else ''}{domain}/{name}",
    st.one_of(st.just(""), st.just("node-role"), _NAMES).filter(
        lambda sub: sub not in ("kubelet", "node")
    ),
    st.sampled_from(["kubernetes.io", "k8s.io"]),
    _NAMES,
).filter(lambda key: key not in _WELL_KNOWN)


@settings(max_examples=100, deadline=None)
@given(_RESTRICTED_KEYS, st.sampled_from(["nodeGroups", "managedNodeGroups"]))
def test_a_label_in_the_kubelets_reserved_namespaces_is_refused_as_eksctl_refuses_it(key, kind):
    """``node-role.kubernetes.io/worker`` in a group's ``labels``: eksctl refuses the file
    ("disallowed as they have reserved prefixes [kubernetes.io/, k8s.io/]"); it was compared."""
    with pytest.raises(FormatError, match="reserved prefixes") as caught:
        _pools(f"{kind}: [{{name: a, labels: {{team: x, {key}: ''}}}}]\n")
    assert caught.value.field is not None and caught.value.field.endswith(f"labels.{key}")
    assert key in caught.value.reason


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.builds(lambda n: f"node.kubernetes.io/{n}", _NAMES),
        st.builds(lambda n: f"x.kubelet.kubernetes.io/{n}", _NAMES),
        st.sampled_from(sorted(_WELL_KNOWN)),
        st.builds(lambda n: f"example.com/{n}", _NAMES),
        _NAMES,
    ),
    st.sampled_from(["nodeGroups", "managedNodeGroups"]),
)
def test_a_label_eksctl_accepts_is_compared(key, kind):
    pool = _pool(f"{kind}: [{{name: a, labels: {{{key}: v}}}}]\n")
    assert pool.labels[key] == "v"


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ("{a/b/c: x}", "only use one '/'"),
        ("{-a: x}", "not a qualified name"),
        ("{a: x!}", "invalid value"),
    ],
)
def test_a_label_that_is_no_label_is_refused_as_eksctl_refuses_it(labels, says):
    with pytest.raises(FormatError, match=says):
        _pools(f"nodeGroups: [{{name: a, labels: {labels}}}]\n")
