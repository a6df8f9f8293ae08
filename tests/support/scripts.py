"""Running the project's service scripts (scripts/*-test-env) from tests: one shared runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run_script(
    name: str,
    args: list[str],
    *,
    state_var: str,
    state_dir: str | os.PathLike | None,
    timeout: float,
    error: type[Exception],
    extra_env: dict[str, str] | None = None,
) -> str:
    """Run ``scripts/<name> args`` with ``state_var`` pointing at ``state_dir``; its stderr is
    passed through (pytest shows it with -s or on failure); a non-zero exit raises ``error``
    with the exit code and the end of stderr. Returns stdout."""
    env = {**os.environ, **(extra_env or {})}
    if state_dir is not None:
        env[state_var] = str(state_dir)
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.stderr:
        sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        raise error(f"{name} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc.stdout


def last_line(out: str, *, name: str, what: str, error: type[Exception]) -> str:
    """The last non-empty line of a script's stdout (where the scripts print their result)."""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if not lines:
        raise error(f"{name} {what} printed nothing")
    return lines[-1]
