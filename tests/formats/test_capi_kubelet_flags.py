"""Kubelet flags in Cluster API bootstrap configs (``kubeletExtraArgs`` ``node-labels`` /
``register-with-taints``) are read as the kubelet reads them: the labels and taints a node
registers are exactly what is expected, and a flag the kubelet refuses is an error naming the
file, the object and the field -- never a pool quietly expecting what no node will show."""

from __future__ import annotations

from textwrap import dedent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import EFFECTS, Taint
from fleetwarden.formats import capi
from fleetwarden.formats.capi.bootstraps import (
    kubelet_labels,
    kubelet_taints,
    label_value,
    qualified_name,
)
from fleetwarden.formats.documents import parse_yaml_documents
from fleetwarden.formats.errors import FormatError

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# what Go's strings.TrimSpace removes (unicode.IsSpace), a few of them
_SPACE = st.text(alphabet=" \t\x85\xa0\u2003\u3000", max_size=3)

_names = st.builds(
    lambda first, middle, last: first + middle + last if middle or last else first,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "-_.", max_size=20),
    st.sampled_from(_ALNUM),
)
_prefixes = st.lists(
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True), min_size=1, max_size=3
).map(".".join)
# kubelet-settable keys: no prefix, or a prefix outside kubernetes.io / k8s.io
_keys = st.one_of(
    _names,
    st.builds(lambda p, n: f"{p}.example.com/{n}", _prefixes, _names),
    st.builds(lambda n: f"node.kubernetes.io/{n}", _names),
)
_values = st.one_of(st.just(""), _names)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_keys, _values, _SPACE, _SPACE, _SPACE, _SPACE), max_size=6),
    st.lists(st.booleans(), max_size=6),
)
def test_node_labels_are_what_the_kubelet_registers_whatever_the_spacing(items, empties):
    """MapStringString.Set: empty items are skipped; spaces around a key or value are not
    part of it (an earlier reader expected the label ``a `` and the value `` b``)."""
    parts = []
    for (key, value, s1, s2, s3, s4), empty in zip(items, empties + [False] * 6, strict=False):
        parts.append(f"{s1}{key}{s2}={s3}{value}{s4}")
        if empty:
            parts.append("")
    # a map: a key given twice keeps its last value, where it was first set
    assert kubelet_labels(",".join(parts)) == list({k: v for k, v, *_ in items}.items())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_keys, _values, st.sampled_from(EFFECTS)),
        min_size=1,
        max_size=5,
        unique_by=lambda t: (t[0], t[2]),
    )
)
def test_register_with_taints_gives_the_taints_the_kubelet_registers(taints):
    text = ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in taints)
    assert kubelet_taints(text) == [Taint(k, v or None, e) for k, v, e in taints]


@settings(max_examples=100, deadline=None)
@given(_keys, _values, _values, st.sampled_from(EFFECTS))
def test_a_key_and_effect_given_twice_is_refused(key, first, second, effect):
    """pkg/util/taints ParseTaints: "duplicated taints with the same key and effect"."""
    with pytest.raises(ValueError, match="a second taint"):
        kubelet_taints(f"{key}={first}:{effect},{key}={second}:{effect}")


@settings(max_examples=300, deadline=None)
@given(_keys, _values, st.sampled_from(EFFECTS), st.sampled_from([" ", "\t"]), st.integers(0, 3))
def test_a_taint_the_kubelet_refuses_is_refused(key, value, effect, space, where):
    """parseTaint trims nothing and spells effects exactly: a space anywhere, a lowercase
    effect, a second ':' or '=' make the kubelet refuse the whole flag."""
    text = [
        f"{space}{key}={value}:{effect}",
        f"{key}={value}:{effect.lower()}",
        f"{key}={value}:{effect}:{effect}",
        f"{key}={value}={value}:{effect}",
    ][where]
    with pytest.raises(ValueError, match="kubelet refuses"):
        kubelet_taints(text)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("team", True),
        ("example.com/team", True),
        ("a.b-c.example/x_y.z", True),
        ("Example.com/team", False),  # the prefix is a DNS subdomain: lowercase
        ("example.com/", False),
        ("/team", False),
        ("a/b/c", False),
        ("team-", False),
        ("x" * 63, True),
        ("x" * 64, False),
        ("é", False),
    ],
)
def test_label_keys_follow_the_api_server_s_rules(key, ok):
    assert qualified_name(key) is ok
    assert label_value(key) is (ok and "/" not in key)


def _tree(args: str) -> str:
    return dedent(
        f"""\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: MachineDeployment
        metadata: {{name: md}}
        spec:
          clusterName: c1
          replicas: 1
          template:
            spec:
              clusterName: c1
              bootstrap:
                configRef: {{kind: KubeadmConfigTemplate, name: md}}
              infrastructureRef: {{kind: DockerMachineTemplate, name: md}}
        ---
        apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
        kind: KubeadmConfigTemplate
        metadata: {{name: md}}
        spec:
          template:
            spec:
              joinConfiguration:
                nodeRegistration:
                  kubeletExtraArgs: {args}
        """
    )


def _pool(args: str):
    (pool,) = capi.read_pools(parse_yaml_documents("tree.yaml", _tree(args))).pools
    return pool


def test_a_spaced_node_labels_flag_expects_the_trimmed_labels():
    pool = _pool("{node-labels: 'team = payments, tier=web'}")
    assert {k: pool.labels[k] for k in ("team", "tier")} == {"team": "payments", "tier": "web"}


def test_kubeadm_taints_are_replaced_by_the_kubelet_flag_as_written():
    pool = _pool("{register-with-taints: 'dedicated=gpu:NoSchedule,spot:PreferNoSchedule'}")
    assert set(pool.taints) == {
        Taint("dedicated", "gpu", "NoSchedule"),
        Taint("spot", None, "PreferNoSchedule"),
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("{node-labels: 'team'}", "is not key=value"),
        ("{node-labels: 'team=a, '}", "is not key=value"),
        ("{node-labels: 'team=a b'}", "is not a label value"),
        ("{node-labels: 'kubernetes.io/role=worker'}", "refuses to start"),
        ("{register-with-taints: 'dedicated=gpu:noschedule'}", "spelt exactly"),
        ("{register-with-taints: 'dedicated=gpu:NoSchedule, spot:NoExecute'}", "taint key"),
        ("{register-with-taints: 'dedicated=gpu'}", "has no effect"),
        ("{register-with-taints: 'a:NoSchedule,'}", "has no effect"),
        ("[{name: register-with-taints, value: 'a=b=c:NoSchedule'}]", "key[=value]:Effect"),
    ],
)
def test_a_kubelet_flag_the_kubelet_refuses_is_an_error_naming_the_field(args, says):
    with pytest.raises(FormatError, match="kubelet flag") as caught:
        _pool(args)
    assert caught.value.path == "tree.yaml"
    assert caught.value.field is not None
    assert caught.value.field.startswith("KubeadmConfigTemplate/md: ")
    assert "kubeletExtraArgs" in caught.value.field
    assert says in caught.value.reason


def test_a_placeholder_in_a_kubelet_flag_stays_unresolved_beside_literal_items():
    pool = _pool("{node-labels: 'team=a,${EXTRA_LABELS}', register-with-taints: '${TAINTS}'}")
    assert pool.labels["team"] == "a"
    assert {u.field for u in pool.unresolved} >= {"labels", "taints"}


def _with_command(command: str) -> str:
    return _tree("{}").replace(
        "kubeletExtraArgs: {}",
        f"kubeletExtraArgs: {{}}\n      preKubeadmCommands:\n      - {command}",
    )


def test_a_label_the_kubelet_may_not_set_in_a_script_is_an_error_naming_the_field():
    """``KUBELET_EXTRA_ARGS=--node-labels=node-role.kubernetes.io/gpu=`` reaches the kubelet,
    which refuses to start (ValidateKubeletFlags): no node of the pool joins, as with a
    malformed flag in the same place; the error says where such a label belongs instead."""
    text = _with_command(
        "echo KUBELET_EXTRA_ARGS=--node-labels=node-role.kubernetes.io/gpu=,team=ml"
        " >> /etc/default/kubelet"
    )
    with pytest.raises(FormatError) as caught:
        capi.read_pools(parse_yaml_documents("tree.yaml", text))
    assert caught.value.field is not None
    assert caught.value.field.endswith("preKubeadmCommands")
    assert "node-role.kubernetes.io/gpu" in caught.value.reason
    assert "refuses to start" in caught.value.reason
    assert "Machine template" in caught.value.reason


def test_a_label_the_kubelet_may_not_set_inside_other_text_is_listed_not_dropped():
    """Inside a ``sed`` expression the flag may not reach the kubelet at all; either way no Node
    carries the label: ignored, with the reason, never expected nor silently left out."""
    text = _with_command(
        "sed -i 's|^ARGS=|ARGS=--node-labels=node-role.kubernetes.io/gpu=x,team=ml |'"
        " /etc/default/kubelet"
    )
    (pool,) = capi.read_pools(parse_yaml_documents("tree.yaml", text)).pools
    assert not any(key.startswith("node-role.kubernetes.io") for key in pool.labels)
    notes = [a for a in pool.account if a.path.endswith("preKubeadmCommands")]
    assert any("node-role.kubernetes.io" in a.detail and "refuses" in a.detail for a in notes)
