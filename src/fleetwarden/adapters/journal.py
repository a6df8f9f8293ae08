"""An append-only JSONL journal of processed change events (``eventLog``: one of the workers'
sinks, beside the audit store).

Every line is one canonical event; a batch is written, flushed and fsync'd before the queue
delivery is acknowledged. The journal is idempotent by event key on its own: it reads the
keys of its lines when it opens and appends only events whose key it does not hold, so a
replay after a crash -- whether the crash came before or after this journal was written --
adds each event once, whatever the other sinks hold.

A crash in the middle of a write can leave a last line without its newline: that line's
events were never acknowledged (the fsync had not returned), so it is cut off when the
journal opens and the redelivered events are written again, whole.

Limits: the keys are kept in memory (16 bytes each: ~50 MB per million events, read at
start); a journal edited by hand is taken as it is.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import orjson

from fleetwarden.core.events import ChangeEvent

__all__ = ["EventJournal"]


class EventJournal:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._keys: set[bytes] = set()
        self._fh = self.path.open("a+b")
        self._load()

    def _load(self) -> None:
        """Read the keys of every complete line; cut a torn last line off."""
        self._fh.seek(0)
        good = 0
        for line in self._fh:
            if not line.endswith(b"\n"):
                break
            good += len(line)
            try:
                self._keys.add(bytes.fromhex(ChangeEvent.from_json(json.loads(line)).key))
            except (ValueError, KeyError, TypeError):
                continue  # not an event line: kept, but it holds no key
        if good < self._fh.seek(0, os.SEEK_END):
            self._fh.truncate(good)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def processed_keys(self) -> list[str]:
        """Keys of every event the journal holds."""
        with self._lock:
            return [k.hex() for k in self._keys]

    def __contains__(self, key: str) -> bool:
        return bytes.fromhex(key) in self._keys

    def _append(self, events: Sequence[ChangeEvent]) -> list[bool]:
        with self._lock:
            fresh: list[bool] = []
            lines: list[bytes] = []
            added: set[bytes] = set()
            for e in events:
                k = bytes.fromhex(e.key)
                new = k not in self._keys and k not in added
                fresh.append(new)
                if new:
                    added.add(k)
                    lines.append(_line(e))
            if lines:
                size = self._fh.seek(0, os.SEEK_END)
                try:
                    self._fh.write(b"".join(lines))
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                except OSError:
                    # a disk that is full now may not be later: no half line for the retry
                    self._fh.truncate(size)
                    raise
                self._keys |= added  # only once they are on disk
            return fresh

    async def record(self, events: Sequence[ChangeEvent]) -> list[bool]:
        """Append the events the journal does not hold yet (durably); per event, whether it
        was new here."""
        return await asyncio.to_thread(self._append, events)

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def _line(event: ChangeEvent) -> bytes:
    """The event's line: the document of ``ChangeEvent.to_bytes`` (ASCII, every other
    character escaped), written by orjson at a fifth of the cost when its text is all ASCII
    (a worker writes every event it takes); byte for byte the same but for a float's
    spelling (``1e16``, not ``1e+16``) and a non-finite float (``null``, not ``NaN``, which
    is no JSON)."""
    try:
        text = orjson.dumps(event.to_json())
    except orjson.JSONEncodeError:  # an integer over 64 bits: the slow path says
        text = b""
    if not text or not text.isascii() or b"\x7f" in text:  # json escapes DEL, orjson not
        text = event.to_bytes()
    return text + b"\n"
