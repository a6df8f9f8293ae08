"""``fleetwarden serve`` as a child process for restart and crash tests: start it on a config,
wait for ``/healthz``, read ``/metrics``, ``kill -9`` it, or wait for it to die by itself (a
fault installed by ``tests/support/crashing_serve.py``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

__all__ = ["ServeProcess", "free_port"]

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    def __init__(self, config: Path, port: int) -> None:
        self.config, self.port = config, port
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd = ROOT  # where serve is started (relative paths in its config resolve there)
        self.log = config.with_suffix(".stderr.log")

    def start(
        self, env: Mapping[str, str] | None = None, timeout: float = 30.0, *, may_die: bool = False
    ) -> bool:
        """Run ``serve`` (through the fault wrapper, which does nothing without its
        variables) and wait until it answers /healthz: True. ``may_die``: a fault may kill it
        first (replaying what a dead process left): then False."""
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.crashing_serve",
                    "serve",
                    "-c",
                    str(self.config),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=self.cwd,
                # this checkout's src first: a worktree runs its own code, not the editable
                # install's
                env={
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join((str(ROOT / "src"), str(ROOT))),
                    **(env or {}),
                },
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if may_die and self.proc.returncode == -signal.SIGKILL:
                    return False
                raise AssertionError(f"serve exited {self.proc.returncode}: {self.stderr()}")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=0.5).status_code == 200:
                    return True
            except httpx.HTTPError:
                time.sleep(0.05)
        raise AssertionError(f"serve did not answer within {timeout}s: {self.stderr()}")

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_dead(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"serve still running after {timeout}s") from None

    def kill9(self) -> None:
        if self.alive:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.base}/metrics", timeout=5).text
        line = next((x for x in text.splitlines() if x.startswith(name + " ")), None)
        return float(line.split()[1]) if line else 0.0
