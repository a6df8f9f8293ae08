"""Audit store: batched append throughput with the hash chain, and `verify` of 1,000,000 records.

    .venv/bin/python benchmarks/audit_store.py [--backend all|sqlite|postgresql]
        [--append 100000] [--batch 500] [--single 2000] [--verify-records 1000000]
        [--pg-url postgresql://...]

Goals: append >= 5,000 records/s batched (SQLite and PostgreSQL); `audit verify` of 1,000,000
records <= 20 s.

Method.  Records come as incidents of five linked records (an event with a realistic
CloudTrail-derived payload of ~600 bytes, a finding, a decision, an action, an outcome), each
draft keyed (as at-least-once workers key them) so that every append also looks its keys up.
Drafts are built before the clock starts; the clock covers ``append_many`` only: redaction,
hashing, the key lookup, the chain-head lock, the insert and the commit (SQLite WAL with
``synchronous=FULL``; PostgreSQL 15 with fsync on, started here by scripts/pg-test-env on
127.0.0.1 and stopped by PID at the end, unless --pg-url is given).  Every figure uses a
fresh database.  ``verify`` fills a store to --verify-records with batches of 5,000, then
times ``SqlAuditStore.verify()`` (what ``fleetwarden audit verify`` runs) twice and reports
both runs.  Prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

from tests.support import pg_env

from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store
from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditKind
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Finding, Layer, Severity

FILL_BATCH = 5_000


def incident(i: int) -> list[AuditDraft]:
    """Five linked drafts: event -> finding -> decision -> action -> outcome."""
    event = ChangeEvent(
        id=f"c0ffee00-{i:012d}",
        source="aws.eks/eu-west-1/123456789012",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.UPDATE,
        subject=f"arn:aws:eks:eu-west-1:123456789012:nodegroup/prod-eu-1/general-{i % 40}/abc",
        cluster=f"prod-eu-{i % 7}",
        pool=f"general-{i % 40}",
        changed=("instanceTypes",),
        actor="arn:aws:sts::123456789012:assumed-role/platform-oncall/alice",
        outcome="success",
        region="eu-west-1",
        account="123456789012",
        detail={"instanceTypes": ["t3.medium"], "scalingConfig": {"desiredSize": 7}},
    )
    finding = Finding(
        cluster=event.cluster or "",
        pool=event.pool,
        layer=Layer.SPEC,
        field="instanceType",
        expected="m5.large",
        actual="t3.medium",
        severity=Severity.CRITICAL,
        nodes=(f"ip-10-0-{i % 250}-{i % 200}.eu-west-1.compute.internal",),
        source="clusters/prod-eu-1/eksctl.yaml",
    )
    ev = audit.event_draft(event)
    fi = audit.finding_draft(
        finding, refs=(audit.record_id(AuditKind.EVENT, event.key),), key=f"{event.key}:f"
    )
    fi_id = audit.record_id(AuditKind.FINDING, f"{event.key}:f")
    decision = AuditDraft(
        AuditKind.DECISION,
        "revert instance type (policy: auto-heal critical SPEC drift)",
        cluster=event.cluster,
        pool=event.pool,
        actor="fleetwarden/policy",
        refs=(fi_id,),
        payload={"action": "revert", "policy": "auto-heal", "mode": "auto"},
        key=f"{event.key}:d",
    )
    action = AuditDraft(
        AuditKind.ACTION,
        "update_nodegroup_config instanceTypes=[m5.large]",
        cluster=event.cluster,
        pool=event.pool,
        actor="fleetwarden/remediator",
        refs=(audit.record_id(AuditKind.DECISION, f"{event.key}:d"),),
        payload={"call": "eks:UpdateNodegroupConfig", "args": {"instanceTypes": ["m5.large"]}},
        key=f"{event.key}:a",
    )
    outcome = AuditDraft(
        AuditKind.OUTCOME,
        "succeeded in 41.2 s",
        cluster=event.cluster,
        pool=event.pool,
        actor="fleetwarden/remediator",
        refs=(audit.record_id(AuditKind.ACTION, f"{event.key}:a"),),
        payload={"status": "succeeded", "seconds": 41.2, "updateId": f"u-{i:08d}"},
        key=f"{event.key}:o",
    )
    return [ev, fi, decision, action, outcome]


def drafts(count: int, start: int = 0) -> list[AuditDraft]:
    out: list[AuditDraft] = []
    i = start
    while len(out) < count:
        out.extend(incident(i))
        i += 1
    return out[:count]


def batches(items: list[AuditDraft], size: int) -> Iterator[list[AuditDraft]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class Backends:
    """Fresh databases: an SQLite file in a temp dir, or a new PostgreSQL database."""

    def __init__(self, pg_url: str | None, tmp: Path) -> None:
        self.pg_url = pg_url
        self.tmp = tmp
        self.n = 0

    async def fresh(self, backend: str) -> SqlAuditStore:
        self.n += 1
        if backend == "sqlite":
            return await open_audit_store(f"sqlite:///{self.tmp}/audit-{self.n}.db")
        assert self.pg_url
        url = await pg_env.create_database_async(self.pg_url, f"bench_{self.n}")
        return await open_audit_store(url)


async def measure_append(store: SqlAuditStore, items: list[AuditDraft], size: int) -> dict:
    latencies: list[float] = []
    t0 = time.perf_counter()
    for batch in batches(items, size):
        t = time.perf_counter()
        await store.append_many(batch)
        latencies.append(time.perf_counter() - t)
    seconds = time.perf_counter() - t0
    latencies.sort()
    return {
        "records": len(items),
        "batch": size,
        "seconds": round(seconds, 3),
        "recordsPerSecond": round(len(items) / seconds),
        "batchP50Ms": round(statistics.median(latencies) * 1000, 2),
        "batchP99Ms": round(
            latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 2
        ),
    }


async def run_backend(backend: str, args: argparse.Namespace, env: Backends) -> list[dict]:
    out: list[dict[str, Any]] = []

    items = drafts(args.append)
    store = await env.fresh(backend)
    try:
        out.append(
            {
                "backend": backend,
                "figure": "append",
                **await measure_append(store, items, args.batch),
            }
        )
        check = await store.verify()
        assert check.ok and check.checked == args.append, check.summary()
    finally:
        await store.close()

    if args.single:
        store = await env.fresh(backend)
        try:
            result = await measure_append(store, drafts(args.single), 1)
            out.append({"backend": backend, "figure": "append-unbatched", **result})
        finally:
            await store.close()

    if args.verify_records:
        store = await env.fresh(backend)
        try:
            t0 = time.perf_counter()
            for start in range(0, args.verify_records, FILL_BATCH):
                count = min(FILL_BATCH, args.verify_records - start)
                await store.append_many(drafts(count, start=start // 5 + 10_000_000))
            fill = time.perf_counter() - t0
            runs = []
            for _ in range(2):
                t = time.perf_counter()
                result = await store.verify()
                runs.append(round(time.perf_counter() - t, 2))
                assert result.ok and result.checked == args.verify_records, result.summary()
            out.append(
                {
                    "backend": backend,
                    "figure": "verify",
                    "records": args.verify_records,
                    "seconds": min(runs),
                    "runs": runs,
                    "recordsPerSecond": round(args.verify_records / min(runs)),
                    "fillSeconds": round(fill, 1),
                    "fillRecordsPerSecond": round(args.verify_records / fill),
                    "maxRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                }
            )
        finally:
            await store.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["all", "sqlite", "postgresql"], default="all")
    parser.add_argument("--append", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--single", type=int, default=2_000, help="unbatched appends (0: skip)")
    parser.add_argument("--verify-records", type=int, default=1_000_000)
    parser.add_argument("--pg-url", help="use this PostgreSQL server (default: start one)")
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "all" else [args.backend]

    with tempfile.TemporaryDirectory(prefix="fw-audit-bench-") as tmp:
        state_dir = Path(tmp) / "pg"
        pg_url = args.pg_url
        started = False
        if "postgresql" in backends and not pg_url:
            pg_url = pg_env.start_server(state_dir)
            started = True
        try:
            env = Backends(pg_url, Path(tmp))
            for backend in backends:
                for line in await run_backend(backend, args, env):
                    print(json.dumps(line), flush=True)
        finally:
            if started:
                pg_env.stop_server(state_dir)


if __name__ == "__main__":
    asyncio.run(main())
