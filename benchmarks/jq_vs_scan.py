"""Side by side on one cluster dump: the seed's jq method vs ``fleetwarden scan``.

Headline run (issue 12; ~900 MB dump, jq needs ~2.5 GB of memory and half a minute):

    .venv/bin/python benchmarks/jq_vs_scan.py --nodes 100000 --pools 200

Add ``--before-src /path/to/other/checkout/src`` to time another version of fleetwarden on the
same dump in the same run (e.g. main before a change). Defaults (10,000 nodes, 5 pools) are a
quick check.

Seed 004 §3.3 inspects L1/L2/L4 with ``kubectl get nodes -o json | jq ...``. Here that method
is written out in full as one jq program (pool labels, taint set equality without transient
taints, kubelet minor version) and run over the same saved dump as ``fleetwarden scan``. Each
side's node-level drifts are checked against the drift ``fleetgen`` planted (jq: L1/L2/L4;
fleetwarden: also the instance type, SPEC): every planted drift found, nothing else. Wall
times and CPU times (user + system of the command and its workers, from getrusage) are best
of ``--runs`` rounds; each round runs every side once, so load that comes and goes hits
the sides alike. The last line (``SUMMARY ...``) is the whole result on one line, with the
load average before and after. On a busy machine the CPU time is the steadier figure: jq runs
on one core, so on a quiet machine its wall time is its CPU time, while fleetwarden's two
processes overlap;
the CPU-time ratio is thus about the least the quiet wall-time ratio will be. Peak memory is
the RSS of the command and every process it starts, summed and sampled from /proc every
20 ms (``proctree``), highest over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleetgen
import proctree

from fleetwarden.core.rules import DEFAULT_TRANSIENT_TAINTS

JQ = r"""
def taintset: [ .[]? | select(.key as $k | $transient | index($k) | not)
               | "\(.key)=\(.value // ""):\(.effect)" ] | unique;
.items[] as $n
| ($n.metadata.labels["eks.amazonaws.com/nodegroup"]) as $p
| select($p != null and $pools[$p] != null)
| $pools[$p] as $want
| $n.metadata.name as $name
| (
    ($want.labels | to_entries[] | select($n.metadata.labels[.key] != .value)
      | "\($name)\tlabels.\(.key)"),
    (($want.taints | taintset) as $e | ($n.spec.taints | taintset) as $a
      | (($e - $a)[], ($a - $e)[])
      | capture("^(?<k>[^=]*)=(?<v>[^:]*):(?<eff>.*)$")
      | "\($name)\ttaints.\(.k):\(.eff)"),
    (($n.status.nodeInfo.kubeletVersion | capture("^v?(?<mm>[0-9]+\\.[0-9]+)").mm) as $v
      | select($v != $want.version) | "\($name)\tkubeletVersion")
  )
"""


def _layer(field: str) -> str:
    if field.startswith("labels."):
        return "L1"
    if field.startswith("taints."):
        return "L2"
    if field == "kubeletVersion":
        return "L4"
    return "SPEC" if field == "instanceType" else "other"


def _fw_drift(stdout: bytes) -> set[tuple[str, str]]:
    return {
        (node, f["layer"] if f["layer"] != "SPEC" else _layer(f["field"]))
        for f in json.loads(stdout)["findings"]
        if f["layer"] in ("L1", "L2", "L4", "SPEC") and f["field"] != "kubeletVersion.mixed"
        for node in f["nodes"]
    }


def _cpu() -> float:
    """CPU seconds of every waited-for child so far (worker processes included)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_once(cmd: list[str], env: dict[str, str] | None) -> tuple[bytes, float, float, float]:
    """One run: stdout, wall seconds, CPU seconds (the command and its workers), peak MiB."""
    cpu = _cpu()
    if env is None:
        r, wall, peak = proctree.run_measured(cmd)
    else:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            r, wall, peak = proctree.run_measured(cmd)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    return r.stdout, wall, _cpu() - cpu, peak


def _measure_rounds(sides: list[dict], runs: int) -> None:
    """Every side once per round, ``runs`` rounds: load that comes and goes hits all sides
    alike (side by side, not one side's runs after the other's)."""
    for side in sides:
        side.update(walls=[], cpus=[], peaks=[], out=b"")
    for _ in range(runs):
        for side in sides:
            out, wall, cpu, peak = _run_once(side["cmd"], side.get("env"))
            side["walls"].append(wall)
            side["cpus"].append(cpu)
            side["peaks"].append(peak)
            side["out"] = out
    for side in sides:
        side.update(best=min(side["walls"]), cpu=min(side["cpus"]), peak_mib=max(side["peaks"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pools", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before-src", help="another fleetwarden src/ to time on the same dump")
    ap.add_argument("--keep", help="write the fleet here and keep it (default: a temp dir)")
    ap.add_argument(
        "--also-one-process", action="store_true", help="also time `scan --jobs 1` (no split)"
    )
    args = ap.parse_args()
    # a user's fleetwarden runs from compiled bytecode: a shell (or CI) that sets
    # PYTHONDONTWRITEBYTECODE would make every timed run compile the package anew
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    jq = shutil.which("jq")
    if not jq:
        raise SystemExit("jq is not installed (apt-get install jq)")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fw-jq-"))
    try:
        meta = fleetgen.write_fleet(
            work, clusters=1, nodes_per_cluster=args.nodes, seed=4, pools=args.pools
        )
        dump = next((work / "nodes").iterdir())
        pools = {
            name: {"labels": labels, "taints": taints, "version": "1.30"}
            for name, _t, _c, _m, _p, labels, taints in fleetgen.make_pools(args.pools)
        }
        jq_cmd = [
            jq,
            "-r",
            "--argjson",
            "pools",
            json.dumps(pools),
            "--argjson",
            "transient",
            json.dumps(list(DEFAULT_TRANSIENT_TAINTS)),
            JQ,
            str(dump),
        ]
        exe = shutil.which("fleetwarden", path=str(Path(sys.executable).parent))
        assert exe is not None
        fw_cmd = [exe, "scan", "-d", str(work / "desired.yaml"), "-n", str(dump)]
        fw_cmd += ["-o", "json", "--no-progress"]
        planted = {(node, kind) for kind, names in meta["planted_nodes"].items() for node in names}
        print(
            f"{meta['nodes']:,} nodes in {args.pools} pools, one dump of "
            f"{dump.stat().st_size / 2**20:,.0f} MiB; planted {meta['planted']}"
        )
        print(f"{platform.node()}: {os.cpu_count()} cores, load average {os.getloadavg()}")
        tiny = work / "tiny"
        fleetgen.write_fleet(tiny, clusters=1, nodes_per_cluster=3, seed=4, pools=args.pools)
        tiny_cmd = [exe, "scan", "-d", str(tiny / "desired.yaml"), "-n", str(tiny / "nodes")]
        tiny_cmd += ["-o", "json", "--no-progress"]
        load_before = os.getloadavg()
        sides: list[dict] = [
            {"label": "jq (seed method, L1/L2/L4)", "cmd": jq_cmd},
            {"label": "fleetwarden scan", "cmd": fw_cmd},
        ]
        if args.also_one_process:
            sides.append({"label": "fleetwarden scan --jobs 1", "cmd": [*fw_cmd, "--jobs", "1"]})
        if args.before_src:
            env = {**os.environ, "PYTHONPATH": args.before_src}
            label = f"fleetwarden scan, {args.before_src}"
            sides.append({"label": label, "cmd": fw_cmd, "env": env})
        startup = {"label": "start-up", "cmd": tiny_cmd}
        _measure_rounds([*sides, startup], args.runs)
        jq_pairs = set()
        for line in sides[0]["out"].decode().splitlines():
            node, field = line.split("\t")
            jq_pairs.add((node, _layer(field)))
        want_jq = {p for p in planted if p[1] != "SPEC"}
        ok = True
        for side in sides:
            found = jq_pairs if side is sides[0] else _fw_drift(side["out"])
            want = want_jq if side is sides[0] else planted
            side["found"] = found == want
            ok = ok and side["found"]
            ratio = sides[0]["best"] / side["best"]
            cpu_ratio = sides[0]["cpu"] / side["cpu"]
            print(
                f"{side['label']}: best {side['best']:.2f} s wall (runs "
                f"{', '.join(f'{w:.2f}' for w in side['walls'])}), {side['cpu']:.2f} s CPU "
                f"(all processes), peak {side['peak_mib']:.0f} MiB; {ratio:.1f}x jq by wall, "
                f"{cpu_ratio:.1f}x by CPU; {len(found)} node-level drifts, every planted drift "
                f"found and nothing else: {side['found']}"
            )
            if not side["found"]:
                print("  missed:", sorted(want - found)[:10])
                print("  extra:", sorted(found - want)[:10])
        print(
            f"start-up: `fleetwarden scan` of a 3-node dump takes {startup['best']:.2f} s wall, "
            f"{startup['cpu']:.2f} s CPU"
        )
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load_after = os.getloadavg()
        print(f"load average after: {load_after}; at {when}")
        jq_side, fw = sides[0], sides[1]
        rest = "; ".join(
            f"{s['label'].removeprefix('fleetwarden ')} {s['best']:.2f} s "
            f"({jq_side['best'] / s['best']:.1f}x), {s['cpu']:.2f} s CPU "
            f"({jq_side['cpu'] / s['cpu']:.1f}x), {s['peak_mib']:.0f} MiB"
            for s in sides[2:]
        )
        print(
            f"SUMMARY {when} | {meta['nodes']:,} nodes / {args.pools} pools, "
            f"{dump.stat().st_size / 2**20:,.0f} MiB, best of {args.runs} | "
            f"jq {jq_side['best']:.2f} s wall, {jq_side['cpu']:.2f} s CPU | "
            f"scan {fw['best']:.2f} s wall "
            f"({jq_side['best'] / fw['best']:.1f}x jq), {fw['cpu']:.2f} s CPU "
            f"({jq_side['cpu'] / fw['cpu']:.1f}x), peak {fw['peak_mib']:.0f} MiB"
            + (f" | {rest}" if rest else "")
            + f" | start-up {startup['best']:.2f} s | every planted drift found: {ok} | "
            f"load average {load_before[0]:.1f} -> {load_after[0]:.1f} on {os.cpu_count()} cores"
        )
        if not ok:
            raise SystemExit(1)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
