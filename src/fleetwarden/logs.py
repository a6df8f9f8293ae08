"""Structured logs: one configuration, key/value events, context bound once, secrets masked.

Every module logs through ``get_logger(name)`` (a structlog logger over the stdlib one), with
lowercase event names and key/value fields (``log.warning("queue unavailable",
source=source)``), never ``extra=``. Context that many lines share is bound once with
``structlog.contextvars`` -- the request id for every line of an HTTP request, the event key
for every line that handles a queued event, the cluster and pool where known -- and merged
into each line.

``configure(fmt, level)`` is called once by ``serve``: JSON lines (``timestamp``, ``level``,
``event``, ``logger`` and the bound context) or a console rendering, on **stderr** (stdout is
for machine output). Third-party loggers (uvicorn, httpx) go through the same formatter.
Until then (every other command, the tests) records go to the stdlib's last-resort handler
as before: warnings and errors on stderr.

Redaction happens in the formatter, after the context is merged and any traceback is
rendered, so nothing reaches the output unmasked: keys that name a credential (token,
password, secret, authorization, cookie, signature, DSN ...) have their value replaced;
in every string value, bearer/basic credentials, a URL's password, credential query
parameters, and every secret value registered with ``add_secrets`` (serve registers the
configured tokens, HMAC secrets, webhook URLs and DSN passwords) are masked.
"""

from __future__ import annotations

import itertools
import logging
import re
import sys
import uuid
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, TextIO

import structlog

__all__ = [
    "MASK",
    "QUIET",
    "Redactor",
    "add_secrets",
    "checked_format",
    "configure",
    "get_logger",
    "is_debug",
    "redactor",
    "request_id",
]

MASK = "[redacted]"
# libraries that narrate routine work at info (every HTTP request, every migration step):
# their warnings and errors are shown, their info only under --log-level debug
QUIET = ("alembic", "httpx", "httpcore", "sqlalchemy", "aiosqlite", "asyncio", "nats")

_SECRET_KEY = re.compile(
    r"token|passw|secret|authori[sz]ation|cookie|signature|api[-_]?key|credential|dsn|"
    r"private[-_]?key|session",
    re.IGNORECASE,
)
_VALUE_PATTERNS = (
    # Authorization header values, wherever they appear in a message
    (re.compile(r"\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=:-]+", re.IGNORECASE), r"\1\2" + MASK),
    # scheme://user:password@host: the password
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@/\s]+@", re.IGNORECASE), r"\1" + MASK + "@"),
    # ?token=... &password=... &sig=...: credential query parameters
    (
        re.compile(
            r"([?&;](?:[a-z_]*token|password|passwd|secret|sig|signature|key|code)=)[^&\s#]+",
            re.IGNORECASE,
        ),
        r"\1" + MASK,
    ),
)
# the shortest secret value masked by value: shorter ones would mask ordinary words
_MIN_SECRET = 6


class Redactor:
    """The redaction processor (see the module docstring). ``add_secrets`` registers exact
    values to mask wherever they appear; the rest is by key name and by pattern."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add_secrets(self, values: Iterable[str | None]) -> None:
        fresh = {v for v in values if v and len(v) >= _MIN_SECRET} - self._secrets
        if not fresh:
            return
        self._secrets |= fresh
        # longest first: a secret that contains another is masked whole
        ordered = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def text(self, value: str) -> str:
        if self._pattern is not None:
            value = self._pattern.sub(MASK, value)
        for pattern, replacement in _VALUE_PATTERNS:
            value = pattern.sub(replacement, value)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.field(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.value(v) for v in value]
        if value is None or isinstance(value, bool | int | float):
            return value
        return self.text(str(value))  # an object: its text is what would be printed

    def field(self, key: str, value: Any) -> Any:
        if value is not None and value != "" and _SECRET_KEY.search(key):
            return MASK
        return self.value(value)

    def __call__(
        self, _logger: Any, _name: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key, value in list(event.items()):
            if key.startswith("_"):  # structlog's own bookkeeping (the record, the logger)
                continue
            event[key] = self.value(value) if key == "event" else self.field(key, value)
        return event


redactor = Redactor()


def add_secrets(values: Iterable[str | None]) -> None:
    """Mask these exact values in every line from now on (configured credentials)."""
    redactor.add_secrets(values)


def get_logger(name: str) -> Any:
    """The logger of a module: ``log = get_logger(__name__)``."""
    return structlog.stdlib.get_logger(name)


def is_debug(logger: logging.Logger) -> bool:
    """Whether debug lines of this stdlib logger are shown: the hot paths ask before building
    a line (the stdlib caches the answer; a structlog proxy would rebuild its logger)."""
    return logger.isEnabledFor(logging.DEBUG)


_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=@-]{0,127}")
# generated ids: a random prefix per process and a counter -- unique across restarts and
# replicas, and ~50x cheaper than a uuid4 per request (no system call)
_ID_PREFIX = uuid.uuid4().hex[:16]
_ID_COUNTER = itertools.count(1)


def request_id(given: str | None) -> str:
    """The client's ``X-Request-Id`` when it is sane (1-128 characters of a token-like
    alphabet), else a fresh one (32 hex digits)."""
    if given and _REQUEST_ID.fullmatch(given):
        return given
    return f"{_ID_PREFIX}{next(_ID_COUNTER) & 0xFFFF_FFFF_FFFF_FFFF:016x}"


def _shared() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
    ]


# structlog's own default prints to stdout: route it through the stdlib from the first import,
# rendered to one ``key=value`` string, so an unconfigured process behaves as before (warnings
# on stderr through the last-resort handler, nothing on stdout). Loggers are not cached:
# ``configure`` may come after a module logged once. A program that configured structlog
# before importing fleetwarden keeps its configuration.
if not structlog.is_configured():
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.PositionalArgumentsFormatter(),
            redactor,
            structlog.processors.KeyValueRenderer(key_order=["event"], repr_native_str=False),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def checked_format(fmt: str | None, level: str, *, terminal: bool) -> str:
    """``--log-format`` (default: ``console`` on a ``terminal``, else ``json``), with
    ``--log-level`` checked too; ``ValueError`` naming the option that is not valid."""
    fmt = fmt or ("console" if terminal else "json")
    if fmt not in ("json", "console"):
        raise ValueError(f"--log-format: {fmt!r} is not json or console")
    if level.lower() not in ("debug", "info", "warning", "error", "critical"):
        raise ValueError(f"--log-level: {level!r} is not debug, info, warning, error or critical")
    return fmt


def configure(fmt: str = "json", level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every log line (ours and third-party) to ``stream`` (stderr) as JSON lines
    (``fmt="json"``) or for a person (``"console"``), at ``level`` and above."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared(), structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redactor,
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET:
        logging.getLogger(name).setLevel(max(root.level, logging.WARNING))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        # uvicorn's own logging setup (if one ran in this process) prints past the formatter
        own = logging.getLogger(name)
        for old in list(own.handlers):
            own.removeHandler(old)
        own.propagate = True
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared(),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
