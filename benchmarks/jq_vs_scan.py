"""Side by side on one 10,000-node dump: the seed's jq method vs ``fleetwarden scan``.

    .venv/bin/python benchmarks/jq_vs_scan.py [--nodes 10000]

Seed 004 §3.3 inspects L1/L2/L4 with ``kubectl get nodes -o json | jq ...``. Here that method
is written out in full as one jq program (pool labels, taint set equality without transient
taints, kubelet minor version) and run over the same saved dump as ``fleetwarden scan``. Both
outputs are reduced to (node, field) pairs for L1/L2/L4 and compared; wall times are best of 3.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleetgen

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    args = ap.parse_args()
    jq = shutil.which("jq")
    if not jq:
        raise SystemExit("jq is not installed (apt-get install jq)")
    work = Path(tempfile.mkdtemp(prefix="fw-jq-"))
    try:
        meta = fleetgen.write_fleet(work, clusters=1, nodes_per_cluster=args.nodes, seed=4)
        dump = next((work / "nodes").iterdir())
        pools = {
            name: {"labels": labels, "taints": taints, "version": "1.30"}
            for name, _t, _c, _m, _p, labels, taints in fleetgen.POOLS
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
        fw_cmd = [
            exe,
            "scan",
            "-d",
            str(work / "desired.yaml"),
            "-n",
            str(dump),
            "-o",
            "json",
            "--no-progress",
        ]
        jq_t, fw_t = [], []
        for _ in range(3):
            t = time.perf_counter()
            jq_out = subprocess.run(jq_cmd, capture_output=True, text=True, check=True).stdout
            jq_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            fw = subprocess.run(fw_cmd, capture_output=True, text=True, check=False)
            fw_t.append(time.perf_counter() - t)
        jq_pairs = {tuple(line.split("\t")) for line in jq_out.splitlines() if line}
        fw_pairs = {
            (node, f["field"])
            for f in json.loads(fw.stdout)["findings"]
            if f["layer"] in ("L1", "L2", "L4") and f["field"] != "kubeletVersion.mixed"
            for node in f["nodes"]
        }
        same = jq_pairs == fw_pairs
        print(f"{meta['nodes']} nodes, planted {meta['planted']}")
        print(
            f"jq (seed method, L1/L2/L4 only): best {min(jq_t):.2f}s, "
            f"{len(jq_pairs)} node-level drifts"
        )
        print(
            f"fleetwarden scan (all layers):   best {min(fw_t):.2f}s, "
            f"{len(fw_pairs)} node-level L1/L2/L4 drifts"
        )
        print(f"ratio jq/fleetwarden: {min(jq_t) / min(fw_t):.1f}x; same drift found: {same}")
        if not same:
            print("only jq:", sorted(jq_pairs - fw_pairs)[:10])
            print("only fleetwarden:", sorted(fw_pairs - jq_pairs)[:10])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
