"""NodePool template labels read as Karpenter reads them: what its CRD (or validation) refuses is
refused naming the label's field, with Karpenter's reason; what it accepts is compared -- the
kubelet's own rule for --node-labels is not Karpenter's (it syncs the labels to the Node itself)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.formats.errors import FormatError

_V1 = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    metadata:
      labels: {LABELS}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""
_V1BETA1 = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: general}
spec:
  template:
    metadata:
      labels: {LABELS}
    spec:
      nodeClassRef: {name: default}
      requirements: []
"""
_V1ALPHA5 = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: general}
spec:
  labels: {LABELS}
  providerRef: {name: default}
"""
_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
# kubernetes.io / k8s.io keys no version lets through by name or by domain exception
_K8S_KEYS = st.builds(
    lambda sub, domain, name: f"{sub + '.' if sub else ''}{domain}/{name}",
    st.one_of(st.just(""), st.just("node-role"), _NAMES).filter(
        lambda sub: sub not in ("node", "node-restriction", "kops", "topology", "beta")
    ),
    st.sampled_from(["kubernetes.io", "k8s.io"]),
    _NAMES,
).filter(lambda key: key not in ("kubernetes.io/arch", "kubernetes.io/os"))


def _pools(template: str, labels: str):
    text = template.replace("{LABELS}", labels)
    return read_desired([SourceFile("np.yaml", text.encode(), direct=True)]).pools


def _refused(template: str, labels: str) -> FormatError:
    with pytest.raises(FormatError) as caught:
        _pools(template, labels)
    assert caught.value.path == "np.yaml"
    return caught.value


@settings(max_examples=100, deadline=None)
@given(_K8S_KEYS)
def test_a_v1_nodepool_label_in_the_kubernetes_domains_is_compared_not_refused(key):
    """``node-role.kubernetes.io/worker`` on a v1 NodePool: Karpenter v1.9+ accepts it and puts
    it on the Node (it hands the kubelet only the labels the kubelet may set): not refused as
    the kubelet's --node-labels would be."""
    (pool,) = _pools(_V1, f"{{{key}: x, team: a}}")
    assert pool.labels[key] == "x"


@settings(max_examples=100, deadline=None)
@given(_K8S_KEYS, st.sampled_from([_V1BETA1, _V1ALPHA5]))
def test_an_older_nodepool_label_in_the_kubernetes_domains_is_refused(key, template):
    """v1beta1's CRD (and v1alpha5's webhook) refuse those domains: the pool never existed."""
    error = _refused(template, f"{{team: a, {key}: x}}")
    assert error.field is not None and error.field.endswith(f"labels.{key}")
    assert "restricted" in error.reason


@pytest.mark.parametrize("template", [_V1, _V1BETA1])
@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("karpenter.sh/nodepool", 'label "karpenter.sh/nodepool" is restricted'),
        ("karpenter.sh/owner", 'label domain "karpenter.sh" is restricted'),
        ("x.karpenter.sh/owner", 'label domain "karpenter.sh" is restricted'),
        ("kubernetes.io/hostname", "kubernetes.io/hostname"),
        ("-team", "not a qualified name"),
    ],
)
def test_a_label_karpenter_reserves_is_refused_in_every_version(template, key, says):
    error = _refused(template, f"{{'{key}': x}}")
    assert says in error.reason and error.field is not None


@pytest.mark.parametrize("template", [_V1, _V1BETA1, _V1ALPHA5])
@pytest.mark.parametrize(
    "key",
    [
        "karpenter.sh/capacity-type",
        "node.kubernetes.io/lifecycle",
        "topology.kubernetes.io/zone",
        "kops.k8s.io/instancegroup",
        "example.com/team",
    ],
)
def test_a_label_every_version_accepts_is_compared(template, key):
    (pool,) = _pools(template, f"{{{key}: x}}")
    assert pool.labels[key] == "x"


def test_a_label_value_that_is_no_label_value_is_refused():
    error = _refused(_V1, "{team: 'a b'}")
    assert "not a label value" in error.reason
    assert error.field is not None and error.field.endswith("labels.team")
