"""Help and version as people read them (issue 12): placeholders that name the values, nothing
cut short, ``--version`` from the installed metadata."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version

import pytest

from fleetwarden.cli import main as cli_main

COMMANDS = [
    ["scan"],
    ["explain"],
    ["demo"],
    ["deprecations"],
    ["serve"],
    ["watch"],
    ["approve"],
    ["gate"],
    ["audit", "verify"],
    ["report"],
    ["audit", "query"],
    ["audit", "export"],
    ["fleet", "versions"],
    ["fleet", "diff"],
]


def run(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "fleetwarden", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_version_prints_the_installed_version():
    r = run("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"fleetwarden {version('fleetwarden')}"


def test_the_command_list_shows_every_summary_whole():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    squashed = " ".join(r.stdout.split())
    for name, command in cli_main.COMMANDS.items():
        assert f"{name} {command.summary}" in squashed, name
    # click's short help cuts at 45 characters and ends the line with "..."
    assert not [x for x in r.stdout.splitlines() if x.endswith("...") and "[ARGS]" not in x]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_placeholders_name_the_values_and_no_help_is_cut(command):
    r = run(*command, "--help")
    assert r.returncode == 0, r.stderr
    # Typer's fallbacks after an option or argument: <str>, <int range>, <table|json>...
    placeholder = re.compile(r"^\s+(?:-\w, )?(?:--?[\w-]+|[A-Z_]+) <[^>]*>", re.M)
    assert not placeholder.findall(r.stdout), r.stdout
    # click cuts a short help with "..." at the end of the line
    assert not [x for x in r.stdout.splitlines() if x.endswith("...") and "[ARGS]" not in x]
    assert all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout


def test_format_and_fail_on_placeholders_list_their_values():
    out = run("scan", "--help", columns=120).stdout
    assert "--format table|json" in out
    assert "--fail-on info|low|medium|high|critical" in out
    assert "--jobs N" in out


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_a_demo_port_outside_1_to_65535_is_a_usage_error_not_a_traceback(port):
    done = run("demo", "--port", port)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "--port" in done.stderr and "1<=x<=65535" in done.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["demo", "--steps", "-1"], "--steps"),
        (["demo", "--interval", "-1"], "--interval"),
        (["watch", "--desired", "x", "--probe-interval", "0"], "--probe-interval"),
        (["watch", "--desired", "x", "--duration", "-5"], "--duration"),
        (["scan", "--desired", "x", "--nodes", "y", "--jobs", "0"], "--jobs"),
    ],
)
def test_a_count_or_duration_below_its_range_is_a_usage_error_not_a_quiet_exit_0(args, option):
    # `demo --steps -1` used to print the fleet and exit 0, as if it had been asked for nothing
    done = run(*args)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{option}'" in done.stderr
