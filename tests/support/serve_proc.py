"""``fleetwarden serve`` as a real subprocess on 127.0.0.1, and a raw HTTP/1.1 client that can
send any bytes (headers with non-ASCII bytes, unencoded query strings) that httpx would not."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

EXE = str(Path(sys.executable).parent / "fleetwarden")

# one client, kept: a new httpx client costs ~20 ms (its TLS context), a request ~1 ms
_CLIENT = httpx.Client()

__all__ = ["EXE", "RawResponse", "Serve", "free_port", "raw_request", "rejected", "serve"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    port: int
    config: Path
    stderr: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metrics(self, token: str | None = None) -> str:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        r = _CLIENT.get(f"{self.base}/metrics", headers=headers, timeout=10)
        r.raise_for_status()
        return r.text

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


@contextlib.contextmanager
def serve(
    tmp: Path,
    config: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
) -> Iterator[Serve]:
    """Start ``fleetwarden serve -c`` with ``config`` (listen, queuePath and store filled in
    when absent) and ``args``, wait for /healthz, stop it with SIGTERM (then SIGKILL) on
    exit."""
    port = free_port()
    full = {
        "listen": f"127.0.0.1:{port}",
        "queuePath": str(tmp / "queue.db"),
        "store": f"sqlite:///{tmp / 'audit.db'}",
        **config,
    }
    path = tmp / "serve.yaml"
    path.write_text(json.dumps(full))
    err = tmp / "serve.stderr"
    with err.open("wb") as sink:
        proc = subprocess.Popen(
            [EXE, "serve", "-c", str(path), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=None if env is None else {**env},
        )
    running = Serve(proc, int(str(full["listen"]).rpartition(":")[2]), path, err)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited {proc.returncode}: {running.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{running.base}/healthz", timeout=0.5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"serve did not answer /healthz: {running.log()}")
            time.sleep(0.05)
        yield running
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def raw_request(
    port: int,
    method: bytes,
    target: bytes,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    host: bytes | None = b"127.0.0.1",
    timeout: float = 10.0,
) -> RawResponse | None:
    """One request on a fresh connection, bytes as given (``Connection: close`` and, with a
    body, ``Content-Length`` added). None when the server closed without answering."""
    head = [method + b" " + target + b" HTTP/1.1"]
    if host is not None:
        head.append(b"Host: " + host)
    head += [k + b": " + v for k, v in headers]
    head.append(b"Connection: close")
    if body or method in (b"POST", b"PUT"):
        head.append(b"Content-Length: " + str(len(body)).encode())
    data = b"\r\n".join(head) + b"\r\n\r\n" + body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        # no half-close after sending: asyncio servers take EOF as the client leaving
        with contextlib.suppress(OSError):  # the server may answer (431) and close early
            s.sendall(data)
        chunks = []
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                chunks.append(chunk)
    reply = b"".join(chunks)
    if not reply:
        return None
    head_bytes, _, rest = reply.partition(b"\r\n\r\n")
    lines = head_bytes.split(b"\r\n")
    status = int(lines[0].split(b" ")[1])
    fields = {}
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        fields[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    return RawResponse(status, fields, rest)


_REJECTED = re.compile(
    r'^fleetwarden_events_rejected_total\{reason="([^"]*)",source="([^"]*)"\} (\S+)$', re.M
)


def rejected(metrics_text: str) -> dict[tuple[str, str], float]:
    """``fleetwarden_events_rejected_total`` by (source, reason)."""
    return {(m[2], m[1]): float(m[3]) for m in _REJECTED.finditer(metrics_text)}
