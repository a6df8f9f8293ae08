"""The dashboard's live stream (``GET /api/stream``) as ``text/event-stream`` bytes: ``sse``
writes one message (an ``id``, an ``event`` kind, one JSON line of ``data``), ``frames``
writes a follower's whole stream -- the reconnect delay and the head id first, then each
message as it comes, a comment line where a heartbeat is due.

What is sent when (replay, ``reload``, heartbeats, ``dropped``) is ``app.broadcasting``'s
``Follower``; this only writes it, and closes the follower when the stream ends or its
client goes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson

from fleetwarden.app.broadcasting import Broadcaster, Follower, Message

__all__ = ["frames", "sse"]


def sse(message: Message) -> bytes:
    """One message in the text/event-stream format (data is one JSON line)."""
    data = orjson.dumps(message.data)
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (message.id, message.kind.encode(), data)


async def frames(live: Broadcaster, follower: Follower, heartbeat: float) -> AsyncIterator[bytes]:
    """``follower``'s stream of ``live``, a heartbeat comment every ``heartbeat`` seconds
    without a message."""
    try:
        # the reconnect delay, and the head id
        yield b"retry: 2000\n: %d\n\n" % live.last_id
        async for message in follower.messages(heartbeat):
            yield b": heartbeat\n\n" if message is None else sse(message)
    finally:
        follower.close()
