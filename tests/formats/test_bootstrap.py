"""Labels, taints and max-pods set at boot: the forms terraform-aws-eks, eksctl and kubeadm users
write (kubelet flags nested in ``--kubelet-extra-args``, nodeadm NodeConfig, Bottlerocket TOML),
read as the kubelet reads them: a value it refuses to start with is a ``KubeletFlagError``
(never dropped), repeated flags add up or replace each other as in the kubelet, and no text
whatever makes the parsers raise anything else."""

from __future__ import annotations

import base64
import gzip
import json
import quopri
import shlex

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import Taint
from fleetwarden.formats import bootstrap
from fleetwarden.formats import shell as shell_text

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
def test_hostile_text_gives_facts_or_a_refusal_not_a_crash(text):
    for parse in (
        bootstrap.from_user_data,
        bootstrap.from_kubelet_flags,
        bootstrap.from_nodeadm,
        bootstrap.from_bottlerocket_toml,
    ):
        try:
            assert isinstance(parse(text), bootstrap.BootFacts)
        except bootstrap.KubeletFlagError as exc:
            assert "refuses" in str(exc)


FRAGMENTS = st.sampled_from(
    [
        "--node-labels=",
        "--register-with-taints=",
        "--max-pods=",
        "--max-pods ",
        "0",
        "0x",
        "noschedule",
        "-",
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
    """Every parser returns facts for any text, or refuses it saying the kubelet would: never
    another exception."""
    for parse in (
        bootstrap.from_user_data,
        bootstrap.from_kubelet_flags,
        bootstrap.from_nodeadm,
        bootstrap.from_bottlerocket_toml,
    ):
        try:
            facts = parse(text)
        except bootstrap.KubeletFlagError as exc:
            assert "refuses" in str(exc)
            continue
        assert all(
            t.effect in ("NoSchedule", "PreferNoSchedule", "NoExecute") for t in facts.taints
        )
        assert facts.max_pods is None or isinstance(facts.max_pods, int)


# ---------------------------------------------------------------------------------------------
# Values the kubelet refuses, repeated flags, --max-pods as pflag reads it


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("--kubelet-extra-args '--register-with-taints=a=b:noschedule'", "spelt exactly"),
        ("--kubelet-extra-args '--register-with-taints=a=b'", "has no effect"),
        ("--register-with-taints=a:NoSchedule,a=b:NoSchedule", "a second taint"),
        ("--register-with-taints=a:NoSchedule,", "has no effect"),
        ("--register-with-taints=a b:NoSchedule", "has no effect"),  # 'a' alone: a word
        ("KUBELET_EXTRA_ARGS=--register-with-taints=a:NoExecute:x", "key[=value]:Effect"),
        ("--kubelet-extra-args '--node-labels=team'", "not key=value"),
        ("--node-labels=team=a!", "not a label value"),
        ("--node-labels=-team=a", "not a label key"),
        ("--kubelet-extra-args '--max-pods=058'", "leading 0 is octal"),
        ("--kubelet-extra-args '--max-pods= 58'", "not an integer"),  # '--max-pods=' '58'
        ("--max-pods=58.0", "not an integer"),
        ("--max-pods=-1", "negative"),
        ("--max-pods=4294967296", "not an integer"),
        (
            "--kubelet-extra-args '--node-labels=node-role.kubernetes.io/worker='",
            "refuses to start",
        ),
        ("KUBELET_EXTRA_ARGS=--node-labels=team=a,kubernetes.io/role=x", "refuses to start"),
    ],
)
def test_a_kubelet_flag_the_kubelet_refuses_in_a_script_is_an_error(text, says):
    with pytest.raises(bootstrap.KubeletFlagError, match="kubelet flag --") as caught:
        bootstrap.from_user_data(f"#!/bin/bash\n/etc/eks/bootstrap.sh c {text}\n")
    assert says in str(caught.value)


def test_max_pods_is_read_as_pflag_reads_an_int32():
    """A leading zero is octal (Go's strconv.ParseInt base 0), not a decimal with padding."""
    assert bootstrap.from_kubelet_flags("--max-pods=010").max_pods == 8
    assert bootstrap.from_kubelet_flags("--max-pods=0x3a").max_pods == 58
    assert bootstrap.from_kubelet_flags("--max-pods=5_8").max_pods == 58
    assert bootstrap.from_kubelet_flags("--kubelet-extra-args '--max-pods 58'").max_pods == 58


def test_repeated_flags_act_as_in_the_kubelet():
    """MapStringString adds every --node-labels up (a later key wins); RegisterWithTaintsVar and
    Int32Var keep the last value, and the earlier ones are listed as ignored, not dropped."""
    facts = bootstrap.from_kubelet_flags(
        "--kubelet-extra-args '--node-labels=a=1,b=2 --register-with-taints=x=y:NoSchedule "
        "--max-pods=20 --node-labels=b=3,c=4 --register-with-taints=z:NoExecute --max-pods=30'"
    )
    assert facts.labels == {"a": "1", "b": "3", "c": "4"}
    assert facts.taints == [Taint("z", None, "NoExecute")]
    assert facts.max_pods == 30
    assert len(facts.ignored) == 2
    assert any("x=y:NoSchedule" in i and "keeps the last" in i for i in facts.ignored)
    assert any("--max-pods=20" in i for i in facts.ignored)
    cleared = bootstrap.from_kubelet_flags(
        "--register-with-taints=a:NoSchedule --register-with-taints="
    )
    assert cleared.taints == [] and cleared.found and cleared.ignored


def test_a_variable_in_the_last_taints_flag_leaves_them_unresolved():
    facts = bootstrap.from_kubelet_flags(
        "--register-with-taints=a:NoSchedule --register-with-taints=$T"
    )
    assert facts.taints == [] and facts.unresolved == ["--register-with-taints=$T"]
    later = bootstrap.from_kubelet_flags(
        "--register-with-taints=$T --register-with-taints=a:NoSchedule"
    )
    assert later.taints == [Taint("a", None, "NoSchedule")] and not later.unresolved


def test_a_taint_marked_for_removal_is_listed_as_not_registered():
    """ParseTaints reads ``key:Effect-`` as a taint to remove, which the flag ignores."""
    facts = bootstrap.from_kubelet_flags("--register-with-taints=a:NoSchedule-,b:NoExecute")
    assert facts.taints == [Taint("b", None, "NoExecute")]
    assert facts.ignored and "a:NoSchedule-" in facts.ignored[0]


@pytest.mark.parametrize(
    "text",
    [
        "sed -i 's/--max-pods=[0-9]*/--max-pods=20/' /etc/eks/bootstrap.sh",
        "grep -q -- --max-pods /etc/kubernetes/kubelet.env",
        "sed -i 's|--register-with-taints=[^ ]*||' /etc/default/kubelet",
    ],
)
def test_a_flag_inside_other_text_the_kubelet_would_refuse_is_unresolved_not_an_error(text):
    """A sed expression or ``grep -- --max-pods`` mentions a flag without passing it to the
    kubelet: left unresolved with the reason, never an error nor a silent pass."""
    facts = bootstrap.from_user_data(text)
    assert facts.found and facts.unresolved and facts.max_pods is None and not facts.taints
    assert "not read as a kubelet argument" in facts.unresolved[-1]


def test_flags_written_into_an_environment_file_are_kubelet_arguments():
    facts = bootstrap.from_user_data(
        "sed -i '/^KUBELET_EXTRA_ARGS=/a KUBELET_EXTRA_ARGS+="
        '" --register-with-taints=x:NoSchedule"\' /etc/eks/bootstrap.sh\n'
        'echo "KUBELET_EXTRA_ARGS=--node-labels=team=a" >> /etc/default/kubelet\n'
    )
    assert facts.taints == [Taint("x", None, "NoSchedule")] and facts.labels == {"team": "a"}
    with pytest.raises(bootstrap.KubeletFlagError):
        bootstrap.from_user_data('echo "KUBELET_EXTRA_ARGS=--max-pods=0x" >> /etc/default/kubelet')


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"registerWithTaints": [{"key": "a", "effect": "noSchedule"}]}, "spelt exactly"),
        ({"registerWithTaints": [{"key": "a"}]}, "spelt exactly"),
        ({"registerWithTaints": ["a:NoSchedule"]}, "not a taint object"),
        ({"registerWithTaints": [{"key": "a b", "effect": "NoSchedule"}]}, "not a taint key"),
        (
            {"registerWithTaints": [{"key": "a", "effect": "NoSchedule"}] * 2},
            "a second taint",
        ),
        ({"maxPods": "58"}, "not an integer"),
        ({"maxPods": -1}, "negative"),
    ],
)
def test_a_kubelet_configuration_value_the_kubelet_refuses_is_an_error(config, says):
    with pytest.raises(bootstrap.KubeletFlagError, match="kubelet configuration") as caught:
        bootstrap.kubelet_config(bootstrap.BootFacts(), config)
    assert says in str(caught.value)


def test_a_bottlerocket_taint_with_an_effect_the_kubelet_refuses_is_an_error():
    """Bottlerocket's own check takes any alphanumeric effect; the kubelet does not."""
    text = '[settings.kubernetes.node-taints]\ndedicated = "gpu:noschedule"\n'
    with pytest.raises(bootstrap.KubeletFlagError, match="spelt exactly"):
        bootstrap.from_bottlerocket_toml(text)
    variable = bootstrap.from_bottlerocket_toml(
        '[settings.kubernetes.node-taints]\ndedicated = "${T}"\n'
    )
    assert variable.unresolved and not variable.taints


_LABEL_KEYS = st.from_regex(
    r"[a-z][a-z0-9]{0,6}(\.example\.com/[a-z][a-z0-9]{0,6})?", fullmatch=True
)
_LABEL_VALUES = st.from_regex(r"([a-z0-9][a-z0-9]{0,6})?", fullmatch=True)
_TAINTS = st.lists(
    st.tuples(
        _LABEL_KEYS, _LABEL_VALUES, st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])
    ),
    max_size=3,
    unique_by=lambda t: (t[0], t[2]),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("labels"), st.dictionaries(_LABEL_KEYS, _LABEL_VALUES, max_size=3)),
            st.tuples(st.just("taints"), _TAINTS),
            st.tuples(st.just("pods"), st.integers(0, 2**31 - 1)),
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_a_kubelet_command_line_gives_what_the_kubelet_would_register(flags, nested):
    """Whatever the order and repetition of the flags: labels add up, the last taints and
    max-pods win."""
    words, labels, taints, pods = [], {}, None, None
    for kind, value in flags:
        if kind == "labels":
            words.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in value.items()))
            labels.update(value)
        elif kind == "taints":
            words.append(
                "--register-with-taints="
                + ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in value)
            )
            taints = [Taint(k, v or None, e) for k, v, e in value]
        else:
            words.append(f"--max-pods={value}")
            pods = value
    line = " ".join(words)
    text = f"/etc/eks/bootstrap.sh c --kubelet-extra-args '{line}'" if nested else f"kubelet {line}"
    facts = bootstrap.from_kubelet_flags(text)
    assert facts.labels == labels
    assert facts.taints == (taints or [])
    assert facts.max_pods == pods
    assert not facts.unresolved


# ---------------------------------------------------------------------------------------------
# Labels in the kubernetes.io / k8s.io namespaces (ValidateKubeletFlags, IsKubeletLabel)

# the kubelet's list (its error message: "or be in the specifically allowed set (...)")
_WELL_KNOWN = {
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
}
_WORDS = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
# namespaces the kubelet may not set a label in: node-role.kubernetes.io, app.k8s.io ...
_REFUSED_NAMESPACES = st.builds(
    lambda sub, domain: f"{sub}.{domain}" if sub else domain,
    st.one_of(st.just(""), st.just("node-role"), _WORDS).filter(
        lambda sub: sub not in ("kubelet", "node")
    ),
    st.sampled_from(["kubernetes.io", "k8s.io"]),
)
_ALLOWED_KEYS = st.one_of(
    st.builds(
        lambda sub, name: f"{sub}kubelet.kubernetes.io/{name}",
        st.just("") | _WORDS.map(lambda w: w + "."),
        _WORDS,
    ),
    st.builds(
        lambda sub, name: f"{sub}node.kubernetes.io/{name}",
        st.just("") | _WORDS.map(lambda w: w + "."),
        _WORDS,
    ),
    st.sampled_from(sorted(_WELL_KNOWN)),
)


@settings(max_examples=200, deadline=None)
@given(_REFUSED_NAMESPACES, _WORDS, st.sampled_from(["", "x"]), st.booleans())
def test_a_label_the_kubelet_may_not_set_is_refused_where_it_is_a_kubelet_argument(
    namespace, name, value, nested
):
    """``node-role.kubernetes.io/worker=`` and any other kubernetes.io / k8s.io label outside
    the kubelet's own namespaces: ValidateKubeletFlags returns an error and the kubelet does
    not start (no node of the pool joins), so it is refused, never expected on the nodes."""
    key = f"{namespace}/{name}"
    assume(key not in _WELL_KNOWN)
    flag = f"--node-labels=team=a,{key}={value}"
    text = f"/etc/eks/bootstrap.sh c --kubelet-extra-args '{flag}'" if nested else f"kubelet {flag}"
    with pytest.raises(bootstrap.KubeletFlagError, match="refuses to start") as caught:
        bootstrap.from_user_data(text)
    assert key in str(caught.value)


@settings(max_examples=100, deadline=None)
@given(_ALLOWED_KEYS, st.sampled_from(["", "x"]))
def test_a_label_in_the_kubelets_own_namespaces_is_read(key, value):
    facts = bootstrap.from_user_data(f"--kubelet-extra-args '--node-labels={key}={value}'")
    assert facts.labels == {key: value}


@settings(max_examples=100, deadline=None)
@given(_REFUSED_NAMESPACES, _WORDS)
def test_a_label_the_kubelet_may_not_set_inside_other_text_is_ignored_with_the_reason(
    namespace, name
):
    """Inside a ``sed`` expression the flag may not reach the kubelet; the label is on no Node
    either way: listed as ignored, saying why, and not expected."""
    key = f"{namespace}/{name}"
    assume(key not in _WELL_KNOWN)
    facts = bootstrap.from_user_data(f"sed -i 's|^A=|A=--node-labels={key}=x |' /etc/x")
    assert key not in facts.labels
    assert any(key in note and "refuses to start" in note for note in facts.ignored)


def test_nodeadm_flags_and_bottlerocket_labels_the_kubelet_may_not_set_are_refused():
    """nodeadm hands ``kubelet.flags`` to the kubelet, Bottlerocket its ``node-labels`` as
    ``--node-labels``: the same refusal."""
    nodeadm = NODEADM.replace("lifecycle=spot", "lifecycle=spot,node-role.kubernetes.io/x=")
    with pytest.raises(bootstrap.KubeletFlagError, match=r"node-role\.kubernetes\.io/x"):
        bootstrap.from_user_data(nodeadm)
    toml = '[settings.kubernetes.node-labels]\n"node-role.kubernetes.io/worker" = ""\n'
    with pytest.raises(bootstrap.KubeletFlagError, match="refuses to start"):
        bootstrap.from_user_data(toml)


# ---------------------------------------------------------------------------------------------
# MIME multi-part user data: a NodeConfig part beside shell script parts

_MIME_HEAD = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n'
_NODECONFIG_PART = """\
--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags: [--node-labels=team=a]
    config: {maxPods: 30, registerWithTaints: TAINTS}

"""
_SCRIPT_PART = """\
--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo 'KUBELET_EXTRA_ARGS=FLAGS' >> /etc/sysconfig/kubelet
"""


def _mime(taints: str = "[]", flags: str = "--register-with-taints=gpu=true:NoSchedule") -> str:
    parts = _NODECONFIG_PART.replace("TAINTS", taints) + _SCRIPT_PART.replace("FLAGS", flags)
    return _MIME_HEAD + parts + "--//--\n"


def test_a_shell_part_that_only_sets_taints_beside_a_nodeconfig_is_read():
    """The NodeConfig part sets labels and max-pods, the shell part only taints: both are read
    (the taints were dropped, because the script added no label the NodeConfig lacked)."""
    facts = bootstrap.from_user_data(_mime())
    assert facts.taints == [Taint("gpu", "true", "NoSchedule")]
    assert facts.labels == {"team": "a"} and facts.max_pods == 30 and not facts.unresolved


@pytest.mark.parametrize(
    "variant",
    [
        lambda text: text.replace("\n", "\r\n"),  # CRLF, as MIME writers often emit
        lambda text: text.removesuffix("--//--\n"),  # no closing delimiter
        lambda text: text.replace('boundary="//"', "boundary=//"),  # unquoted parameter
        lambda text: text.replace("--//--\n", "--//--\n--node-labels=ignored=x\n"),  # epilogue
        lambda text: text.removeprefix(_MIME_HEAD),  # parts pasted without the message headers
    ],
)
def test_mime_parts_are_split_as_mime_writers_emit_them(variant):
    facts = bootstrap.from_user_data(variant(_mime()))
    assert facts.taints == [Taint("gpu", "true", "NoSchedule")]
    assert facts.labels == {"team": "a"} and facts.max_pods == 30


def test_what_both_parts_set_differently_is_unresolved_with_the_reason_never_one_dropped():
    facts = bootstrap.from_user_data(
        _mime(
            taints="[{key: a, effect: NoExecute}]",
            flags="--register-with-taints=gpu=true:NoSchedule --max-pods=20 --node-labels=team=b",
        )
    )
    assert facts.taints == [] and facts.labels == {} and facts.max_pods is None
    fields = {bootstrap.unresolved_fact(u) for u in facts.unresolved}
    assert fields == {"taints", "labels", "allocatable.pods"}
    assert all("NodeConfig part and a shell script part" in u for u in facts.unresolved)


_PART_TAINTS = st.lists(
    st.tuples(_WORDS, st.sampled_from(["NoSchedule", "NoExecute"])),
    max_size=2,
    unique_by=lambda t: t,
)


@settings(max_examples=100, deadline=None)
@given(_PART_TAINTS, _PART_TAINTS, st.booleans(), st.booleans())
def test_taints_of_either_part_are_never_silently_dropped(config, script, script_first, crlf):
    """Whatever each part sets: the one that sets taints is read; two that disagree leave
    the taints unresolved, saying why."""
    # keys quoted: a bare "no" or "on" is YAML 1.1's boolean, which the kubelet refuses
    taints = "[" + ", ".join(f"{{key: {json.dumps(k)}, effect: {e}}}" for k, e in config) + "]"
    flags = "--register-with-taints=" + ",".join(f"{k}:{e}" for k, e in script)
    config_part = _NODECONFIG_PART.replace("TAINTS", taints)
    script_part = _SCRIPT_PART.replace("FLAGS", flags if script else "--node-labels=x=y")
    parts = script_part + config_part if script_first else config_part + script_part
    text = _MIME_HEAD + parts + "--//--\n"
    facts = bootstrap.from_user_data(text.replace("\n", "\r\n") if crlf else text)
    want = {Taint(k, None, e) for k, e in config}
    got = {Taint(k, None, e) for k, e in script}
    unresolved = [u for u in facts.unresolved if bootstrap.unresolved_fact(u) == "taints"]
    if want and got and want != got:
        assert not facts.taints and len(unresolved) == 1
    else:
        assert set(facts.taints) == (want or got) and not unresolved


# ---------------------------------------------------------------------------------------------
# A word in --kubelet-extra-args that is no flag: the kubelet refuses to start


@pytest.mark.parametrize(
    "text",
    [
        "--kubelet-extra-args '--node-labels=a=b oops'",
        "--kubelet-extra-args='--node-labels=a=b oops'",
        "--kubelet-extra-args 'oops --max-pods=20'",
        "--kubelet-extra-args '--max-pods 20 oops'",  # 20 is --max-pods' value, oops is not
        "--kubelet-extra-args '--node-labels=a=b -- oops'",
        "--kubelet-extra-args '--cpu-manager-policy=static oops'",  # whatever the flags
    ],
)
def test_a_stray_word_in_kubelet_extra_args_is_an_error(text):
    """bootstrap.sh passes the value on split at spaces; the kubelet takes no positional
    argument ("unknown command oops") and does not start: no node of the pool joins."""
    with pytest.raises(bootstrap.KubeletFlagError, match="'oops' is not a flag") as caught:
        bootstrap.from_user_data(f"#!/bin/bash\n/etc/eks/bootstrap.sh c {text}\n")
    assert "refuses to start" in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        "--kubelet-extra-args '--max-pods 20'",  # --flag VALUE
        "--kubelet-extra-args '--node-labels=a=b' --b64-cluster-ca x",  # bootstrap.sh's own
        '--kubelet-extra-args "--node-labels=a=$B oops"',  # a variable: expanded elsewhere
        "--kubelet-extra-args '--node-labels=\"a=b c\"'",  # quotes another layer may remove
        "--kubelet-extra-args",
        "\n# /etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=a=b oops'",  # comment
        "&& sed -i 's/--kubelet-extra-args x y/z/' f",  # inside other text
    ],
)
def test_a_kubelet_extra_args_value_that_may_be_right_is_not_refused(text):
    bootstrap.from_user_data(f"#!/bin/bash\n/etc/eks/bootstrap.sh c {text}\n")


_FLAG_WORDS = st.one_of(
    st.builds(lambda k, v: f"--node-labels={k}={v}", _LABEL_KEYS, _LABEL_VALUES),
    st.builds(lambda n: f"--max-pods={n}", st.integers(0, 500)),
    st.builds(lambda n: f"--max-pods {n}", st.integers(0, 500)),
    st.sampled_from(["--v=2", "--cpu-manager-policy=static", "--fail-swap-on=false"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_FLAG_WORDS, min_size=1, max_size=5), st.data(), st.booleans())
def test_a_word_no_flag_takes_is_refused_wherever_it_stands(flags, data, equals):
    """Flags alone are read; one word that follows a ``--flag=value`` (or starts the value) is
    refused, at whatever place in the value."""
    line = " ".join(flags)
    form = "--kubelet-extra-args={}" if equals else "--kubelet-extra-args {}"
    bootstrap.from_user_data(form.format(shlex.quote(line)))
    at = data.draw(st.integers(0, len(flags)))  # every flag drawn has its value
    stray = " ".join([*flags[:at], "stray", *flags[at:]])
    with pytest.raises(bootstrap.KubeletFlagError, match="'stray' is not a flag"):
        bootstrap.from_user_data(form.format(shlex.quote(stray)))


@pytest.mark.parametrize(
    "line",
    [
        "# /etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=old=x --max-pods=20'",
        "  #KUBELET_EXTRA_ARGS=--register-with-taints=old:NoSchedule",
        "# example: --max-pods=058 (a value the kubelet would refuse)",
        "# --kubelet-extra-args '--node-labels=a=b oops'",
    ],
)
def test_a_flag_in_a_line_commented_out_is_neither_read_nor_refused(line):
    """A commented-out bootstrap line passes nothing to the kubelet: it was read as if it ran
    (an old label expected, or a pool refused for a value in a comment)."""
    facts = bootstrap.from_user_data(f"#!/bin/bash\n{line}\n/etc/eks/bootstrap.sh c\n")
    assert not facts.found and not facts.labels and not facts.taints and facts.max_pods is None
    live = bootstrap.from_user_data(f"#!/bin/bash\n{line}\necho A=--node-labels=team=a >x\n")
    assert live.labels == {"team": "a"}  # the lines after it are read


def _encoded_script(body: bytes, *, encoding: str = "base64") -> str:
    return (
        f'--//\nContent-Type: text/x-shellscript; charset="us-ascii"\n'
        f"Content-Transfer-Encoding: {encoding}\n\n{body.decode()}\n"
    )


@pytest.mark.parametrize("packed", [False, True])
def test_an_encoded_script_part_is_decoded_and_read(packed):
    """A base64 part (gzip-packed or not, as cloud-init takes it) was searched undecoded: its
    taints were dropped and the user data said to set nothing."""
    script = b"#!/bin/bash\necho 'KUBELET_EXTRA_ARGS=--register-with-taints=gpu=true:NoSchedule'\n"
    body = base64.encodebytes(gzip.compress(script) if packed else script)
    text = _MIME_HEAD + _NODECONFIG_PART.replace("TAINTS", "[]") + _encoded_script(body)
    facts = bootstrap.from_user_data(text + "--//--\n")
    assert facts.taints == [Taint("gpu", "true", "NoSchedule")] and facts.max_pods == 30


@pytest.mark.parametrize(
    "body",
    [
        b"not base64 at all!",
        base64.encodebytes(b"\xff\xfe binary"),
        base64.encodebytes(b"\x1f\x8b"),
    ],
)
def test_a_part_that_does_not_decode_leaves_every_boot_fact_unresolved(body):
    text = _MIME_HEAD + _NODECONFIG_PART.replace("TAINTS", "[]") + _encoded_script(body)
    facts = bootstrap.from_user_data(text + "--//--\n")
    fields = {bootstrap.unresolved_fact(u) for u in facts.unresolved}
    assert fields == {"labels", "taints", "allocatable.pods"}
    assert all("does not decode" in u for u in facts.unresolved)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.booleans(), st.sampled_from(["base64", "quoted-printable"]))
def test_any_encoded_part_is_read_or_said_unread_never_a_crash(data, packed, encoding):
    raw = gzip.compress(data) if packed else data
    body = base64.encodebytes(raw) if encoding == "base64" else quopri.encodestring(raw)
    text = _MIME_HEAD + _encoded_script(body, encoding=encoding) + "--//--\n"
    try:
        facts = bootstrap.from_user_data(text)
    except bootstrap.KubeletFlagError:
        return
    try:
        data.decode()
    except UnicodeDecodeError:
        assert facts.unresolved


# ---------------------------------------------------------------------------------------------
# A NodeConfig that is not YAML: nodeadm refuses the user data, the node does not join

_BROKEN_NODECONFIG = """\
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags: [--node-labels=team=a
    config: {maxPods: 30}
"""
_BROKEN = [
    _BROKEN_NODECONFIG,  # an unclosed flow sequence
    _BROKEN_NODECONFIG.replace("  kubelet:", "\tkubelet:"),  # a tab indents
    _BROKEN_NODECONFIG.replace("    config", "   config"),  # indentation that nests nothing
    '{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {',  # JSON cut short
]


@pytest.mark.parametrize("config", _BROKEN)
def test_a_nodeconfig_part_that_is_not_yaml_is_refused_naming_the_part(config):
    """nodeadm fails to decode the part, drops every NodeConfig of the user data with it and
    does not start the node: it was read as setting nothing, without a word."""
    text = _MIME_HEAD + "--//\nContent-Type: application/node.eks.aws\n\n" + config
    script = _SCRIPT_PART.replace("FLAGS", "--max-pods=20")
    for user_data in (text + "\n--//--\n", text + "\n" + script + "--//--\n"):
        with pytest.raises(bootstrap.KubeletFlagError, match="not YAML") as caught:
            bootstrap.from_user_data(user_data)
        assert "MIME part 1 (application/node.eks.aws)" in str(caught.value)
        assert "the node does not join" in str(caught.value)


@pytest.mark.parametrize("config", _BROKEN)
def test_a_nodeconfig_nodeadm_reads_that_is_not_yaml_is_refused(config):
    with pytest.raises(bootstrap.NodeConfigYAMLError, match="line") as caught:
        bootstrap.from_nodeadm(config)
    assert "nodeadm refuses" in str(caught.value) and caught.value.problem


@pytest.mark.parametrize("config", _BROKEN)
def test_plain_user_data_laid_out_as_a_nodeconfig_that_is_not_yaml_is_unresolved(config):
    """Without a MIME type, who reads the text decides: nodeadm refuses it, Karpenter passes it
    on as a shell script (it sets nothing). Either way not "sets nothing" in silence: labels,
    taints and max-pods are unresolved, saying why."""
    facts = bootstrap.from_user_data(config)
    assert facts.found and not facts.labels and facts.max_pods is None
    assert {bootstrap.unresolved_fact(u) for u in facts.unresolved} == {
        "labels",
        "taints",
        "allocatable.pods",
    }
    assert all("laid out as a NodeConfig, not YAML" in u for u in facts.unresolved)


def test_a_script_that_writes_a_nodeconfig_is_read_as_a_script_not_refused():
    """A heredoc holding NodeConfig lines is a script's text: not YAML as a whole, and no
    reason to refuse or leave anything unresolved."""
    for head in ("#!/bin/bash\n", ""):
        text = (
            f"{head}cat <<EOF > /etc/eks/nodeadm.d/extra.yaml\n{_BROKEN_NODECONFIG}EOF\n"
            "/usr/bin/kubelet --max-pods=20\n"
        )
        facts = bootstrap.from_user_data(text)
        assert facts.max_pods == 20 and not facts.unresolved


def test_a_nodeconfig_pyyaml_alone_cannot_read_is_unresolved_not_refused():
    """A date PyYAML refuses to build (Go's YAML leaves it a string) is no reason to refuse."""
    config = NODEADM.replace("spec:", "metadata: {annotations: {d: 2024-13-45}}\nspec:")
    text = _MIME_HEAD + "--//\nContent-Type: application/node.eks.aws\n\n" + config + "--//--\n"
    facts = bootstrap.from_user_data(text)
    assert facts.unresolved and all("fleetwarden's YAML parser" in u for u in facts.unresolved)


# ---------------------------------------------------------------------------------------------
# A NodeConfig's kubelet flags and kubelet configuration: the kubelet lets the flag win


def _node_config(flags: list[str], config: dict[str, object]) -> str:
    return (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n"
        f"    flags: {json.dumps(flags)}\n    config: {json.dumps(config)}\n"
    )


def test_a_taints_flag_overrides_register_with_taints_in_the_config():
    """nodeadm passes ``kubelet.flags`` on the command line and ``kubelet.config`` in a drop-in
    file; the kubelet's flags override its configuration: the two were combined."""
    text = _node_config(
        ["--register-with-taints=a=1:NoSchedule", "--max-pods=20"],
        {"registerWithTaints": [{"key": "b", "effect": "NoExecute"}], "maxPods": 58},
    )
    facts = bootstrap.from_nodeadm(text)
    assert facts.taints == [Taint("a", "1", "NoSchedule")] and facts.max_pods == 20
    assert any(i.startswith("registerWithTaints") and "overrides" in i for i in facts.ignored)
    assert any(i.startswith("maxPods: 58") and "overrides" in i for i in facts.ignored)


def test_an_overridden_config_value_is_refused_only_where_the_kubelet_cannot_load_it():
    """The flag's taints are registered, not the config's: a misspelt effect there is never
    validated; a value of the wrong type still stops the kubelet loading its configuration."""
    text = _node_config(
        ["--register-with-taints=", "--max-pods=20"],
        {"registerWithTaints": [{"key": "b", "effect": "noexecute"}], "maxPods": -1},
    )
    facts = bootstrap.from_nodeadm(text)
    assert facts.taints == [] and facts.max_pods == 20
    for config in ({"registerWithTaints": ["b:NoExecute"]}, {"maxPods": "58"}):
        with pytest.raises(bootstrap.KubeletFlagError, match="kubelet refuses it"):
            bootstrap.from_nodeadm(
                _node_config(["--register-with-taints=", "--max-pods=1"], config)
            )


def _parts(*configs: str) -> str:
    """A MIME user data with one ``application/node.eks.aws`` part per text."""
    head = "--//\nContent-Type: application/node.eks.aws\n\n"
    return _MIME_HEAD + "".join(head + c for c in configs) + "--//--\n"


def test_a_later_nodeconfig_replaces_an_earlier_config_value_and_its_flags_come_last():
    """nodeadm merges the NodeConfigs of its parts: flags appended in order, config values
    replaced by a later one, an empty list too (mergo WithOverride on the decoded maps)."""
    first = _node_config(["--register-with-taints=a:NoSchedule"], {"maxPods": 30})
    second = _node_config(["--register-with-taints=b:NoSchedule"], {"maxPods": 40})
    facts = bootstrap.from_nodeadm(_parts(first, second))
    assert facts.taints == [Taint("b", None, "NoSchedule")] and facts.max_pods == 40
    assert any("maxPods: 30" in i and "later" in i for i in facts.ignored)
    assert any("a:NoSchedule" in i and "keeps the last" in i for i in facts.ignored)
    tainted = _node_config([], {"registerWithTaints": [{"key": "c", "effect": "NoSchedule"}]})
    for empty in ([], None):
        later = _node_config([], {"registerWithTaints": empty})
        assert bootstrap.from_nodeadm(_parts(tainted, later)).taints == []  # kept before


# ---------------------------------------------------------------------------------------------
# What nodeadm decodes of a part: its first YAML document, which must be a NodeConfig


@pytest.mark.parametrize("read", [bootstrap.from_nodeadm, bootstrap.from_user_data])
def test_only_the_first_yaml_document_of_a_part_is_read_and_the_rest_is_listed(read):
    """nodeadm's decoder (sigs.k8s.io/yaml on go-yaml v2) reads one document: a second
    NodeConfig in the same part was merged in, its taints and max-pods expected on the nodes."""
    first = _node_config(["--register-with-taints=a:NoSchedule"], {"maxPods": 30})
    second = _node_config(["--register-with-taints=b:NoSchedule"], {"maxPods": 40})
    for later in (second, "not: [yaml"):  # later documents are not even parsed by nodeadm
        facts = read(_parts(first + "---\n" + later))
        assert facts.taints == [Taint("a", None, "NoSchedule")] and facts.max_pods == 30
        assert any("documents after the first" in i for i in facts.ignored)
    plain = bootstrap.from_user_data(first + "---\n" + second)  # no MIME: one text, likewise
    assert plain.max_pods == 30 and any("after the first" in i for i in plain.ignored)


_NOT_NODECONFIGS = {
    "shell-script": "#!/bin/bash\n/usr/bin/nodeadm init --max-pods=20\n",
    "empty": "# nothing here\n",
    "list": "- --max-pods=20\n",
    "no-kind": "apiVersion: node.eks.aws/v1alpha1\nspec:\n  kubelet:\n    flags: [--max-pods=20]\n",
    "other-kind": "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfigs\nspec: {}\n",
    "no-apiversion": "kind: NodeConfig\nspec:\n  kubelet:\n    config: {maxPods: 20}\n",
    "other-version": "apiVersion: node.eks.aws/v1beta1\nkind: NodeConfig\nspec: {}\n",
    "flags-not-a-list": _node_config([], {}).replace("flags: []", "flags: --max-pods=20"),
    "flag-a-number": _node_config([], {}).replace("flags: []", "flags: [20]"),
    "spec-a-string": "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: x\n",
    "config-a-list": _node_config([], {}).replace("config: {}", "config: [maxPods]"),
    "second-is-it": "kind: Other\n---\n" + _node_config(["--max-pods=20"], {}),
}


@pytest.mark.parametrize("config", _NOT_NODECONFIGS.values(), ids=_NOT_NODECONFIGS.keys())
def test_a_nodeconfig_part_whose_first_document_is_no_nodeconfig_is_refused(config):
    """nodeadm fails to decode a part of its type that holds no NodeConfig (a script, nothing,
    another kind or version, a field of another type), drops every NodeConfig of the user data
    and the node does not join: such a part was read as setting nothing (or its flags read)."""
    for text in (_parts(config), _parts(_node_config(["--max-pods=30"], {}), config)):
        with pytest.raises(bootstrap.NotNodeConfigError, match="nodeadm refuses it") as caught:
            bootstrap.from_user_data(text)
        assert "(application/node.eks.aws)" in str(caught.value)
        assert "the node does not join" in str(caught.value)
    with pytest.raises(bootstrap.NotNodeConfigError):
        bootstrap.from_node_config(config)


def test_a_flag_given_as_null_passes_nothing_and_is_no_error():
    """Go decodes a null list item into "" (no flag): it was read as the flag "None"."""
    text = _node_config([], {}).replace("flags: []", "flags: [null, --max-pods=20]")
    assert bootstrap.from_node_config(text).max_pods == 20


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.none(), _TAINTS),
    st.one_of(st.none(), _TAINTS),
    st.one_of(st.none(), st.integers(0, 500)),
    st.one_of(st.none(), st.integers(0, 500)),
    st.booleans(),
)
def test_a_nodeconfig_registers_the_flags_value_where_given_else_the_configs(
    flag_taints, config_taints, flag_pods, config_pods, mime
):
    """Whatever a NodeConfig sets where: the flag's taints and max-pods when the flag is given,
    the configuration's otherwise (a maxPods 0 there unresolved), never both combined; the one
    overridden is listed."""
    flags, config = [], {}
    if flag_taints is not None:
        flags.append(
            "--register-with-taints="
            + ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in flag_taints)
        )
    if flag_pods is not None:
        flags.append(f"--max-pods={flag_pods}")
    if config_taints is not None:
        config["registerWithTaints"] = [
            {"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e}
            for k, v, e in config_taints
        ]
    if config_pods is not None:
        config["maxPods"] = config_pods
    text = _node_config(flags, config)
    if mime:
        text = _MIME_HEAD + "--//\nContent-Type: application/node.eks.aws\n\n" + text + "--//--\n"
    facts = bootstrap.from_user_data(text)
    taints = flag_taints if flag_taints is not None else (config_taints or [])
    assert facts.taints == [Taint(k, v or None, e) for k, v, e in taints]
    if flag_pods is None and config_pods == 0:  # a drop-in's 0: not defaulted, unresolved
        assert facts.max_pods is None and facts.unresolved[0].startswith("maxPods: 0")
    else:
        assert facts.max_pods == (flag_pods if flag_pods is not None else config_pods)
    overridden = (flag_taints is not None and config_taints is not None) + (
        flag_pods is not None and config_pods is not None
    )
    assert sum("overrides its configuration" in i for i in facts.ignored) == overridden


# ---------------------------------------------------------------------------------------------
# A comment at the end of a line: a "#" that begins a word, outside quotes


@pytest.mark.parametrize(
    ("text", "pods", "taints"),
    [
        ("kubelet --max-pods=20 # was --max-pods=30", 20, []),
        ("kubelet --max-pods=20 # --register-with-taints=old:NoSchedule", 20, []),
        ("kubelet --max-pods=20 ;# --max-pods=30", 20, []),
        ("/etc/eks/bootstrap.sh c --kubelet-extra-args '--max-pods=20' # '--max-pods=058'", 20, []),
        ("kubelet --max-pods=20 # don't: it was 30", 20, []),  # a quote in the comment
        ("echo 'A=--max-pods=20 # --max-pods=30' >> /etc/x", 30, []),  # quoted: no comment
        ("kubelet --register-with-taints=a#b:NoSchedule", None, None),
    ],
    ids=[
        "after-flag",
        "taints",
        "after-semicolon",
        "refused-value",
        "apostrophe",
        "quoted",
        "in-word",
    ],
)
def test_words_after_a_comment_are_no_kubelet_arguments(text, pods, taints):
    """``cmd --max-pods=20 # was 30``: the shell passes nothing after the ``#``; only whole
    lines commented out were dropped, so a value there was read (or refused)."""
    try:
        facts = bootstrap.from_user_data(f"#!/bin/bash\n{text}\n")
    except bootstrap.KubeletFlagError as exc:
        assert "'a#b' is not a taint key" in str(exc)  # one word, read whole, and refused
        return
    assert facts.max_pods == pods and facts.taints == taints


def test_a_here_document_is_the_file_it_writes_not_shell_comments():
    """Its lines are data: a ``#`` there is not the shell's to strip (whole lines commented
    out are dropped, as everywhere); the shell resumes after the delimiter."""
    text = (
        "cat <<-'EOF' > /etc/eks/extra.sh\n\tKUBELET_EXTRA_ARGS=--max-pods=20 # x\n\tEOF\n"
        "kubelet --register-with-taints=a:NoSchedule # --register-with-taints=b:NoExecute\n"
    )
    facts = bootstrap.from_user_data(text)
    assert facts.max_pods == 20 and facts.taints == [Taint("a", None, "NoSchedule")]


def test_a_hash_in_a_nodeconfig_flag_is_no_comment():
    """nodeadm hands ``kubelet.flags`` to the kubelet as they are, through no shell."""
    config = _node_config(["#x", "--max-pods=20"], {})
    assert bootstrap.from_nodeadm(config).max_pods == 20


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_FLAG_WORDS, min_size=1, max_size=4),
    st.lists(_FLAG_WORDS, max_size=4),
    st.sampled_from([" # ", " #", "\t#", ";#", " ## "]),
    st.booleans(),
)
def test_a_trailing_comment_passes_nothing(before, after, hash_, nested):
    """Whatever follows a ``#`` that begins a word is not read: the facts are those of the
    words before it alone."""
    line = " ".join(before)
    form = "/etc/eks/bootstrap.sh c --kubelet-extra-args {}" if nested else "kubelet {}"
    alone = bootstrap.from_user_data(form.format(shlex.quote(line)))
    commented = form.format(shlex.quote(line)) + hash_ + " ".join(after)
    facts = bootstrap.from_user_data(commented)
    assert (facts.labels, facts.taints, facts.max_pods, facts.ignored) == (
        alone.labels,
        alone.taints,
        alone.max_pods,
        alone.ignored,
    )


@pytest.mark.parametrize(
    "text",
    [
        "kubelet --max-pods=20; echo done",
        "/etc/eks/bootstrap.sh c --kubelet-extra-args '--max-pods=20'&& echo done",
        "kubelet --max-pods=20>>/var/log/kubelet.log",
        "kubelet --max-pods=20|tee x",
    ],
)
def test_a_shell_operator_ends_the_word_before_it(text):
    """``--max-pods=20;`` passes ``--max-pods=20``: the ``;`` was read into the value, and the
    kubelet was said to refuse ``'20;'``."""
    assert bootstrap.from_user_data(text).max_pods == 20


@pytest.mark.parametrize(
    "text",
    [
        "kubelet --max-pods=$1",
        "kubelet --max-pods=$(cat /etc/max-pods)",
        "kubelet --max-pods=`cat /etc/max-pods`",
        "kubelet --node-labels=node=$(hostname)",
        'kubelet "--register-with-taints=$@"',
    ],
)
def test_a_positional_parameter_or_command_substitution_is_unresolved_not_refused(text):
    """``$1``, ``$(...)`` and backquotes are expanded by the shell: the value is not known,
    and was read as a literal the kubelet refuses ('$1' is not an integer)."""
    facts = bootstrap.from_user_data(text)
    assert facts.unresolved and facts.max_pods is None and not facts.taints


# ---------------------------------------------------------------------------------------------
# A KUBELET_EXTRA_ARGS assignment: the kubelet unit passes $KUBELET_EXTRA_ARGS split at spaces


@pytest.mark.parametrize(
    "text",
    [
        'KUBELET_EXTRA_ARGS="--node-labels=a=b oops" /etc/eks/bootstrap.sh c',
        'export KUBELET_EXTRA_ARGS="--max-pods=20 oops"',
        "echo 'KUBELET_EXTRA_ARGS=--max-pods=20 oops' >> /etc/sysconfig/kubelet",
        "echo \"Environment='KUBELET_EXTRA_ARGS=--max-pods=20 oops'\" > /etc/x.conf",
        'cat <<EOF > /etc/x.conf\nEnvironment="KUBELET_EXTRA_ARGS=--max-pods=20 oops"\nEOF',
        "cat <<'EOF' > /etc/x.conf\nEnvironment=A=1 'KUBELET_EXTRA_ARGS=--max-pods=20 oops'\nEOF",
        'KUBELET_EXTRA_ARGS+=" --node-labels=a=b oops"',
    ],
)
def test_a_stray_word_in_a_kubelet_extra_args_assignment_is_an_error(text):
    """bootstrap.sh takes KUBELET_EXTRA_ARGS from its environment and writes it where the
    kubelet unit's ``$KUBELET_EXTRA_ARGS`` reads it, split at spaces: ``oops`` is a positional
    argument and the kubelet does not start. Only ``--kubelet-extra-args`` was checked."""
    with pytest.raises(bootstrap.KubeletFlagError, match="'oops' is not a flag") as caught:
        bootstrap.from_user_data(f"#!/bin/bash\n{text}\n")
    assert "KUBELET_EXTRA_ARGS=" in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        'KUBELET_EXTRA_ARGS="--max-pods 20"',  # --flag VALUE
        'KUBELET_EXTRA_ARGS="$KUBELET_EXTRA_ARGS --node-labels=a=b"',  # a variable
        "echo 'KUBELET_EXTRA_ARGS=\"--node-labels=a=b c\"' >> /etc/x",  # quotes another layer reads
        "sed -i 's/KUBELET_EXTRA_ARGS=x y/z/' /etc/x",  # inside other text
        "OTHER_ARGS='--node-labels=a=b oops'",  # another variable: not the kubelet's
        # systemd splits an unquoted Environment= value into assignments: "oops" is one of its
        # own (invalid: systemd ignores it), never a word of $KUBELET_EXTRA_ARGS
        "echo Environment=KUBELET_EXTRA_ARGS=--max-pods=20\\ oops > /etc/x.conf",
        "cat <<EOF > /etc/x.conf\nEnvironment=KUBELET_EXTRA_ARGS=--max-pods=20 oops\nEOF",
        "echo \"Environment='KUBELET_EXTRA_ARGS=--max-pods=20' oops\" > /etc/x.conf",
    ],
)
def test_a_kubelet_extra_args_assignment_that_may_be_right_is_not_refused(text):
    bootstrap.from_user_data(f"#!/bin/bash\n{text}\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(_FLAG_WORDS, min_size=1, max_size=5), st.data(), st.booleans())
def test_a_word_no_flag_takes_is_refused_in_an_assignment_wherever_it_stands(flags, data, env):
    """The assignment's value is read as --kubelet-extra-args' is: flags alone pass, one word
    no flag takes is refused at whatever place."""
    form = "echo {} >> /etc/sysconfig/kubelet" if env else "export {}"
    bootstrap.from_user_data(form.format(shlex.quote("KUBELET_EXTRA_ARGS=" + " ".join(flags))))
    at = data.draw(st.integers(0, len(flags)))
    stray = " ".join([*flags[:at], "stray", *flags[at:]])
    with pytest.raises(bootstrap.KubeletFlagError, match="'stray' is not a flag"):
        bootstrap.from_user_data(form.format(shlex.quote("KUBELET_EXTRA_ARGS=" + stray)))


def test_eksctls_own_max_pods_sed_line_is_not_refused():
    """eksctl's managed AL2 user data (makeMaxPodsScript) edits bootstrap.sh with sed: the flag
    sits inside the sed expression, so its value is not read as a kubelet argument -- it was,
    and '20"/' was refused as a --max-pods the kubelet would not start with."""
    text = (
        "sed -i 's/KUBELET_EXTRA_ARGS=$2/KUBELET_EXTRA_ARGS=\"$2 --max-pods=20\"/' "
        "/etc/eks/bootstrap.sh"
    )
    facts = bootstrap.from_user_data(f"#!/bin/bash\n{text}\n")
    assert facts.max_pods is None and facts.unresolved
    assert "not read as a kubelet argument" in facts.unresolved[0]


def test_a_nodeconfig_in_a_part_of_another_type_is_not_nodeadms():
    """nodeadm reads only ``application/node.eks.aws`` parts: a NodeConfig in a text/plain
    part sets nothing (its maxPods was expected)."""
    part = _NODECONFIG_PART.replace("application/node.eks.aws", "text/plain")
    facts = bootstrap.from_user_data(_MIME_HEAD + part.replace("TAINTS", "[]") + "--//--\n")
    assert facts.max_pods is None and not facts.labels


# ---------------------------------------------------------------------------------------------
# Shell words: an unquoted ( or ) is an operator, never part of a flag's value


@pytest.mark.parametrize(
    "text",
    [
        "(kubelet --max-pods=20)",
        "( /usr/bin/kubelet --max-pods=20 )",
        "if true; then (kubelet --max-pods=20); fi",
        "{ kubelet --max-pods=20; }",
        "x=$(date) && (cd /tmp && kubelet --max-pods=20)",
        "/etc/eks/bootstrap.sh c --kubelet-extra-args '--max-pods=20'&",
    ],
)
def test_a_flag_before_a_closing_parenthesis_is_read_without_it(text):
    """``(kubelet --max-pods=20)`` runs the kubelet in a subshell with max-pods 20: the
    parenthesis stuck to the value, and ``20)`` was refused as no integer."""
    assert bootstrap.from_kubelet_flags(text).max_pods == 20


def test_a_substitution_stays_one_word_and_leaves_the_value_unresolved():
    """``$(...)`` is not an operator: its text stays in the word, which holds a variable."""
    facts = bootstrap.from_kubelet_flags('kubelet --max-pods=$(echo "20 ) 30")')
    assert facts.max_pods is None and facts.unresolved


_PLAIN_WORDS = st.from_regex(r"[A-Za-z0-9_./:,=+-]{1,8}", fullmatch=True)
_OPERATORS = st.sampled_from([";", "&&", "||", "|", "&", "(", ")", ">>", "<", ">"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_PLAIN_WORDS, _OPERATORS), max_size=12), st.data())
def test_shell_words_end_at_operators_with_or_without_blanks(tokens, data):
    """POSIX 2.3: an unquoted operator ends the word before it, blanks or not (a blank only
    between two words, or two operators that would run together: ``;`` ``&&``)."""
    text = ""
    for i, token in enumerate(tokens):
        kinds = {_kind(t) for t in tokens[max(i - 1, 0) : i + 1]}
        needed = i and len(kinds) == 1 and kinds != {"()"}
        text += " " if needed else data.draw(st.sampled_from(["", " "]))
        text += token
    assert shell_text.words(text) == tokens


def _kind(token: str) -> str:
    return "()" if token in "()" else "run" if token[0] in ";&|<>" else "word"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(exclude_characters="\x00"), min_size=1), max_size=5))
def test_a_quoted_word_is_one_word_whatever_it_holds(parts):
    """What shlex.quote writes, the shell reads back as it was (quotes and escapes removed)."""
    assert shell_text.words(" ".join(shlex.quote(p) for p in parts)) == parts


@pytest.mark.parametrize(
    ("value", "items"),
    [
        ("A=1 B=2", ["A=1", "B=2"]),
        ("'A=1 2' B=3", ["A=1 2", "B=3"]),
        ('"A=1 2"  "B=3"', ["A=1 2", "B=3"]),
        ("A='1 2'", ["A='1", "2'"]),  # a quote inside an item is no quote (systemd.syntax)
        ("'A=1", None),
    ],
)
def test_systemd_environment_items_are_split_as_systemd_quotes_them(value, items):
    assert shell_text.unit_words(value) == items


def test_max_pods_zero_is_the_kubelets_default_in_a_file_and_unresolved_in_a_drop_in():
    """The kubelet's configuration-file decoding defaults maxPods 0 to 110
    (SetDefaults_KubeletConfiguration); nodeadm writes a NodeConfig's kubelet.config as a
    drop-in, merged undefaulted: there 0 is unresolved, saying why. It was expected as 0."""
    facts = bootstrap.from_nodeadm(_node_config([], {"maxPods": 0}))
    assert facts.max_pods is None
    assert any(u.startswith("maxPods: 0: nodeadm writes") for u in facts.unresolved)
    assert bootstrap.unresolved_fact(facts.unresolved[0]) == "allocatable.pods"
    config = bootstrap.BootFacts()
    bootstrap.kubelet_config(config, {"maxPods": 0})
    assert config.max_pods == 110
    assert any(i.startswith("maxPods: 0: the kubelet defaults") for i in config.ignored)
    flagged = bootstrap.from_nodeadm(_node_config(["--max-pods=20"], {"maxPods": 0}))
    assert flagged.max_pods == 20 and not flagged.unresolved  # the flag still wins
