"""``fleetwarden serve`` as a real process for fault tests: its config, start and stop by PID,
and a load generator that posts EventBridge deliveries and keeps what each one was answered.

    svc = ServeProcess(tmp_path, {"queue": "sqlite", ...})   # listen, auth.aws, desired: set
    svc.start()                                               # returns once /healthz answers
    with Load(svc) as load:                                   # posts until the block ends
        ...                                                   # inject the fault here
    load.accepted                                             # ids answered 202, in order
    svc.stop()

Accepted means answered 202: the gateway stored the event (the contract's acknowledgement).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

__all__ = ["TOKEN", "Load", "ServeProcess", "eks_event", "wait_for"]

EXE = str(Path(sys.executable).parent / "fleetwarden")
TOKEN = "chaos-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 30.0, every: float = 0.05) -> Any:
    """Poll ``cond`` until it returns something true; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = cond()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(every)


def eks_event(event_id: str) -> dict[str, Any]:
    """A CloudTrail UpdateNodegroupConfig as EventBridge delivers it (cluster duckboat)."""
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "AWS API Call via CloudTrail",
        "source": "aws.eks",
        "account": "123456789012",
        "time": "2026-11-29T10:00:00Z",
        "region": "eu-west-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.08",
            "eventSource": "eks.amazonaws.com",
            "userIdentity": {"arn": "arn:aws:iam::123456789012:user/alice"},
            "eventName": "UpdateNodegroupConfig",
            "awsRegion": "eu-west-1",
            "eventTime": "2026-11-29T10:00:00Z",
            "requestParameters": {
                "name": "duckboat",
                "nodegroupName": "custom-1",
                "scalingConfig": {"desiredSize": 2},
            },
        },
    }


class ServeProcess:
    """One ``fleetwarden serve`` process over ``tmp``; ``config`` is merged over the basics
    (listen, the aws bearer token, one desired EKS pool for cluster duckboat)."""

    def __init__(self, tmp: Path, config: dict[str, Any], *, env: dict[str, str] | None = None):
        self.tmp = tmp
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        desired = tmp / "desired.yaml"
        desired.write_text(
            "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
            "metadata: {name: duckboat}\nmanagedNodeGroups:\n  - {name: custom-1}\n"
        )
        self.config = {
            "listen": f"127.0.0.1:{self.port}",
            "auth": {"aws": {"bearerToken": TOKEN}},
            "desired": [str(desired)],
            "debounceSeconds": 0.05,
            **config,
        }
        self.config_path = tmp / "serve.json"
        self.config_path.write_text(json.dumps(self.config))
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tmp / "serve.log"

    def start(self, timeout: float = 30.0) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [EXE, "serve", "-c", str(self.config_path)],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=self.env,
            )

        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}:\n{self.log_tail()}")
            try:
                return httpx.get(f"{self.base}/healthz", timeout=0.5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, "serve answers /healthz", timeout)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def metric(self, name: str) -> float:
        """The sum of a metric's samples on /metrics (0 when absent)."""
        text = httpx.get(f"{self.base}/metrics", timeout=5).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def depth(self) -> float:
        return self.metric("fleetwarden_queue_depth")

    def journal_ids(self) -> list[str]:
        """Event ids in the event log (``eventLog``), complete lines only, in order."""
        path = Path(self.config["eventLog"])
        if not path.exists():
            return []
        lines = path.read_bytes().splitlines(keepends=True)
        return [json.loads(line)["id"] for line in lines if line.endswith(b"\n")]


class Load:
    """Producer threads posting one event per request, each id once, until the block ends.
    ``answers`` counts every status (``"error:<httpx exception>"`` for no answer within
    ``timeout``, a webhook sender's patience); ``accepted`` lists the ids answered 202,
    ``timeline`` (monotonic time, status) every answer."""

    def __init__(
        self, svc: ServeProcess, *, threads: int = 2, prefix: str = "chaos", timeout: float = 10
    ) -> None:
        self.svc, self.threads, self.prefix, self.timeout = svc, threads, prefix, timeout
        self.accepted: list[str] = []
        self.answers: Counter[str] = Counter()
        self.timeline: list[tuple[float, str]] = []
        self.bodies: dict[int, dict[str, Any]] = {}  # one example body per refusal status
        self.slowest = 0.0  # seconds: the longest any request waited for its answer
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []

    def __enter__(self) -> Load:
        for n in range(self.threads):
            t = threading.Thread(target=self._run, args=(n,), daemon=True)
            t.start()
            self._workers.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._workers:
            t.join(30)

    def ids(self, n: int) -> Iterator[str]:
        i = 0
        while True:
            yield f"{self.prefix}-{n}-{i:07d}"
            i += 1

    def _run(self, n: int) -> None:
        with httpx.Client(timeout=self.timeout) as client:
            for event_id in self.ids(n):
                if self._stop.is_set():
                    return
                sent = time.monotonic()
                try:
                    r = client.post(
                        f"{self.svc.base}/events/aws",
                        json=eks_event(event_id),
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    )
                    status = str(r.status_code)
                except httpx.HTTPError as exc:  # no answer: not acknowledged either
                    status = f"error:{type(exc).__name__}"
                    r = None
                with self._lock:
                    self.slowest = max(self.slowest, time.monotonic() - sent)
                    self.answers[status] += 1
                    self.timeline.append((time.monotonic(), status))
                    if status == "202":
                        self.accepted.append(event_id)
                    elif r is not None and r.status_code not in self.bodies:
                        self.bodies[r.status_code] = {
                            "json": r.json(),
                            "retry-after": r.headers.get("retry-after"),
                        }
                if status != "202":
                    # refused (the fault): try again a little later, as a sender would
                    self._stop.wait(0.02)

    def count(self) -> int:
        with self._lock:
            return len(self.accepted)

    def answered_since(self, t: float) -> int:
        with self._lock:
            return sum(1 for at, _ in self.timeline if at > t)

    def first_after(self, t: float, status: str = "202") -> float | None:
        """Monotonic time of the first answer ``status`` after ``t``."""
        with self._lock:
            return next((at for at, s in self.timeline if at > t and s == status), None)
