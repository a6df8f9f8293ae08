"""Labels, taints and max-pods set at boot: the forms terraform-aws-eks, eksctl and kubeadm users
write (kubelet flags nested in ``--kubelet-extra-args``, nodeadm NodeConfig, Bottlerocket TOML),
and that no text whatever makes the parsers raise."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import Taint
from fleetwarden.formats import bootstrap

AL2_ARGS = (
    "--container-runtime containerd --kubelet-extra-args '--node-labels=node.kubernetes.io/"
    "lifecycle=spot,team=data --register-with-taints=dedicated=data:NoSchedule --max-pods=20'"
)
NODEADM = """\
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags:
      - --node-labels=node.kubernetes.io/lifecycle=spot
    config:
      maxPods: 58
      registerWithTaints:
        - key: gpu
          value: "true"
          effect: NoSchedule
"""
TOML = """\
[settings.kernel]
lockdown = "integrity"

[settings.kubernetes.node-labels]
"label1" = "foo"
label2 = "bar"

[settings.kubernetes.node-taints]
dedicated = "experimental:PreferNoSchedule"
"node.cilium.io/agent-not-ready" = ["true:NoExecute"]
"""


def test_al2_flags_nested_in_kubelet_extra_args_are_read():
    facts = bootstrap.from_kubelet_flags(AL2_ARGS)
    assert facts.labels == {"node.kubernetes.io/lifecycle": "spot", "team": "data"}
    assert facts.taints == [Taint("dedicated", "data", "NoSchedule")]
    assert facts.max_pods == 20


def test_nodeadm_flags_and_kubelet_config_are_read():
    facts = bootstrap.from_nodeadm(NODEADM)
    assert facts.labels == {"node.kubernetes.io/lifecycle": "spot"}
    assert facts.taints == [Taint("gpu", "true", "NoSchedule")]
    assert facts.max_pods == 58


def test_bottlerocket_toml_labels_and_taints_with_quoted_keys_and_lists():
    facts = bootstrap.from_bottlerocket_toml(TOML)
    assert facts.labels == {"label1": "foo", "label2": "bar"}
    assert set(facts.taints) == {
        Taint("dedicated", "experimental", "PreferNoSchedule"),
        Taint("node.cilium.io/agent-not-ready", "true", "NoExecute"),
    }


def test_toml_without_kubernetes_settings_sets_nothing():
    assert not bootstrap.from_bottlerocket_toml('[settings.kernel]\nlockdown = "integrity"\n').found


@pytest.mark.parametrize(
    "text",
    ["--node-labels=${NODE_LABELS}", "--node-labels=$LABELS", "--node-labels={{ .Labels }}"],
)
def test_variables_are_unresolved_never_guessed(text):
    facts = bootstrap.from_kubelet_flags(text)
    assert facts.labels == {} and facts.unresolved


@pytest.mark.parametrize(
    "text",
    [
        "a=" + "[" * 100_000,
        "[settings\nx=" + "{" * 50_000,
        "NodeConfig\n" + "[" * 100_000,
        "kind: NodeConfig\nspec: [1]",
        "kind: NodeConfig\nspec: {kubelet: {flags: [1, null], config: {maxPods: true}}}",
        "[settings.kubernetes]\nnode-taints = 5\nnode-labels = [1]",
        '"unbalanced --node-labels=a=b --register-with-taints=:::,=:',
    ],
    ids=[
        "deep-toml",
        "deep-toml-settings",
        "deep-yaml",
        "odd-spec",
        "odd-types",
        "odd-toml",
        "odd",
    ],
)
def test_hostile_text_gives_facts_not_an_exception(text):
    for parse in (
        bootstrap.from_user_data,
        bootstrap.from_kubelet_flags,
        bootstrap.from_nodeadm,
        bootstrap.from_bottlerocket_toml,
    ):
        assert isinstance(parse(text), bootstrap.BootFacts)


FRAGMENTS = st.sampled_from(
    [
        "--node-labels=",
        "--register-with-taints=",
        "--max-pods=",
        "²",  # str.isdigit() says yes, int() refuses
        "--kubelet-extra-args '",
        "'",
        '"',
        "=",
        ":",
        ",",
        "NoSchedule",
        "kind: NodeConfig\n",
        "spec:\n  kubelet:\n    flags:\n      - ",
        "---\n",
        "Content-Type: application/node.eks.aws\n\n",
        "--//\n",
        "[settings.kubernetes.node-labels]\n",
        "[settings.kubernetes.node-taints]\n",
        "a = ",
        '"x:NoExecute"\n',
        "[",
        "{",
        "${VAR}",
        "\n",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(),
        st.lists(st.one_of(FRAGMENTS, st.text(max_size=8)), max_size=30).map("".join),
    )
)
def test_user_data_parsing_never_raises_on_arbitrary_text(text: str) -> None:
    """Every parser returns facts for any text: a value only it may drop is never a crash."""
    for parse in (
        bootstrap.from_user_data,
        bootstrap.from_kubelet_flags,
        bootstrap.from_nodeadm,
        bootstrap.from_bottlerocket_toml,
    ):
        facts = parse(text)
        assert all(
            t.effect in ("NoSchedule", "PreferNoSchedule", "NoExecute") for t in facts.taints
        )
        assert facts.max_pods is None or isinstance(facts.max_pods, int)
