"""Silence must mean "no drift": inputs that compare nothing exit 2 with one clear line, partial
coverage is a finding, and `explain` accounts for every field (issue #10, parts 2 and 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_cli_scan import EKSCTL, EKSCTL_LABELS, run


@pytest.fixture()
def tree(tmp_path: Path, realdata: Path) -> Path:
    (tmp_path / "desired").mkdir()
    (tmp_path / "desired" / "eksctl.yaml").write_text(EKSCTL)
    nodes = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())
    for item in nodes["items"]:
        item["metadata"]["labels"].update(EKSCTL_LABELS)
    (tmp_path / "duckboat.json").write_text(json.dumps(nodes))
    return tmp_path


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "NoneType" not in stderr
    return lines[0]


def test_a_desired_directory_without_pools_exits_2_naming_paths_and_kinds(tree):
    other = tree / "apps"
    other.mkdir()
    (other / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    (other / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: y}\n"
    )
    r = run("scan", "-d", str(other), "-n", str(tree / "duckboat.json"))
    assert r.returncode == 2
    line = _one_line_error(r.stderr)
    assert str(other) in line and "ConfigMap" in line and "Deployment" in line
    assert "read 2 files" in line
    assert (
        run("scan", "-d", str(other), "-n", str(tree / "duckboat.json"), "--allow-empty").returncode
        == 0
    )


def test_a_cluster_name_typo_exits_2_with_the_nearest_match(tree):
    r = run("scan", "-d", str(tree / "desired"), "-n", f"duckbaot={tree / 'duckboat.json'}")
    assert r.returncode == 2
    line = _one_line_error(r.stderr)
    assert "duckboat" in line and "duckbaot" in line and "did you mean" in line


def test_an_unmatched_desired_cluster_is_a_high_finding_not_a_silent_skip(tree):
    (tree / "desired" / "other.yaml").write_text(EKSCTL.replace("duckboat", "duckboat-eu"))
    r = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"), "-o", "json")
    assert r.returncode == 1, r.stderr
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["cluster"], f["layer"], f["field"], f["severity"]) == (
        "duckboat-eu",
        "COUNT",
        "cluster",
        "high",
    )
    assert f["expected"] == ["custom-1"] and "did you mean 'duckboat'" in f["message"]


@pytest.mark.parametrize("content", ["", "   \n"], ids=["0 bytes", "blank"])
def test_an_empty_node_dump_exits_2_naming_the_file(tree, content):
    dump = tree / "duckboat.json"
    dump.write_text(content)
    r = run("scan", "-d", str(tree / "desired"), "-n", str(dump))
    assert r.returncode == 2
    line = _one_line_error(r.stderr)
    assert str(dump) in line and "empty file" in line


def test_an_empty_node_list_is_a_real_state_with_count_findings(tree):
    (tree / "duckboat.json").write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    r = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"), "-o", "json")
    assert r.returncode == 1
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["pool"], f["field"], f["expected"], f["actual"]) == (
        "custom-1",
        "nodeCount",
        "1..3",
        0,
    )
    eksctl = tree / "desired" / "eksctl.yaml"
    assert f["provenance"] == f"minSize: {eksctl}:7; maxSize: {eksctl}:8"


def test_findings_carry_the_provenance_of_their_expected_value(tree):
    nodes = json.loads((tree / "duckboat.json").read_text())
    nodes["items"][0]["status"]["capacity"]["ephemeral-storage"] = "20959212Ki"
    nodes["items"][1]["metadata"]["labels"].pop("alpha.eksctl.io/cluster-name")
    (tree / "duckboat.json").write_text(json.dumps(nodes))
    r = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"), "-o", "json")
    found = {f["field"]: f["provenance"] for f in json.loads(r.stdout)["findings"]}
    eksctl = str(tree / "desired" / "eksctl.yaml")
    assert found == {
        "diskSize": f"{eksctl}:9",
        "labels.alpha.eksctl.io/cluster-name": "default: eksctl: ClusterNameLabel (metadata.name)",
    }


def test_explain_lists_every_field_as_table_and_json(tree):
    r = run("explain", "-d", str(tree / "desired"), "--pool", "custom-1", "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (pool,) = out["pools"]
    by_path = {f["path"]: f for f in pool["fields"]}
    assert by_path["instanceType"]["status"] == "compared"
    assert by_path["instanceType"]["origin"].endswith("eksctl.yaml:6")
    assert by_path["labels.alpha.eksctl.io/cluster-name"]["origin"].startswith("default: eksctl")
    assert pool["summary"]["unaccounted"] == 0
    table = run("explain", "-d", str(tree / "desired"))
    assert "DefaultNodeType" not in table.stdout  # m5.large is not applied: instanceType is stated
    assert "ClusterNameLabel" in table.stdout and "compared" in table.stdout


def test_explain_strict_fails_on_an_attribute_fleetwarden_does_not_know(tree):
    text = EKSCTL.replace("    minSize: 1\n", "    minSize: 1\n    someFutureField: 3\n")
    (tree / "desired" / "eksctl.yaml").write_text(text)
    r = run("explain", "-d", str(tree / "desired"), "-o", "json", "--strict")
    assert r.returncode == 1
    fields = json.loads(r.stdout)["pools"][0]["fields"]
    assert {"path": "someFutureField", "status": "unaccounted"}.items() <= next(
        f for f in fields if f["path"] == "someFutureField"
    ).items()
    assert run("explain", "-d", str(tree / "desired")).returncode == 0


def test_explain_strict_fails_when_a_file_in_the_tree_cannot_be_read(tree):
    (tree / "desired" / "broken.yaml").write_text("apiVersion: eksctl.io/v1alpha5\nkind: [\n")
    r = run("explain", "-d", str(tree / "desired"), "-o", "json", "--strict")
    assert r.returncode == 1, r.stderr
    assert [s["problem"] for s in json.loads(r.stdout)["skipped"]] == [True]
    assert run("explain", "-d", str(tree / "desired"), "-o", "json").returncode == 0


def test_a_pool_that_cannot_be_compared_is_said_without_verbose(tree):
    """A template's group named by a variable is not compared (its nodes cannot be told
    apart): the table says so even without --verbose, the JSON names the pool."""
    text = EKSCTL + "  - name: '${EXTRA_GROUP}'\n    instanceType: m5.large\n"
    (tree / "desired" / "eksctl.yaml").write_text(text)
    args = ("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"))
    table = run(*args)
    assert table.returncode == 0, table.stderr
    said = [ln for ln in table.stdout.splitlines() if "not compared" in ln]
    assert len(said) == 1 and "${EXTRA_GROUP}" in said[0], table.stdout
    out = json.loads(run(*args, "-o", "json").stdout)
    assert [s.get("pool") for s in out["skipped"] if s.get("pool")] == ["${EXTRA_GROUP}"]


@pytest.mark.parametrize(
    ("user", "context", "needles"),
    [
        ("{token: t}", "{cluster: c, user: duckboat-admn}",
         ["contexts.duckboat.user", "'duckboat-admn' was not found", "'duckboat'"]),
        ("{token: t, as-groups: [sre]}", "{cluster: c, user: u}",
         ["users.u.as", "without as"]),
        ("{token: t, tokn: x}", "{cluster: c, user: u}",
         ["users.u.tokn", "did you mean 'token'"]),
    ],
)  # fmt: skip
def test_watch_exits_2_naming_the_kubeconfig_entry_it_will_not_guess(tree, user, context, needles):
    """A context whose user does not exist would have run as anonymous: exit 2, before
    connecting, one line naming the kubeconfig file, the entry and the field."""
    kubeconfig = tree / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        f"contexts: [{{name: duckboat, context: {context}}}]\n"
    )
    r = run("watch", "-k", str(kubeconfig), "-d", str(tree / "desired"), "--duration", "1")
    assert r.returncode == 2
    line = _one_line_error(r.stderr)
    assert str(kubeconfig) in line
    for needle in needles:
        assert needle in line


def test_watch_exits_2_when_no_desired_cluster_is_a_context(tree):
    """Before connecting to anything: a desired tree whose clusters are none of the contexts
    would watch for ever and compare nothing."""
    kubeconfig = tree / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: duckboat-prod, context: {cluster: c, user: u}}]\n"
    )
    r = run("watch", "-k", str(kubeconfig), "-d", str(tree / "desired"), "--duration", "1")
    assert r.returncode == 2
    line = _one_line_error(r.stderr)
    assert "duckboat" in line and "duckboat-prod" in line and "did you mean" in line


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_watch_that_never_listed_a_cluster_s_nodes_exits_2_and_says_so(tree):
    """An API server that never answers: the pools were never compared, so "0 findings" at
    the end of a --duration run would read as "no drift". Each such cluster gets a
    ``cluster.not_compared`` event, the table's title says it, and a watch that compared
    nothing exits 2 naming the cluster and the last error."""
    kubeconfig = tree / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{_closed_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: duckboat, context: {cluster: c, user: u}}]\n"
    )
    args = ("watch", "-k", str(kubeconfig), "-d", str(tree / "desired"), "--duration", "2")
    r = run(*args, "-o", "json")
    assert r.returncode == 2, r.stdout + r.stderr
    line = _one_line_error(r.stderr)
    assert "no cluster's nodes could be listed" in line and "duckboat" in line
    assert "ConnectError" in line
    events = [json.loads(x) for x in r.stdout.splitlines()]
    last = events[-1]
    assert last["type"] == "cluster.not_compared" and last["cluster"] == "duckboat"
    assert "ConnectError" in last["lastError"]
    table = run(*args)
    assert table.returncode == 2
    assert "not compared yet: duckboat" in table.stdout
    assert "cluster.not_compared" in table.stdout


def _split_dump(tree: Path, first: list[int], second: list[int], *, yaml_second: bool = False):
    """The real dump's items as two dumps of one cluster (by position, overlapping or not)."""
    nodes = json.loads((tree / "duckboat.json").read_text())
    a, b = tree / "a.json", tree / ("b.yaml" if yaml_second else "b.json")
    a.write_text(json.dumps({**nodes, "items": [nodes["items"][i] for i in first]}))
    part = {**nodes, "items": [nodes["items"][i] for i in second]}
    # kubectl -o yaml: read whole (formats.nodes.parse_document), not streamed
    b.write_text(yaml.safe_dump(part) if yaml_second else json.dumps(part))
    return a, b


@pytest.mark.parametrize("yaml_second", [False, True], ids=["json", "yaml"])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_node_in_two_dumps_of_one_cluster_exits_2_naming_both_files(tree, yaml_second, jobs):
    """``--nodes c=a.json --nodes c=b.json`` with a node in both: counted twice it would hide a
    missing node (or invent a count finding), so it is refused, naming the node and both
    files — as one dump refuses a name twice."""
    a, b = _split_dump(tree, [0], [0, 1], yaml_second=yaml_second)
    desired = str(tree / "desired")
    r = run("scan", "-d", desired, "-n", f"duckboat={a}", "-n", f"duckboat={b}", "-j", jobs)
    assert r.returncode == 2, r.stdout
    line = _one_line_error(r.stderr)
    assert str(a) in line and str(b) in line and "'duckboat-01'" in line


def test_a_control_plane_node_in_two_dumps_is_refused_too(tree):
    """No summary keeps control-plane nodes, but the dumps still overlap: refused."""
    nodes = json.loads((tree / "duckboat.json").read_text())
    nodes["items"][0]["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""
    (tree / "duckboat.json").write_text(json.dumps(nodes))
    a, b = _split_dump(tree, [0, 1], [0])
    r = run("scan", "-d", str(tree / "desired"), "-n", f"duckboat={a}", "-n", f"duckboat={b}")
    assert r.returncode == 2 and "'duckboat-01' is also in" in _one_line_error(r.stderr)


def test_one_dump_given_twice_for_a_cluster_exits_2(tree):
    dump = str(tree / "duckboat.json")
    r = run("scan", "-d", str(tree / "desired"), "-n", dump, "-n", f"duckboat={dump}")
    assert r.returncode == 2
    assert "the same dump is given twice" in _one_line_error(r.stderr)


def test_disjoint_dumps_of_one_cluster_are_one_cluster_of_all_their_nodes(tree):
    a, b = _split_dump(tree, [0], [1])
    r = run(
        "scan", "-d", str(tree / "desired"), "-n", f"duckboat={a}", "-n", f"duckboat={b}",
        "-o", "json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)["summary"]
    assert (summary["clusters"], summary["nodes"], summary["findings"]) == (1, 2, 0)
