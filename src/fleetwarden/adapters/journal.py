"""An append-only JSONL journal of processed change events (the workers' durable effect).

Every line is one canonical event; the file is flushed and fsync'd before the events are
acknowledged to the queue, and its keys are loaded at start so a redelivered event is known.
The audit store supersedes it where one is configured.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from fleetwarden.core.events import ChangeEvent

__all__ = ["EventJournal"]


class EventJournal:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("ab")

    def processed_keys(self) -> list[str]:
        """Keys of every complete line (a line cut by a crash is ignored)."""
        out = []
        if not self.path.exists():
            return out
        with self.path.open("rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break
                try:
                    data = json.loads(line)
                    out.append(ChangeEvent.from_json(data).key)
                except (ValueError, KeyError):
                    continue
        return out

    def _append(self, events: Sequence[ChangeEvent]) -> None:
        data = b"".join(e.to_bytes() + b"\n" for e in events)
        with self._lock:
            self._fh.write(data)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    async def record(self, events: Sequence[ChangeEvent]) -> None:
        await asyncio.to_thread(self._append, events)

    def close(self) -> None:
        with self._lock:
            self._fh.close()
