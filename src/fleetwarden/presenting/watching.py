"""``fleetwarden watch``'s output: JSON lines for machines, a live table for people."""

from __future__ import annotations

import json
from collections import deque
from typing import TYPE_CHECKING, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from fleetwarden.core.fleet import not_found, severity_order
from fleetwarden.core.lifecycle import SkipEvent
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.presenting.rendering import (
    event_text,
    findings_table,
    line,
    literal,
    make_console,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleetwarden.app.watching import Event, FleetWatcher
    from fleetwarden.core.findings import Finding
    from fleetwarden.core.skips import Skip

__all__ = ["JsonLines", "LiveView"]


class JsonLines:
    """``watch --format json``: one JSON object per event, on ``stream``, flushed."""

    fleet: FleetWatcher | None = None

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    async def __aenter__(self) -> JsonLines:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.fleet is not None:  # clusters whose pools were never compared, said last
            for event in [*self.fleet.not_compared(), *self.fleet.missing()]:
                self.emit(event)
        self.stream.flush()

    def emit(self, event: Event | SkipEvent) -> None:
        self.stream.write(json.dumps(event.to_json()) + "\n")
        self.stream.flush()


class LiveView:
    """``watch``'s live table: the current findings and the last 12 events, redrawn on
    each event. The title names the clusters whose nodes were never listed, the desired
    clusters no cluster watched is named as (a line each under the table), and the pools not
    compared (defined twice, a name not known: ``CLUSTER/POOL``; a cluster not known: ``POOL``),
    one ``not compared (FILE): why`` line each under the table, and the desired files not read
    (``could not read FILE: why``), as ``scan`` says them: events scroll away, these stay."""

    fleet: FleetWatcher | None = None
    # what of the current findings to show (``watch``: not a running upgrade's drift)
    select: Callable[[list[Finding]], list[Finding]] | None = None

    def __init__(self, console: Console | None = None, *, wide: bool = False) -> None:
        self.wide = wide  # the live view is cropped to the terminal all the same
        self.console = console or make_console()
        self.log: deque[Text] = deque(maxlen=12)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.desired_skips: list[Skip] = []  # SkipEvents: compared in no cluster

    async def __aenter__(self) -> LiveView:
        self.live.__enter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.fleet is not None:  # clusters whose pools were never compared, said last
            for event in [*self.fleet.not_compared(), *self.fleet.missing()]:
                self.emit(event)
        self.live.__exit__(None, None, None)

    def emit(self, event: Event | SkipEvent) -> None:
        if isinstance(event, SkipEvent):  # said under the table, for as long as it runs
            self.desired_skips.append(event.skip)
        else:
            finding = event.finding if isinstance(event, FindingEvent) else None
            self.log.append(literal(event_text(event.to_json(), finding)))
        found = self.fleet.tracker.current() if self.fleet else []
        current = sorted(self.select(found) if self.select else found, key=severity_order)
        title = f"{len(current)} findings"
        skipped = _desired_lines(self.desired_skips)
        unread = sum(s.problem for s in self.desired_skips)
        if unread:
            title += f" ({unread} desired file{'' if unread == 1 else 's'} not read)"
        pools = [s.pool for s in self.desired_skips if s.pool is not None]  # of no cluster
        if self.fleet is not None:
            waiting = [r.watcher for r in self.fleet.running.values()]
            unseen = [w.cluster for w in waiting if not w.synced.is_set()]
            if unseen:
                title += f" (not compared yet: {', '.join(sorted(unseen))}, nodes never listed)"
            missing = self.fleet.unfound()  # desired clusters never found: scan's finding
            if missing:
                names = ", ".join(missing)
                title += f" (not compared yet: {names}, no cluster watched has that name)"
            for cluster, defined in missing.items():
                said = not_found(cluster, defined, self.fleet.found)
                where = said["source"] or "<desired>"
                skipped.append(line((f"not compared ({where}): {said['reason']}", "yellow")))
            held = self.fleet.pools_not_compared()
            pools = sorted({f"{c}/{s.pool}" for c, skips in held.items() for s in skips}) + pools
            skipped += [
                line((f"not compared ({s.path}): {s.reason}", "yellow"))
                for _, skips in sorted(held.items())
                for s in skips
            ]
        if pools:
            title += f" (pools not compared: {', '.join(dict.fromkeys(pools))})"
        self.live.update(
            Group(
                findings_table(current, title=title, wide=self.wide),
                *skipped,
                Text("recent events:", style="bold"),
                *self.log,
            ),
            refresh=True,
        )


def _desired_lines(skips: list[Skip]) -> list[Text]:
    """What ``scan`` prints of the same skips: each file not read and each pool not compared;
    the files that define no pool counted."""
    out = []
    for s in skips:
        if s.problem:
            out.append(line((f"could not read {s.path}: {s.reason}", "yellow")))
        elif s.pool is not None:
            out.append(line((f"not compared ({s.path}): {s.reason}", "yellow")))
    quiet = sum(not s.shown for s in skips)
    if quiet:
        out.append(line((f"{quiet} skipped (files or pools); --format json lists them", "dim")))
    return out
