"""The SQLite audit store's append, per event, by batch size: before and after, side by side.

    .venv/bin/python benchmarks/audit_append.py --before ../before/src [--rounds 3]

What is timed: ``SqlAuditStore.append_new`` of change-event drafts (the EventBridge event of
``gateway_ingest.py``'s wrk script, one id each) into a fresh ``sqlite:///`` file, as the
worker of the default ``serve`` records each batch it leases: the chain head locked, the keys
looked up, the drafts sealed (redaction, canonical JSON, SHA-256), the rows inserted, the head
moved, committed with ``synchronous=FULL``. Batches of 1, 3, 10 and 50 events; 1,500 events a
size. CPU = ``time.process_time()`` of the process (every thread), wall = ``perf_counter``,
both per event. Each round runs each side once in a fresh interpreter, alternating; the
summary gives each side's best.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SIZES = (1, 3, 10, 50)


async def _child(events: int) -> dict[str, float]:
    from datetime import UTC, datetime

    import orjson

    from benchmarks.gateway_ingest import WRK_SINGLE
    from fleetwarden.adapters.storage.audit_sql import open_audit_store
    from fleetwarden.core.audit.records import event_draft
    from fleetwarden.formats.events import aws

    template = WRK_SINGLE.split("[[", 1)[1].split("]]", 1)[0]
    now = datetime.now(UTC)
    out: dict[str, float] = {}
    for size in SIZES:
        with tempfile.TemporaryDirectory(prefix="fw-audit-append-") as tmp:
            store = await open_audit_store(f"sqlite:///{tmp}/audit.db")
            drafts = [
                event_draft(
                    aws.parse(orjson.loads(template.replace('"ID"', f'"{i}"')), {}, now)
                    .events[0]
                    .via("aws")
                )
                for i in range(events)
            ]
            await store.append_new(drafts[:size])  # warm-up: statement caches
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for i in range(size, events, size):
                await store.append_new(drafts[i : i + size])
            timed = len(range(size, events))
            out[f"cpu_us_{size}"] = round((time.process_time() - cpu0) / timed * 1e6, 1)
            out[f"wall_us_{size}"] = round((time.perf_counter() - wall0) / timed * 1e6, 1)
            assert (await store.verify()).ok
            await store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="src directory of the code to compare with")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--events", type=int, default=1500, help="events per batch size")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.events))))
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sides = {"after": str(ROOT / "src")}
    if args.before:
        sides = {"before": args.before, **sides}
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for rnd in range(args.rounds):
        order = list(sides) if rnd % 2 == 0 else list(sides)[::-1]
        for side in order:
            env = {**os.environ, "PYTHONPATH": sides[side]}
            cmd = [sys.executable, __file__, "--child", "--events", str(args.events)]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            runs[side].append(json.loads(r.stdout))
            print(f"round {rnd + 1} {side}: {r.stdout.strip()}", flush=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    parts = []
    for side, results in runs.items():
        cells = ", ".join(
            f"{size}: {min(r[f'cpu_us_{size}'] for r in results):.0f} us CPU "
            f"{min(r[f'wall_us_{size}'] for r in results):.0f} us wall"
            for size in SIZES
        )
        parts.append(f"{side} per event by batch size: {cells}")
    print(f"SUMMARY {when} | best of {args.rounds} | " + " | ".join(parts))


if __name__ == "__main__":
    main()
