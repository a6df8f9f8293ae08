"""Event-queue ingest: single-event ``put_many`` from 64 concurrent tasks, both backends.

    .venv/bin/python benchmarks/queue_ingest.py [--events 20000] [--tasks 64] [--backend all]

Goal: >= 3,000 events/s with p99 <= 50 ms on 2 cores.  Each task puts one event at a time
(as the gateway does per webhook) and times each call from the call to its return, i.e.
until the event is durable: SQLite WAL + synchronous=FULL with group commit (fsync per
commit); NATS JetStream PubAck (file store, nats-server started here by
scripts/nats-test-env on 127.0.0.1, SIGTERMed by PID at the end).  A short warm-up is not
counted.  Prints one JSON line per backend.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

from tests.support import nats_env

from fleetwarden.adapters.queue.nats import NatsQueue
from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.ports.queue import EventQueue

WARMUP = 500


def make_event(i: int) -> ChangeEvent:
    """A realistic size (~600 bytes serialised): a CloudTrail-derived scale event."""
    return ChangeEvent(
        id=f"c0ffee00-{i:012d}",
        source="aws.eks/eu-west-1/123456789012",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        subject="arn:aws:eks:eu-west-1:123456789012:nodegroup/prod-eu-1/general/abc",
        cluster="prod-eu-1",
        pool="general",
        changed=("scalingConfig.desiredSize", "scalingConfig.maxSize"),
        actor="arn:aws:sts::123456789012:assumed-role/platform-oncall/alice",
        outcome="success",
        region="eu-west-1",
        account="123456789012",
        detail={"scalingConfig": {"desiredSize": 7, "maxSize": 20, "minSize": 3}},
    )


async def measure(q: EventQueue, events: int, tasks: int, first_id: int) -> dict[str, float]:
    latencies: list[float] = []
    per_task = events // tasks

    async def producer(task: int) -> None:
        base = first_id + task * per_task
        for i in range(per_task):
            e = make_event(base + i)
            t0 = time.perf_counter()
            await q.put_many([e])
            latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for task in range(tasks):
            tg.create_task(producer(task))
    elapsed = time.perf_counter() - t0
    latencies.sort()
    n = len(latencies)
    return {
        "events": n,
        "seconds": round(elapsed, 3),
        "events_per_s": round(n / elapsed),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[min(n - 1, int(n * 0.99))] * 1000, 2),
        "max_ms": round(latencies[-1] * 1000, 2),
    }


async def run_backend(q: EventQueue, name: str, events: int, tasks: int) -> dict[str, object]:
    try:
        await measure(q, WARMUP, min(tasks, WARMUP), first_id=10**9)
        result = await measure(q, events, tasks, first_id=0)
        depth = await q.depth()
    finally:
        await q.close()
    return {"backend": name, "tasks": tasks, "cpus": os.cpu_count(), **result, "depth": depth}


async def bench_sqlite(events: int, tasks: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmp:
        q = SqliteQueue(Path(tmp) / "queue.db", max_depth=10**7)
        result = await run_backend(q, "sqlite", events, tasks)
        result["settings"] = "WAL, synchronous=FULL, batch_window=2ms"
        result["commits"] = q.commits  # warm-up included: events per fsync'd transaction
        return result


async def bench_nats(events: int, tasks: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="fw-bench-nats-") as tmp:
        state = Path(tmp) / "nats"
        url = await asyncio.to_thread(nats_env.start_server, state)
        try:
            q = NatsQueue(url, max_depth=10**7, depth_cache=0.5)
            result = await run_backend(q, "nats", events, tasks)
            result["settings"] = "JetStream file store, R1, Nats-Msg-Id dedupe, await PubAck"
            result["server"] = nats_env.load_state(state)["bin"]
            return result
        finally:
            await asyncio.to_thread(nats_env.stop_server, state)


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--backend", choices=["all", "sqlite", "nats"], default="all")
    args = parser.parse_args(argv)
    if args.backend in ("all", "sqlite"):
        print(json.dumps(await bench_sqlite(args.events, args.tasks)), flush=True)
    if args.backend in ("all", "nats"):
        print(json.dumps(await bench_nats(args.events, args.tasks)), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
