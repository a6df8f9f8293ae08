"""Terminal output shows data literally: every command's tables, errors and help.

A value read from input (a label, a path, an object or cluster name, an image, an actor) is
never interpreted as rich markup (``[red]x[/red]``, ``[/bogus]``, ``:smile:``) nor reaches the
terminal as a control sequence (ESC, CSI, ``\\r``, C1 controls): it is printed as typed, with
controls shown as escapes (``\\x1b``). Errors stay one line when stderr is piped, and tables
honour COLUMNS when stdout is piped. Each command runs as the installed console script.
"""

from __future__ import annotations

import asyncio
import copy
import io
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
import yaml
from rich.console import Console

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.cli import main as cli_main
from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.presenting import watching
from fleetwarden.presenting.rendering import dumps, findings_table, visible
from fleetwarden.wiring import workloads
from fleetwarden.wiring.service_config import service_config_from
from tests.core.test_workloads import liveify, load_docs
from tests.e2e.test_gateway import EKS_EVENT
from tests.support.serve_proc import serve

EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"

MARKUP = "[red]x[/red]"
BOGUS = "[/bogus]"
BOLD = "[bold]x[/bold]"
ESC = "\x1b[31mred"  # an SGR sequence: would turn the terminal red
SHOWN_ESC = "\\x1b[31mred"  # how it must be shown
EMOJI = ":thumbs_up:"

EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: duckboat, version: "1.21"}
managedNodeGroups:
  - name: custom-1
    instanceType: m6gd.2xlarge
    minSize: 1
    maxSize: 3
    amiFamily: AmazonLinux2
    taints: [{key: type, value: hound, effect: NoSchedule}]
"""


def run(*args: str, columns: str | None = "200", **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "NO_COLOR": "1", **env}
    full.pop("COLUMNS", None)
    if columns is not None:
        full["COLUMNS"] = columns
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        stdin=subprocess.DEVNULL,
    )


def assert_no_controls(text: str) -> None:
    """Nothing a terminal would act on: no ESC, no C1 controls, no bare CR."""
    bad = sorted({hex(ord(c)) for c in text if c in "\x1b\r\x07\x08" or 0x80 <= ord(c) <= 0x9F})
    assert not bad, f"control characters in output: {bad}"


# --------------------------------------------------------------------------- rendering


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (MARKUP, MARKUP),
        (BOGUS, BOGUS),
        (EMOJI, EMOJI),
        (ESC, SHOWN_ESC),
        ("a\rb", "a\\rb"),
        ("a\nb\tc", "a\\nb\\tc"),
        ("\x9b31m", "\\x9b31m"),  # the one-byte C1 CSI
        ("\x00\x07\x7f", "\\x00\\x07\\x7f"),
        ("abc\u202etxt.exe", "abc\\u202etxt.exe"),  # a right-to-left override
        ("prod-eu-1 ünïcode ✓", "prod-eu-1 ünïcode ✓"),  # printable text is left alone
    ],
)
def test_visible_shows_controls_as_escapes_and_leaves_text_alone(value, shown):
    assert visible(value) == shown


def test_json_output_escapes_c1_controls_and_keeps_the_value():
    doc = {"name": "a\x9bb\u202e", "plain": "ü"}
    text = dumps(doc)
    assert_no_controls(text)
    assert "\u202e" not in text and "ü" in text
    assert json.loads(text) == doc


def test_findings_table_prints_every_cell_literally():
    finding = Finding(
        cluster=BOGUS,
        pool=BOLD,
        layer=Layer.L1,
        field=f"labels.{EMOJI}",
        expected=MARKUP,
        actual=ESC,
        severity=Severity.HIGH,
        nodes=("node-[b]1[/b]",),
        source="x.yaml",
    )
    buf = io.StringIO()
    Console(file=buf, width=300, color_system=None).print(
        findings_table([finding], title=f"title {MARKUP}")
    )
    out = buf.getvalue()
    for text in (BOGUS, BOLD, EMOJI, MARKUP, SHOWN_ESC, "node-[b]1[/b]", f"title {MARKUP}"):
        assert text in out
    assert_no_controls(out)


# --------------------------------------------------------------------------- help


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = []
    for name, command in getattr(group, "commands", {}).items():
        out.append(((*path, name), command))
        out.extend(_commands(command, (*path, name)))
    return out


def _loaded_group() -> Any:
    """The command line with every (lazily loaded) command resolved."""
    group = typer.main.get_command(cli_main.app)
    for name in cli_main.COMMANDS:
        assert group.get_command(None, name) is not None, name
    return group


ALL_COMMANDS = _commands(_loaded_group())


def _squash(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("path", [p for p, _ in ALL_COMMANDS], ids=" ".join)
def test_every_help_text_prints_literally(path):
    """Every help string, metavar and docstring appears in --help as written (rich markup
    mode would eat `[x]` tags and turn `[CLUSTER=]PATH`-like text into styles)."""
    command = dict(ALL_COMMANDS)[path]
    r = run(*path, "--help")
    assert r.returncode == 0, r.stderr
    assert_no_controls(r.stdout)
    shown = _squash(r.stdout)
    texts = [command.help or ""]
    for param in command.params:
        texts.append(getattr(param, "help", None) or "")
        texts.append(getattr(param, "metavar", None) or "")
    for text in texts:
        text = text.replace("\b", "")  # click's "do not rewrap this paragraph" marker
        for paragraph in text.split("\n\n"):
            assert _squash(paragraph) in shown, paragraph


def test_help_shows_cluster_path_metavars_and_every_typer_is_plain():
    r = run("scan", "--help")
    assert "[CLUSTER=]PATH" in r.stdout and "╭" not in r.stdout  # plain click help, no panels
    assert cli_main.app.rich_markup_mode is None
    for path, command in ALL_COMMANDS:
        assert command.rich_markup_mode is None, path


def test_a_usage_error_prints_the_value_literally():
    r = run("deprecations", "-t", "1.25", "-m", "x", "--format", f"{MARKUP}{ESC}")
    assert r.returncode == 2
    assert MARKUP in r.stderr and "--format" in r.stderr
    assert_no_controls(r.stderr)


# --------------------------------------------------------------------------- errors


def test_an_error_naming_a_hostile_path_prints_it_literally(tmp_path):
    missing = tmp_path / f"nope{BOGUS}{MARKUP}{ESC}"
    r = run("deprecations", "-m", str(missing), "-t", "1.25")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("fleetwarden: error: ")
    assert f"nope{BOGUS}{MARKUP}{SHOWN_ESC}" in r.stderr and "no such file" in r.stderr
    assert_no_controls(r.stderr)


def test_a_long_error_stays_one_line_when_stderr_is_piped(tmp_path):
    missing = tmp_path / ("d" * 120) / ("a-very-long-file-name-" * 6 + ".yaml")
    for columns in ("80", None):
        r = run("deprecations", "-m", str(missing), "-t", "1.25", columns=columns)
        assert r.returncode == 2
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and len(lines[0]) > 200, r.stderr
        assert str(missing) in lines[0]


def test_fleet_and_gate_errors_are_literal_and_one_line(tmp_path):
    missing = str(tmp_path / ("w" * 150) / f"{MARKUP}{ESC}.json")
    r = run("fleet", "diff", "--app", BOGUS, "-d", str(tmp_path), "-w", missing, columns="80")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert f"--app {BOGUS}: the desired state holds no workload" in r.stderr
    r = run("gate", "--app", "x", "-d", missing, "-n", missing, columns="80")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert f"{MARKUP}{SHOWN_ESC}.json: no such file" in r.stderr
    assert_no_controls(r.stderr)


def test_serve_and_approve_errors_are_literal(tmp_path):
    config = tmp_path / f"fw{MARKUP}{EMOJI}.yaml"
    r = run("serve", "--config", str(config))
    assert r.returncode == 2 and f"fw{MARKUP}{EMOJI}.yaml" in r.stderr
    assert_no_controls(r.stderr)
    # an id that is no URL path segment is sent quoted, not a traceback
    r = run("approve", f"d-{ESC}/..", "--server", "http://127.0.0.1:9", "--token", "t")
    assert r.returncode == 2 and "cannot reach the service" in r.stderr, r.stderr
    r = run("approve", "d-1", "--server", f"http://{ESC}", "--token", "t")
    assert r.returncode == 2 and f"--server http://{SHOWN_ESC}" in r.stderr, r.stderr
    assert_no_controls(r.stderr)


# --------------------------------------------------------------------------- tables


def test_deprecations_table_prints_names_and_paths_literally(tmp_path):
    folder = tmp_path / "charts[bold]"  # a path may hold brackets, not a slash
    folder.mkdir()
    manifest = folder / f"pdb[red]{EMOJI}.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "policy/v1beta1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": MARKUP + EMOJI, "namespace": ESC},
            }
        )
    )
    (folder / "broken[red].yaml").write_text(f"name: [{ESC}\n")
    r = run("deprecations", "-m", str(folder), "-t", "1.25")
    assert r.returncode == 1, r.stderr
    assert f"pdb[red]{EMOJI}.yaml" in r.stdout and "charts[bold]" in r.stdout
    assert f"{SHOWN_ESC}/{MARKUP}{EMOJI}" in r.stdout
    assert "skipped 1 files:" in r.stdout
    assert "broken[red].yaml: YAML error: unacceptable character #x001b" in r.stdout
    assert_no_controls(r.stdout + r.stderr)


def test_table_output_honours_columns_when_piped(tmp_path, realdata):
    folder = realdata / "deprecations"
    narrow = run("deprecations", "-m", str(folder), "-t", "1.25", columns="70")
    assert narrow.returncode == 1
    assert max(len(x) for x in narrow.stdout.splitlines()) <= 70
    wide = run("deprecations", "-m", str(folder), "-t", "1.25", columns=None)
    assert max(len(x) for x in wide.stdout.splitlines()) > 120  # not rich's 80-column default


@pytest.fixture()
def scan_tree(tmp_path: Path, realdata: Path) -> Path:
    desired = yaml.safe_load(EKSCTL)
    # eksctl refuses a label value that is no label value, so the odd text is the nodes'
    desired["managedNodeGroups"][0]["labels"] = {"team": "a", "tier": "b", "app": "c", "env": "d"}
    (tmp_path / "desired").mkdir()
    (tmp_path / "desired" / "eksctl.yaml").write_text(yaml.safe_dump(desired))
    nodes = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())
    odd = {"team": ESC, "tier": f"{BOLD}\r{EMOJI}", "app": BOGUS, "env": MARKUP}
    for item in nodes["items"]:
        item["metadata"]["labels"].update(odd)
    (tmp_path / "duckboat.json").write_text(json.dumps(nodes))
    return tmp_path


def test_scan_table_prints_label_values_literally(scan_tree):
    r = run("scan", "-d", str(scan_tree / "desired"), "-n", str(scan_tree / "duckboat.json"))
    assert r.returncode == 1, r.stderr
    for text in (BOGUS, MARKUP, SHOWN_ESC, f"{BOLD}\\r{EMOJI}"):
        assert text in r.stdout, text
    assert_no_controls(r.stdout + r.stderr)


def test_fleet_diff_and_versions_tables_print_values_literally(tmp_path, realdata):
    (doc,) = load_docs(realdata / "manifests" / "podinfo-kustomize-deployment.yaml")
    desired = tmp_path / "git"
    desired.mkdir()
    (desired / "deployment.yaml").write_text(yaml.safe_dump(doc))
    live = liveify(copy.deepcopy(doc), namespace="default")
    container = live["spec"]["template"]["spec"]["containers"][0]
    container["image"] = f"ghcr.io/stefanprodan/podinfo:{BOGUS}{ESC}"
    container.setdefault("env", []).append({"name": "MODE", "value": MARKUP})
    dumps_dir = tmp_path / "dumps"
    dumps_dir.mkdir()
    dump = {"apiVersion": "v1", "kind": "List", "items": [live]}
    (dumps_dir / "prod.json").write_text(json.dumps(dump))
    args = ["--app", "podinfo", "-d", str(desired), "-w", str(dumps_dir)]
    diff = run("fleet", "diff", *args)
    assert diff.returncode == 1, diff.stderr
    assert f"{BOGUS}{SHOWN_ESC}" in diff.stdout and MARKUP in diff.stdout
    versions = run("fleet", "versions", *args)
    assert versions.returncode == 1, versions.stderr
    assert BOGUS in versions.stdout
    for r in (diff, versions):
        assert_no_controls(r.stdout + r.stderr)


def test_audit_query_table_prints_actors_and_summaries_literally(tmp_path):
    url = f"sqlite:///{tmp_path}/audit.db"

    async def seed() -> None:
        store = await open_audit_store(url)
        try:
            await store.append_many(
                [
                    AuditDraft(
                        AuditKind.FINDING,
                        f"label changed to {MARKUP}{ESC}",
                        cluster=BOGUS,
                        pool=BOLD,
                        actor=f"arn:aws:iam::1:user/{EMOJI}\x9b",
                        key="k-1",
                        payload={},
                    )
                ]
            )
        finally:
            await store.close()

    asyncio.run(seed())
    assert audit.record_id(AuditKind.FINDING, "k-1")
    r = run("audit", "query", "--store", url, "-o", "table", columns="300")
    assert r.returncode == 0, r.stderr
    for text in (BOGUS, BOLD, f"{MARKUP}{SHOWN_ESC}", f"user/{EMOJI}\\x9b"):
        assert text in r.stdout, text
    assert_no_controls(r.stdout + r.stderr)


HOSTILE = f"{BOGUS}{ESC}\x9b31m\u202e{EMOJI}{MARKUP}\r\n"


def test_event_data_stored_through_the_gateway_prints_literally_in_every_audit_output(
    tmp_path,
):
    """Data from a webhook, stored by a real serve, read back by every audit command: the
    actor, cluster, pool, type and subject of a CloudEvent and a CloudTrail actor carry
    markup that would crash rich (``[/bogus]``), markup, an emoji code, ESC and C1 CSI
    sequences, a bidi override and CR/LF. Printed as typed (controls as escapes), never
    interpreted, no crash; JSON and the export keep the same values, escaped."""
    token = "literal-token"
    ce = {
        "specversion": "1.0",
        "id": "hostile-1",
        "source": f"//ci{HOSTILE}",
        "type": f"t{HOSTILE}",
        "subject": f"s{HOSTILE}",
        "cluster": f"c{HOSTILE}",
        "nodepool": f"p{HOSTILE}",
        "actor": f"a{HOSTILE}",
    }
    trail = copy.deepcopy(EKS_EVENT)
    trail["detail"]["userIdentity"]["arn"] = f"arn:aws:iam::1:user/{HOSTILE}"
    auth = {"authorization": f"Bearer {token}"}
    config = {"auth": {"cloudevents": {"bearerToken": token}, "aws": {"bearerToken": token}}}
    with serve(tmp_path, config) as svc:
        r = httpx.post(
            f"{svc.base}/events/cloudevents",
            json=ce,
            headers={**auth, "content-type": "application/cloudevents+json"},
        )
        assert r.status_code == 202, r.text
        assert httpx.post(f"{svc.base}/events/aws", json=trail, headers=auth).status_code == 202
        store = f"sqlite:///{tmp_path / 'audit.db'}"
        deadline = time.monotonic() + 30
        while True:  # the workers record both events in the audit store
            found = run("audit", "query", "--store", store, "-o", "json")
            if found.returncode == 0 and len(json.loads(found.stdout)) == 2:
                break
            assert time.monotonic() < deadline, found.stderr
            time.sleep(0.2)
    shown = visible(HOSTILE)
    assert shown.startswith(f"{BOGUS}{SHOWN_ESC}\\x9b31m\\u202e{EMOJI}{MARKUP}")
    table = run("audit", "query", "--store", store, "-o", "table", columns="2000")
    assert table.returncode == 0, table.stderr
    for text in (f"c{shown}", f"p{shown}", f"a{shown}", f"user/{shown}"):
        assert text in table.stdout, text
    as_json = run("audit", "query", "--store", store, "-o", "json")
    values = {r["cluster"] for r in json.loads(as_json.stdout)}
    assert f"c{HOSTILE}" in values  # the same value, escaped in the text
    export = run("audit", "export", "--store", store)
    assert export.returncode == 0, export.stderr
    exported = [json.loads(line) for line in export.stdout.splitlines()]
    assert {r["actor"] for r in exported} == {f"a{HOSTILE}", f"arn:aws:iam::1:user/{HOSTILE}"}
    verify = run("audit", "verify", "--store", store)
    assert verify.returncode == 0, verify.stderr
    for r in (table, as_json, export, verify):
        assert_no_controls(r.stdout + r.stderr)
        assert "\u202e" not in r.stdout + r.stderr  # no raw bidi override either


def test_watch_live_view_prints_events_literally():
    buf = io.StringIO()
    sink = watching.LiveView(Console(file=buf, width=300, color_system=None))
    at = datetime(2026, 1, 2, tzinfo=UTC)
    asyncio.run(sink.__aenter__())
    try:
        sink.emit(LifecycleEvent(LifecycleType.ADDED, f"{BOGUS}{ESC}", at, {"note": MARKUP}))
    finally:
        asyncio.run(sink.__aexit__())
    out = buf.getvalue()
    assert f"{BOGUS}{SHOWN_ESC}" in out and MARKUP in out
    assert_no_controls(out.replace("\x1b[?25l", "").replace("\x1b[?25h", ""))


def test_serve_logs_a_followed_app_that_did_not_load_literally(tmp_path, caplog):
    """serve's console line for an application whose desired files did not load."""
    config = service_config_from(
        {"workloads": {"apps": [{"name": f"shop{ESC}", "desired": [str(tmp_path / MARKUP)]}]}},
        source="fw.yaml",
    )
    with caplog.at_level("WARNING", logger="fleetwarden"):
        _apps, failures = asyncio.run(workloads.load_apps(config, None))
    assert list(failures) == [f"shop{ESC}"]
    [message] = [r.getMessage() for r in caplog.records if "not loaded" in r.getMessage()]
    assert f"shop{SHOWN_ESC}" in message and MARKUP in message
    assert_no_controls(message)
