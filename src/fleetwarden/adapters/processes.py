"""``serve`` with ``role: all`` and the SQLite queue: a supervisor and two processes.

Why two processes: in one, the HTTP loop, the queue's writer thread and the workers (the
inspections, the audit store's hash chain and inserts, leasing hundreds of events) share one
GIL, and the gateway's answers wait for the workers' steps (BENCHMARKS.md, issue 12). Here
the **gateway** process authenticates, validates, appends to the queue (WAL, group commit,
fsync) and answers; the **worker** process consumes the queue and runs everything else
(watchers, inspections, healing, the audit store, the read API and the dashboard, which the
gateway passes on over a private Unix socket).

The supervisor (this module, started by ``wiring/supervisor.py``; the decisions are
``app/supervising.py``, passed in as ``decide``):

* holds the queue file's lock (a second ``serve`` on the same file is refused), binds the
  listening socket and the worker's Unix socket, and makes the socket pair through which a
  put wakes the worker; the children inherit them, so a restarted child finds them as they
  were (connections made meanwhile wait in the backlog);
* starts both children by running the same command line again (``sys.orig_argv``) with
  ``FW_SERVE_PROCESS`` set; each child asks the kernel to SIGKILL it when the supervisor dies
  (``PR_SET_PDEATHSIG``), so a ``kill -9`` of the supervisor leaves no orphan, and runs in a
  process group of its own, so a terminal's Ctrl-C reaches the supervisor only; the
  worker socket's directory (``$TMPDIR/fleetwarden-serve-*``, 0700) is noted in the queue's
  lock file, so the next supervisor of that queue removes one a ``kill -9`` left behind;
* restarts a child that dies (``supervising.decide``), and gives up with exit 2 when a child
  fails on its configuration at start;
* on SIGTERM/SIGINT stops the gateway first (it answers the requests it holds; no new 202),
  then the worker (it finishes or hands back its deliveries), each with SIGTERM and then,
  after ``STOP_GRACE`` seconds, SIGKILL.

Nothing acknowledged can be lost to any of this: a 202 is sent after the event's commit is
fsync'd, and a worker killed mid-batch had not acked what it had not finished (the stores
are idempotent by event key). ``FLEETWARDEN_ONE_PROCESS=1`` runs the old one-process
``serve`` (for comparison and debugging). Linux only (``prctl``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from fleetwarden.formats.errors import FormatError

__all__ = [
    "STOP_GRACE",
    "ChildSetup",
    "Step",
    "child_setup",
    "in_child",
    "queue_options",
    "supervise",
]

STOP_GRACE = 15.0  # seconds a child has to stop after SIGTERM (uvicorn drains in 5)
_ENV_PROCESS = "FW_SERVE_PROCESS"
_ENV_FDS = "FW_SERVE_FDS"
_ENV_PARENT = "FW_SERVE_SUPERVISOR"
_ENV_API = "FW_SERVE_WORKER_SOCKET"
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildSetup:
    """What a child inherited from the supervisor."""

    role: str  # "gateway" | "worker"
    listen_fd: int  # the gateway's TCP socket, the worker's Unix socket
    wake_fd: int  # the queue's wake-up socket (producer end / consumer end)
    worker_socket: str  # the path the gateway passes the read API on to


@dataclass(frozen=True)
class Step:
    """What to do about a child that exited (``decide``'s answer): give up with the exit code
    ``give_up``, or start it again after ``delay`` seconds."""

    reason: str  # said on stderr
    give_up: int | None = None
    delay: float = 0.0
    failures_in_a_row: int = 0  # including this exit


# decide(name, returncode, started_at, ended_at, failures_in_a_row before this exit)
Decide = Callable[[str, int, float, float, int], Step]


def in_child() -> bool:
    """This process is a supervised serve's gateway or worker."""
    return _ENV_PROCESS in os.environ


def child_setup() -> ChildSetup | None:
    """In a child: die with the supervisor, and say what was inherited. None elsewhere."""
    role = os.environ.get(_ENV_PROCESS)
    if role is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(os.environ.get(_ENV_PARENT, "0")):
        os._exit(1)  # the supervisor died before the line above: nobody to serve for
    if role == "worker":
        # on a busy machine the gateway's answers come first; the worker catches up after
        os.nice(5)
    return _inherited()


def queue_options() -> dict[str, Any]:
    """The SQLite queue's sharing options in a child (``SqliteQueue(**...)``); {} elsewhere."""
    setup = _inherited()
    if setup is None:
        return {}
    share = "producer" if setup.role == "gateway" else "consumer"
    return {"share": share, "wake_fd": setup.wake_fd}


def _inherited() -> ChildSetup | None:
    role = os.environ.get(_ENV_PROCESS)
    if role is None:
        return None
    listen_fd, wake_fd = (int(x) for x in os.environ[_ENV_FDS].split(","))
    return ChildSetup(role, listen_fd, wake_fd, os.environ[_ENV_API])


# --------------------------------------------------------------------------- the supervisor


@dataclass
class _Child:
    name: str
    fds: tuple[int, int]
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    due: float = 0.0  # when to start it (again)
    failures: int = 0


@dataclass
class _Resources:
    lock: IO[str]
    listen: socket.socket
    api: socket.socket
    api_dir: str
    wake: tuple[socket.socket, socket.socket]

    def close(self) -> None:
        for s in (self.listen, self.api, *self.wake):
            s.close()
        shutil.rmtree(self.api_dir, ignore_errors=True)
        self.lock.close()  # drops the flock


def supervise(
    host: str,
    port: int,
    queue_path: str,
    *,
    decide: Decide,
    stop_order: Sequence[str],
    warn: Callable[[str], None],
) -> int:
    """Supervise the gateway and the worker until SIGTERM/SIGINT (0) or ``decide`` gives up
    (its code). Raises FormatError when the queue file is taken or the listen address cannot
    be bound. ``warn`` says each exit's step and a child killed at stop."""
    res = _open_resources(host, port, queue_path)
    stop = False
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)

    def on_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    old_fd = signal.set_wakeup_fd(wake_w)
    old = {s: signal.signal(s, on_stop) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    old[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda s, f: None)  # wakes select
    children = {
        "gateway": _Child("gateway", (res.listen.fileno(), res.wake[0].fileno())),
        "worker": _Child("worker", (res.api.fileno(), res.wake[1].fileno())),
    }
    code = 0
    try:
        while not stop:
            now = time.monotonic()
            for child in children.values():
                if child.proc is None and child.due <= now:
                    _start(child, res)
            for child in children.values():
                if child.proc is None or child.proc.poll() is None:
                    continue
                decision = decide(
                    child.name,
                    child.proc.returncode,
                    child.started_at,
                    time.monotonic(),
                    child.failures,
                )
                child.proc = None
                warn(decision.reason)
                if decision.give_up is not None:
                    code, stop = decision.give_up, True
                    break
                child.failures, child.due = decision.failures_in_a_row, now + decision.delay
            if stop:
                break
            pending = [c.due - now for c in children.values() if c.proc is None]
            timeout = max(min(pending, default=1.0), 0.0)
            with contextlib.suppress(InterruptedError):
                select.select([wake_r], [], [], min(timeout, 1.0))
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
    finally:
        for name in stop_order:
            _stop(children[name], warn)
        signal.set_wakeup_fd(old_fd)
        for s, handler in old.items():
            signal.signal(s, handler)
        os.close(wake_r)
        os.close(wake_w)
        res.close()
    return code


def _start(child: _Child, res: _Resources) -> None:
    env = {
        **os.environ,
        _ENV_PROCESS: child.name,
        _ENV_FDS: ",".join(str(fd) for fd in child.fds),
        _ENV_PARENT: str(os.getpid()),
        _ENV_API: str(Path(res.api_dir) / _API_SOCKET),
    }
    child.proc = subprocess.Popen(
        sys.orig_argv,
        pass_fds=child.fds,
        env=env,
        stdin=subprocess.DEVNULL,
        process_group=0,  # Ctrl-C reaches the supervisor, which stops the children in order
    )
    child.started_at = time.monotonic()


def _stop(child: _Child, warn: Callable[[str], None]) -> None:
    proc = child.proc
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        warn(f"the {child.name} process did not stop within {STOP_GRACE:.0f}s: killing it")
        proc.kill()
        proc.wait()


def _open_resources(host: str, port: int, queue_path: str) -> _Resources:
    lock = _lock_queue(Path(queue_path))
    try:
        listen = _bind(host, port)
    except BaseException:
        lock.close()
        raise
    try:
        api_dir = tempfile.mkdtemp(prefix=_API_DIR_PREFIX)  # 0700: only this user
        api = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        api.bind(str(Path(api_dir) / _API_SOCKET))
        api.listen(1024)
        _note_api_dir(lock, api_dir)
    except OSError as exc:
        listen.close()
        lock.close()
        raise FormatError(
            tempfile.gettempdir(),
            f"cannot make the worker's socket: {exc} (set TMPDIR to a writable directory)",
        ) from None
    wake = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in wake:
        s.setblocking(False)
    return _Resources(lock, listen, api, api_dir, wake)


def _lock_queue(path: Path) -> IO[str]:
    """The lock a one-process ``serve`` takes on its queue (``SqliteQueue``): one service
    per queue file, whichever way it runs."""
    lock_path = path.with_name(path.name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock_path, "a+")  # noqa: SIM115 - held while the supervisor runs
    except OSError as exc:
        raise FormatError(str(lock_path), f"cannot open the queue's lock: {exc}") from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise FormatError(
            str(path),
            f"the queue is open in another process (lock {lock_path}); one service owns an "
            "embedded queue: use the NATS queue for several replicas",
        ) from None
    _remove_stale_api_dir(fh)
    return fh


_API_DIR_PREFIX = "fleetwarden-serve-"
_API_SOCKET = "worker.sock"


def _note_api_dir(lock: IO[str], api_dir: str) -> None:
    """Write the worker socket's directory into the queue's lock file, which this
    supervisor holds: the next one to take the lock removes it if this one never could
    (``kill -9``; a clean stop removes it itself)."""
    lock.seek(0)
    lock.truncate()
    lock.write(api_dir + "\n")
    lock.flush()


def _remove_stale_api_dir(lock: IO[str]) -> None:
    """The worker socket's directory a supervisor of this queue left behind (named in the
    lock file it held; it holds it no longer, so it is gone), removed -- only when it is
    what a supervisor makes: a directory of this user named ``fleetwarden-serve-*`` right
    in the temporary directory, holding nothing but the socket."""
    lock.seek(0)
    noted = lock.read(4096).strip()
    if not noted:
        return
    stale = Path(noted)
    with contextlib.suppress(OSError, ValueError):  # ValueError: a NUL in the note
        if (
            stale.parent != Path(tempfile.gettempdir())
            or not stale.name.startswith(_API_DIR_PREFIX)
            or stale.is_symlink()
            or not stale.is_dir()
            or stale.stat().st_uid != os.getuid()
        ):
            return
        entries = list(stale.iterdir())
        if any(e.name != _API_SOCKET or not e.is_socket() for e in entries):
            return
        for entry in entries:
            entry.unlink()
        stale.rmdir()


def _bind(host: str, port: int, *, patience: float = 5.0) -> socket.socket:
    """The listening socket, as uvicorn would make it (SO_REUSEADDR, backlog 2048). A port
    still held by the children of a ``serve`` killed a moment ago is tried again a while."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    infos.sort(key=lambda i: i[0] != socket.AF_INET)  # "localhost": 127.0.0.1 first
    family, _, _, _, address = infos[0]
    deadline = time.monotonic() + patience
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
            sock.listen(2048)
            return sock
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise FormatError(f"listen {host}:{port}", f"cannot listen: {exc}") from None
            time.sleep(0.1)
