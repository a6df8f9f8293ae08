"""Progress bars on a console (stderr, transient): bytes of node dumps for ``scan``, clusters
read for ``fleet`` and ``gate``. ``rich.progress`` is loaded only when a bar is made."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

__all__ = ["cluster_progress", "dump_progress"]


@contextmanager
def dump_progress(console: Console, total: int) -> Iterator[Callable[[int], None]]:
    """A bar over ``total`` bytes of node dumps; call what it gives with each cluster's
    bytes when that cluster is done."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("scanning node dumps"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[clusters]} clusters"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("scan", total=total, clusters=0)
        done = {"n": 0}

        def advance(size: int) -> None:
            done["n"] += 1
            bar.update(task, advance=size, clusters=done["n"])

        yield advance


@contextmanager
def cluster_progress(console: Console, total: int) -> Iterator[Callable[[str], None]]:
    """A bar over ``total`` live clusters, shown on a terminal when there are several; call
    what it gives with each cluster's name when it is read."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("reading live clusters"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not (console.is_terminal and total > 1),
    ) as bar:
        task = bar.add_task("read", total=total)
        yield lambda _: bar.advance(task)
