"""ASGI plumbing of the service's HTTP side, shared by the routes of ``entrypoints/``.

On the raw ASGI interface (the gateway's hot path, before any Starlette object is made):
``receive_body`` (a body read within a limit: ``TooLarge`` over it, by its declared length or
by what arrived), ``send_json`` (a JSON answer written on ``send``), ``with_request_id`` (every
HTTP request's id bound to its log lines and echoed in its answer) and ``watching_status``
(``send`` that reports each answer's status on its way out). For Starlette routes:
``read_body`` (a request body within a limit), ``read_form`` (a form body within a limit),
``json_response`` (a document as compact JSON,
``orjson``) and ``problem`` (``{"error": message}``).

Limits: it decides nothing -- which answer, which limit, what a status counts as -- and knows
no route, event source or metric; the callers do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import orjson
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fleetwarden import logs
from fleetwarden.formats.events import is_count

__all__ = [
    "ASGIApp",
    "TooLarge",
    "json_response",
    "problem",
    "read_body",
    "read_form",
    "receive_body",
    "send_json",
    "watching_status",
    "with_request_id",
]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]  # (scope, receive, send)
# an HTTP request's handler, given its headers (lower-case names, latin-1 decoded)
HeadersRoute = Callable[[Any, Any, Any, dict[str, str]], Awaitable[None]]


class TooLarge(Exception):
    """A request body over its limit."""


async def receive_body(headers: Mapping[str, str], receive: Any, limit: int) -> bytes:
    """The request body of at most ``limit`` bytes; ``TooLarge`` when its declared length or
    what arrives is over it (nothing more is read then)."""
    declared = headers.get("content-length")
    if declared is not None and is_count(declared) and int(declared) > limit:
        raise TooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def send_json(
    send: Any, status: int, payload: Any, extra: Mapping[str, str] | None = None
) -> None:
    """``payload`` as the JSON answer, with ``extra`` headers."""
    body = orjson.dumps(payload)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def with_request_id(route: HeadersRoute, other: ASGIApp) -> ASGIApp:
    """An ASGI app: an HTTP request goes to ``route`` with its headers, every log line of it
    carrying its request id (``X-Request-Id`` when sane, else a fresh one:
    ``logs.request_id``), which its answer echoes; anything else (lifespan) to ``other``."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await other(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        rid = logs.request_id(headers.get("x-request-id"))
        bound = structlog.contextvars.bind_contextvars(request_id=rid)
        try:
            await route(scope, receive, _echoing(send, rid), headers)
        finally:
            structlog.contextvars.reset_contextvars(**bound)

    return asgi


def _echoing(send: Any, rid: str) -> Any:
    """``send`` with ``X-Request-Id`` added to the response head."""
    header = (b"x-request-id", rid.encode("latin-1"))

    async def echo(message: Any) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)

    return echo


def watching_status(send: Any, seen: Callable[[int], None]) -> Any:
    """``send`` that gives ``seen`` the status of the answer as it starts."""

    async def watched(message: Any) -> None:
        if message["type"] == "http.response.start":
            seen(message["status"])
        await send(message)

    return watched


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when it is over ``limit`` bytes (reading stops there)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return body


async def read_form(request: Request, limit: int) -> dict[str, str] | None:
    """An ``application/x-www-form-urlencoded`` body of at most ``limit`` bytes (None: over
    it), its bytes read as ASCII and its escapes as UTF-8 (anything else replaced)."""
    body = await read_body(request, limit)
    if body is None:
        return None
    pairs = parse_qsl(body.decode("ascii", "replace"), encoding="utf-8", errors="replace")
    return dict(pairs)


def json_response(
    doc: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """``doc`` as an answer of compact JSON (for an ``{"error": ...}``, the same bytes as
    ``problem``'s)."""
    return Response(
        orjson.dumps(doc), status_code=status, media_type="application/json", headers=headers
    )


def problem(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``{"error": message}`` with ``status`` (and ``headers``)."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)
