"""Counting the event loop's turns while some code runs: a step that never lets the loop
turn holds every request of the process for as long as it runs."""

from __future__ import annotations

import asyncio


class Ticker:
    """Counts the event loop's turns while it runs (one per ``sleep(0)`` of its task)."""

    def __init__(self) -> None:
        self.turns = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.turns += 1
            await asyncio.sleep(0)

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
