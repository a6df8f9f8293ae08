"""``app.deprecating.find_deprecations``: the deprecations use case without the command line.

Spread over worker processes it must give exactly what one process gives, in the order of the
files; a file that does not parse is skipped in a directory and fatal when named; the use case
loads no terminal, web or database library.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetwarden.app import deprecating
from fleetwarden.core.deprecations import DeprecationTable
from fleetwarden.core.skips import Skip
from fleetwarden.formats import manifests
from fleetwarden.formats.errors import FormatError

K8S = DeprecationTable(manifests.bundled_table()).only(deprecating.DEFAULT_COMPONENTS)


def _list(root: Path, skipped: list[Skip]) -> list[tuple[Path, bool]]:
    if root.is_file():
        return [(root, True)]
    return [(p, False) for p in sorted(root.rglob("*")) if p.suffix in (".yaml", ".json")]


def _tree(realdata: Path, tmp_path: Path, copies: int = 3) -> Path:
    for i in range(copies):
        shutil.copytree(realdata / "deprecations", tmp_path / f"c{i}")
    (tmp_path / "c1" / "broken.yaml").write_text("kind: Pod\nspec: [unclosed\n")
    return tmp_path


def test_workers_find_what_one_process_finds_in_the_same_order(realdata, tmp_path, monkeypatch):
    root = _tree(realdata, tmp_path)
    one = deprecating.find_deprecations(
        [root], (1, 25), K8S, list_files=_list, read=Path.read_bytes, workers=1
    )
    monkeypatch.setattr(deprecating, "PARALLEL_BYTES", 0)  # parallel even for a small tree
    two = deprecating.find_deprecations(
        [root], (1, 25), K8S, list_files=_list, read=Path.read_bytes, workers=2
    )
    assert two.to_json() == one.to_json()
    files = [f.object.path for f in two.findings]
    assert files == sorted(files)  # the walk's order
    assert len(two.findings) == 3 * 10
    assert [s.path for s in two.skipped] == [str(root / "c1" / "broken.yaml")]
    assert two.skipped[0].reason.startswith("line 3: YAML syntax error")


def test_a_named_file_that_does_not_parse_is_fatal_even_in_a_worker(tmp_path, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nspec: [unclosed\n" + "# padding\n" * 1000)
    monkeypatch.setattr(deprecating, "PARALLEL_BYTES", 0)
    with pytest.raises(FormatError, match=r"bad\.yaml:1003: YAML syntax error"):
        deprecating.find_deprecations(
            [bad, bad],
            (1, 25),
            K8S,
            list_files=_list,
            read=Path.read_bytes,
            workers=2,
        )


def test_charts_are_split_by_their_sources_under_the_chart_directory(tmp_path):
    rendered = (
        "---\n# Source: web/templates/cron.yaml\n"
        "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: c\n"
    )
    scan = deprecating.find_deprecations(
        [],
        (1, 25),
        K8S,
        list_files=_list,
        read=Path.read_bytes,
        charts=[tmp_path / "chart"],
        render=lambda chart, target: rendered,
    )
    assert [(f.object.path, f.object.kind) for f in scan.findings] == [
        (str(tmp_path / "chart" / "templates" / "cron.yaml"), "CronJob")
    ]


def test_the_use_case_loads_no_terminal_web_or_database_library():
    code = (
        "import sys, fleetwarden.app.deprecating; "
        "print(sorted(m for m in ('rich', 'typer', 'sqlalchemy', 'starlette', 'uvicorn', "
        "'httpx', 'jsonschema', 'hcl2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
