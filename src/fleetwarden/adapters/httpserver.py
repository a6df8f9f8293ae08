"""The HTTP server ``serve`` runs: uvicorn, with the request head (request line + headers)
bounded and every request the parser refuses counted.

uvicorn's httptools protocol keeps whatever header bytes arrive until the head ends; the
subclass here refuses a head over ``header_bytes`` with **431** and closes the connection:
exactly at the end of a head that arrived whole, and as soon as the bytes of a head still
incomplete pass the limit (so an endless header costs at most the limit plus one read). A
request the parser cannot read at all (a bad request line, a bad ``Content-Length``, a raw
control byte in a header) gets uvicorn's own 400. Both are reported to ``on_refused(reason)``
-- ``headers_too_large`` or ``malformed`` -- since no route ever sees them.

Without httptools (it comes with ``uvicorn[standard]``) the h11 protocol is used with the same
limit (``h11_max_incomplete_event_size``; its refusal is a 400 and is not counted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import uvicorn

__all__ = ["DEFAULT_HEADER_BYTES", "bounded_protocol", "server_config"]

DEFAULT_HEADER_BYTES = 16384


class _HeadTooLarge(Exception):
    pass


def bounded_protocol(
    limit: int, on_refused: Callable[[str], None]
) -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with the head bounded; None without httptools."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed: h11 with its own limit
        return None

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        _head = 0  # bytes of the current head, exactly (url + headers, from the callbacks)
        _raw = 0  # bytes fed while a head is incomplete (an upper bound of the same)
        _in_head = True
        _too_large = False

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head, self._in_head, self._too_large = 0, True, False

        def on_url(self, url: bytes) -> None:
            self._grow(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._grow(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head, self._raw = False, 0
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._raw = True, 0

        def _grow(self, n: int) -> None:
            self._head += n
            if self._head > limit:
                self._too_large = True
                raise _HeadTooLarge  # the parser stops; data_received answers (below)

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._raw += len(data)
            super().data_received(data)
            if self._in_head and self._raw > limit and not self.transport.is_closing():
                self._too_large = True  # one header still arriving, already over the limit
                self.send_400_response("")

        def send_400_response(self, msg: str) -> None:
            if not self._too_large:
                on_refused("malformed")
                super().send_400_response(msg)
                return
            on_refused("headers_too_large")
            body = f"request headers over {limit} bytes".encode()
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                b"content-type: text/plain; charset=utf-8\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\n"
                b"connection: close\r\n\r\n" + body
            )
            self.transport.close()

    return BoundedHttpToolsProtocol


def server_config(
    app: Any,
    *,
    host: str,
    port: int,
    header_bytes: int = DEFAULT_HEADER_BYTES,
    on_refused: Callable[[str], None] = lambda _reason: None,
) -> uvicorn.Config:
    """The uvicorn configuration ``serve`` uses (tests start the same server)."""
    protocol = bounded_protocol(header_bytes, on_refused)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol if protocol is not None else "h11",
        h11_max_incomplete_event_size=header_bytes,
        ws="none",  # no route speaks WebSocket: an Upgrade header is just a header
        log_level="warning",
        log_config=None,  # uvicorn's lines go through serve's log configuration (stderr)
        access_log=False,
        lifespan="off",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=5,
    )
