"""`kill -9` of the running service in the middle of a load, then restart: zero acknowledged
events lost, zero processed twice — with a real SQLite queue file and with a real NATS server.

Accepted = the gateway answered 202. Processed = the worker's durable effect: the event log
(`eventLog`), written and fsync'd before the queue delivery is acknowledged, and read back at
start so a redelivered event is recognised.
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
from pathlib import Path

import httpx
import pytest

from tests.support import nats_env

EXE = str(Path(sys.executable).parent / "fleetwarden")
TOKEN = "crash-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _event(i: int) -> dict:
    return {
        "version": "0",
        "id": f"crash-{i:06d}",
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


class Service:
    def __init__(self, tmp: Path, realdata: Path, queue: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.journal = tmp / "events.jsonl"
        (tmp / "desired.yaml").write_text(
            "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
            "metadata: {name: duckboat}\nmanagedNodeGroups:\n  - {name: custom-1}\n"
        )
        nodes = realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json"
        self.config = tmp / "svc.yaml"
        self.config.write_text(
            json.dumps(
                {
                    "listen": f"127.0.0.1:{self.port}",
                    "queue": queue,
                    "queuePath": str(tmp / "queue.db"),
                    "store": f"sqlite:///{tmp / 'audit.db'}",
                    "eventLog": str(self.journal),
                    "desired": [str(tmp / "desired.yaml")],
                    "nodes": [f"duckboat={nodes}"],
                    "auth": {"aws": {"bearerToken": TOKEN}},
                    "debounceSeconds": 0.05,
                }
            )
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [EXE, "serve", "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/healthz", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise AssertionError(self.proc.stderr.read().decode() if self.proc.poll() else "no start")

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def depth(self) -> float:
        text = httpx.get(f"{self.base}/metrics", timeout=2).text
        line = next(x for x in text.splitlines() if x.startswith("fleetwarden_queue_depth "))
        return float(line.split()[1])

    def journal_ids(self) -> list[str]:
        ids = []
        for line in self.journal.read_bytes().splitlines(keepends=True):
            if line.endswith(b"\n"):
                ids.append(json.loads(line)["id"])
        return ids


def _load(svc: Service, accepted: list[str], stop: threading.Event, start: int) -> None:
    """A producer: posts events one by one, records the ids answered 202, until stopped."""
    i = start
    with httpx.Client(timeout=2) as client:
        while not stop.is_set():
            try:
                r = client.post(
                    f"{svc.base}/events/aws",
                    json=_event(i),
                    headers={"Authorization": f"Bearer {TOKEN}"},
                )
                if r.status_code == 202:
                    accepted.append(f"crash-{i:06d}")
            except httpx.HTTPError:
                return  # the service is gone: what was not answered 202 was not accepted
            i += 1


def _scenario(svc: Service) -> None:
    accepted: list[str] = []
    svc.start()
    try:
        # 1. kill -9 in the middle of a load run
        stop = threading.Event()
        producer = threading.Thread(target=_load, args=(svc, accepted, stop, 0))
        producer.start()
        deadline = time.monotonic() + 20
        while len(accepted) < 300 and time.monotonic() < deadline:
            time.sleep(0.01)
        svc.kill9()
        stop.set()
        producer.join(10)
        assert len(accepted) >= 300
        # 2. restart; kill -9 again while the backlog drains, with a new load running
        svc.start()
        stop = threading.Event()
        producer = threading.Thread(target=_load, args=(svc, accepted, stop, 100_000))
        producer.start()
        time.sleep(0.3)
        svc.kill9()
        stop.set()
        producer.join(10)
        # 3. restart and drain
        svc.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if svc.depth() == 0 and set(accepted) <= set(svc.journal_ids()):
                break
            time.sleep(0.1)
        processed = Counter(svc.journal_ids())
        lost = [i for i in accepted if i not in processed]
        twice = [i for i, n in processed.items() if n > 1]
        assert not lost, f"{len(lost)} acknowledged events lost, e.g. {lost[:5]}"
        assert not twice, f"{len(twice)} events processed twice, e.g. {twice[:5]}"
        assert len(set(accepted)) == len(accepted)
    finally:
        svc.stop()


def test_kill9_with_sqlite_queue_loses_and_duplicates_nothing(tmp_path, realdata):
    _scenario(Service(tmp_path, realdata, "sqlite"))


@pytest.mark.live
def test_kill9_with_nats_queue_loses_and_duplicates_nothing(tmp_path, realdata):
    state = tmp_path / "nats"
    url = nats_env.start_server(state)
    try:
        _scenario(Service(tmp_path, realdata, url))
    finally:
        nats_env.stop_server(state)
