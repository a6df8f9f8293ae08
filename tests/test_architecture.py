"""Architecture rules that must not rot: layers point one way, public names are declared."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import fleetwarden

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold():
    """entrypoints -> adapters -> app -> ports -> formats -> core, and core does no I/O."""
    exe = Path(sys.executable).parent / "lint-imports"
    r = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "broken" not in r.stdout.split("Contracts:")[-1].replace("0 broken", "")


MODULES = sorted(
    m.name for m in pkgutil.walk_packages(fleetwarden.__path__, "fleetwarden.") if not m.ispkg
)


@pytest.mark.parametrize("name", MODULES)
def test_every_module_declares_all_and_it_resolves(name):
    module = importlib.import_module(name)
    if name.endswith("__main__"):
        return
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr}"


def test_core_modules_have_docstrings():
    for name in MODULES:
        if name.startswith("fleetwarden.core."):
            assert importlib.import_module(name).__doc__, name


# --------------------------------------------------------------------------- core allow list

# The core is pure (STYLE.md): values, rules, decisions. It may import itself and these
# standard-library modules, which do no I/O, read no clock and keep no process state. Anything
# else (os, time, random, logging, asyncio, pathlib, a third-party package, another layer of
# fleetwarden) fails the test below: an allow list, where import-linter can only forbid.
CORE_ALLOWED = frozenset(
    {
        "__future__",
        "abc",
        "base64",
        "binascii",
        "bisect",
        "collections",
        "collections.abc",
        "contextlib",
        "copy",
        "dataclasses",
        "datetime",
        "decimal",
        "difflib",
        "enum",
        "fnmatch",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "hmac",
        "ipaddress",
        "itertools",
        "json",
        "json.encoder",
        "math",
        "numbers",
        "operator",
        "re",
        "statistics",
        "string",
        "textwrap",
        "types",
        "typing",
        "unicodedata",
    }
)
CORE = ROOT / "src" / "fleetwarden" / "core"


def core_imports_outside_allow_list(source: str, path: str) -> list[str]:
    """Every import in ``source`` (a module of ``fleetwarden.core``) that is neither the core
    itself nor in ``CORE_ALLOWED``, as ``path:line: module``."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside the core package
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            if name == "fleetwarden.core" or name.startswith("fleetwarden.core."):
                continue
            if name not in CORE_ALLOWED:
                found.append(f"{path}:{node.lineno}: {name}")
    return found


def test_core_imports_only_itself_and_pure_stdlib_modules():
    """The allow list holds for every module of the core (in functions and TYPE_CHECKING
    blocks too)."""
    bad = []
    for path in sorted(CORE.rglob("*.py")):
        bad.extend(core_imports_outside_allow_list(path.read_text(), str(path.relative_to(ROOT))))
    assert not bad, "the core imports outside its allow list:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "import time",
        "from pathlib import Path",
        "import sqlalchemy",
        "from starlette.requests import Request",
        "from fleetwarden.formats import nodes",
        "import fleetwarden.app.scanning",
        "def f():\n    import logging",
        "from collections import abc\nimport asyncio.tasks",
    ],
)
def test_the_core_allow_list_refuses_io_third_party_and_other_layers(source):
    assert core_imports_outside_allow_list(source, "x.py")


def test_the_core_allow_list_accepts_the_core_and_pure_stdlib():
    source = "import re\nfrom . import findings\nfrom fleetwarden.core.pools import NodePoolSpec"
    assert core_imports_outside_allow_list(source, "x.py") == []


MAX_MODULE_LINES = 800
TOO_LONG_ALLOWED: set[str] = set()  # entrypoints/fleet_cmd.py was dismantled (issue #12)


def test_no_module_is_longer_than_800_lines():
    """A module over 800 lines holds several concerns: split it along them (issue #12)."""
    src = ROOT / "src" / "fleetwarden"
    too_long = {
        str(p.relative_to(src)): n
        for p in sorted(src.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    for allowed in TOO_LONG_ALLOWED:
        too_long.pop(allowed, None)
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


ENTRY_LAYERS_MAX_LINES = 2500  # issue #12: use cases live in app/, plumbing in adapters/


def test_the_entry_layers_stay_within_2500_lines():
    """``cli/`` and ``entrypoints/`` parse, call one use case and render; a use case or a
    piece of plumbing written there again shows up here (``benchmarks/entry_lines.py`` lists
    the modules)."""
    src = ROOT / "src" / "fleetwarden"
    total = sum(
        p.read_bytes().count(b"\n")
        for layer in ("cli", "entrypoints")
        for p in (src / layer).rglob("*.py")
    )
    assert 0 < total <= ENTRY_LAYERS_MAX_LINES, f"entry layers: {total} lines"
