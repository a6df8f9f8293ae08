"""Figures for issue 12: the default ``serve`` (role: all, SQLite queue, workers, audit store
and event log on) before and after, side by side in one run.

    .venv/bin/python benchmarks/gateway_default.py [--before ../before/src] [--seconds 15]
        [--rounds 2]

Each round runs, for "before" (``PYTHONPATH=<--before>``: that checkout's code) and "after"
(this checkout), in alternating order: single EventBridge events from ``wrk`` (64
connections) and CloudEvents batches of 100 (16 and 64 connections), against a fresh queue
file, with the fleet of ``gateway_ingest.py`` (50 clusters x 50 pools, node dumps). Load,
config and parsing are ``gateway_ingest.py``'s, so the figures compare with its table.

Besides wrk's figures: the events still waiting in the queue when the load ends, and from
them the rate the worker kept up with (accepted events less those waiting, per second of
load; the service's queue limit is lifted, so the gateway's rate is not capped by the
worker's); and the CPU time each process of the service used during the load (from
``/proc/PID/stat``), per 1,000 requests: a figure that other load on the machine changes much
less than latencies, and the capacity of one free core for that process (1,000 / ms).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gateway_ingest import (  # noqa: E402 - after the path is set
    WRK_BATCH,
    WRK_SINGLE,
    Svc,
    ensure_wrk,
    write_fleet,
    wrk,
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def queued(path: Path) -> int:
    """Events still waiting in the queue file (a reader beside the service's writers)."""
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])


def service_processes(svc: Svc) -> dict[str, int]:
    """name -> pid: "serve" alone, or the supervisor's "gateway" and "worker"."""
    assert svc.proc is not None
    kids = [
        int(x)
        for task in Path(f"/proc/{svc.proc.pid}/task").glob("*")
        for x in (task / "children").read_text().split()
    ]
    if not kids:
        return {"serve": svc.proc.pid}
    gateway = httpx.get(f"{svc.base}/healthz", timeout=5).json()["processes"]["gateway"]["pid"]
    named = {"supervisor": svc.proc.pid, "gateway": gateway}
    (named["worker"],) = (k for k in kids if k != gateway)
    return named


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--before", help="src directory of the code to compare with (default: this checkout only)"
    )
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    binary = ensure_wrk()
    work = Path(tempfile.mkdtemp(prefix="fw-gw12-"))
    write_fleet(work, clusters=50, pools=50, nodes_per_pool=2)
    sides = {"before": args.before} if args.before else {}
    sides["after"] = str(ROOT / "src")
    results: dict[str, list[dict]] = {}
    for rnd in range(args.rounds):
        order = list(sides) if rnd % 2 == 0 else list(sides)[::-1]
        for side in order:
            for label, script, conns in (
                ("single", WRK_SINGLE, 64),
                ("batch100", WRK_BATCH, 16),
                ("batch100", WRK_BATCH, 64),
            ):
                for f in work.glob("queue.db*"):
                    f.unlink()
                for f in work.glob("audit.db*"):
                    f.unlink()
                (work / "events.jsonl").unlink(missing_ok=True)
                svc = Svc(work, "sqlite")
                svc.start({"PYTHONPATH": sides[side]})
                procs = service_processes(svc)
                cpu0 = {n: cpu_seconds(p) for n, p in procs.items()}
                r = wrk(binary, svc.base, script, args.seconds, conns)
                waiting = queued(work / "queue.db")
                requests = r["requests_per_s"] * args.seconds
                per_request = 100 if label == "batch100" else 1
                # what the worker kept up with: accepted events less those still waiting
                r["events_waiting_at_end"] = waiting
                r["worker_events_per_s"] = round(
                    max(requests * per_request - waiting, 0) / args.seconds
                )
                r["cpu_ms_per_1000_requests"] = {
                    n: round((cpu_seconds(p) - cpu0[n]) * 1e6 / max(requests, 1), 1)
                    for n, p in procs.items()
                }
                svc.stop()
                if label == "batch100":
                    r["events_per_s"] = r["requests_per_s"] * 100
                key = f"{label} c{conns} {side}"
                results.setdefault(key, []).append(r)
                print(f"round {rnd + 1} {key}: {json.dumps(r)}", flush=True)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
