"""Figures for issue 10: the account of every field, per format, over the real corpus.

    .venv/bin/python benchmarks/field_accounting.py [--realdata ../shared/realdata] [--markdown]

For each desired-state format directory of the corpus: files read, files with pools, pools, and
the attributes of those pools as compared / unresolved / ignored / unaccounted, plus the
provisioner defaults applied (a default is a compared value no file states). Goal: 0
unaccounted. Also times reading each tree (the line index and the accounting are part of it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fleetwarden.adapters.files import PathArg, load_desired
from fleetwarden.core.fleet import field_counts

FORMATS = ("eksctl", "karpenter", "capi", "terraform")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parents[1]
    ap.add_argument("--realdata", type=Path, default=here.parent / "shared" / "realdata")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    rows = []
    for name in FORMATS:
        root = args.realdata / name
        start = time.perf_counter()
        # the Karpenter files are unrelated examples (most name a NodePool `default`, which one
        # tree refuses as defined twice): each is read as its own tree
        trees = sorted(root.glob("*.yaml")) if name == "karpenter" else [root]
        loaded = load_desired([PathArg(None, tree) for tree in trees])
        elapsed = time.perf_counter() - start
        counts = field_counts(loaded.pools)
        with_pools = len({p.source for p in loaded.pools})
        problems = sum(1 for s in loaded.skipped if s.problem)
        rows.append(
            (
                name,
                loaded.files,
                with_pools,
                problems,
                len(loaded.pools),
                counts["compared"],
                counts["defaults"],
                counts["unresolved"],
                counts["ignored"],
                counts["unaccounted"],
                elapsed,
            )
        )
    header = (
        "format",
        "files",
        "with pools",
        "unreadable",
        "pools",
        "compared",
        "of which defaults",
        "unresolved",
        "ignored",
        "unaccounted",
        "read (s)",
    )
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(_cell(v) for v in row) + " |")
    else:
        print("  ".join(f"{h:>12}" for h in header))
        for row in rows:
            print("  ".join(f"{_cell(v):>12}" for v in row))
    total_unaccounted = sum(r[9] for r in rows)
    print(f"unaccounted in all: {total_unaccounted} (goal 0)")


def _cell(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()
