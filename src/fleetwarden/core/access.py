"""The service's front door, decided: may this HTTP request pass? (Pure: the request line and
headers in, a ``Refusal`` or None out; ``entrypoints/door.py`` answers it.)

Two checks, in this order (``check``):

1. **Host.** With ``allowed_hosts`` set (``serve`` always sets it: by default the loopback
   names and the listen host), a request whose ``Host`` names anything else is refused with
   400 on every route but ``/healthz`` -- a page on another site that rebinds its DNS name to
   127.0.0.1 reaches the socket, never the data. ``*`` allows any host; ``*.example.com``
   any name under it.
2. **Read credentials.** With ``auth.read`` tokens configured, ``/api/*``, ``/ui/`` (but its
   login form and stylesheet) and ``/metrics`` (unless ``metrics.public``) need
   ``Authorization: Bearer <token>`` or the session cookie; an ``auth.admin`` token opens the
   read side too. ``/events/*`` keep their own per-source credentials; ``/healthz`` is
   always open.

The session cookie's value is ``<expiry>.<HMAC-SHA256(token, expiry)>`` (``session_value``):
nothing is kept server-side and rotating the token ends every session made with it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleetwarden.core.signatures import check_bearer

__all__ = [
    "COOKIE",
    "LOOPBACK_HOSTS",
    "SESSION_SECONDS",
    "DoorConfig",
    "ReadAuth",
    "Refusal",
    "admin_ok",
    "check",
    "credentials_ok",
    "default_hosts",
    "family",
    "host_allowed",
    "is_loopback",
    "same_origin",
    "session_ok",
    "session_value",
]

COOKIE = "fw_session"
SESSION_SECONDS = 12 * 3600
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_PUBLIC_UI = frozenset({"/ui/login", "/ui/logout", "/ui/app.css"})


@dataclass(frozen=True)
class ReadAuth:
    """``auth.read``: bearer tokens for the read side; ``public`` says an open read side on
    a non-loopback address is meant (``serve`` refuses to start that way otherwise)."""

    tokens: tuple[str, ...] = ()
    public: bool = False

    @property
    def required(self) -> bool:
        return bool(self.tokens)

    def __repr__(self) -> str:  # never print secrets
        return f"ReadAuth({len(self.tokens)} token(s), public={self.public})"


@dataclass(frozen=True)
class DoorConfig:
    """``allowed_hosts`` None: any Host (the gateway used as a library); ``serve`` sets it."""

    allowed_hosts: frozenset[str] | None = None
    read: ReadAuth = field(default_factory=ReadAuth)
    admin_tokens: tuple[str, ...] = field(default=(), repr=False)
    metrics_public: bool = False

    @property
    def read_tokens(self) -> tuple[str, ...]:
        return (*self.read.tokens, *self.admin_tokens)


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str  # the metric's reason label
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost: what only this machine can reach."""
    name = host.strip("[]").lower()
    if name in ("localhost", "::1"):
        return True
    parts = name.split(".")
    return len(parts) == 4 and parts[0] == "127" and all(p.isdigit() for p in parts)


def default_hosts(listen_host: str) -> frozenset[str]:
    """The loopback names and the listen host (``allowedHosts`` when the config has none)."""
    return frozenset({*LOOPBACK_HOSTS, listen_host.strip("[]").lower()})


def _host_name(header: str) -> str | None:
    """``Host`` without its port, lower-case; None when it is not a plausible host."""
    value = header.strip().lower()
    if value.startswith("["):  # [::1]:8080
        end = value.find("]")
        name, rest = value[1:end], value[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        name, sep, port = value.rpartition(":")
        if not sep:
            name, port = value, ""
    if _bad_port(port):
        return None
    return name or None


def _bad_port(port: str) -> bool:
    return bool(port) and not (port.isascii() and port.isdigit() and len(port) <= 5)


def host_allowed(header: str | None, allowed: frozenset[str] | None) -> bool:
    if allowed is None:
        return True
    if "*" in allowed:
        return True
    if header is None:
        return False
    name = _host_name(header)
    if name is None:
        return False
    if name in allowed:
        return True
    return any(p.startswith("*.") and name.endswith(p[1:]) for p in allowed)


def family(path: str) -> str:
    """The metric label of a route that is not an event source (bounded: never the path)."""
    if path.startswith("/api/"):
        return "api"
    if path == "/ui" or path.startswith("/ui/") or path in ("/", "/favicon.ico"):
        return "ui"
    if path == "/metrics":
        return "metrics"
    if path == "/healthz":
        return "healthz"
    if path.startswith("/events/"):
        return "events"
    return "other"


def _needs_read(path: str, config: DoorConfig) -> bool:
    if path.startswith("/api/"):
        return True
    if path == "/metrics":
        return not config.metrics_public
    return (path == "/ui" or path.startswith("/ui/")) and path not in _PUBLIC_UI


def session_value(token: str, expiry: int) -> str:
    mac = hmac.new(token.encode(), f"fleetwarden-session.{expiry}".encode(), hashlib.sha256)
    return f"{expiry}.{mac.hexdigest()}"


def _cookie(headers: Mapping[str, str]) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == COOKIE:
            return value.strip()
    return None


def session_ok(value: str | None, tokens: Sequence[str], *, now: float) -> bool:
    if not value:
        return False
    expiry = value.partition(".")[0]
    if not (expiry.isascii() and expiry.isdigit() and len(expiry) <= 12) or int(expiry) < now:
        return False
    given = value.encode("utf-8", "replace")
    return any(hmac.compare_digest(session_value(t, int(expiry)).encode(), given) for t in tokens)


def credentials_ok(headers: Mapping[str, str], config: DoorConfig, *, now: float) -> bool:
    tokens = config.read_tokens
    auth = headers.get("authorization")
    if auth and check_bearer(auth, tokens).ok:
        return True
    return session_ok(_cookie(headers), tokens, now=now)


def admin_ok(headers: Mapping[str, str], tokens: Sequence[str]) -> bool:
    """Whether the request carries an admin token as ``Authorization: Bearer`` (approve,
    deny); with no ``auth.admin`` token configured, no request does."""
    return bool(tokens) and check_bearer(headers.get("authorization"), tuple(tokens)).ok


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a form post comes from this site's own page. A browser says where it comes
    from: ``Sec-Fetch-Site`` (every current browser), else ``Origin``; it must be this site.
    Neither: not a browser, and a client that is not one needs the token anyway.
    ``headers`` have lower-case names."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = headers.get("origin")
    if origin is None:
        return True
    _, sep, rest = origin.partition("://")
    return bool(sep) and rest.lower() == headers.get("host", "").lower()


def check(
    path: str, headers: Mapping[str, str], config: DoorConfig, *, now: float
) -> Refusal | None:
    """Why this request may not pass (None: it may). ``headers`` have lower-case names."""
    if path == "/healthz":
        return None
    if not host_allowed(headers.get("host"), config.allowed_hosts):
        return Refusal(
            400,
            "host",
            "this service does not answer for that Host header (config: allowedHosts)",
        )
    if (
        config.read.required
        and _needs_read(path, config)
        and not credentials_ok(headers, config, now=now)
    ):
        return Refusal(
            401,
            "unauthorized",
            "the read side needs auth.read credentials: Authorization: Bearer <token> "
            "(or log in at /ui/login)",
            {"www-authenticate": 'Bearer realm="fleetwarden"'},
        )
    return None
