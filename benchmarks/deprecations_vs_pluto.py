"""Issue 12: ``fleetwarden deprecations`` against Pluto v5.21.7 on the same 2,760 manifests.

    .venv/bin/python benchmarks/deprecations_vs_pluto.py [--copies 20] [--runs 5] [--target 1.25]

1. The set: every manifest of the corpus (``shared/realdata``, .yaml/.yml/.json) except
   ``events/`` (cloud event payloads), ``nodes/`` (node dumps) and ``crds/``: 138 files,
   copied ``--copies`` times (20: 2,760 files, 26 MB) into a temporary directory.
2. Pluto, built by ``benchmarks/pluto-ensure``: ``pluto detect-files -d SET -o json
   -t k8s=vMAJOR.MINOR.0 --components k8s``; fleetwarden: ``fleetwarden deprecations -m SET
   -t MAJOR.MINOR -o json`` through the console script, and the same command on its own
   (``python -c`` building a Typer app of that one command: what a CLI that loads only the
   command it runs costs). Each side by side in turn, wall time, best of ``--runs``.
3. The findings compared: (file, kind, apiVersion, name, namespace, status) on both sides,
   status ``removed`` when removed at the target, else ``deprecated``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REALDATA = HERE.parent.parent / "shared" / "realdata"
LEFT_OUT = {"events", "nodes", "crds"}
SUFFIXES = (".yaml", ".yml", ".json")
ONE_COMMAND = (
    "import sys, typer; from fleetwarden.cli import deprecations as d; "
    "app = typer.Typer(add_completion=False); d.register(app); "
    "sys.argv[0] = 'fleetwarden-deprecations'; app()"
)

Row = tuple[str, str, str, str | None, str | None, str]


def realdata_dir() -> Path:
    given = os.environ.get("FW_REALDATA")
    for candidate in ([Path(given)] if given else []) + [REALDATA]:
        if candidate.is_dir():
            return candidate
    sys.exit("no shared/realdata found: set FW_REALDATA")


def build_set(dest: Path, copies: int) -> int:
    src = realdata_dir()
    files = sorted(
        p
        for p in src.rglob("*")
        if p.is_file() and p.suffix in SUFFIXES and p.relative_to(src).parts[0] not in LEFT_OUT
    )
    for i in range(1, copies + 1):
        for p in files:
            out = dest / f"c{i:02d}" / p.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, out)
    return len(files) * copies


def pluto_binary() -> str:
    done = subprocess.run(
        [str(HERE / "pluto-ensure")], capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        sys.exit(f"pluto-ensure failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


def child_env() -> dict[str, str]:
    """The environment for the commands: the fleetwarden this script imports (a worktree's
    ``src`` given as a relative PYTHONPATH would not resolve from the set's directory)."""
    import fleetwarden

    src = str(Path(fleetwarden.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, path) if p)}


def timed(argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system, the process and the children it waited for), output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, check=False, env=child_env()
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1, 2, 3, 4):  # findings: exit 1 (fleetwarden), 2-4 (pluto)
        sys.exit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, cpu, done.stdout


def pluto_rows(out: str, root: Path) -> set[Row]:
    rows: set[Row] = set()
    for item in json.loads(out).get("items") or []:
        # Pluto prints "CWD/PATH" for each PATH it walked ("-d ." from the set: SET/cNN/...)
        path = item["filePath"].split(f"{root.name}/", 1)[-1]
        api = item["api"]
        status = "removed" if item["removed"] else "deprecated"
        rows.add(
            (path, api["kind"], api["version"], item.get("name"), item.get("namespace"), status)
        )
    return rows


def fleetwarden_rows(out: str, root: Path) -> set[Row]:
    rows: set[Row] = set()
    for f in json.loads(out)["findings"]:
        path = str(Path(f["file"]).relative_to(root))
        rows.add((path, f["kind"], f["apiVersion"], f["name"], f["namespace"], f["status"]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", default="1.25")
    args = ap.parse_args()
    pluto = pluto_binary()
    version = subprocess.run([pluto, "version"], capture_output=True, text=True).stdout.strip()
    exe = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"
    work = Path(tempfile.mkdtemp(prefix="fw-deprec-"))
    try:
        n = build_set(work, args.copies)
        size = sum(p.stat().st_size for p in work.rglob("*") if p.is_file())
        print(f"set: {n} files, {size / 1e6:.1f} MB in {work}; pluto {version}")
        pluto_target = ["-t", f"k8s=v{args.target}.0", "--components", "k8s"]
        fw_args = ["deprecations", "-m", str(work), "-t", args.target, "-o", "json"]
        commands = {
            "pluto detect-files": [pluto, "detect-files", "-d", ".", "-o", "json", *pluto_target],
            "fleetwarden deprecations": [exe, *fw_args],
            "the command alone": [sys.executable, "-c", ONE_COMMAND, *fw_args[1:]],
        }
        best = dict.fromkeys(commands, float("inf"))
        best_cpu = dict.fromkeys(commands, float("inf"))
        outputs: dict[str, str] = {}
        for _ in range(args.runs):
            for name, argv in commands.items():  # side by side, in turn
                wall, cpu, out = timed(argv, work)
                best[name] = min(best[name], wall)
                best_cpu[name] = min(best_cpu[name], cpu)
                outputs[name] = out
        base, base_cpu = best["pluto detect-files"], best_cpu["pluto detect-files"]
        print(
            f"\n{'command':26} {'wall, best of ' + str(args.runs):>18} {'vs pluto':>9}"
            f" {'CPU (user+sys)':>15} {'vs pluto':>9}"
        )
        for name, wall in best.items():
            cpu = best_cpu[name]
            ratios = f"{wall / base:>8.2f}x {cpu:>14.3f}s {cpu / base_cpu:>8.2f}x"
            print(f"{name:26} {wall:>17.3f}s {ratios}")
        theirs = pluto_rows(outputs["pluto detect-files"], work)
        ours = fleetwarden_rows(outputs["fleetwarden deprecations"], work)
        alone = fleetwarden_rows(outputs["the command alone"], work)
        summary = json.loads(outputs["fleetwarden deprecations"])["summary"]
        print(
            f"\nfindings: pluto {len(theirs)}, fleetwarden {len(ours)} "
            f"({summary['objects']} objects in {summary['files']} files, "
            f"{summary['skipped']} skipped); same set: {theirs == ours and ours == alone}"
        )
        for row in sorted(theirs - ours):
            print("  only pluto:      ", row)
        for row in sorted(ours - theirs):
            print("  only fleetwarden:", row)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
