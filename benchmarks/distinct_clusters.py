"""Issue 11: 200,000 distinct clusters through the gateway -- does /healthz stay quick?

    .venv/bin/python benchmarks/distinct_clusters.py [--clusters 200000] [--batch 100]
        [--rate 5000] [--backlog N] [--drain-timeout S] [--src DIR]

A poster process sends CloudEvents batches (``application/cloudevents-batch+json``,
``--batch`` events per request, 4 keep-alive connections, paced at ``--rate`` events/s), every
event naming a cluster never seen before; a prober process GETs ``/healthz`` every 10 ms on
its own connection and times each answer (the gateway asks the worker process, so the answer
waits for both). The service is the real CLI wired as by default: a supervisor, the gateway
process, the worker process (SQLite queue, inspections, audit store). The probe starts once
``/healthz`` answers 200, not while the service is starting. The run ends when every event is
processed (queue depth 0), or when posting or draining takes far longer than it should
(``posted_all: false``, a depth left). Prints one JSON line: the probe's p50/p99/max and when
its five slowest answers came, the posting and draining times, the events accepted, the
service's RSS (now and peak).

``--backlog N`` first queues N more events as fast as the gateway takes them, so the worker
is behind and works through full batches (512 deliveries) while it is probed, as after a
restart or a burst. ``--src DIR`` runs the service from another source tree (``DIR/src``),
e.g. an older commit unpacked with ``git archive``, for a before/after figure.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

EXE = str(Path(sys.executable).parent / "fleetwarden")
TOKEN = "bench-token"
CONNECTIONS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def batch_body(start: int, n: int) -> bytes:
    return json.dumps(
        [
            {
                "specversion": "1.0",
                "id": f"distinct-{i}",
                "source": "//bench/distinct",
                "type": "io.fleetwarden.bench.scaled",
                "cluster": f"cluster-{i:07d}",
                "nodepool": "general",
                "actor": "bench",
            }
            for i in range(start, start + n)
        ]
    ).encode()


def _post(port: int, bodies: list[bytes], interval: float, accepted: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {
        "Content-Type": "application/cloudevents-batch+json",
        "Authorization": f"Bearer {TOKEN}",
    }
    due = time.perf_counter()
    for body in bodies:
        due += interval
        conn.request("POST", "/events/cloudevents", body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 202:
            raise SystemExit(f"POST answered {resp.status}: {data[:200]!r}")
        with accepted.get_lock():
            accepted.value += json.loads(data)["accepted"]
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    conn.close()


def poster(
    port: int, clusters: int, batch: int, rate: float, accepted: Any, first: int = 0
) -> None:
    """Send every cluster once (numbered from ``first``), paced; count the events answered
    202 in ``accepted``."""
    starts = list(range(first, first + clusters, batch))
    per_conn = [starts[k::CONNECTIONS] for k in range(CONNECTIONS)]
    interval = batch * CONNECTIONS / rate  # seconds between requests on one connection
    end = first + clusters
    bodies = [[batch_body(s, min(batch, end - s)) for s in mine] for mine in per_conn]
    threads = [
        threading.Thread(target=_post, args=(port, mine, interval, accepted)) for mine in bodies
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def prober(port: int, stop: Any, out: Any, every: float = 0.01) -> None:
    """GET /healthz every ``every`` seconds until ``stop``; put ``(sent at, latency)`` pairs
    (s, since the first probe) on ``out``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    latencies = []
    start = time.perf_counter()
    while not stop.is_set():
        t = time.perf_counter()
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        resp.read()
        latencies.append((t - start, time.perf_counter() - t))
        pause = every - (time.perf_counter() - t)
        if pause > 0:
            time.sleep(pause)
    conn.close()
    out.put(latencies)


def _health(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    except OSError:
        return 0
    finally:
        conn.close()


def _depth(port: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    m = re.search(r"^fleetwarden_queue_depth (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def _rss_mib(pid: int) -> tuple[float, float]:
    """RSS and peak RSS (MiB) of ``pid`` and its children together: the supervisor, the
    gateway and the worker (peaks summed: an upper bound of the peak together)."""
    pids = [pid]
    with contextlib.suppress(OSError):
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    rss = peak = 0.0
    for p in pids:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{p}/status").read_text()
            for key in ("VmRSS", "VmHWM"):
                m = re.search(rf"^{key}:\s+(\d+) kB", status, re.M)
                kib = int(m.group(1)) / 1024 if m else 0.0
                if key == "VmRSS":
                    rss += kib
                else:
                    peak += kib
    return round(rss, 1), round(peak, 1)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def run(
    clusters: int = 200_000,
    batch: int = 100,
    rate: float = 5000.0,
    *,
    work: Path | None = None,
    src: Path | None = None,
    drain_timeout: float = 120.0,
    backlog: int = 0,
) -> dict[str, Any]:
    """Start serve, post, probe, drain; the figures as a dict. ``backlog``: events posted
    as fast as the gateway takes them before the probe starts, so that the worker works
    through full batches (512 deliveries) while it is probed, as after a restart or a burst."""
    tmp = Path(work or tempfile.mkdtemp(prefix="fw-distinct-"))
    port = free_port()
    config = tmp / "serve.yaml"
    config.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{port}",
                "queuePath": str(tmp / "queue.db"),
                "store": f"sqlite:///{tmp / 'audit.db'}",
                "auth": {"cloudevents": {"bearerToken": TOKEN}},
                "limits": {"queueDepth": 10_000_000},
            }
        )
    )
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src / "src")
    proc = subprocess.Popen(
        [EXE, "serve", "-c", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "serve.stderr").open("wb"),
        env=env,
    )
    ctx = multiprocessing.get_context("spawn")
    stop, probes, accepted = ctx.Event(), ctx.Queue(), ctx.Value("q", 0)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (tmp / "serve.stderr").read_text()
                    raise SystemExit(f"serve did not start: {log}") from None
                time.sleep(0.05)
        # the supervisor listens before its children are up (connections wait in the
        # backlog): the probe starts once the service answers, not during its start-up
        while _health(port) != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (tmp / "serve.stderr").read_text()
                raise SystemExit(f"serve did not become healthy: {log}")
            time.sleep(0.05)
        if backlog:
            poster(port, backlog, 1000, 1e9, ctx.Value("q", 0), first=clusters)
        probe = ctx.Process(target=prober, args=(port, stop, probes))
        probe.start()
        time.sleep(0.5)  # a baseline of probes before the load
        post = ctx.Process(target=poster, args=(port, clusters, batch, rate, accepted))
        t0 = time.perf_counter()
        post.start()
        post.join(timeout=clusters / rate * 2 + 60)
        posted_all = not post.is_alive()
        if not posted_all:  # the service stalled: report how far it got
            post.terminate()
            post.join()
        post_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        while _depth(port) > 0:
            if time.perf_counter() - t0 > drain_timeout:
                break
            time.sleep(0.2)
        drain_seconds = time.perf_counter() - t0
        depth = _depth(port)
        stop.set()
        timed = probes.get(timeout=30)
        latencies = [lat for _, lat in timed]
        probe.join()
        rss, peak = _rss_mib(proc.pid)
    finally:
        stop.set()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {
        "clusters": clusters,
        "backlog": backlog,
        "batch": batch,
        "rate_target": rate,
        "posted_all": posted_all,
        "accepted": accepted.value,
        "post_seconds": round(post_seconds, 1),
        "events_per_s": round(accepted.value / post_seconds),
        "drain_seconds_after_posting": round(drain_seconds, 1),
        "queue_depth_at_end": depth,
        "healthz_probes": len(latencies),
        "healthz_p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "healthz_p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "healthz_max_ms": round(max(latencies) * 1000, 2),
        # when the five slowest probes were sent (seconds after probing began; the load starts
        # 0.5 s in) and how long each took (ms): a stall at start-up reads differently from
        # one under load
        "healthz_slowest": [
            [round(at, 1), round(lat * 1000, 1)]
            for at, lat in sorted(timed, key=lambda x: -x[1])[:5]
        ],
        "rss_mib": rss,
        "rss_peak_mib": peak,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--src", type=Path, default=None)
    ap.add_argument("--drain-timeout", type=float, default=120.0)
    ap.add_argument("--backlog", type=int, default=0, help="events queued before probing")
    args = ap.parse_args()
    result = run(
        args.clusters,
        args.batch,
        args.rate,
        src=args.src,
        drain_timeout=args.drain_timeout,
        backlog=args.backlog,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
