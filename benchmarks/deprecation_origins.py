"""What the rows' ``origin`` costs ``fleetwarden deprecations -o json`` (issue #14 item 8).

    .venv/bin/python benchmarks/deprecation_origins.py [--copies 20] [--runs 5] [--target 1.25]
        [--baseline REV]

1. The set of ``benchmarks/deprecations_vs_pluto.py``: every manifest of the corpus but
   ``events/``, ``nodes/`` and ``crds/``, copied ``--copies`` times into a temporary directory.
2. This checkout's ``src`` (findings with ``origin``) against ``--baseline``'s (``git archive``
   of that revision's ``src``; default: the commit before ``row_origin`` came into
   ``core/deprecations.py``), each as ``python -m fleetwarden deprecations -m SET -t TARGET -o
   json``, side by side in turn, wall and CPU time, best of ``--runs``; the ratio is what the
   origins add. The findings of both must be the same apart from the added key.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _pluto_bench() -> Any:
    spec = importlib.util.spec_from_file_location("dvp", HERE / "deprecations_vs_pluto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def baseline_rev() -> str:
    """The parent of the first commit that brought ``row_origin`` into the core."""
    out = subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "log",
            "-S",
            "def row_origin",
            "--format=%H",
            "--",
            "src/fleetwarden/core/deprecations.py",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not out:
        sys.exit("no commit adds row_origin: give --baseline REV")
    return f"{out[-1]}~1"


def export_src(rev: str, dest: Path) -> Path:
    archive = dest / "src.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", default="1.25")
    ap.add_argument("--baseline", default=None, help="a git revision (default: see above)")
    args = ap.parse_args()
    dvp = _pluto_bench()
    rev = args.baseline or baseline_rev()
    with tempfile.TemporaryDirectory(prefix="fw-origins-") as tmp:
        work = Path(tmp) / "set"
        n = dvp.build_set(work, args.copies)
        trees = {"with origins": ROOT / "src", "baseline": export_src(rev, Path(tmp))}
        argv = [
            sys.executable,
            "-m",
            "fleetwarden",
            "deprecations",
            "-m",
            str(work),
            "-t",
            args.target,
            "-o",
            "json",
        ]
        best = dict.fromkeys(trees, float("inf"))
        best_cpu = dict.fromkeys(trees, float("inf"))
        outputs: dict[str, str] = {}
        for _ in range(args.runs):
            for name, src in trees.items():  # side by side, in turn
                wall, cpu, out = _timed(dvp, argv, work, src)
                best[name], best_cpu[name] = min(best[name], wall), min(best_cpu[name], cpu)
                outputs[name] = out
        ours, theirs = (json.loads(outputs[k])["findings"] for k in trees)
        stripped = [{k: v for k, v in f.items() if k != "origin"} for f in ours]
        result = {
            "files": n,
            "findings": len(ours),
            "baseline": rev,
            "runs": args.runs,
            "wallSeconds": {k: round(v, 3) for k, v in best.items()},
            "cpuSeconds": {k: round(v, 3) for k, v in best_cpu.items()},
            "wallRatio": round(best["with origins"] / best["baseline"], 3),
            "cpuRatio": round(best_cpu["with origins"] / best_cpu["baseline"], 3),
            "sameFindings": stripped == theirs,
            "everyFindingHasOrigin": all(f.get("origin") for f in ours),
        }
        print(json.dumps(result, indent=2))


def _timed(dvp: Any, argv: list[str], cwd: Path, src: Path) -> tuple[float, float, str]:
    """``deprecations_vs_pluto.timed`` with ``src`` first on PYTHONPATH."""
    saved = dvp.child_env
    dvp.child_env = lambda: {**saved(), "PYTHONPATH": str(src)}
    try:
        result: tuple[float, float, str] = dvp.timed(argv, cwd)
        return result
    finally:
        dvp.child_env = saved


if __name__ == "__main__":
    main()
