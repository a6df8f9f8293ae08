"""``fleetwarden demo``'s live mode for people (a line per change, one per finding it made
appear, change or clear) and for machines (the same as JSON lines)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import Console

from fleetwarden.core.describing import describe_drift
from fleetwarden.core.findings import Finding
from fleetwarden.presenting.rendering import SEVERITY_STYLE, line

__all__ = ["change_json_lines", "demo_service_text", "drift_text", "print_change"]

_MARKS = {
    "finding.appeared": ("+", "red"),
    "finding.cleared": ("-", "green"),
    "finding.changed": ("~", "yellow"),
}


def demo_service_text(
    url: str,
    read_token: str,
    admin_token: str,
    interval: float,
    mode: str = "dry-run",
    *,
    live: bool = False,
) -> str:
    """What ``fleetwarden demo`` says once its service is up (``live``: its clusters are real
    kube-apiservers started for it, not the embedded node dumps)."""
    heals = {
        "approval": "restores wait for approval: approve or deny them in the dashboard",
        "enforce": "the healer restores labels and taints on the simulated nodes by itself",
    }.get(mode, "the healer runs in dry-run: it says what it would do (--mode approval: asks)")
    where = (
        "the demo fleet on real kube-apiservers (one per cluster, started for the demo)"
        if live
        else "the embedded fleet"
    )
    if live:
        heals = heals.replace("the simulated nodes", "the API servers' nodes")
    return (
        f"fleetwarden demo: the service runs on {where}; a simulated cloud posts a "
        f"change event every {interval:g} s\n"
        f"  dashboard:    {url}\n"
        f"  log in with:  {read_token}\n"
        f"  admin token:  {admin_token}   (approve, deny)\n"
        f"  {heals}\n"
        f"Ctrl-C stops it."
    )


def drift_text(f: Finding) -> str:
    return describe_drift(f.expected, f.actual, f.nodes)


def print_change(
    console: Console, now: str, what: str, events: Sequence[tuple[str, Finding]]
) -> None:
    console.print(line((now, "bold"), " ", what), highlight=False)
    for kind, f in events:
        console.print(
            line(
                "   ",
                _MARKS[kind],
                " ",
                (f.severity.value, SEVERITY_STYLE[f.severity]),
                f" {f.cluster}/{f.pool} {f.layer.value} {f.field}: {drift_text(f)}",
            ),
            highlight=False,
        )


def change_json_lines(now: str, what: str, events: Sequence[tuple[str, Finding]]) -> list[str]:
    return [
        json.dumps({"type": "change", "what": what, "at": now}),
        *(
            json.dumps({"type": kind, "id": f.id, "finding": f.to_json(), "at": now})
            for kind, f in events
        ),
    ]
