"""eksctl ClusterConfig and Karpenter NodePool/Provisioner readers over the real corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import FieldStatus, Requirement, Taint
from fleetwarden.formats import eksctl, karpenter
from fleetwarden.formats.desired import read_desired
from fleetwarden.formats.documents import SourceFile, parse_yaml_documents
from fleetwarden.formats.errors import FormatError
from tests.conftest import realdata_files


def _read(path: Path, reader):
    return reader(parse_yaml_documents(str(path), path.read_text()))


@pytest.mark.parametrize("path", realdata_files("eksctl", ".yaml"), ids=lambda p: p.name)
def test_every_eksctl_file_yields_pools_or_a_reason(realdata, path):
    got = _read(path, eksctl.read_pools)
    assert got.pools or got.notes.get(str(path))
    for pool in got.pools:
        assert pool.cluster and pool.name and pool.source == str(path)


@pytest.mark.parametrize("path", realdata_files("karpenter", ".yaml"), ids=lambda p: p.name)
def test_every_karpenter_file_yields_pools_or_a_reason(realdata, path):
    got = _read(path, karpenter.read_pools)
    assert got.pools or got.notes.get(str(path))
    for pool in got.pools:
        assert pool.cluster is None  # Karpenter objects never name their cluster
        assert pool.heterogeneous


# file, pool -> facts read from the real file
EKSCTL_FACTS = [
    (
        "eksctl-05-advanced-nodegroups.yaml",
        "ng1-public",
        dict(
            cluster="cluster-5",
            instance_types=("m5.xlarge",),
            min_size=2,
            max_size=8,
            desired_size=2,  # eksctl: the initial size is minSize
            disk_size_gib=100,
            disk_type="gp2",
            os_family="amazonlinux2",
            labels={
                "nodegroup-type": "frontend-workloads",
                "alpha.eksctl.io/cluster-name": "cluster-5",
                "alpha.eksctl.io/nodegroup-name": "ng1-public",
            },
            taints=(),
        ),
    ),
    (
        "eksctl-05-advanced-nodegroups.yaml",
        "ng3-private-b",
        dict(
            instance_types=("c3.8xlarge",),
            min_size=4,
            max_size=4,
            desired_size=4,
            taints=(Taint("special", "true", "NoSchedule"),),
        ),
    ),
    (
        "eksctl-08-spot-instances.yaml",
        "ng-1",
        dict(instance_types=("t3.small", "t3.medium"), min_size=2, max_size=5),
    ),
    (
        "eksctl-15-managed-nodes.yaml",
        "managed-ng-public",
        dict(
            min_size=2,
            max_size=4,
            desired_size=3,
            disk_size_gib=20,
            labels={
                "role": "worker",
                "alpha.eksctl.io/cluster-name": "cluster-15",
                "alpha.eksctl.io/nodegroup-name": "managed-ng-public",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
            },
            taints=(Taint("key1", "value1", "NoSchedule"), Taint("key2", None, "NoExecute")),
        ),
    ),
    ("eksctl-20-bottlerocket.yaml", "ng1-public", dict(os_family="bottlerocket")),
    (
        "eksctl-23-kubeflow-spot-instance.yaml",
        "1-gpu-spot-g5-xlarge",
        dict(
            kubernetes_version="1.14",
            instance_types=("g5.xlarge",),
            min_size=0,
            max_size=10,
            taints=(Taint("spotInstance", "true", "PreferNoSchedule"),),
        ),
    ),
    (
        "eksctl-34-taints.yaml",
        "mng1-public",
        dict(
            cluster="taints-1",
            taints=(
                Taint("your.domain.com/memory-pressure", "true", "PreferNoSchedule"),
                Taint("your.domain.com/needs-auth", "true", "NoExecute"),
            ),
        ),
    ),
    ("eksctl-14-windows-nodes.yaml", "windows-ng", dict(os_family="windows-2019")),
]


@pytest.mark.parametrize(
    ("file", "pool", "facts"), EKSCTL_FACTS, ids=[f"{f}:{p}" for f, p, _ in EKSCTL_FACTS]
)
def test_eksctl_facts_read_from_real_files(realdata, file, pool, facts):
    got = {p.name: p for p in _read(realdata / "eksctl" / file, eksctl.read_pools).pools}
    spec = got[pool]
    for key, want in facts.items():
        have = getattr(spec, key)
        assert (dict(have) if key == "labels" else have) == want, key


_ON_DEMAND_CMR = (
    Requirement("karpenter.sh/capacity-type", "In", ("on-demand",)),
    Requirement("eks.amazonaws.com/instance-category", "In", ("c", "m", "r")),
    Requirement("eks.amazonaws.com/instance-generation", "Gt", ("4",)),
    Requirement("kubernetes.io/os", "In", ("linux",)),
)


def test_eksctl_auto_mode_yields_the_built_in_node_pools_as_aws_documents_them(realdata):
    """``autoModeConfig.nodePools: [general-purpose, system]``: the two built-in NodePools, with
    the requirements and taint AWS documents, each a default with that origin."""
    got = _read(realdata / "eksctl" / "eksctl-42-auto-mode.yaml", eksctl.read_pools)
    pools = {p.name: p for p in got.pools}
    assert sorted(pools) == ["general-purpose", "system"]
    gp, system = pools["general-purpose"], pools["system"]
    assert gp.cluster == system.cluster == "auto-mode-cluster"
    assert gp.provider.value == "karpenter" and gp.heterogeneous
    assert gp.requirements == (*_ON_DEMAND_CMR, Requirement("kubernetes.io/arch", "In", ("amd64",)))
    assert system.requirements == (
        *_ON_DEMAND_CMR,
        Requirement("kubernetes.io/arch", "In", ("amd64", "arm64")),
    )
    assert gp.taints == () and system.taints == (Taint("CriticalAddonsOnly", None, "NoSchedule"),)
    assert system.provenance["taints.CriticalAddonsOnly:NoSchedule"].startswith("default: EKS Auto")
    assert gp.provenance["name"].endswith("eksctl-42-auto-mode.yaml:14")
    assert not [a for a in gp.account if a.status.value == "unaccounted"]


def _auto(body: str, tmp_path: Path):
    f = tmp_path / "c.yaml"
    f.write_text(
        "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
        "metadata: {name: c1, region: us-west-2, version: '1.33'}\n" + body
    )
    return _read(f, eksctl.read_pools)


def test_eksctl_auto_mode_defaults_follow_eksctl_and_bad_lists_are_refused(tmp_path):
    both = _auto("autoModeConfig: {enabled: true}\n", tmp_path)
    assert [p.name for p in both.pools] == ["general-purpose", "system"]  # eksctl's default
    assert both.pools[0].provenance["name"].startswith("default: eksctl")
    assert {p.kubernetes_version for p in both.pools} == {"1.33"}
    assert _auto("autoModeConfig: {enabled: true, nodePools: []}\n", tmp_path).pools == []
    assert _auto("autoModeConfig: {enabled: false}\n", tmp_path).pools == []
    for body, why in [
        ("autoModeConfig: {enabled: true, nodePools: [gpu]}\n", "invalid NodePool 'gpu'"),
        ("autoModeConfig: {enabled: true, nodePools: [system, system]}\n", "duplicate"),
        ("autoModeConfig: {nodePools: [system]}\n", "when Auto Mode is disabled"),
        ("autoModeConfig: {enabled: 'yes'}\n", "expected true or false"),
    ]:
        with pytest.raises(FormatError, match=why) as exc:
            _auto(body, tmp_path)
        assert "autoModeConfig" in str(exc.value)


KARPENTER_FACTS = [
    (
        "karpenter-v1-general-purpose.yaml",
        "general-purpose",
        dict(
            os_family="amazonlinux2023",
            requirements=(
                Requirement("kubernetes.io/arch", "In", ("amd64",)),
                Requirement("kubernetes.io/os", "In", ("linux",)),
                Requirement("karpenter.sh/capacity-type", "In", ("on-demand",)),
                Requirement("karpenter.k8s.aws/instance-category", "In", ("c", "m", "r")),
                Requirement("karpenter.k8s.aws/instance-generation", "Gt", ("2",)),
            ),
        ),
    ),
    (
        "karpenter-v1beta1-large-instances.yaml",
        "large-instances",
        dict(
            os_family="amazonlinux2",
            requirements=(
                Requirement("karpenter.k8s.aws/instance-cpu", "Gt", ("3",)),
                Requirement("karpenter.k8s.aws/instance-memory", "Gt", ("8191",)),
            ),
        ),
    ),
    (
        "karpenter-v1alpha5-provisioner-general-purpose.yaml",
        "default",
        dict(
            requirements=(
                Requirement("karpenter.k8s.aws/instance-family", "In", ("c5", "m5", "r5")),
                Requirement(
                    "karpenter.k8s.aws/instance-size", "NotIn", ("nano", "micro", "small", "large")
                ),
                # the v1alpha5 defaulting webhook's, for the keys the Provisioner leaves out
                Requirement("kubernetes.io/os", "In", ("linux",)),
                Requirement("kubernetes.io/arch", "In", ("amd64",)),
                Requirement("karpenter.sh/capacity-type", "In", ("on-demand",)),
            ),
            os_family="amazonlinux2",  # AWSNodeTemplate without amiFamily: AL2
            disk_size_gib=20,
        ),
    ),
    ("karpenter-v1-bottlerocket.yaml", "default", dict(os_family="bottlerocket")),
    ("karpenter-v1-windows-2022.yaml", "windows2022", dict(os_family="windows-2022")),
]


@pytest.mark.parametrize(
    ("file", "pool", "facts"), KARPENTER_FACTS, ids=[f"{f}:{p}" for f, p, _ in KARPENTER_FACTS]
)
def test_karpenter_facts_read_from_real_files(realdata, file, pool, facts):
    got = {p.name: p for p in _read(realdata / "karpenter" / file, karpenter.read_pools).pools}
    for key, want in facts.items():
        assert getattr(got[pool], key) == want, key


def test_karpenter_multiple_arch_gives_two_pools(realdata):
    got = _read(realdata / "karpenter" / "karpenter-v1-multiple-arch.yaml", karpenter.read_pools)
    assert sorted(p.name for p in got.pools) == ["amd64", "arm64"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (
            "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: c}\n"
            "nodeGroups: {a: 1}\n",
            "nodeGroups",
        ),
        (
            "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: c}\n"
            "nodeGroups: [{name: a, minSize: many}]\n",
            "nodeGroups[0].minSize",
        ),
        (
            "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: c}\n"
            "nodeGroups: [{name: a, taints: [{key: k, effect: Sometimes}]}]\n",
            "nodeGroups[0].taints[0].effect",
        ),
        (
            "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: c}\n"
            "managedNodeGroups: [{labels: {a: b}}]\n",
            "managedNodeGroups[0].name",
        ),
    ],
)
def test_eksctl_wrong_types_name_the_field(text, field):
    with pytest.raises(FormatError) as err:
        eksctl.read_pools(parse_yaml_documents("bad.yaml", text))
    assert err.value.path == "bad.yaml"
    assert field in str(err.value)


_REF = "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}\n"
_TEMPLATE = "spec:\n  template:\n    spec:\n"


@pytest.mark.parametrize(
    ("version", "spec", "field", "says"),
    [
        ("v1", "", "spec", "missing"),
        ("v1", "spec: {}\n", "spec.template", "missing"),
        (
            "v1",
            "spec:\n  template: {metadata: {labels: {a: b}}}\n",
            "spec.template.spec",
            "missing",
        ),
        (
            "v1",
            _TEMPLATE + "      requirements: []\n",
            "spec.template.spec.nodeClassRef",
            "missing",
        ),
        ("v1", _TEMPLATE + _REF, "spec.template.spec.requirements", "missing"),
        (
            "v1",
            _TEMPLATE + "      requirements: null\n" + _REF,
            "spec.template.spec.requirements",
            "missing",
        ),
        (
            "v1",
            _TEMPLATE
            + "      requirements: []\n      nodeClassRef: {kind: EC2NodeClass, name: c}\n",
            "spec.template.spec.nodeClassRef.group",
            "missing",
        ),
        (
            "v1",
            _TEMPLATE + "      requirements: []\n      nodeClassRef: {name: c}\n",
            "spec.template.spec.nodeClassRef.group",
            "missing",
        ),
        (
            "v1",
            _TEMPLATE + "      requirements: []\n" + _REF.replace("name: c", "name: ''"),
            "spec.template.spec.nodeClassRef.name",
            "may not be empty",
        ),
        (
            "v1",
            _TEMPLATE + "      requirements: []\n      nodeClassRef: c\n",
            "spec.template.spec.nodeClassRef",
            "expected a mapping",
        ),
        (
            "v1beta1",
            _TEMPLATE + "      requirements: []\n      nodeClassRef: {kind: EC2NodeClass}\n",
            "spec.template.spec.nodeClassRef.name",
            "missing",
        ),
        (
            "v1beta1",
            _TEMPLATE + "      nodeClassRef: {name: c}\n",
            "spec.template.spec.requirements",
            "missing",
        ),
    ],
    ids=[
        "no spec",
        "no template",
        "no template spec",
        "no nodeClassRef",
        "no requirements",
        "null requirements",
        "no group",
        "name only",
        "empty name",
        "ref not a mapping",
        "v1beta1 ref without name",
        "v1beta1 no requirements",
    ],
)
def test_a_nodepool_without_what_its_crd_requires_is_an_error(version, spec, field, says):
    """The NodePool CRD requires spec.template.spec with nodeClassRef (v1: group, kind and name,
    none empty; v1beta1: name) and requirements: the API server refuses a NodePool without them,
    so Karpenter never made nodes from it -- an error naming the file, the object and the
    field, never a pool read without its node class."""
    text = f"apiVersion: karpenter.sh/{version}\nkind: NodePool\nmetadata: {{name: p}}\n" + spec
    with pytest.raises(FormatError, match=says) as err:
        karpenter.read_pools(parse_yaml_documents("k.yaml", text))
    assert err.value.path == "k.yaml"
    assert err.value.field == f"NodePool/p: {field}"


_PROVISIONER = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\n"


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ("", "Provisioner/p: spec", "requires spec.provider or spec.providerRef"),
        ("spec: null\n", "Provisioner/p: spec", "requires spec.provider or spec.providerRef"),
        ("spec: {}\n", "Provisioner/p: spec", "requires spec.provider or spec.providerRef"),
        (
            "spec:\n  labels: {team: web}\n",
            "Provisioner/p: spec.providerRef",
            "requires spec.provider or spec.providerRef",
        ),
        (
            "spec:\n  provider: {amiFamily: AL2}\n  providerRef: {name: default}\n",
            "Provisioner/p: spec.providerRef",
            "takes exactly one",
        ),
    ],
    ids=["no spec", "null spec", "empty spec", "no provider", "both"],
)
def test_a_provisioner_without_exactly_one_provider_is_an_error(spec, field, reason):
    """Karpenter's v1alpha5 webhook refuses a Provisioner with neither (or both) of
    spec.provider and spec.providerRef: such a file never made nodes, so it is no silent pass."""
    with pytest.raises(FormatError, match=reason) as err:
        karpenter.read_pools(parse_yaml_documents("prov.yaml", _PROVISIONER + spec))
    assert err.value.path == "prov.yaml"
    assert err.value.field == field


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_real_provisioner_reads_only_with_exactly_one_provider(realdata, data):
    """Any part of a real v1alpha5 Provisioner's spec: a pool when it keeps exactly one of
    provider / providerRef, else an error naming the file and the Provisioner — never a pool."""
    from fleetwarden.formats.documents import Document

    files = [p for p in realdata_files("karpenter", ".yaml") if "v1alpha5" in p.name]
    path = data.draw(st.sampled_from(files))
    docs = parse_yaml_documents(str(path), path.read_text())
    (doc,) = [d for d in docs if d.kind == "Provisioner"]
    spec = dict(doc.body["spec"])
    spec.pop("providerRef")
    kept = data.draw(st.sets(st.sampled_from(sorted(spec))))
    spec = {k: spec[k] for k in kept}
    provider = data.draw(st.sampled_from(["none", "provider", "providerRef", "both"]))
    if provider in ("provider", "both"):
        spec["provider"] = {"subnetSelector": {"karpenter.sh/discovery": "x"}}
    if provider in ("providerRef", "both"):
        spec["providerRef"] = {"name": "default"}
    body = {k: v for k, v in doc.body.items() if k != "spec"}
    if spec or data.draw(st.booleans()):  # an empty spec is written {}, null or not at all
        body["spec"] = spec or data.draw(st.sampled_from([{}, None]))
    mutated = [Document(doc.path, doc.index, body), *[d for d in docs if d is not doc]]
    if provider in ("provider", "providerRef"):
        assert [p.name for p in karpenter.read_pools(mutated).pools] == [doc.name]
        return
    with pytest.raises(FormatError) as err:
        karpenter.read_pools(mutated)
    assert err.value.path == str(path)
    assert str(err.value.field).startswith(f"Provisioner/{doc.name}: spec")


_V1_FAMILIES = (
    *("AL2", "AL2023", "Bottlerocket", "Custom"),
    *("Windows2019", "Windows2022", "Windows2025"),
)


def _v1_class_tree(family: str | None, terms: str | None, version: str = "v1") -> str:
    """aws/karpenter-provider-aws examples/v1 shape: a NodePool and its EC2NodeClass."""
    spec = "  role: KarpenterNodeRole\n  subnetSelectorTerms: [{tags: {a: b}}]\n"
    spec += "  securityGroupSelectorTerms: [{tags: {a: b}}]\n"
    spec += f"  amiFamily: {family}\n" if family is not None else ""
    spec += f"  amiSelectorTerms: {terms}\n" if terms is not None else ""
    return (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n"
        "  template:\n    spec:\n      requirements: []\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}\n"
        f"---\napiVersion: karpenter.k8s.aws/{version}\nkind: EC2NodeClass\n"
        f"metadata: {{name: c}}\nspec:\n{spec}"
    )


@settings(max_examples=200, deadline=None)
@given(
    family=st.none() | st.sampled_from([*_V1_FAMILIES, "Ubuntu", "al2023", "Foo"]),
    alias=st.none() | st.sampled_from(["al2@latest", "al2023@latest", "bottlerocket@latest",
                                       "windows2022@latest", "windows2025@latest"]),
    ids=st.booleans(),
)  # fmt: skip
def test_a_v1_ec2_node_class_is_read_only_as_its_crd_admits_it(family, alias, ids):
    """The v1 EC2NodeClass CRD (x-kubernetes-validations): amiSelectorTerms required; amiFamily
    one of its enum, required without an alias, and beside an alias its own family or Custom.
    What it refuses is an error naming the class (Karpenter never made nodes of it); what it
    admits gives the pool with its OS accounted for."""
    terms = [f"{{alias: {alias}}}"] if alias else []
    terms += ["{id: ami-0123}"] if ids else []
    text = _v1_class_tree(family, f"[{', '.join(terms)}]" if terms else None)
    admitted = (
        bool(terms)
        and (family is None or family in _V1_FAMILIES)
        and (family is not None or alias is not None)
        and (family in (None, "Custom") or alias is None or alias.split("@")[0] == family.lower())
    )
    if not admitted:
        with pytest.raises(FormatError) as err:
            karpenter.read_pools(parse_yaml_documents("k.yaml", text))
        assert str(err.value.field).startswith("EC2NodeClass/c: spec.amiSelectorTerms") or (
            str(err.value.field) == "EC2NodeClass/c: spec.amiFamily"
        )
        return
    (spec,) = karpenter.read_pools(parse_yaml_documents("k.yaml", text)).pools
    notes = {a.fact for a in spec.account if "ami" in a.path} | {u.field for u in spec.unresolved}
    assert spec.os_family is not None or family == "Custom" or "osImage" in notes or ids


def test_a_nodepool_whose_node_class_is_missing_says_why_os_and_disk_are_not_compared():
    """Both the OS and the ephemeral disk come from the node class: with none in the tree,
    each is listed as not compared, with the reason (the disk was silently left out). A
    NodePool with no nodeClassRef at all is refused, as its CRD refuses it."""
    text = (
        "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: np}\nspec:\n"
        "  template:\n    spec:\n      requirements: []\n      nodeClassRef: {name: c}\n"
    )
    (spec,) = karpenter.read_pools(parse_yaml_documents("k.yaml", text)).pools
    facts = {a.fact: a.detail for a in spec.account if a.path == "spec.template.spec.nodeClassRef"}
    why = "a node class 'c' is not in the desired-state tree"
    assert facts == {"osImage": why, "diskSizeGiB": why}


def test_a_v1beta1_ec2_node_class_needs_its_ami_family():
    text = _v1_class_tree(None, "[{id: ami-0123}]", version="v1beta1")
    with pytest.raises(FormatError, match="required by the v1beta1") as err:
        karpenter.read_pools(parse_yaml_documents("k.yaml", text))
    assert err.value.field == "EC2NodeClass/c: spec.amiFamily"
    ubuntu = _v1_class_tree("Ubuntu", None, version="v1beta1")  # Ubuntu is a v1beta1 family
    (spec,) = karpenter.read_pools(parse_yaml_documents("k.yaml", ubuntu)).pools
    assert spec.os_family == "ubuntu"


@pytest.mark.parametrize("provider", ["AL2", "[a, b]", "3"], ids=str)
def test_a_provisioner_provider_that_is_not_a_mapping_is_an_error(provider):
    text = _PROVISIONER + f"spec:\n  provider: {provider}\n"
    with pytest.raises(FormatError, match="expected a mapping") as err:
        karpenter.read_pools(parse_yaml_documents("prov.yaml", text))
    assert err.value.field == "Provisioner/p: spec.provider"


@pytest.mark.parametrize("values", ["[abc]", "[]", "['1', '2']", "['-1']", "['1.5']"], ids=str)
@pytest.mark.parametrize("operator", ["Gt", "Lt", "Gte", "Lte"])
def test_a_bound_requirement_needs_one_non_negative_integer(operator, values):
    text = (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n"
        "  template:\n    spec:\n" + _REF + "      requirements:\n"
        f"      - {{key: karpenter.k8s.aws/instance-cpu, operator: {operator}, values: {values}}}\n"
    )
    with pytest.raises(FormatError, match="single non-negative integer") as err:
        karpenter.read_pools(parse_yaml_documents("k.yaml", text))
    assert err.value.field == "NodePool/p: spec.template.spec.requirements[0].values"


def test_karpenter_unknown_operator_is_an_error():
    text = (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n"
        "  template:\n    spec:\n      requirements: [{key: a, operator: Near}]\n" + _REF
    )
    with pytest.raises(FormatError, match="operator"):
        karpenter.read_pools(parse_yaml_documents("k.yaml", text))


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_real_documents_give_pools_or_format_error(realdata, data):
    files = realdata_files("eksctl", ".yaml") + realdata_files("karpenter", ".yaml")
    path = data.draw(st.sampled_from(files))
    docs = parse_yaml_documents(str(path), path.read_text())
    doc = data.draw(st.sampled_from(docs))
    body = _mutate(doc.body, data)
    assume(isinstance(body, dict))  # the YAML layer already rejects non-mapping documents
    from fleetwarden.formats.documents import Document

    mutated = [Document(doc.path, doc.index, body)]
    for reader in (eksctl.read_pools, karpenter.read_pools):
        try:
            reader(mutated)
        except FormatError as exc:
            assert exc.path == str(path)


def _mutate(value, data):
    """Replace one randomly chosen nested value with arbitrary JSON-ish data."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value, key=str)))
        return {**value, key: _mutate(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate(value[i], data), *value[i + 1 :]]
    return data.draw(_json)


# -- node classes and names across the files of one tree ------------------------------------


def _tree(files: dict[str, str]):
    return read_desired([SourceFile(path, text.encode()) for path, text in files.items()])


def _nodepool(name: str) -> str:
    return (
        f"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n"
        "  template:\n    spec:\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}\n"
        "      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]\n"
    )


def _ec2_class(alias: str) -> str:
    return (
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c}\n"
        f"spec:\n  role: r\n  amiSelectorTerms: [{{alias: {alias}}}]\n"
    )


def test_a_node_class_ref_takes_the_class_in_the_pools_own_file():
    got = _tree(
        {
            "a/pool.yaml": _nodepool("np-a") + "---\n" + _ec2_class("bottlerocket@latest"),
            "b/pool.yaml": _nodepool("np-b") + "---\n" + _ec2_class("al2023@latest"),
        }
    )
    families = {p.name: p.os_family for p in got.pools}
    assert families == {"np-a": "bottlerocket", "np-b": "amazonlinux2023"}


def test_a_node_class_defined_in_two_other_files_is_unresolved_naming_both():
    got = _tree(
        {
            "pool.yaml": _nodepool("np"),
            "x/class.yaml": _ec2_class("bottlerocket@latest"),
            "y/class.yaml": _ec2_class("al2023@latest"),
        }
    )
    (pool,) = got.pools
    assert pool.os_family is None and pool.disk_size_gib is None
    (why, *_) = [u.expression for u in pool.unresolved if u.field == "osImage"]
    assert "ambiguous" in why and "x/class.yaml" in why and "y/class.yaml" in why


def test_a_node_class_only_in_another_file_is_still_found():
    got = _tree({"pool.yaml": _nodepool("np"), "class.yaml": _ec2_class("bottlerocket@latest")})
    assert [p.os_family for p in got.pools] == ["bottlerocket"]


@pytest.mark.parametrize("same_file", [True, False], ids=["one file", "two files"])
def test_two_nodepools_with_one_name_are_an_error_naming_both_places(same_file):
    docs = [_nodepool("np") + "---\n" + _ec2_class("al2023@latest"), _nodepool("np")]
    files = {"a.yaml": "---\n".join(docs)} if same_file else {"a.yaml": docs[0], "b.yaml": docs[1]}
    got = _tree(files)
    problems = [s for s in got.skipped if s.problem]
    assert len(problems) == 1, got.skipped
    assert "defined twice" in problems[0].reason and "a.yaml:3" in problems[0].reason
    assert len([p for p in got.pools if p.name == "np"]) <= 1


def test_a_provisioner_and_a_nodepool_may_share_a_name():
    provisioner = (
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: np}\n"
        "spec: {providerRef: {name: default}}\n"
    )
    got = _tree({"a.yaml": _nodepool("np") + "---\n" + provisioner})
    assert sorted(p.name for p in got.pools) == ["np", "np"]
    assert not got.skipped


def test_a_v1beta1_ref_without_kind_finds_the_aks_node_class():
    pool = (
        "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: gp}\nspec:\n"
        "  template:\n    spec:\n      nodeClassRef: {name: default}\n      requirements: []\n"
        "---\napiVersion: karpenter.azure.com/v1beta1\nkind: AKSNodeClass\n"
        "metadata: {name: default}\nspec: {imageFamily: AzureLinux}\n"
    )
    (spec,) = karpenter.read_pools(parse_yaml_documents("gp.yaml", pool)).pools
    assert spec.os_family == "azurelinux"
    assert not spec.unresolved


def test_a_ref_without_kind_matching_two_kinds_is_unresolved():
    text = (
        "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: gp}\nspec:\n"
        "  template:\n    spec:\n      nodeClassRef: {name: default}\n      requirements: []\n"
        "---\napiVersion: karpenter.azure.com/v1beta1\nkind: AKSNodeClass\n"
        "metadata: {name: default}\nspec: {imageFamily: AzureLinux}\n"
        "---\napiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\n"
        "metadata: {name: default}\nspec: {amiFamily: AL2}\n"
    )
    (spec,) = karpenter.read_pools(parse_yaml_documents("gp.yaml", text)).pools
    assert spec.os_family is None
    (why,) = {u.expression for u in spec.unresolved}
    assert "AKSNodeClass" in why and "EC2NodeClass" in why


def test_a_label_key_with_dots_is_accounted_by_its_own_path_and_line():
    text = (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: web}\nspec:\n"
        "  template:\n    metadata:\n      labels:\n"
        "        plain: x\n        team.example.com/owner: web\n"
        "    spec:\n      requirements: []\n" + _REF
    )
    (spec,) = karpenter.read_pools(parse_yaml_documents("np.yaml", text)).pools
    assert spec.labels == {"plain": "x", "team.example.com/owner": "web"}
    assert not [a for a in spec.account if a.status is FieldStatus.UNACCOUNTED]
    (owner,) = [a for a in spec.account if a.fact == "labels.team.example.com/owner"]
    assert owner.origin == "np.yaml:9"


def _account(spec):
    return {(a.path, a.status.value) for a in spec.account}


def test_kubelet_blocks_and_an_inline_provider_are_accounted_by_their_paths():
    alpha5 = (
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec:\n"
        "  provider: {amiFamily: Bottlerocket, subnetSelector: {a: b}, tags: {t: v}}\n"
        "  kubeletConfiguration: {maxPods: 30, systemReserved: {cpu: 100m}}\n"
    )
    (spec,) = karpenter.read_pools(parse_yaml_documents("p.yaml", alpha5)).pools
    assert spec.allocatable == {"pods": "30"}
    assert {
        ("spec.kubeletConfiguration.maxPods", "compared"),
        ("spec.kubeletConfiguration.systemReserved", "ignored"),
        ("spec.provider.subnetSelector", "ignored"),
        ("spec.provider.tags", "ignored"),
    } <= _account(spec)
    beta1 = (
        "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: p}\nspec:\n"
        "  template:\n    spec:\n      kubelet: {maxPods: 50, systemReserved: {cpu: 100m}}\n"
        "      nodeClassRef: {name: c}\n      requirements: []\n"
    )
    (spec,) = karpenter.read_pools(parse_yaml_documents("p.yaml", beta1)).pools
    assert spec.allocatable == {"pods": "50"}
    assert {
        ("spec.template.spec.kubelet.maxPods", "compared"),
        ("spec.template.spec.kubelet.systemReserved", "ignored"),
    } <= _account(spec)
    assert not [a for a in spec.account if a.status is FieldStatus.UNACCOUNTED]


def test_a_v1_nodepool_kubelet_is_not_a_v1_field_and_leaves_the_class_max_pods():
    text = (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n"
        "  template:\n    spec:\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}\n"
        "      requirements: []\n"
        "      kubelet: {maxPods: 50}\n"
        "---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c}\n"
        "spec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  kubelet: {maxPods: 42}\n"
    )
    (spec,) = karpenter.read_pools(parse_yaml_documents("p.yaml", text)).pools
    assert spec.allocatable == {"pods": "42"}
    assert ("spec.template.spec.kubelet", "unaccounted") in _account(spec)
    assert ("EC2NodeClass/c: spec.kubelet.maxPods", "compared") in _account(spec)
