"""Issue 12's figure: the lines of the entry layers (``cli/`` + ``entrypoints/``), per
package and per module, beside the layers their responsibilities moved to (``wiring/``,
``presenting/``, ``app/``) -- what ``wc -l`` counts: newline characters of every ``.py`` file.

    .venv/bin/python benchmarks/entry_lines.py               # this checkout
    .venv/bin/python benchmarks/entry_lines.py --src OTHER/src --json

Exits 1 when the entry layers are over ``--goal`` lines (2,500, issue 12), so the figure is
a check as well as a number.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ENTRY = ("cli", "entrypoints")
BESIDE = ("wiring", "presenting", "app")


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def count(src: Path) -> dict[str, dict[str, int]]:
    """package -> module -> lines, for the entry layers and the layers beside them."""
    out: dict[str, dict[str, int]] = {}
    for package in (*ENTRY, *BESIDE):
        root = src / "fleetwarden" / package
        if root.is_dir():
            out[package] = {str(p.relative_to(root)): lines(p) for p in sorted(root.rglob("*.py"))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    ap.add_argument("--goal", type=int, default=2500)
    ap.add_argument("--json", action="store_true", help="every module's count as JSON")
    args = ap.parse_args(argv)
    counts = count(args.src)
    totals = {package: sum(modules.values()) for package, modules in counts.items()}
    entry = sum(totals.get(p, 0) for p in ENTRY)
    if args.json:
        print(json.dumps({"modules": counts, "totals": totals, "entry": entry}, indent=2))
    else:
        for package, modules in counts.items():
            parts = ", ".join(f"{m.removesuffix('.py')} {n}" for m, n in modules.items())
            print(f"{package}/ {totals[package]:,}: {parts}")
        verdict = "met" if entry <= args.goal else "not met"
        print(
            f"entry layers (cli/ + entrypoints/): {entry:,} lines; goal <= {args.goal:,}: {verdict}"
        )
    return 0 if entry <= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
