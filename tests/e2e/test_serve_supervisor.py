"""The default ``serve`` (``role: all``, SQLite queue) is a supervisor with two processes:
the gateway and the worker (``adapters/processes.py``). Against the real CLI:

* ``kill -9`` of the worker under load: the supervisor starts a new one, the gateway keeps
  answering 202 throughout (its pid unchanged), and every acknowledged event reaches the
  event log and the audit store exactly once;
* SIGTERM of the supervisor under load: exit 0, both children gone, nothing acknowledged lost;
* ``kill -9`` of the supervisor: both children exit by themselves (no orphan);
* ``/healthz`` and ``/metrics`` speak for both processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from tests.support.serve_process import free_port

EXE = str(Path(sys.executable).parent / "fleetwarden")
TOKEN = "supervisor-test-token"


class Supervised:
    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.tmp = tmp
        self.journal = tmp / "events.jsonl"
        self.config = tmp / "svc.json"
        self.config.write_text(
            json.dumps(
                {
                    "listen": f"127.0.0.1:{self.port}",
                    "queuePath": str(tmp / "queue.db"),
                    "store": f"sqlite:///{tmp / 'audit.db'}",
                    "eventLog": str(self.journal),
                    "auth": {"cloudevents": {"bearerToken": TOKEN}},
                    "debounceSeconds": 0.05,
                }
            )
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tmp / "serve.log"
        self.env: dict[str, str] = {}

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "FLEETWARDEN_ONE_PROCESS"}
        env.update(self.env)
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                [EXE, "serve", "-c", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
        wait_for(lambda: self.health().get("status") == "ok", 60, "serve to answer /healthz")

    def health(self) -> dict:
        try:
            r = httpx.get(f"{self.base}/healthz", timeout=3)
        except httpx.HTTPError:
            return {}
        return dict(r.json()) if r.headers.get("content-type", "").endswith("json") else {}

    def children(self) -> set[int]:
        assert self.proc is not None
        return _children(self.proc.pid)

    def journal_ids(self) -> list[str]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_bytes().splitlines(keepends=True)
        return [json.loads(x)["id"] for x in lines if x.endswith(b"\n")]

    def audit_event_ids(self) -> list[str]:
        out = subprocess.run(
            [EXE, "audit", "export", "--config", str(self.config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        records = [json.loads(x) for x in out.splitlines() if x.strip()]
        return [r["payload"]["event"]["id"] for r in records if r.get("kind") == "event"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with_children = task / "children"
        if with_children.exists():
            found |= {int(x) for x in with_children.read_text().split()}
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Load:
    """Producers posting unique CloudEvents; the ids answered 202, and any other answer."""

    def __init__(self, svc: Supervised, prefix: str, threads: int = 4) -> None:
        self.svc, self.prefix = svc, prefix
        self.accepted: list[str] = []
        self.other: list[int] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in range(threads)]

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)

    def _run(self, n: int) -> None:
        i = 0
        with httpx.Client(timeout=5) as client:
            while not self.stop.is_set():
                eid = f"{self.prefix}-{n}-{i}"
                body = {"specversion": "1.0", "id": eid, "source": "//sup", "type": "t.scaled"}
                body |= {"cluster": "c1", "nodepool": "p1"}
                try:
                    r = client.post(
                        f"{self.svc.base}/events/cloudevents",
                        json=body,
                        headers={
                            "authorization": f"Bearer {TOKEN}",
                            "content-type": "application/cloudevents+json",
                        },
                    )
                except httpx.HTTPError:
                    if self.stop.is_set():
                        return
                    time.sleep(0.01)  # the service is stopping or restarting: not accepted
                    continue
                if r.status_code == 202:
                    self.accepted.append(eid)
                else:
                    self.other.append(r.status_code)
                i += 1

    def wait_accepted(self, n: int) -> None:
        wait_for(lambda: len(self.accepted) >= n, 30, f"{n} accepted events")


def test_a_killed_worker_is_restarted_and_sigterm_drains_nothing_lost_nothing_twice(tmp_path):
    svc = Supervised(tmp_path)
    svc.start()
    try:
        health = svc.health()
        assert set(health["processes"]) == {"gateway", "worker"}
        gateway = health["processes"]["gateway"]["pid"]
        kids = svc.children()
        assert len(kids) == 2 and gateway in kids
        (worker,) = kids - {gateway}
        metrics = httpx.get(f"{svc.base}/metrics", timeout=5).text
        assert 'fleetwarden_process_up{process="worker"} 1.0' in metrics

        with Load(svc, "a") as load:
            load.wait_accepted(200)
            os.kill(worker, signal.SIGKILL)
            wait_for(lambda: not _alive(worker), 10, "the worker to die")
            seen = len(load.accepted)
            wait_for(
                lambda: len(svc.children() - {gateway}) == 1 and svc.health().get("status") == "ok",
                30,
                "a new worker",
            )
            load.wait_accepted(seen + 200)  # still accepting after the restart
        (new_worker,) = svc.children() - {gateway}
        assert new_worker != worker
        assert svc.health()["processes"]["gateway"]["pid"] == gateway  # the gateway stayed up
        assert load.other == [], f"answers other than 202 while the worker restarted: {load.other}"

        with Load(svc, "b") as second:  # SIGTERM under load: a graceful stop
            second.wait_accepted(100)
            assert svc.proc is not None
            kids = svc.children()
            svc.proc.send_signal(signal.SIGTERM)
            assert svc.proc.wait(40) == 0
        wait_for(lambda: not any(_alive(k) for k in kids), 5, "both children to exit")
        assert all(code < 500 for code in second.other), second.other

        accepted = load.accepted + second.accepted
        svc.start()  # drain what the stop left queued
        wait_for(lambda: set(accepted) <= set(svc.journal_ids()), 60, "the backlog to drain")
    finally:
        svc.stop()
    for name, ids in (("event log", svc.journal_ids()), ("audit store", svc.audit_event_ids())):
        counts = Counter(ids)
        lost = [i for i in accepted if i not in counts]
        twice = [i for i, n in counts.items() if n > 1]
        assert not lost, f"{name}: {len(lost)} acknowledged events lost, e.g. {lost[:5]}"
        assert not twice, f"{name}: {len(twice)} events stored twice, e.g. {twice[:5]}"


def test_kill9_of_the_supervisor_leaves_no_orphan_and_a_new_serve_starts_at_once(tmp_path):
    """...and the next supervisor of the queue removes the worker socket's directory the
    killed one left in the temporary directory; a clean stop leaves none."""
    svc = Supervised(tmp_path)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    svc.env["TMPDIR"] = str(tmpdir)
    keep = tmpdir / "fleetwarden-serve-not-ours"  # not named in the lock: never touched
    keep.mkdir()
    svc.start()
    try:
        kids = svc.children()
        assert len(kids) == 2
        assert svc.proc is not None
        (left,) = set(tmpdir.glob("fleetwarden-serve-*")) - {keep}
        os.kill(svc.proc.pid, signal.SIGKILL)
        svc.proc.wait(10)
        wait_for(lambda: not any(_alive(k) for k in kids), 5, "the children to exit")
        assert left.is_dir(), "kill -9: nobody could remove it"
        svc.start()  # the queue's locks and the port are free again
        assert svc.health()["status"] == "ok"
        assert not left.exists(), "the next supervisor removes what the killed one left"
        (current,) = set(tmpdir.glob("fleetwarden-serve-*")) - {keep}
        assert svc.proc is not None
        svc.proc.terminate()
        assert svc.proc.wait(30) == 0
        assert not current.exists() and keep.is_dir()
    finally:
        svc.stop()


def test_the_worker_down_makes_healthz_503_and_metrics_say_so(tmp_path):
    """While the worker does not answer, /healthz is 503 naming it and /metrics still
    answers with the gateway's figures and process_up{process="worker"} 0."""
    svc = Supervised(tmp_path)
    svc.start()
    try:
        gateway = svc.health()["processes"]["gateway"]["pid"]
        (worker,) = svc.children() - {gateway}
        os.kill(worker, signal.SIGSTOP)  # alive but not answering
        try:
            r = httpx.get(f"{svc.base}/healthz", timeout=10)
            assert r.status_code == 503
            assert r.json()["processes"]["worker"]["status"] == "down"
            metrics = httpx.get(f"{svc.base}/metrics", timeout=15).text
            assert 'fleetwarden_process_up{process="worker"} 0.0' in metrics
            assert "fleetwarden_events_received_total" in metrics
        finally:
            os.kill(worker, signal.SIGCONT)
        wait_for(lambda: svc.health().get("status") == "ok", 10, "the worker to answer again")
    finally:
        svc.stop()


def test_metrics_of_both_processes_are_merged_without_counting_a_refusal_twice():
    """The gateway's deliveries are the gateway's (the worker's copies only repeat the 4xx it
    passed on); the worker's inspections are the worker's; duplicates are both processes'."""
    from prometheus_client import generate_latest

    from fleetwarden.adapters.metrics import ServiceMetrics, merge_metrics

    gateway, worker = ServiceMetrics(), ServiceMetrics()
    gateway.received.labels("aws").inc(3)
    gateway.rejected.labels("api", "unauthorized").inc(2)
    gateway.duplicates.inc(2)
    worker.rejected.labels("api", "unauthorized").inc(2)  # the same two, passed on
    worker.duplicates.inc(5)
    worker.inspections.labels("drift").inc(4)
    worker.event_to_finding.observe(0.02)
    text = merge_metrics(
        gateway.registry.collect(), generate_latest(worker.registry).decode()
    ).decode()
    lines = set(text.splitlines())
    assert 'fleetwarden_events_received_total{source="aws"} 3.0' in lines
    assert 'fleetwarden_events_rejected_total{reason="unauthorized",source="api"} 2.0' in lines
    assert "fleetwarden_events_duplicate_total 7.0" in lines
    assert 'fleetwarden_inspections_total{result="drift"} 4.0' in lines
    assert "fleetwarden_event_to_finding_seconds_count 1.0" in lines
    assert 'fleetwarden_process_up{process="worker"} 1.0' in lines
    assert sum(x.startswith("# TYPE fleetwarden_events_received_total") for x in lines) <= 1
    alone = merge_metrics(gateway.registry.collect(), None).decode()
    assert 'fleetwarden_process_up{process="worker"} 0.0' in alone
    assert 'fleetwarden_events_received_total{source="aws"} 3.0' in alone
