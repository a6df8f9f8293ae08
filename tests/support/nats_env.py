"""A real nats-server with JetStream for tests, via scripts/nats-test-env.

Typical session fixture (in conftest.py)::

    from tests.support import nats_env

    @pytest.fixture(scope="session")
    def nats_url(tmp_path_factory):
        state_dir = tmp_path_factory.mktemp("nats")
        url = nats_env.start_server(state_dir)
        try:
            yield url
        finally:
            nats_env.stop_server(state_dir)

Crash tests call ``kill_server`` (SIGKILL) and ``restart_server`` (same ports, same store
dir).  The first run installs Debian's ``nats-server`` with apt-get (about 2 s with fresh
package lists); later runs start a server in about 0.2 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

from tests.support.scripts import last_line, run_script

__all__ = [
    "SCRIPT",
    "NatsEnvError",
    "ensure_binary",
    "kill_server",
    "load_state",
    "restart_server",
    "start_server",
    "stop_server",
]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "nats-test-env"

# Generous: includes `apt-get update` + install on a slow mirror.
DEFAULT_TIMEOUT = 10 * 60


class NatsEnvError(RuntimeError):
    """scripts/nats-test-env failed; the message holds its exit code and stderr."""


def _run(args: list[str], state_dir: str | os.PathLike | None, timeout: float) -> str:
    return run_script(
        "nats-test-env",
        args,
        state_var="FW_NATS_STATE",
        state_dir=state_dir,
        timeout=timeout,
        error=NatsEnvError,
    )


def _last_line(out: str, what: str) -> str:
    return last_line(out, name="nats-test-env", what=what, error=NatsEnvError)


def ensure_binary(timeout: float = DEFAULT_TIMEOUT) -> Path:
    """Install Debian's nats-server when missing; return its path."""
    return Path(_last_line(_run(["ensure"], None, timeout), "ensure"))


def start_server(state_dir: str | os.PathLike, timeout: float = DEFAULT_TIMEOUT) -> str:
    """Start one nats-server (JetStream, file store in state_dir); return its nats:// URL.

    Returns once /healthz?js-enabled-only=true answers 200.  state_dir must not hold a
    running server (pass a fresh directory, e.g. from tmp_path_factory).
    """
    try:
        out = _run(["up"], state_dir, timeout)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        # The script was killed mid-start; its daemon would otherwise outlive the session.
        with contextlib.suppress(Exception):
            stop_server(state_dir)
        raise
    return _last_line(out, "up")


def stop_server(state_dir: str | os.PathLike, timeout: float = 60) -> None:
    """Stop the server of state_dir (by PID) and remove state_dir."""
    _run(["down"], state_dir, timeout)


def kill_server(state_dir: str | os.PathLike, timeout: float = 60) -> None:
    """SIGKILL the server; its store and ports stay for ``restart_server``."""
    _run(["kill9"], state_dir, timeout)


def restart_server(state_dir: str | os.PathLike, timeout: float = 60) -> str:
    """Start a killed server again (same ports, same store dir); wait for health."""
    return _last_line(_run(["start"], state_dir, timeout), "start")


def load_state(state_dir: str | os.PathLike) -> dict:
    """The script's state.json: "url", "port", "monitor_port", "store_dir", "argv", "bin"."""
    return json.loads((Path(state_dir) / "state.json").read_text())
