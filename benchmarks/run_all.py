"""`make bench`: every benchmark script in this directory, one after the other, with a summary.

    .venv/bin/python benchmarks/run_all.py            # quick mode: small sizes, no services
    .venv/bin/python benchmarks/run_all.py --full     # every script at its own defaults
    .venv/bin/python benchmarks/run_all.py scan_fleet workloads   # only these

Quick mode runs each script that has a small-size mode with the arguments of ``QUICK`` (a
smoke run of the same code path, seconds each, not the published figures) and lists the
heavy ones (``FULL_ONLY``: real API servers, NATS, PostgreSQL, wrk, minutes each) as not run.
``--full`` runs every script with its own defaults, as BENCHMARKS.md records them. Each
script's output goes straight to the terminal; the summary at the end names each script, its
exit code and its wall time. Exits 1 when any script failed.

Every script with a ``__main__`` block must be named in ``QUICK`` or ``FULL_ONLY``
(tests/test_benchmarks.py checks it), so a new benchmark cannot be forgotten by ``make bench``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# script -> arguments of its quick mode (a few seconds on 2 cores)
QUICK: dict[str, tuple[str, ...]] = {
    "cli_startup.py": ("--runs", "3"),
    "clock_reads.py": ("--reads", "20000", "--rounds", "3"),
    "audit_append.py": ("--rounds", "1", "--events", "200"),
    "audit_inputs.py": ("--events", "5000", "--buffer", "5000", "--samples", "2000"),
    "audit_store.py": (
        "--backend",
        "sqlite",
        "--append",
        "2000",
        "--single",
        "200",
        "--verify-records",
        "20000",
    ),
    "deprecation_origins.py": ("--copies", "2", "--runs", "2"),
    "drift_intel.py": ("--findings", "1000", "--decisions", "2000"),
    "entry_lines.py": ("--goal", "1000000"),  # the count only: the goal is a separate check
    "field_accounting.py": (),
    "fleet_api.py": ("--clusters", "20", "--workloads", "40", "--requests", "10"),
    "gateway_cpu.py": ("--rounds", "1", "--batches", "50", "--singles", "500"),
    "heal_times_restore.py": ("--heals", "1000", "--runs", "2"),
    "jq_vs_scan.py": ("--nodes", "2000"),
    "policy_to_sync.py": ("--findings", "1000"),  # fewer pools would hit the blast-radius guard
    "queue_ingest.py": ("--events", "2000", "--backend", "sqlite"),
    "queue_depth.py": ("--depths", "2000", "--rounds", "1", "--steps", "5"),
    "scan_floor.py": ("--nodes", "2000", "--rounds", "2"),
    "scan_fleet.py": ("--clusters", "20", "--nodes-per-cluster", "50"),
    "workloads.py": ("--clusters", "20", "--workloads", "40"),
}
# scripts that need services (real API servers, NATS, PostgreSQL, wrk) or minutes of load:
# run by --full only
FULL_ONLY: frozenset[str] = frozenset(
    {
        "argocd_refresh.py",  # a real API server and the Argo CD simulator
        "chaos_suite.py",
        "dashboard_paint.py",  # headless Chromium against serve on 500 clusters
        "shard_heal.py",  # three serve replicas, two real API servers, PostgreSQL
        "deprecations_vs_pluto.py",  # builds pluto from the Go module proxy first
        "distinct_clusters.py",
        "gateway_default.py",
        "gateway_ingest.py",
        "live_scale.py",
        "live_watch.py",
        "sharding_failover.py",
        "workload_watch.py",
    }
)


def runnable() -> list[str]:
    """The benchmark scripts: every ``*.py`` here with a ``__main__`` block, but this one."""
    return sorted(
        p.name
        for p in HERE.glob("*.py")
        if p.name != Path(__file__).name and '__name__ == "__main__"' in p.read_text()
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="every script at its own defaults")
    ap.add_argument("only", nargs="*", help="only these scripts (name with or without .py)")
    args = ap.parse_args(argv)
    wanted = {n if n.endswith(".py") else f"{n}.py" for n in args.only}
    scripts = [s for s in runnable() if not wanted or s in wanted]
    unknown = sorted(wanted - set(runnable()))
    if unknown:
        print(f"no such benchmark: {', '.join(unknown)}", file=sys.stderr)
        return 2
    summary: list[tuple[str, str, float]] = []
    for script in scripts:
        if args.full:
            extra: tuple[str, ...] = ()
        elif script in QUICK:
            extra = QUICK[script]
        else:
            why = "heavy (services or minutes of load)" if script in FULL_ONLY else "no quick mode"
            summary.append((script, f"not run: {why}; BENCH_FULL=1 runs it", 0.0))
            continue
        command = [sys.executable, str(HERE / script), *extra]
        print(f"\n== {script} {' '.join(extra)}".rstrip(), flush=True)
        start = time.perf_counter()
        rc = subprocess.run(command, cwd=HERE.parent, check=False).returncode
        summary.append(
            (script, "ok" if rc == 0 else f"FAILED (exit {rc})", time.perf_counter() - start)
        )
    print("\n== summary" + (" (full)" if args.full else " (quick: BENCH_FULL=1 for the figures)"))
    for script, status, seconds in summary:
        took = f"{seconds:7.1f} s" if seconds else " " * 9
        print(f"  {script:<24} {took}  {status}")
    return 1 if any(status.startswith("FAILED") for _, status, _ in summary) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
