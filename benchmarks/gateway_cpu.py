"""The gateway process's CPU per accepted event, without HTTP parsing: the ASGI app of
``serve``'s gateway (``entrypoints/gateway.py``: the door, request ids, authentication,
parsing, flagging, the durable SQLite queue with its writer thread and fsync) driven by raw
ASGI calls in one process, before and after, side by side.

    .venv/bin/python benchmarks/gateway_cpu.py --before ../before/src [--rounds 7]

Why: the end-to-end figures (``gateway_default.py``: wrk against a real ``serve``) move by
+-20 % between runs on a shared 2-core host, more than a change of a few microseconds per
event; CPU time per event of the same work, best of several interleaved rounds, does not.

Load: CloudEvents batches of 100 (``gateway_ingest.py``'s ``WRK_BATCH`` body: 16 senders at
once, so commits are shared as under wrk) and single EventBridge events (64 senders). CPU =
``time.process_time()`` of the whole process (every thread: the event loop and the queue's
writer), from the first request to the last answer, divided by the events accepted (every
answer must be 202). Each round runs each side once in a fresh interpreter, alternating;
the summary gives each side's best and the median of the rounds' after/before ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TOKEN = "bench-token"


def _cloudevents_batch(n: int, size: int = 100) -> bytes:
    parts = [
        f'{{"specversion":"1.0","id":"{n}-{i}-{random.randint(1, 10**9)}",'
        '"source":"//bench/ci","type":"io.fleetwarden.bench.scaled",'
        '"time":"2026-11-29T10:00:00Z","cluster":"c000","nodepool":"p000","actor":"ci",'
        '"datacontenttype":"application/json","data":{"desired":3}}'
        for i in range(size)
    ]
    return ("[" + ",".join(parts) + "]").encode()


async def _post(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    """One POST through the ASGI app; its answer's status."""
    sent = False
    status = 0

    async def receive() -> dict:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
        "query_string": b"", "root_path": "", "headers": list(headers),
        "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8080),
    }  # fmt: skip
    await app(scope, receive, send)
    return status


def _eventbridge(n: int) -> bytes:
    """The EventBridge CloudTrail event ``gateway_ingest.py``'s wrk script sends, its id
    made unique as there."""
    from benchmarks.gateway_ingest import WRK_SINGLE

    template = WRK_SINGLE.split("[[", 1)[1].split("]]", 1)[0]
    return template.replace('"ID"', f'"{n}-{random.randint(1, 10**9)}"').encode()


async def _child(batches: int, singles: int) -> dict[str, float]:
    from fleetwarden.adapters.queue.sqlite import SqliteQueue
    from fleetwarden.app.ingesting import SourceAuth
    from fleetwarden.app.service_config import GatewayConfig
    from fleetwarden.entrypoints.gateway import create_app
    from fleetwarden.formats.events import parsers

    known = {f"c{c:03d}": {f"p{p:03d}" for p in range(50)} for c in range(50)}
    auth = {s: SourceAuth(bearer_tokens=(TOKEN,)) for s in ("aws", "cloudevents")}
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="fw-gwcpu-") as tmp:
        for label, path, ctype, make, count, senders, per in (
            ("batch100", "/events/cloudevents", "application/cloudevents-batch+json",
             _cloudevents_batch, batches, 16, 100),
            ("single", "/events/aws", "application/json", _eventbridge, singles, 64, 1),
        ):  # fmt: skip
            queue = SqliteQueue(Path(tmp) / f"{label}.db", max_depth=10**9)
            app = create_app(GatewayConfig(auth=auth, known_pools=known), queue, parsers())
            bodies = [make(i) for i in range(count + senders)]
            headers = [
                (b"host", b"127.0.0.1"),
                (b"content-type", ctype.encode()),
                (b"authorization", f"Bearer {TOKEN}".encode()),
            ]

            async def sender(
                app: Any, path: str, headers: list[tuple[bytes, bytes]], part: list[bytes]
            ) -> list[int]:
                return [await _post(app, path, headers, b) for b in part]

            for b in bodies[:senders]:  # warm-up: first imports, statement caches
                assert await _post(app, path, headers, b) == 202
            work = bodies[senders:]
            parts = [work[i::senders] for i in range(senders)]
            cpu0, wall0 = time.process_time(), time.perf_counter()
            statuses = await asyncio.gather(*(sender(app, path, headers, p) for p in parts))
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            assert all(s == 202 for part in statuses for s in part), "every answer a 202"
            events = count * per
            out[f"{label}_cpu_us_per_event"] = round(cpu / events * 1e6, 2)
            out[f"{label}_wall_events_per_s"] = round(events / wall)
            await queue.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="src directory of the code to compare with")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batches", type=int, default=400, help="batches of 100 per round")
    ap.add_argument("--singles", type=int, default=6000, help="single events per round")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.batches, args.singles))))
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
            cmd = [sys.executable, __file__, "--child", "--batches", str(args.batches)]
            cmd += ["--singles", str(args.singles)]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            runs[side].append(json.loads(r.stdout))
            print(f"round {rnd + 1} {side}: {r.stdout.strip()}", flush=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    summary = []
    for side, results in runs.items():
        best = {k: min(r[k] for r in results) for k in results[0] if k.endswith("per_event")}
        summary.append(
            f"{side}: batch {best['batch100_cpu_us_per_event']:.1f} us/event, single "
            f"{best['single_cpu_us_per_event']:.1f} us/event"
        )
    if "before" in runs:  # paired by round: drift of the machine hits both sides alike
        for key, name in (("batch100", "batch"), ("single", "single")):
            k = f"{key}_cpu_us_per_event"
            ratios = sorted(a[k] / b[k] for a, b in zip(runs["after"], runs["before"], strict=True))
            median = statistics.median(ratios)
            summary.append(f"{name} after/before per round: median {median:.2f}")
    print(
        f"SUMMARY {when} | best of {args.rounds}, CPU per accepted event | " + " | ".join(summary)
    )


if __name__ == "__main__":
    main()
