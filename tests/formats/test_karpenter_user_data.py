"""A Karpenter AL2023 node class's userData beside the NodeConfig Karpenter appends: the taints the
nodes get follow nodeadm's merge and the kubelet's precedence (a --register-with-taints flag in
the user's NodeConfig replaces the registerWithTaints Karpenter generates from the NodePool;
the user's own registerWithTaints is replaced by Karpenter's), and Karpenter's copying of the
NodePool's taints onto the Node, which depends on its release -- never the two lists added up."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import FieldStatus, Taint
from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.formats.errors import FormatError

_POOL = """\
apiVersion: API
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: REF
      requirements: []
      taints: TAINTS
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: FAMILY
  amiSelectorTerms: [{alias: al2023@latest}]
  role: r
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
  userData: |
    MIME-Version: 1.0
    Content-Type: multipart/mixed; boundary="//"

    --//
    Content-Type: application/node.eks.aws

    apiVersion: node.eks.aws/v1alpha1
    kind: NodeConfig
    spec:
      kubelet:
        KUBELET
    --//--
"""
_REFS = {
    "karpenter.sh/v1": "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}",
    "karpenter.sh/v1beta1": "{name: default}",
}


def _taint_items(taints: list[Taint]) -> str:
    return json.dumps(
        [
            {"key": t.key, "effect": t.effect} | ({"value": t.value} if t.value else {})
            for t in taints
        ]
    )


def _pool(
    pool_taints: list[Taint],
    kubelet: str,
    *,
    api: str = "karpenter.sh/v1",
    family: str = "AL2023",
):
    text = (
        _POOL.replace("API", api)
        .replace("REF", _REFS[api])
        .replace("TAINTS", _taint_items(pool_taints))
        .replace("FAMILY", family)
        .replace("KUBELET", kubelet)
    )
    (pool,) = read_desired([SourceFile("np.yaml", text.encode(), direct=True)]).pools
    return pool


def _flag(taints: list[Taint]) -> str:
    items = ",".join(
        f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in taints
    )
    return f"flags: {json.dumps(['--register-with-taints=' + items])}"


_A1, _A2, _B = (
    Taint("a", "1", "NoSchedule"),
    Taint("a", "2", "NoSchedule"),
    Taint("b", None, "NoExecute"),
)
_C = Taint("c", None, "NoSchedule")


def test_v1beta1_flag_taints_beside_the_node_pool_taints_it_does_not_cover():
    """Karpenter up to v1.0 (all that serve v1beta1) copies the NodePool's taints onto the Node,
    adding those of a key and effect it lacks: the flag's a=2 stays, b is added."""
    pool = _pool([_A1, _B], _flag([_A2, _C]), api="karpenter.sh/v1beta1")
    assert set(pool.taints) == {_A2, _B, _C}
    notes = [a for a in pool.account if a.path == "spec.template.spec.taints"]
    assert any(a.status is FieldStatus.IGNORED and "a=1:NoSchedule" in a.detail for a in notes)


def test_v1_flag_leaves_node_pool_taints_it_does_not_cover_unresolved():
    """v1.0-v1.4 copy them, v1.5+ label the node karpenter.sh/do-not-sync-taints and do not:
    the release is not in the files. Both lists were expected."""
    pool = _pool([_A1, _B], _flag([_A2, _C]))
    assert "taints" in pool.unresolved_fields
    assert any("v1.5" in u.expression for u in pool.unresolved if u.field == "taints")


def test_v1_flag_covering_every_node_pool_taint_gives_the_flags_taints():
    pool = _pool([_A1], _flag([_A2, _C]))
    assert "taints" not in pool.unresolved_fields
    assert set(pool.taints) == {_A2, _C}


def test_the_users_register_with_taints_config_is_replaced_by_karpenters():
    """Karpenter's NodeConfig part comes last and always sets registerWithTaints: nodeadm's merge
    keeps it, so the user's configuration taints never reach the kubelet (they were expected)."""
    kubelet = f"config: {{registerWithTaints: {_taint_items([_C])}}}"
    for api in _REFS:
        pool = _pool([_A1], kubelet, api=api)
        assert set(pool.taints) == {_A1} and "taints" not in pool.unresolved_fields
        notes = [a for a in pool.account if a.path.endswith("spec.userData")]
        assert any(a.status is FieldStatus.IGNORED and "replaced" in a.detail for a in notes)


def test_a_custom_family_reads_the_user_data_as_it_is():
    """Custom: Karpenter passes the user data on unchanged and copies the NodePool's taints."""
    pool = _pool([_B], _flag([_C]), family="Custom")
    assert set(pool.taints) == {_B, _C}


_TAINTS = st.lists(
    st.builds(
        Taint,
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([None, "1", "2"]),
        st.sampled_from(["NoSchedule", "NoExecute"]),
    ),
    max_size=4,
    unique_by=lambda t: (t.key, t.effect),
)


@settings(max_examples=60, deadline=None)
@given(_TAINTS, _TAINTS.filter(bool), st.sampled_from(sorted(_REFS)))
def test_flag_taints_against_node_pool_taints(pool_taints, flag_taints, api):
    """The flag's taints always; a NodePool taint of a key and effect the flag has, never; one it
    lacks, beside them on v1beta1 and unresolved on v1."""
    pool = _pool(pool_taints, _flag(flag_taints), api=api)
    uncovered = [
        p
        for p in pool_taints
        if not any((f.key, f.effect) == (p.key, p.effect) for f in flag_taints)
    ]
    if api == "karpenter.sh/v1" and uncovered:
        assert "taints" in pool.unresolved_fields
        return
    assert "taints" not in pool.unresolved_fields
    assert set(pool.taints) == {*flag_taints, *uncovered}


def _plain(user_data: str, family: str = "AL2023"):
    head = _POOL.split("  userData: |")[0]
    text = (
        head.replace("API", "karpenter.sh/v1")
        .replace("REF", _REFS["karpenter.sh/v1"])
        .replace("TAINTS", "[]")
        .replace("FAMILY", family)
        + "  userData: |\n"
        + "".join(f"    {line}\n" for line in user_data.splitlines())
    )
    return read_desired([SourceFile("np.yaml", text.encode(), direct=True)])


def test_plain_al2023_user_data_that_unmarshals_into_a_map_is_a_nodeconfig_part():
    """Karpenter makes user data that is no MIME message a NodeConfig part where it unmarshals
    into a map (parseUserData), else a shell script: a mapping that is no NodeConfig is a part
    nodeadm refuses -- it was read as a script that sets nothing."""
    for user_data in ("spec:\n  kubelet:\n    flags: [--max-pods=20]", "echo greeting: hello"):
        with pytest.raises(FormatError, match="nodeadm refuses it") as caught:
            _plain(user_data)
        assert caught.value.field == "EC2NodeClass/default: spec.userData"
    config = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n"
    (pool,) = _plain(config + "    flags: [--max-pods=20]").pools
    assert pool.allocatable["pods"] == "20"
    for script in ("#!/bin/bash\necho hello", "#!/bin/bash\nkubelet --max-pods=20"):
        (pool,) = _plain(script).pools  # a YAML string: a shell script part
    (pool,) = _plain("echo greeting: hello", family="Custom").pools  # passed on as it is


def test_the_users_max_pods_config_is_replaced_by_karpenters_and_a_flag_beats_both():
    """Karpenter's NodeConfig always sets maxPods (the class's kubelet.maxPods, else the instance
    type's pod count) and comes last: the user's maxPods never applies (it was expected, over
    the class's); a --max-pods flag beats every configuration."""
    for class_kubelet in ("", "  kubelet: {maxPods: 30}\n"):
        text = _POOL.replace("  userData: |", class_kubelet + "  userData: |")
        for kubelet, pods in (("config: {maxPods: 50}", None), ("flags: [--max-pods=20]", "20")):
            body = (
                text.replace("API", "karpenter.sh/v1")
                .replace("REF", _REFS["karpenter.sh/v1"])
                .replace("TAINTS", "[]")
                .replace("FAMILY", "AL2023")
                .replace("KUBELET", kubelet)
            )
            (pool,) = read_desired([SourceFile("np.yaml", body.encode(), direct=True)]).pools
            expected = pods or ("30" if class_kubelet else None)
            assert pool.allocatable.get("pods") == expected
            if pods is None:
                notes = [a for a in pool.account if a.path.endswith("spec.userData")]
                assert any("maxPods 50: replaced" in a.detail for a in notes)


def test_v1beta1_user_max_pods_flag_beats_the_node_pools_kubelet_max_pods_on_al2023():
    """On AL2023 Karpenter writes a v1beta1 NodePool's kubelet.maxPods into its NodeConfig's
    kubelet configuration; a --max-pods flag in the userData beats it (flags beat the
    configuration): the flag's value is expected, the NodePool's listed as ignored. On AL2
    Karpenter's own --max-pods goes to bootstrap.sh after the user's parts: the NodePool's wins."""
    text = _POOL.replace(
        "      taints: TAINTS\n", "      taints: []\n      kubelet: {maxPods: 30}\n"
    )
    body = text.replace("API", "karpenter.sh/v1beta1").replace("REF", _REFS["karpenter.sh/v1beta1"])
    al2023 = body.replace("FAMILY", "AL2023").replace("KUBELET", "flags: [--max-pods=20]")
    (pool,) = read_desired([SourceFile("np.yaml", al2023.encode(), direct=True)]).pools
    assert pool.allocatable["pods"] == "20"
    (note,) = [a for a in pool.account if a.path.endswith("kubelet.maxPods")]
    assert note.status == FieldStatus.IGNORED and "--max-pods=20" in note.detail
    al2 = (
        body.replace("FAMILY", "AL2")
        .replace("{alias: al2023@latest}", "{alias: al2@latest}")
        .split("  userData: |")[0]
        + "  userData: |\n    #!/bin/bash\n"
        + "    /etc/eks/bootstrap.sh c --kubelet-extra-args '--max-pods=20'\n"
    )
    (pool,) = read_desired([SourceFile("np.yaml", al2.encode(), direct=True)]).pools
    assert pool.allocatable["pods"] == "30"
    notes = [a for a in pool.account if a.path.endswith("spec.userData")]
    assert any("max-pods 20: Karpenter passes" in a.detail for a in notes)
