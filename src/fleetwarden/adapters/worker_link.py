"""The gateway process's link to the worker process of a supervised ``serve``: HTTP over the
worker's private Unix socket. What the worker answers comes back as values; a worker that is
not answering (restarting) is ``WorkerUnreachable``, a request that cannot be written on
(the client's fault) ``Unsendable``: no httpx exception leaves this module. ``relay`` is the
gateway's route to the worker: a Starlette request passed on, the worker's answer (or why
there is none: 413, 400, 503 with ``Retry-After``) as the Starlette response.

No proxy, whatever the environment says: the link is a Unix socket to this serve's own worker
(the URL's host, ``worker``, is only a name for the Host header), and ``HTTP_PROXY`` and the
rest name TCP proxies, which ``adapters.proxies`` never uses for a local server either."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from fleetwarden.adapters.asgi import problem, read_body

__all__ = ["Answer", "Unsendable", "WorkerLink", "WorkerUnreachable", "end_to_end", "relay"]

Headers = list[tuple[bytes, bytes]]

# hop-by-hop headers (RFC 9110 7.6.1) and the length, which is set again for the body sent
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
    }
)


class WorkerUnreachable(Exception):
    """The worker did not answer (it may be restarting)."""


class Unsendable(Exception):
    """The request cannot be passed on as it came (h11 refuses to write it)."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Headers  # end-to-end headers, with the content's length
    content: bytes


@dataclass(frozen=True, slots=True)
class StreamAnswer:
    """An answer passed on as it comes (server-sent events): ``close`` when done with it."""

    status: int
    headers: Headers  # end-to-end headers
    chunks: AsyncIterator[bytes]
    close: Callable[[], Awaitable[None]]


def end_to_end(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """``headers`` without the hop-by-hop ones."""
    return [(k, v) for k, v in headers if k.lower() not in _HOP]


class WorkerLink:
    def __init__(self, socket_path: str) -> None:
        # httpx mounts no environment proxy over a given transport; trust_env=False says so
        self._client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=socket_path),
            base_url="http://worker",
            trust_env=False,
        )

    async def health(self) -> tuple[Any, str]:
        """The worker's ``/healthz`` JSON (None unless 200), or why there is none."""
        try:
            resp = await self._client.get("/healthz", headers={"host": "localhost"}, timeout=2.0)
            answer = resp.json() if resp.status_code == 200 else None
            return answer, "" if answer is not None else f"answered {resp.status_code}"
        except (httpx.HTTPError, ValueError) as exc:
            return None, f"no answer ({type(exc).__name__})"

    async def metrics(self, headers: Headers) -> str | None:
        """The worker's ``/metrics`` text, or None when it does not answer 200."""
        try:
            resp = await self._client.get("/metrics", headers=headers, timeout=5.0)
        except httpx.HTTPError:
            return None
        return resp.text if resp.status_code == 200 else None

    async def forward(self, method: str, target: str, headers: Headers, body: bytes) -> Answer:
        """The request passed on; the worker's answer with its end-to-end headers."""
        try:
            resp = await self._client.request(
                method, target, headers=headers, content=body, timeout=30.0
            )
        except httpx.LocalProtocolError as exc:  # a request h11 will not write: the client's
            raise Unsendable(str(exc)) from None
        except httpx.HTTPError as exc:
            raise WorkerUnreachable(type(exc).__name__) from None
        length = (b"content-length", str(len(resp.content)).encode())
        return Answer(resp.status_code, [*end_to_end(resp.headers.raw), length], resp.content)

    async def open_stream(self, target: str, headers: Headers) -> StreamAnswer:
        """``GET target`` answered as it comes: no read timeout (the worker's event stream
        sends a heartbeat every 15 s; the caller closes it when its client goes away)."""
        request = self._client.build_request(
            "GET", target, headers=headers, timeout=httpx.Timeout(10.0, read=None)
        )
        try:
            resp = await self._client.send(request, stream=True)
        except httpx.LocalProtocolError as exc:
            raise Unsendable(str(exc)) from None
        except httpx.HTTPError as exc:
            raise WorkerUnreachable(type(exc).__name__) from None
        return StreamAnswer(
            resp.status_code, end_to_end(resp.headers.raw), resp.aiter_raw(), resp.aclose
        )

    async def aclose(self) -> None:
        await self._client.aclose()


async def relay(worker: WorkerLink, request: Request, *, body_limit: int, stream: bool) -> Response:
    """``request`` passed on to the worker as it came (its body within ``body_limit``), and
    the worker's answer; ``stream``: the answer passed on as it comes (server-sent events)."""
    target = request.url.path
    if request.url.query:
        target += "?" + request.url.query
    body = await read_body(request, body_limit)
    if body is None:
        return problem(413, f"body over the limit of {body_limit} bytes")
    headers = end_to_end(request.headers.raw)
    try:
        if stream:
            streamed = await worker.open_stream(target, headers)
            out: Response = StreamingResponse(
                streamed.chunks,
                status_code=streamed.status,
                background=BackgroundTask(streamed.close),
            )
            out.raw_headers = streamed.headers
            return out
        answer = await worker.forward(request.method, target, headers, body)
    except Unsendable as exc:
        return problem(400, f"cannot pass the request on: {exc}")
    except WorkerUnreachable:
        retry = {"retry-after": "1"}
        return problem(
            503, "the worker process is not answering (restarting?); retry shortly", retry
        )
    out = Response(answer.content, status_code=answer.status)
    out.raw_headers = answer.headers
    return out
