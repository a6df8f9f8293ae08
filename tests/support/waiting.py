"""Waiting in async tests: poll a condition (plain or awaitable) until it holds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

_sleep = asyncio.sleep  # bound now: a test that patches asyncio.sleep does not see these waits


async def wait_for(
    cond: Callable[[], Any], timeout: float = 30.0, what: str = "it", every: float = 0.02
) -> Any:
    """The first truthy result of ``cond()`` (awaited when it is a coroutine); AssertionError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = cond()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await _sleep(every)
