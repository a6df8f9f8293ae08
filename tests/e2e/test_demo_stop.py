"""``fleetwarden demo`` stops cleanly on Ctrl-C and on SIGTERM (``kill``, ``timeout``, a
container's stop): exit 0, "demo stopped" said, and every process it started (the
kube-apiservers and etcds of its clusters) gone. SIGTERM used to kill it outright and leave
six of them running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXE = str(Path(sys.executable).parent / "fleetwarden")


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = {int(k) for k in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += kids - found
            found |= kids
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_demo_stops_everything_it_started_on_sigterm_and_ctrl_c(tmp_path, sig):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        proc = subprocess.Popen(
            [EXE, "demo", "--port", str(port), "--no-open"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "200"},
        )
    try:
        deadline = time.monotonic() + 120
        while "Ctrl-C stops it" not in out.read_text():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, "the demo did not start"
            time.sleep(0.2)
        started = descendants(proc.pid)
        proc.send_signal(sig)
        assert proc.wait(60) == 0, out.read_text()
        assert "demo stopped" in out.read_text()
        deadline = time.monotonic() + 20
        while left := [p for p in started if alive(p)]:
            assert time.monotonic() < deadline, f"still running: {left}"
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
