"""Peak memory of a command *and all its worker processes*, sampled from /proc.

getrusage(RUSAGE_CHILDREN).ru_maxrss is the peak of the largest single process, which
under-reports a command that forks workers; this sums RSS over the whole process tree.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(root: int) -> int:
    tree = _children()
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += _rss_kib(pid)
        stack.extend(tree.get(pid, ()))
    return total


def run_measured(
    cmd: Sequence[str], *, interval: float = 0.02
) -> tuple[subprocess.CompletedProcess[bytes], float, float]:
    """Run ``cmd``; return (result, wall seconds, peak tree RSS in MiB)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    out_chunks: list[bytes] = []
    # stdout may be large: read it in a thread-free way by polling with communicate timeouts
    while True:
        try:
            out, err = proc.communicate(timeout=interval)
            out_chunks.append(out)
            break
        except subprocess.TimeoutExpired:
            peak = max(peak, tree_rss_kib(proc.pid))
    wall = time.perf_counter() - t
    result = subprocess.CompletedProcess(cmd, proc.returncode, b"".join(out_chunks), err)
    return result, wall, peak / 1024
