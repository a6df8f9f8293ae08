"""A real PostgreSQL server for tests and benchmarks, via scripts/pg-test-env.

Typical session fixture::

    from tests.support import pg_env

    @pytest.fixture(scope="session")
    def pg_url(tmp_path_factory):
        state_dir = tmp_path_factory.mktemp("pg")
        url = pg_env.start_server(state_dir)
        try:
            yield url
        finally:
            pg_env.stop_server(state_dir)

Tests that need an empty database each call ``create_database(url, name)`` (or
``fresh_database(url)``, which picks a new name) and get that database's URL.  The first run
may install Debian's ``postgresql`` with apt-get; later runs create and start a cluster in
about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import subprocess
from pathlib import Path

from tests.support.scripts import last_line, run_script

__all__ = [
    "SCRIPT",
    "PgEnvError",
    "crash_server",
    "create_database",
    "create_database_async",
    "ensure_binaries",
    "fresh_database",
    "fresh_database_async",
    "load_state",
    "restart_server",
    "start_server",
    "stop_server",
]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg-test-env"

# Generous: includes `apt-get update` + install on a slow mirror.
DEFAULT_TIMEOUT = 10 * 60
_names = itertools.count(1)


class PgEnvError(RuntimeError):
    """scripts/pg-test-env failed; the message holds its exit code and stderr."""


def _run(args: list[str], state_dir: str | os.PathLike | None, timeout: float) -> str:
    return run_script(
        "pg-test-env",
        args,
        state_var="FW_PG_STATE",
        state_dir=state_dir,
        timeout=timeout,
        error=PgEnvError,
    )


def _last_line(out: str, what: str) -> str:
    return last_line(out, name="pg-test-env", what=what, error=PgEnvError)


def ensure_binaries(timeout: float = DEFAULT_TIMEOUT) -> Path:
    """Install Debian's postgresql when its server binaries are missing; return their dir."""
    return Path(_last_line(_run(["ensure"], None, timeout), "ensure"))


def start_server(state_dir: str | os.PathLike, timeout: float = DEFAULT_TIMEOUT) -> str:
    """initdb + start a private server on 127.0.0.1; return the URL of its ``fleetwarden``
    database (``postgresql://postgres@127.0.0.1:PORT/fleetwarden``, trust auth).

    state_dir must not hold a running server (pass a fresh directory).
    """
    try:
        out = _run(["up"], state_dir, timeout)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        # The script was killed mid-start; its server would otherwise outlive the session.
        with contextlib.suppress(Exception):
            stop_server(state_dir)
        raise
    return _last_line(out, "up")


def stop_server(state_dir: str | os.PathLike, timeout: float = 120) -> None:
    """Stop the server of state_dir (pg_ctl stop -m fast, by PID) and remove its dirs."""
    _run(["down"], state_dir, timeout)


def crash_server(state_dir: str | os.PathLike, timeout: float = 90) -> None:
    """Stop the server as a crash would (immediate: no checkpoint, connections cut); its data
    dir and port stay for ``restart_server``."""
    _run(["crash"], state_dir, timeout)


def restart_server(state_dir: str | os.PathLike, timeout: float = DEFAULT_TIMEOUT) -> str:
    """Start a crashed server again (same data, same port; the WAL is replayed); return its
    URL once it accepts connections."""
    return _last_line(_run(["start"], state_dir, timeout), "start")


def load_state(state_dir: str | os.PathLike) -> dict:
    """The script's state.json: "url", "port", "host", "user", "database", "data_dir",
    "root_dir", "socket_dir", "pid", "bin_dir", "log"."""
    return json.loads((Path(state_dir) / "state.json").read_text())


def create_database(url: str, name: str) -> str:
    """CREATE DATABASE name on the server of ``url``; return the new database's URL.

    Not from inside a running event loop: use ``create_database_async`` there.
    """
    return asyncio.run(create_database_async(url, name))


async def create_database_async(url: str, name: str) -> str:
    """``create_database`` for async callers (fixtures, benchmarks)."""
    import asyncpg  # the driver the audit store uses
    from sqlalchemy.engine import make_url

    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"not a plain database name: {name!r}")
    target = make_url(url)
    dsn = target.set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return target.set(database=name).render_as_string(hide_password=False)


def fresh_database(url: str, prefix: str = "t") -> str:
    """A new, empty database on the server of ``url`` (a name no other call used)."""
    return create_database(url, _fresh_name(prefix))


async def fresh_database_async(url: str, prefix: str = "t") -> str:
    return await create_database_async(url, _fresh_name(prefix))


def _fresh_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_names)}"
