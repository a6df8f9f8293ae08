"""The notification port: what a sink is, the one error it may raise, and the back-off its
retries use.

Sinks (``adapters/notify``: webhook, Slack, Alertmanager) implement ``Sink``; the notifier
(``app/notifying.py``) and the event relay (``app/relaying.py``) drive them. A sink raises
``NotifyError`` and nothing else, and its message never holds a URL or a credential.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from fleetwarden.core.notifying import Batch

__all__ = ["Backoff", "NotifyError", "Sink"]


class NotifyError(Exception):
    """A notification could not be delivered. ``sink`` names the sink; the message never holds
    its URL or credentials. ``retryable``: a later attempt may succeed (5xx, timeout)."""

    def __init__(
        self,
        sink: str,
        detail: str,
        *,
        status: int | None = None,
        attempts: int = 1,
        retryable: bool = False,
    ) -> None:
        super().__init__(f"notify {sink}: {detail}")
        self.sink, self.detail, self.status = sink, detail, status
        self.attempts, self.retryable = attempts, retryable


class Sink(Protocol):
    """Delivers one batch as one message (or, if it must split it, several). Raises
    ``NotifyError`` and nothing else; retries transient failures itself, within bounds."""

    @property
    def name(self) -> str: ...

    async def send(self, batch: Batch) -> None: ...

    async def aclose(self) -> None: ...


@dataclass
class Backoff:
    """Exponential back-off with full jitter (AWS architecture blog's "full jitter"): the
    delays a sink's retries, the event relay and the watchers' reflectors wait."""

    base: float = 0.2
    cap: float = 30.0
    attempt: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def next(self) -> float:
        delay = self.rng.uniform(0, min(self.cap, self.base * 2**self.attempt))
        self.attempt += 1
        return delay

    def reset(self) -> None:
        self.attempt = 0
