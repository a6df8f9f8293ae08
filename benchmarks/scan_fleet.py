"""Figures for issue 2: diff throughput, end-to-end scan time and peak memory.

    .venv/bin/python benchmarks/scan_fleet.py [--clusters 1000] [--nodes-per-cluster 100]

1. Generates a synthetic fleet (default 100,000 nodes in 1,000 clusters) as kubectl JSON dumps.
2. Diff only: the nodes parsed once into memory, then ``diff_fleet`` timed alone (one core:
   the code is single-threaded), best of 3.
3. End to end: the real CLI, ``fleetwarden scan -d desired.yaml -n nodes/ -o json``, in a
   subprocess; wall time (best of 3) and peak RSS summed over its process tree (workers too).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleetgen
import proctree

from fleetwarden.adapters.files import load_desired, load_nodes, parse_path_arg
from fleetwarden.core.fleet import diff_fleet


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--nodes-per-cluster", type=int, default=100)
    ap.add_argument("--keep", type=Path, help="write the fleet here and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="fw-bench-"))
    try:
        t = time.perf_counter()
        meta = fleetgen.write_fleet(
            work, clusters=args.clusters, nodes_per_cluster=args.nodes_per_cluster
        )
        size = sum(p.stat().st_size for p in (work / "nodes").iterdir())
        print(
            f"generated {meta['nodes']} nodes in {meta['clusters']} clusters "
            f"({size / 2**20:.0f} MiB of JSON) in {time.perf_counter() - t:.1f}s; "
            f"planted {meta['planted']}",
            flush=True,
        )

        desired = load_desired([parse_path_arg(str(work / "desired.yaml"))])
        observed = load_nodes([parse_path_arg(str(work / "nodes"))])
        n_nodes = sum(len(v) for v in observed.values())
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            report = diff_fleet(desired.pools, observed)
            best = min(best, time.perf_counter() - t)
        by_layer: dict[str, int] = {}
        for f in report.findings:
            by_layer[f.layer.value] = by_layer.get(f.layer.value, 0) + len(f.nodes)
        print(
            f"diff only: {n_nodes} nodes in {best:.3f}s = {n_nodes / best:,.0f} nodes/s; "
            f"{len(report.findings)} findings; nodes flagged per layer {by_layer}"
        )
        del observed, report

        exe = shutil.which("fleetwarden", path=str(Path(sys.executable).parent))
        cmd = [
            exe,
            "scan",
            "-d",
            str(work / "desired.yaml"),
            "-n",
            str(work / "nodes"),
            "-o",
            "json",
            "--no-progress",
        ]
        walls, peaks = [], []
        for _ in range(3):
            r, wall, tree_peak = proctree.run_measured(cmd)
            walls.append(wall)
            peaks.append(tree_peak)
            if r.returncode not in (0, 1):
                raise SystemExit(r.stderr.decode())
        peak = max(peaks)
        summary = json.loads(r.stdout)["summary"]
        print(
            f"end to end: fleetwarden scan of {summary['nodes']} nodes: best {min(walls):.2f}s "
            f"(runs {', '.join(f'{w:.2f}' for w in walls)}); "
            f"peak RSS of the process tree {peak:.0f} MiB; "
            f"{summary['findings']} findings"
        )
        print(
            json.dumps(
                {
                    "nodes": n_nodes,
                    "diff_seconds": best,
                    "diff_nodes_per_s": n_nodes / best,
                    "scan_seconds": min(walls),
                    "scan_peak_rss_mib": peak,
                    "cpus": os.cpu_count(),
                }
            )
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
