"""Drift intelligence costs: ``fleetwarden report`` over an audit store, and the warn-mode check
in the policy decision.

    .venv/bin/python benchmarks/drift_intel.py [--findings 10000] [--decisions 20000]

1. **report**: ``--findings`` findings, each an ``appeared`` and a ``cleared`` finding record as
   the healer writes them (a third healed, with start, detection and notify times) over 50
   clusters x 20 pools, plus one change event per finding, appended to a real SQLite audit store
   in a temporary directory; then ``app.reporting.build_report`` (the store's pages + the pure
   aggregation) timed end to end, and ``core.reporting.drift_report`` alone over the same records
   in memory. Best of 3.
2. **warn check**: ``core.policy.decide`` for ``--decisions`` findings routed to Flux
   Kustomizations, without warn rules and with 20 (one of which covers a quarter of the
   findings), timed side by side in one run, alternating, best of 3: the ratio is what the
   check adds. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.reporting import build_report
from fleetwarden.core.audit import AuditDraft, event_draft, finding_draft
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import FluxKind, FluxRef, Owner, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Mode, Policy, PolicyState, decide, parse_warn
from fleetwarden.core.reporting import drift_report

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def drafts(n: int) -> list[AuditDraft]:
    out: list[AuditDraft] = []
    for i in range(n):
        start = T0 + timedelta(seconds=i)
        times = {"startedAt": iso(start), "detectedAt": iso(start + timedelta(seconds=3 + i % 7))}
        cleared = {
            **times,
            "notifiedAt": iso(start + timedelta(seconds=12)),
            "clearedAt": iso(start + timedelta(minutes=5 + i % 30)),
        }
        if i % 3 == 0:
            cleared["healedAt"] = iso(start + timedelta(minutes=4))
        base = (f"c{i % 50:02d}", f"p{i // 50 % 20:02d}", Layer.L1, f"labels.k{i}", "a", "b")
        for event, extra in (("finding.appeared", times), ("finding.cleared", cleared)):
            d = finding_draft(Finding(*base, Severity.HIGH, ("n",), extra=extra), key=f"{i}{event}")
            out.append(
                AuditDraft(
                    kind=d.kind,
                    summary=d.summary,
                    cluster=d.cluster,
                    pool=d.pool,
                    payload={**d.payload, "event": event},
                    key=d.key,
                )
            )
        ev = ChangeEvent(
            id=f"e{i}",
            source="s",
            type="t",
            provider=EventSource.AWS,
            operation=Operation.UPDATE,
            cluster=base[0],
            pool=base[1],
            time=start,
            received_at=start + timedelta(seconds=60 + i % 600),
        )
        out.append(event_draft(ev))
    return out


async def report_figures(n: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_audit_store(f"sqlite:///{Path(tmp) / 'audit.db'}")
        try:
            batch = drafts(n)
            t = time.perf_counter()
            for i in range(0, len(batch), 1000):
                await store.append_many(batch[i : i + 1000])
            appended = time.perf_counter() - t
            now = datetime.now(UTC) + timedelta(seconds=1)
            runs, pure = [], []
            for _ in range(3):
                t = time.perf_counter()
                report = await build_report(store, since="1d", now=now)
                runs.append(time.perf_counter() - t)
            records = [r async for r in store.iterate()]
            for _ in range(3):
                t = time.perf_counter()
                drift_report(records, since=now - timedelta(days=1), until=now)
                pure.append(time.perf_counter() - t)
        finally:
            await store.close()
    total = report.to_json()["total"]
    assert total["opened"] == total["cleared"] == n, total
    return {
        "findings": n,
        "records": len(records),
        "append_s": round(appended, 3),
        "report_s": round(min(runs), 3),
        "aggregate_only_s": round(min(pure), 3),
        "records_per_s": round(len(records) / min(runs)),
        "healed": total["healed"],
    }


def warn_figures(n: int) -> dict[str, object]:
    kusts = [FluxRef(FluxKind.KUSTOMIZATION, "flux-system", f"apps-{i}") for i in range(4)]
    owners = [OwnershipMap([OwnershipRule(owner=Owner.INFRASTRUCTURE, flux=k)]) for k in kusts]
    items = []
    for i in range(n):
        f = Finding(
            f"c{i % 50}",
            f"p{i % 20}",
            Layer.SPEC,
            "instanceType",
            "m5.large",
            f"t3.{i}",
            Severity.HIGH,
        )
        items.append((f, owners[i % 4].route(f)))
    others = [
        {"owner": {"kind": "HelmRelease", "name": f"r{i}"}, "fields": ["*"]} for i in range(20)
    ]
    none = parse_warn(others)  # 20 rules, none of which covers these findings
    some = parse_warn(
        [
            *others[:19],
            {"owner": {"kind": "Kustomization", "name": "apps-0"}, "fields": ["instanceType"]},
        ]
    )  # a quarter warned

    def run(policy: Policy) -> tuple[float, int]:
        state = PolicyState({f"c{i}": 10_000 for i in range(50)})
        t = time.perf_counter()
        warned = sum(
            1 for f, r in items if decide(f, r, state, T0, Mode.ENFORCE, policy=policy).warn
        )
        return time.perf_counter() - t, warned

    times: dict[str, list[float]] = {"plain": [], "none": [], "some": []}
    warned = 0
    for _ in range(3):  # alternating, so all three see the same load
        times["plain"].append(run(Policy())[0])
        times["none"].append(run(Policy(warn=none))[0])
        elapsed, warned = run(Policy(warn=some))
        times["some"].append(elapsed)
    assert warned == n // 4, warned
    best = {k: min(v) for k, v in times.items()}
    return {
        "decisions": n,
        "without_warn_us": round(best["plain"] / n * 1e6, 2),
        "20_rules_none_match_us": round(best["none"] / n * 1e6, 2),
        "20_rules_quarter_warned_us": round(best["some"] / n * 1e6, 2),
        "ratio_none_match": round(best["none"] / best["plain"], 3),
        "ratio_quarter_warned": round(best["some"] / best["plain"], 3),
        "warned": warned,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--findings", type=int, default=10_000)
    ap.add_argument("--decisions", type=int, default=20_000)
    args = ap.parse_args()
    out = {
        "report": asyncio.run(report_figures(args.findings)),
        "warn": warn_figures(args.decisions),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
