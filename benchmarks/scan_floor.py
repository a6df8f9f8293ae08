"""Where a big scan's CPU goes, per node: what the fast reader's stages cost, one by one.

    .venv/bin/python benchmarks/scan_floor.py                   # 20,000 nodes, 200 pools
    .venv/bin/python benchmarks/scan_floor.py --nodes 5000 --rounds 3

``fleetwarden scan`` of one big dump (``nodedumps`` / ``nodestream``) reads the items array in
chunks, decodes each chunk with msgspec into structs of only the fields the diff reads, turns
them into rows (``_rows_of``) and feeds the rows to the summary builder. This script times each
of those stages alone on the chunks of one generated dump (``fleetgen``, as ``jq_vs_scan.py``
makes it), best of ``--rounds``, in CPU time of this process:

- ``read``: ``readinto`` of the whole file in the reader's chunk size (the page-cache copy);
- ``skip``: msgspec decoding every item into an empty struct, i.e. validating and skipping
  every byte: the least any msgspec-based reader can spend;
- ``decode``: the reader's own decoder (the fields the diff reads);
- ``rows``: slim items to node rows; ``summarise``: the rows into the pool summaries;
- ``native rows``: the native fast path (``_nodescan.c``), chunk to node rows in one step: what
  the scan runs where the extension is built (it replaces ``decode`` + ``rows``).

The per-node figures say what a further speed-up can come from: the last line gives the
least wall time the two-process scan could take if only ``read`` + ``decode`` were left,
split evenly over two cores. If ``fastsimdjson`` is importable (it is not a dependency), its
``loads_many(..., fields=...)`` over the same chunks is timed too, as a candidate parser.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleetgen

from fleetwarden.core.diffing import ClusterSummariser
from fleetwarden.formats import nodestream
from fleetwarden.formats.desired import read_desired
from fleetwarden.formats.documents import SourceFile


class _Nothing(msgspec.Struct):
    pass


def _best(run: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def _chunks(path: Path) -> list[bytes]:
    """The items array as the reader cuts it: ``[`` + whole items + ``]``, about a chunk each."""
    with open(path, "rb", buffering=0) as fh:
        head = nodestream.read_head(fh.readinto)
    data = path.read_bytes()
    assert head.separator is not None, "a dump of one item"
    close = head.separator.index(b"}")
    end_of_items = data.rindex(b"]", 0, data.rindex(b"}"))
    chunks, pos = [], head.items_at
    while pos < end_of_items:
        cut = data.rfind(head.separator, pos, pos + nodestream.CHUNK_BYTES)
        end = cut + close + 1 if cut > pos else data.rindex(b"}", pos, end_of_items) + 1
        chunks.append(b"[" + data[pos:end] + b"]")
        nxt = data.find(b"{", end)
        pos = nxt if 0 <= nxt < end_of_items else end_of_items
    return chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--pools", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fw-floor-"))
    try:
        fleetgen.write_fleet(
            work, clusters=1, nodes_per_cluster=args.nodes, seed=4, pools=args.pools
        )
        dump = next((work / "nodes").iterdir())
        desired = work / "desired.yaml"
        specs = read_desired([SourceFile(str(desired), desired.read_bytes(), True)]).pools
        summariser = ClusterSummariser(tuple(specs))
        keys = summariser.builder().label_keys
        chunks = _chunks(dump)
        size = dump.stat().st_size
        decoder = nodestream._items_reading(keys)  # the reader's own decoder
        items = [decoder.decode(c) for c in chunks]
        nodes = sum(map(len, items))
        assert nodes == args.nodes, (nodes, args.nodes)
        gc.disable()  # as the reader runs (``_gc_paused``)

        def read() -> None:
            buf = memoryview(bytearray(nodestream.CHUNK_BYTES))
            with open(dump, "rb", buffering=0) as fh:
                while fh.readinto(buf):
                    pass

        skip = msgspec.json.Decoder(list[_Nothing])
        rows: list[list[object]] = []

        def make_rows() -> None:
            rows.clear()
            shared = nodestream._Shared()
            for got in items:
                out: list[object] = []
                nodestream._rows_of(got, out, shared, keys)
                rows.append(out)

        make_rows()
        stages: dict[str, Callable[[], object]] = {
            "read": read,
            "skip": lambda: [skip.decode(c) for c in chunks],
            "decode": lambda: [decoder.decode(c) for c in chunks],
            "rows": make_rows,
            "summarise": lambda: [summariser.builder().add(r) for r in rows],
        }
        native = nodestream._native
        if native is not None:

            def native_rows() -> None:
                shared = nodestream._Shared()
                for c in chunks:
                    got = native.rows(c, keys, shared.map_of, shared.taints_of, shared.names)
                    assert isinstance(got, list), "the native path was not sure of a chunk"

            stages["native rows"] = native_rows
        try:
            import fastsimdjson  # type: ignore[import-not-found]
        except ImportError:
            fastsimdjson = None
        if fastsimdjson is not None:
            pointers = ["/kind", "/metadata/name"]
            pointers += [
                "/metadata/labels/" + k.replace("~", "~0").replace("/", "~1") for k in keys
            ]
            pointers += ["/spec/taints", "/spec/unschedulable", "/status/allocatable"]
            pointers += ["/status/capacity", "/status/nodeInfo"]

            def fields() -> None:
                for c in chunks:
                    list(fastsimdjson.loads_many(c, format="array", fields=pointers))

            stages["fastsimdjson fields"] = fields
        print(
            f"{nodes:,} nodes in {args.pools} pools, {size / 2**20:,.0f} MiB "
            f"({size / nodes:,.0f} bytes a node), {len(chunks)} chunks; "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
        )
        got: dict[str, float] = {}
        for name, run in stages.items():
            got[name] = _best(run, args.rounds)
            print(
                f"{name:>20}: {got[name] / nodes * 1e6:6.2f} us a node, "
                f"{size / got[name] / 1e9:5.2f} GB/s, "
                f"{got[name] * 1e5 / nodes:.3f} s per 100k nodes"
            )
        if "native rows" in got:
            per_100k = (got["read"] + got["native rows"]) * 1e5 / nodes
            python = got["summarise"] * 1e5 / nodes
            print(
                f"per 100k nodes on two cores: read + native rows {per_100k / 2:.3f} s of wall "
                f"each, summarise {python / 2:.3f} s more; start-up, merge and output on top"
            )
        else:
            per_100k = (got["read"] + got["decode"]) * 1e5 / nodes
            python = (got["rows"] + got["summarise"]) * 1e5 / nodes
            print(
                f"per 100k nodes on two cores: read + decode {per_100k / 2:.3f} s of wall each, "
                f"rows + summarise {python / 2:.3f} s more; start-up, merge and output on top"
            )
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        print(
            f"SUMMARY {when} | {nodes:,} nodes | "
            + " | ".join(f"{k} {v / nodes * 1e6:.2f} us" for k, v in got.items())
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
