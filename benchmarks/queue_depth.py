"""The SQLite queue's cost per event at a standing depth, before and after, side by side.

    .venv/bin/python benchmarks/queue_depth.py [--before <other checkout>/src]
        [--depths 2000,20000,100000] [--rounds 3]

Each measurement runs in a fresh interpreter (``PYTHONPATH=<src>``) on a fresh file: the
queue is filled to the depth (puts of 1,000 events), then 50 steps of one put of 1,000 new
events and one lease + ack of the 1,000 oldest keep it there -- what the default serve's
queue does under a load its worker cannot keep up with. Printed: CPU (user + system) and
wall time per event of the 50 steps, median of the rounds; the two sides alternate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FIGURES = ("cpu_us", "wall_us")

_CHILD = r"""
import asyncio, json, resource, sys, tempfile, time
from pathlib import Path
from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.core.events import ChangeEvent, EventSource, Operation

depth, steps = int(sys.argv[1]), int(sys.argv[2])

def batch(start):
    return [ChangeEvent(id=f"e{i}", source="//bench", type="io.bench", provider=EventSource.AWS,
                        operation=Operation.SCALE, cluster="c000", pool="p000")
            for i in range(start, start + 1000)]

async def main():
    q = SqliteQueue(Path(tempfile.mkdtemp()) / "q.db", max_depth=10**9, batch_window=0)
    n = 0
    while n < depth:
        await q.put_many(batch(n)); n += 1000
    events = [batch(n + 1000 * s) for s in range(steps)]
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for step in events:
        await q.put_many(step)
        got = []
        while len(got) < 1000:
            got += await q.get_batch(1000 - len(got), 1.0)
        await q.ack(got)
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    await q.close()
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    per = steps * 1000
    print(json.dumps({"cpu_us": cpu / per * 1e6, "wall_us": (t1 - t0) / per * 1e6}))

asyncio.run(main())
"""


def measure(src: str, depth: int, steps: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(depth), str(steps)],
        env={**os.environ, "PYTHONPATH": src},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--before", help="src directory of the code to compare with (default: this checkout only)"
    )
    ap.add_argument("--depths", default="2000,20000,100000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    sides = {"before": args.before} if args.before else {}
    sides["after"] = str(ROOT / "src")
    for depth in (int(d) for d in args.depths.split(",")):
        got: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
        for rnd in range(args.rounds):
            for side in list(sides) if rnd % 2 == 0 else list(sides)[::-1]:
                got[side].append(measure(sides[side], depth, args.steps))
        row = {
            side: {k: round(statistics.median(r[k] for r in runs), 1) for k in _FIGURES}
            for side, runs in got.items()
        }
        print(f"depth {depth:>7,}: " + json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
