"""Observed nodes from real `kubectl get nodes` output (../shared/realdata/nodes)."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.nodes import pool_of
from fleetwarden.core.pools import Taint
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import parse_nodes
from tests.conftest import realdata_files

COUNTS = {
    "honeycomb-eks-nodelist-arm64.json": 2,
    "openshift-baremetal-node-worker-0.json": 1,
    "openshift-gcp-node-master-0-vw6lz.json": 1,
    "openshift-gcp-node-worker-b-q6vs9.json": 1,
    "openshift-gcp-node-worker-c-k5w6k.json": 1,
    "popeye-kind-nodelist.yaml": 5,
    "regolibrary-kind-node-v1.25.json": 1,
    "regolibrary-minikube-node-v1.23.json": 1,
    "troubleshoot-nodelist-mixed-doks-microk8s-aws.json": 7,
}


@pytest.mark.parametrize("path", realdata_files("nodes"), ids=lambda p: p.name)
def test_every_real_dump_parses(realdata, path):
    nodes = parse_nodes(str(path), path.read_bytes())
    assert len(nodes) == COUNTS[path.name]
    assert all(n.name for n in nodes)


def test_facts_read_from_the_eks_dump(realdata):
    path = realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json"
    n = parse_nodes(str(path), path.read_bytes())[0]
    assert n.name == "duckboat-01"
    assert pool_of(n) == "custom-1"
    assert n.instance_type == "m6gd.2xlarge"
    assert n.kubelet_version == "v1.21.2-13+d2965f0db10712"
    assert n.os_image == "Amazon Linux 2"
    assert n.taints == (Taint("type", "hound", "NoSchedule"),)
    assert n.allocatable["memory"] == "31127824Ki"


def test_doks_pool_label_and_yaml_dump(realdata):
    path = realdata / "nodes" / "troubleshoot-nodelist-mixed-doks-microk8s-aws.json"
    pools = {n.name: pool_of(n) for n in parse_nodes(str(path), path.read_bytes())}
    assert pools["biggernode-3i745"] == "biggernode"
    assert pools["repldev-marc"] is None
    kind = realdata / "nodes" / "popeye-kind-nodelist.yaml"
    nodes = parse_nodes(str(kind), kind.read_bytes())
    assert nodes[0].is_control_plane and not nodes[1].is_control_plane
    assert nodes[1].taints == (Taint("t2", None, "NoSchedule"),)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b'{"kind": "List", "items": [', "invalid JSON"),
        (b"\x00\x01\x02binary", "binary data"),
        (b'{"kind": "Pod"}', "kind"),
        (b'{"kind": "List", "items": [42]}', "items[0]"),
        (
            b'{"kind": "List", "items": [{"metadata": {"name": "a", "labels": []}}]}',
            "items[0].metadata.labels",
        ),
        (
            b'{"kind": "List", "items": [{"metadata": {"name": "a"}, '
            b'"spec": {"taints": [{"key": "k", "effect": "Bad"}]}}]}',
            "items[0].spec.taints[0].effect",
        ),
        (b"kind: List\nitems:\n  - metadata: {name: [unclosed\n", "YAML syntax error"),
        (b"\xff\xfe\xfa not utf8", "UTF-8"),
    ],
)
def test_bad_dumps_give_a_precise_error(data, needle):
    with pytest.raises(FormatError) as err:
        parse_nodes("nodes.json", data)
    assert err.value.path == "nodes.json"
    assert needle in str(err.value)


def _node(status: dict[str, object]) -> dict[str, object]:
    return {"kind": "Node", "metadata": {"name": "n7"}, "status": status}


@pytest.mark.parametrize(
    ("status", "field", "reason"),
    [
        ({"allocatable": {"cpu": "abc"}}, "status.allocatable.cpu", "quantity: 'abc'"),
        ({"allocatable": {"memory": "12XB"}}, "status.allocatable.memory", "quantity: '12XB'"),
        (
            {"capacity": {"ephemeral-storage": "lots"}},
            "status.capacity.ephemeral-storage",
            "quantity: 'lots'",
        ),
        ({"capacity": {"pods": ""}}, "status.capacity.pods", "quantity: ''"),
        ({"nodeInfo": {"osImage": 42}}, "status.nodeInfo.osImage", "got an integer"),
        ({"nodeInfo": {"kubeletVersion": 123}}, "status.nodeInfo.kubeletVersion", "got an integer"),
        ({"nodeInfo": {"kubeletVersion": ["v1.29"]}}, "status.nodeInfo.kubeletVersion", "list"),
    ],
)
def test_a_node_value_no_api_server_serves_is_an_error_naming_node_and_field(status, field, reason):
    """Resource amounts the diff compares must be quantities and nodeInfo values strings:
    anything else was read as if absent and passed with no finding."""
    for body, where in (
        ({"kind": "List", "items": [_node(status)]}, "items[0]."),
        (_node(status), ""),
    ):
        with pytest.raises(FormatError) as err:
            parse_nodes("nodes.json", json.dumps(body).encode())
        assert err.value.field == where + field
        assert "node 'n7'" in err.value.reason and reason in err.value.reason


def test_quantities_in_every_spelling_the_api_uses_are_accepted():
    amounts = {"cpu": "1930m", "memory": "7910Mi", "pods": "110", "a": "1e3", "b": "1.5Gi"}
    status = {"allocatable": amounts, "capacity": {**amounts, "ephemeral-storage": "20959212Ki"}}
    (node,) = parse_nodes("nodes.json", json.dumps(_node(status)).encode())
    assert node.allocatable == amounts


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_arbitrary_bytes_never_raise_anything_but_format_error(data):
    with contextlib.suppress(FormatError):
        parse_nodes("x.json", data)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_truncated_real_dumps_fail_cleanly(realdata, data):
    path = data.draw(st.sampled_from(realdata_files("nodes")))
    raw = path.read_bytes()
    cut = data.draw(st.integers(0, len(raw) - 1))
    try:
        parse_nodes(str(path), raw[:cut])
    except FormatError as exc:
        assert exc.path == str(path)


@pytest.mark.parametrize("kind", ["Pod", "node", 7])
def test_an_item_of_another_kind_is_an_error_naming_it(kind):
    """``kubectl get nodes,pods``: a Pod was skipped without a word, so a NodeList of Pods
    read as an empty cluster with exit 0."""
    body = {
        "kind": "NodeList",
        "items": [{"kind": "Node", "metadata": {"name": "n"}}, {"kind": kind, "metadata": {}}],
    }
    with pytest.raises(FormatError) as err:
        parse_nodes("x.json", json.dumps(body).encode())
    assert err.value.field == "items[1].kind"
    assert "not a Node" in err.value.reason and "Nodes only" in err.value.reason


def test_a_node_name_twice_is_an_error_naming_the_node():
    """Two dumps put together: the nodes were counted twice, with no word."""
    items = [{"metadata": {"name": n}} for n in ("a", "b", "c", "b")]
    with pytest.raises(FormatError) as err:
        parse_nodes("x.json", json.dumps({"kind": "List", "items": items}).encode())
    assert err.value.field == "items[3].metadata.name"
    assert "node 'b' is listed twice (items[1] and items[3])" in err.value.reason


def test_several_yaml_documents_say_a_dump_is_one_document():
    """Node --- Node: the parser's "but found another document" did not say what to do."""
    node = "kind: Node\nmetadata: {name: n%d}\n"
    with pytest.raises(FormatError) as err:
        parse_nodes("nodes.yaml", (node % 1 + "---\n" + node % 2).encode())
    assert err.value.line == 3
    assert "a second YAML document" in err.value.reason
    assert "a List of Nodes or a single Node" in err.value.reason
    # a document marker before the only document is one document
    assert [n.name for n in parse_nodes("nodes.yaml", ("---\n" + node % 1).encode())] == ["n1"]


def test_an_item_without_a_kind_is_a_node():
    """Some tools store Node objects without their kind (insights-operator)."""
    body = {
        "kind": "List",
        "items": [{"metadata": {"name": "n"}}, {"kind": None, "metadata": {"name": "m"}}],
    }
    assert [n.name for n in parse_nodes("x.json", json.dumps(body).encode())] == ["n", "m"]
