"""Rerun the chaos suite (tests/chaos, seed 000 ch. 26-30) and print the table of RELIABILITY.md.

    .venv/bin/python benchmarks/chaos_suite.py            # every drill
    .venv/bin/python benchmarks/chaos_suite.py -k nats    # pytest arguments pass through

Each test records its own figures (tests/chaos/conftest.py): the faults it injected, events
acknowledged, lost, processed twice and the time to recover. This script runs pytest with
``FW_CHAOS_REPORT`` pointing at a scratch file, then prints one Markdown row per drill, the
wall time of the run and pytest's exit code (which it also exits with). The services come from
the project's scripts, as in the test suite (scripts/k8s-test-env, nats-test-env, pg-test-env).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DRILLS = {  # test name → the drill's name in RELIABILITY.md
    "test_apiserver_killed_and_restarted_during_a_watch_misses_nothing": (
        "API server killed and restarted during a watch"
    ),
    "test_nats_killed_and_restarted_under_load_loses_and_duplicates_nothing": (
        "NATS restarted under load"
    ),
    "test_postgres_crashed_mid_write_loses_and_duplicates_nothing": (
        "PostgreSQL restarted mid-write"
    ),
    "test_argocd_failing_for_five_minutes_loses_no_decision_and_heals_after": (
        "Argo CD 5xx / timeouts for 5 minutes"
    ),
    "test_a_full_disk_is_a_clean_503_and_space_returning_is_recovery": (
        "Disk full on the SQLite store"
    ),
    "test_signed_webhooks_ten_minutes_off_get_a_clear_401_and_are_accepted_once_corrected": (
        "Clock skew ±10 min on signed webhooks"
    ),
}


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| drill | faults injected | acknowledged | lost | twice | time to recover |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        recover = row["recover_s"]
        lines.append(
            f"| {DRILLS.get(str(row['test']), str(row['test']))} | {row['faults']} | "
            f"{row['acknowledged']} | **{row['lost']}** | **{row['twice']}** | "
            f"{'-' if recover is None else f'{float(recover):.2f} s'} |"  # type: ignore[arg-type]
        )
    lines.append("")
    lines += [
        f"- {DRILLS.get(str(r['test']), r['test'])}: {r['notes']}" for r in rows if r["notes"]
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="fw-chaos-") as tmp:
        report = Path(tmp) / "figures.jsonl"
        env = {**os.environ, "FW_CHAOS_REPORT": str(report)}
        started = time.monotonic()
        rc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/chaos", *argv],
            cwd=ROOT,
            env=env,
            check=False,
        ).returncode
        wall = time.monotonic() - started
        rows = (
            [json.loads(line) for line in report.read_text().splitlines()]
            if report.exists()
            else []
        )
    print()
    print(table(rows))
    print()
    print(f"{len(rows)} drill(s) in {wall:.0f} s of wall time; pytest exit code {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
