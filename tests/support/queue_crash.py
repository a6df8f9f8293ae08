"""The queue crash test: producer and consumer processes that get ``kill -9``, and the
driver (``run_scenario``) that starts, kills and reads them.

    python tests/support/queue_crash.py produce BACKEND
    python tests/support/queue_crash.py consume BACKEND --processed FILE [--drain]

BACKEND is ``--sqlite PATH`` or ``--nats URL --stream S --subject SUB --durable D``.

produce: puts events in batches of 1-3 (every 7th batch also re-sends an earlier event, as
    a webhook retry would) and prints ``acked KEY`` for each event, flushed, only after
    ``put_many`` returned.  ``QueueUnavailable`` (a broker restart) is retried.
consume: prints ``delivered KEY ATTEMPT`` per delivery; "processes" an event by appending its
    key to FILE unless FILE already has it (dedupe by key), then acks the batch and prints
    ``acked KEY``.  With ``--drain`` it exits 0 once the queue is empty (depth 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fleetwarden.adapters.queue.nats import NatsQueue
from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.ports.queue import EventQueue, QueueUnavailable

__all__ = ["CrashResult", "main", "run_scenario"]

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parents[2]

ACK_WAIT = 2.0  # NATS: a dead consumer's messages come back this soon
DEADLINE = 60.0  # no process of a crash test should live longer


def open_queue(args: argparse.Namespace) -> EventQueue:
    if args.sqlite:
        return SqliteQueue(args.sqlite, ack_wait=ACK_WAIT)
    return NatsQueue(
        args.nats,
        stream=args.stream,
        subject=args.subject,
        durable=args.durable,
        ack_wait=ACK_WAIT,
        depth_cache=0.0,
        request_timeout=1.0,
        connect_timeout=5.0,
    )


def make_event(i: int) -> ChangeEvent:
    return ChangeEvent(
        id=f"e{i}",
        source="crash-test",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="prod-eu-1",
        pool="general",
    )


async def produce(q: EventQueue) -> None:
    deadline = time.monotonic() + DEADLINE
    i = 0
    for n in range(100_000):
        size = 1 + n % 3
        batch = [make_event(j) for j in range(i, i + size)]
        if n % 7 == 6:
            batch.append(make_event(i - 4))  # a retry of something already acknowledged
        i += size
        while True:
            if time.monotonic() > deadline:
                sys.exit("producer: deadline passed")
            try:
                await q.put_many(batch)
                break
            except QueueUnavailable as exc:
                print(f"producer: retrying: {exc}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.05)
        sys.stdout.write("".join(f"acked {e.key}\n" for e in batch))
        sys.stdout.flush()


async def consume(q: EventQueue, processed_path: Path, drain: bool) -> None:
    processed_path.touch()
    processed = set(processed_path.read_text().split())
    deadline = time.monotonic() + DEADLINE
    with processed_path.open("a") as log:
        while time.monotonic() < deadline:
            try:
                batch = await q.get_batch(20, 0.5)
                if not batch:
                    if drain and await q.depth() == 0:
                        return
                    continue
                for d in batch:
                    print(f"delivered {d.event.key} {d.attempt}")
                    if d.event.key not in processed:  # dedupe by key: effects once
                        log.write(f"{d.event.key}\n")
                        log.flush()
                        processed.add(d.event.key)
                sys.stdout.flush()
                await q.ack(batch)
            except QueueUnavailable as exc:
                print(f"consumer: retrying: {exc}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.05)
                continue
            sys.stdout.write("".join(f"acked {d.event.key}\n" for d in batch))
            sys.stdout.flush()
    sys.exit("consumer: deadline passed")


async def run(args: argparse.Namespace) -> None:
    q = open_queue(args)
    try:
        if args.role == "produce":
            await produce(q)
        else:
            await consume(q, Path(args.processed), args.drain)
    finally:
        await q.close()


# --------------------------------------------------------------------------- the driver


@dataclass(frozen=True)
class CrashResult:
    produced: set[str]  # keys the producer saw acknowledged before its kill -9
    consumer_acked: list[str]  # keys whose ack the first consumer saw before its kill -9
    redelivered: list[str]  # keys the draining consumer was given
    producer_retries: int  # puts the producer saw refused (QueueUnavailable) and retried
    processed: list[str]  # the processed log, in order (dedupe by key in the consumer)


def run_scenario(
    backend: list[str],
    *,
    produced_before: int = 150,
    during_producer: Callable[[], None] | None = None,
    produced_after: int = 100,
    consumer_acks: int = 100,
) -> CrashResult:
    """Producer killed -9 mid-run (after ``during_producer``, e.g. a broker kill -9 and
    restart, and ``produced_after`` more acks); then a consumer killed -9 after
    ``consumer_acks`` acks; then a fresh consumer drains the queue."""
    with tempfile.TemporaryDirectory(prefix="fw-crash-") as tmp:
        processed = Path(tmp) / "processed.log"
        producer = _spawn("produce", *backend)
        acked = _wait_for_lines(producer, "acked", produced_before)
        if during_producer is not None:
            during_producer()
            acked += _wait_for_lines(producer, "acked", produced_after)
        produced_keys, producer_err = _kill9_and_collect(producer, "acked", acked)

        consumer = _spawn("consume", *backend, "--processed", str(processed))
        consumer_acked = _wait_for_lines(consumer, "acked", consumer_acks)
        consumer_acked, _ = _kill9_and_collect(consumer, "acked", consumer_acked)

        argv = [sys.executable, str(SCRIPT), "consume", *backend]
        drain = subprocess.run(
            [*argv, "--processed", str(processed), "--drain"],
            capture_output=True,
            text=True,
            timeout=DEADLINE + 10,
            cwd=ROOT,
        )
        if drain.returncode != 0:
            raise AssertionError(f"draining consumer failed:\n{drain.stderr[-3000:]}")
        return CrashResult(
            produced=set(produced_keys),
            consumer_acked=consumer_acked,
            redelivered=_keys(drain.stdout.splitlines(), "delivered"),
            producer_retries=producer_err.count("producer: retrying"),
            processed=processed.read_text().split(),
        )


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _keys(lines: list[str], prefix: str) -> list[str]:
    return [line.split()[1] for line in lines if line.startswith(prefix + " ")]


def _wait_for_lines(
    proc: subprocess.Popen[str], prefix: str, n: int, timeout: float = 30.0
) -> list[str]:
    """Read proc's stdout until n lines start with prefix (fails on timeout or early exit)."""
    assert proc.stdout is not None and proc.stderr is not None
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"only {len(got)} of {n} '{prefix}' lines within {timeout}s")
        line = proc.stdout.readline()  # the process writes steadily; EOF if it died
        if not line:
            proc.wait(timeout=10)
            raise AssertionError(
                f"{proc.args[2]} exited early ({proc.returncode}): {proc.stderr.read()[-3000:]}"
            )
        if line.startswith(prefix + " "):
            got.append(line.split()[1])
    return got


def _kill9_and_collect(
    proc: subprocess.Popen[str], prefix: str, seen: list[str]
) -> tuple[list[str], str]:
    """SIGKILL proc, then add what it had printed before dying (nothing after); and its stderr."""
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    if proc.returncode != -signal.SIGKILL:
        raise AssertionError(f"{proc.args[2]} ended by itself ({proc.returncode}), not by kill -9")
    return seen + _keys(out.splitlines(), prefix), err


# --------------------------------------------------------------------------- processes


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["produce", "consume"])
    parser.add_argument("--sqlite")
    parser.add_argument("--nats")
    parser.add_argument("--stream")
    parser.add_argument("--subject")
    parser.add_argument("--durable")
    parser.add_argument("--processed")
    parser.add_argument("--drain", action="store_true")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
