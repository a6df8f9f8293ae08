"""Tables for people: every table of every command, printed at 60, 80, 100 and 200 columns.

No line is wider than COLUMNS, and no word is split: every token printed is a word (or a
path piece ending in ``/``) of the same output at 2,000 columns, where nothing is wrapped or
dropped -- or one of the words the table uses to say what it abbreviated or left out.
``--wide`` keeps every column. Each command runs as the installed console script.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.presenting.rendering import Col, Grid, findings_table, make_console
from fleetwarden.presenting.table_layout import pieces
from tests.e2e.test_cli_audit import seed
from tests.e2e.test_cli_fleet import fleet, gate_tree, lose_label  # noqa: F401 (fixtures)

EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"
WIDTHS = (60, 80, 100, 200)
# what a table says about itself when it drops or abbreviates (rendering.Grid._note)
NOTE_WORDS = {"every", "row:", "not", "shown:", "long", "words", "cut", "--wide", "shows"}
NOTE_WORDS |= {"column", "in", "full", "more", "…"}
SHORT_FORMS = {"sev", "crit", "med"}
RULE = re.compile(r"^[─━│┃┏┓┗┛┡┩╇╈┳┻┼━-]+$")

EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: duckboat, version: "1.21"}
managedNodeGroups:
  - name: custom-1
    instanceType: m5.2xlarge
    minSize: 1
    maxSize: 3
    volumeSize: 128
    amiFamily: AmazonLinux2
    labels: {team: payments-platform-backend}
    taints: [{key: type, value: hound, effect: NoSchedule}]
"""


def run(*args: str, columns: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL
    )


def words(text: str) -> set[str]:
    out = set()
    for token in text.split():
        out.update(token[a:b] for a, b in pieces(token))
    return out


def assert_fits_and_splits_no_word(args: tuple[str, ...]) -> None:
    full = run(*args, columns=2000)
    assert full.returncode in (0, 1), full.stderr
    vocabulary = {w.strip(";,()") for w in words(full.stdout)}
    assert vocabulary, "the command printed nothing"
    for width in WIDTHS:
        r = run(*args, columns=width)
        assert r.returncode == full.returncode, r.stderr
        lines = r.stdout.splitlines()
        too_wide = [x for x in lines if len(x) > width]
        assert not too_wide, f"at {width} columns: {too_wide}"
        for word in words(r.stdout):
            bare = word.strip(";,()")
            if bare in vocabulary or RULE.match(word):
                continue
            if bare in NOTE_WORDS | SHORT_FORMS or re.fullmatch(r"\+\d+", bare):
                continue
            said = "long words cut" in " ".join(r.stdout.split())
            if said and word.endswith("…") and any(v.startswith(word[:-1]) for v in vocabulary):
                continue  # a word wider than 2/3 of the terminal, cut, and the table says so
            raise AssertionError(f"at {width} columns, {word!r} is not a whole word:\n{r.stdout}")


@pytest.fixture()
def scan_tree(tmp_path: Path, realdata: Path) -> Path:
    (tmp_path / "desired").mkdir()
    (tmp_path / "desired" / "eksctl.yaml").write_text(EKSCTL)
    shutil.copy(
        realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json", tmp_path / "duckboat.json"
    )
    return tmp_path


def test_scan_table(scan_tree):
    assert_fits_and_splits_no_word(
        ("scan", "-d", str(scan_tree / "desired"), "-n", str(scan_tree / "duckboat.json"))
    )


def test_explain_tables(scan_tree):
    assert_fits_and_splits_no_word(("explain", "-d", str(scan_tree / "desired")))


def test_demo_table():
    assert_fits_and_splits_no_word(("demo", "--once"))


def test_deprecations_table(realdata):
    assert_fits_and_splits_no_word(
        ("deprecations", "-m", str(realdata / "deprecations"), "-t", "1.25")
    )


def test_fleet_versions_and_diff_tables(fleet):  # noqa: F811
    common = ("--app", "shop", "-d", str(fleet / "git" / "shop"), "-w", str(fleet / "workloads"))
    assert_fits_and_splits_no_word(("fleet", "versions", *common))
    assert_fits_and_splits_no_word(("fleet", "diff", *common))


def test_gate_table(gate_tree):  # noqa: F811
    lose_label(gate_tree)
    assert_fits_and_splits_no_word(
        (
            "gate",
            "--app",
            "podinfo",
            "-d",
            str(gate_tree / "git"),
            "-n",
            str(gate_tree / "duckboat.json"),
        )
    )


def test_audit_query_table(tmp_path):
    url = f"sqlite:///{tmp_path}/audit.db"
    asyncio.run(seed(url))
    assert_fits_and_splits_no_word(("audit", "query", "--store", url))


def test_at_80_columns_the_scan_table_drops_columns_and_says_so_and_wide_keeps_them(scan_tree):
    args = ("scan", "-d", str(scan_tree / "desired"), "-n", str(scan_tree / "duckboat.json"))
    narrow = " ".join(run(*args, columns=80).stdout.split())
    assert "severit" not in narrow.replace("severity", "")  # the issue's `severit|y`
    assert "crit " in narrow and "not shown: layer" in narrow and "--wide" in narrow
    assert "every row: cluster duckboat; pool custom-1" in narrow  # same in every row
    wide = run(*args, "--wide", columns=80).stdout
    header = next(x for x in wide.splitlines() if "severity" in x)
    assert header.split() == [
        "severity", "cluster", "pool", "layer", "field", "expected", "actual", "nodes"
    ]  # fmt: skip
    assert "not shown" not in wide
    assert max(len(x) for x in wide.splitlines()) > 80  # wider than asked: --wide says so


def test_json_output_is_the_same_at_every_width(scan_tree):
    args = ("scan", "-d", str(scan_tree / "desired"), "-n", str(scan_tree / "duckboat.json"))
    docs = {json.dumps(json.loads(run(*args, "-o", "json", columns=w).stdout)) for w in WIDTHS}
    assert len(docs) == 1


# --------------------------------------------------------------------------- the grid itself


def _many_findings() -> list[Finding]:
    nodes = tuple(f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal" for i in range(42))
    return [
        Finding(
            cluster=f"prod-{c}",
            pool=f"pool-{c}",
            layer=Layer.L1,
            field="labels.node.kubernetes.io/instance-lifecycle",
            expected="a long expected value with several words in it",
            actual=None,
            severity=Severity.CRITICAL if c % 2 else Severity.MEDIUM,
            nodes=nodes[: 1 + c * 10],
            source="clusters/prod/eksctl.yaml",
        )
        for c in range(5)
    ]


@pytest.mark.parametrize("width", [20, 40, *WIDTHS])
def test_the_watch_table_fits_every_width(width):
    """The live view of ``watch`` (and ``demo``): the same findings table, at any width."""
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(
        findings_table(_many_findings(), title="5 findings")
    )
    out = buf.getvalue()
    assert max(len(x) for x in out.splitlines()) <= width
    if width >= 80:
        assert re.search(r"\+\d+\s+more", out)  # a long node list: its first nodes and a count


def test_a_list_cell_in_wide_mode_lists_every_item_wrapped_between_items():
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None, soft_wrap=True).print(
        findings_table(_many_findings()[-1:], wide=True)
    )
    out = buf.getvalue()
    assert all(f"ip-10-0-0-{i}.eu-west-1.compute.internal" in out for i in range(41))
    assert "more" not in out


def test_a_word_too_wide_for_the_whole_terminal_is_cut_with_an_ellipsis_and_said_so():
    grid = Grid(Col("path", 1))
    grid.add_row("/" + "x" * 50)
    grid.add_row("/" + "y" * 50)
    buf = io.StringIO()
    Console(file=buf, width=30, color_system=None).print(grid)
    out = buf.getvalue()
    assert max(len(x) for x in out.splitlines()) <= 30
    assert "…" in out and "long words cut" in out


def test_piped_output_takes_columns_then_the_attached_terminal_then_a_wide_default(
    monkeypatch,
):
    monkeypatch.setenv("COLUMNS", "73")
    assert make_console().width == 73
    monkeypatch.setenv("COLUMNS", "5")
    assert make_console().width == 20  # MIN_WIDTH: nothing sensible fits in less
    monkeypatch.delenv("COLUMNS")
    # pytest's streams are no terminals: nothing attached, so the wide default
    assert make_console().width == 200
