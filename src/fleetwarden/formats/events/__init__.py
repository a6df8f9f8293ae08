"""Cloud and GitOps event payloads -> canonical ``ChangeEvent`` values (parsing only).

One module per gateway route: ``aws``, ``azure``, ``gcp``, ``cloudevents``, ``argocd``, ``flux``.
Each exposes ``parse(body, headers, received_at) -> Parsed``: ``body`` is the request body the
gateway already decoded from JSON (or raw ``bytes`` for a CloudEvents binary-mode body that is
not JSON), ``headers`` are the request headers with lower-case names, ``received_at`` is the
gateway's clock reading, stored on every event. Nothing here does I/O or reads a clock.

A parser returns the events the body carries and, for subscription handshakes, a ``Reply`` the
gateway must answer with (Event Grid's ``validationResponse``) or act on (an SNS
``SubscribeURL`` the caller may GET after its own checks). Anything malformed or wrong-shaped
raises ``FormatError(path="<source> payload", field=<path in the body>)`` and nothing else --
except an optional field that only feeds attribution (who made the change: CloudTrail's
``userIdentity``, Event Grid's ``claims`` and ``caller``, an audit entry's
``authenticationInfo``, a CloudEvent's ``actor``, Argo CD's ``actor``/``automated``, Flux's
``reportingController``/``reportingInstance``). A provider redelivers or dead-letters a refused
delivery, so such a field never refuses one: it is read through ``tolerate``, the event is
attributed from what else the payload says (or to no one), and the reason is kept in
``detail.notes``. The fields that identify the change (ids, types, the cluster and pool, times)
are still refused precisely.

Limits: the parsers never fetch URLs, never verify provider signatures (the gateway
authenticates requests) and keep ``detail`` to a small allow-listed extract with nothing that
looks like a credential.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

import orjson

from fleetwarden.core.events import ChangeEvent, parse_time
from fleetwarden.core.integers import ascii_int
from fleetwarden.formats.errors import FormatError

__all__ = [
    "SOURCES",
    "CloudEvent",
    "Parsed",
    "Parser",
    "Reader",
    "Reply",
    "at",
    "body_id",
    "compact",
    "is_count",
    "kind_of",
    "looks_secret",
    "maybe_json",
    "options_reply",
    "parsers",
    "read_cloudevent",
    "safe_text",
    "tolerate",
    "tolerated_name",
    "with_notes",
]

T = TypeVar("T")

SOURCES = ("aws", "azure", "gcp", "cloudevents", "argocd", "flux")


@dataclass(frozen=True, slots=True)
class Reply:
    """A handshake answer. ``status`` None: answer 202 as usual and let the caller act on it.

    ``kind`` is one of ``"eventgrid-validation"`` (200 with ``body``), ``"sns-subscribe"``
    (``url`` is a checked ``https://sns.<region>.amazonaws.com/`` confirmation URL) or
    ``"webhook-allowed-origin"`` (the CloudEvents OPTIONS answer, in ``headers``).
    """

    kind: str
    status: int | None = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None


@dataclass(frozen=True, slots=True)
class Parsed:
    events: list[ChangeEvent]
    reply: Reply | None = None


Parser = Callable[[Any, Mapping[str, str], datetime], Parsed]


def parsers() -> dict[str, Parser]:
    """Every route's parser by source name (imported here, lazily, to keep modules acyclic)."""
    table: dict[str, Parser] = {}
    for source in SOURCES:
        module = importlib.import_module(f"{__name__}.{source}")
        table[source] = module.parse
    return table


# --- typed access to decoded JSON --------------------------------------------------------


def at(prefix: str, key: str | int) -> str:
    """The field path of ``key`` under ``prefix``: ``a.b``, ``a[0]``, or ``key`` at the top."""
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


FieldPath = str | tuple[str, str | int]
"""A field's path, or ``(prefix, key)`` for ``at(prefix, key)``: spelled out only when a read
is refused, so the hot path (a batch of CloudEvents) does not format a path per field."""


_STR = {str}


class Reader:
    """Checked reads from one payload; every refusal is a ``FormatError`` naming the field."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field_: FieldPath | None, reason: str) -> NoReturn:
        if isinstance(field_, tuple):
            field_ = at(*field_)
        raise FormatError(self.where, reason, field=field_ or None)

    def mapping(
        self, value: Any, field_: FieldPath, *, required: bool = False
    ) -> Mapping[str, Any]:
        """An object; a missing (null) one is ``{}`` unless required."""
        if type(value) is dict and {*map(type, value)} <= _STR:  # decoded JSON: the usual
            return value
        if value is None:
            if required:
                self.fail(field_, "missing (expected an object)")
            return {}
        if not isinstance(value, Mapping):
            self.fail(field_, f"expected an object, got {kind_of(value)}")
        for key in value:
            if not isinstance(key, str):
                self.fail(field_, f"object keys must be strings, got {kind_of(key)}")
        return value

    def text(self, value: Any, field_: FieldPath, *, required: bool = False) -> str | None:
        """An optional string; ``""`` counts as absent. Other JSON types are refused."""
        if type(value) is str and value:  # the common case first: ~12 reads per event
            return value
        if value is None or value == "":
            if required:
                self.fail(field_, "missing (expected a non-empty string)")
            return None
        if not isinstance(value, str):
            self.fail(field_, f"expected a string, got {kind_of(value)}")
        return value

    def required_text(self, value: Any, field_: FieldPath) -> str:
        if type(value) is str and value:
            return value
        text = self.text(value, field_, required=True)
        assert text is not None  # narrowed by required=True
        return text

    def items(self, value: Any, field_: FieldPath) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            self.fail(field_, f"expected an array, got {kind_of(value)}")
        return list(value)

    def integer(self, value: Any, field_: FieldPath) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(field_, f"expected an integer, got {kind_of(value)}")
        return value

    def boolean(self, value: Any, field_: FieldPath) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.fail(field_, f"expected true or false, got {kind_of(value)}")
        return value

    def time(self, value: Any, field_: FieldPath) -> datetime | None:
        """An RFC 3339 timestamp; absent is None, present but unreadable is refused."""
        text = self.text(value, field_)
        if text is None:
            return None
        parsed = parse_time(text)
        if parsed is None:
            self.fail(field_, f"not an RFC 3339 timestamp: {text[:40]!r}")
        try:  # events are stored in UTC: year 1 with +01:00 or 9999 with -01:00 do not fit
            parsed.astimezone(UTC)
        except OverflowError:
            self.fail(field_, f"timestamp out of range: {text[:40]!r}")
        return parsed

    def strings(self, value: Any, field_: str) -> dict[str, str]:
        """An object of string values (labels, attributes, claims)."""
        out: dict[str, str] = {}
        for key, item in self.mapping(value, field_).items():
            if not isinstance(item, str):
                self.fail(at(field_, key), f"expected a string, got {kind_of(item)}")
            out[key] = item
        return out

    def json_text(self, value: str | bytes, field_: FieldPath) -> Any:
        """JSON carried inside a string (an SNS ``Message``, a Pub/Sub attribute), read by the
        same rules as a request body (orjson): a lone surrogate (``"\\ud800"``), which the
        standard library would accept and nothing downstream could store, is refused here."""
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            self.fail(field_, "not valid JSON")

    def base64(self, value: str, field_: FieldPath) -> bytes:
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            self.fail(field_, "not valid base64")


def maybe_json(raw: bytes | str) -> Any:
    """JSON if the bytes are UTF-8 JSON, else None (an opaque payload is not an error)."""
    try:
        return orjson.loads(raw)  # UTF-8 only, no lone surrogates: as for a request body
    except orjson.JSONDecodeError:
        return None


# --- ids and secret-free details ---------------------------------------------------------


def body_id(body: Any, reader: Reader) -> str:
    """A deterministic id for payloads without one: the same body twice is the same event."""
    try:
        canonical = json.dumps(
            body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
        )
    except (TypeError, ValueError, RecursionError):
        reader.fail(None, "body cannot be canonicalised as JSON")
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:32]


_SECRET_VALUE = re.compile(
    r"(?i)(bearer\s+\S{8,}|basic\s+[a-z0-9+/=]{8,}|\beyJ[\w-]{5,}\.[\w-]{5,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abprs]-[\w-]{10,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|(?:password|passwd|secret|token|api[_-]?key|access[_-]?key)\s*[=:]\s*\S+)"
)


def looks_secret(value: str) -> bool:
    """True for text that looks like a credential (tokens, keys, ``password=...``)."""
    return bool(_SECRET_VALUE.search(value))


def safe_text(value: Any, limit: int = 300) -> str | None:
    """A short human string for ``detail``: None if absent, not a string or credential-like."""
    if not isinstance(value, str) or not value or looks_secret(value):
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


def compact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the absent values, so ``detail`` shows only what the payload said."""
    return {k: v for k, v in mapping.items() if v is not None and v != "" and v != {}}


def tolerate(notes: list[str], read: Callable[[], T]) -> T | None:
    """Read an optional field that only feeds attribution: what the reader would refuse
    becomes a note in ``notes`` (the field and why it was ignored) and None, so the delivery
    is accepted and attributed from the other fields."""
    try:
        return read()
    except FormatError as exc:
        note = f"{exc.field}: {exc.reason}" if exc.field else exc.reason
        if looks_secret(note):  # reasons may quote a bit of the value
            note = f"{exc.field or 'a field'}: unreadable"
        notes.append(f"{note}; ignored (attribution only)")
        return None


def tolerated_name(
    notes: list[str], reader: Reader, fields: Mapping[str, Any], where: str, keys: tuple[str, ...]
) -> str | None:
    """The first of ``keys`` that holds a non-empty string (an actor's candidates, best
    first); one of another type is noted and the next is tried."""
    for key in keys:

        def read(key: str = key) -> str | None:
            return reader.text(fields.get(key), at(where, key))

        name = tolerate(notes, read)
        if name:
            return name
    return None


def with_notes(detail: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``detail`` with ``notes`` (why an attribution field was ignored) when there are any."""
    return {**detail, "notes": list(notes)} if notes else detail


# --- CloudEvents 1.0 (JSON event format), shared by cloudevents.py and azure.py -----------

_CONTEXT = frozenset(
    {"id", "source", "specversion", "type", "datacontenttype", "dataschema", "subject", "time"}
)


_SCALARS = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class CloudEvent:
    id: str
    source: str
    type: str
    time: datetime | None = None
    subject: str | None = None
    datacontenttype: str | None = None
    dataschema: str | None = None
    data: Any = None
    extensions: Mapping[str, Any] = field(default_factory=dict)


def read_cloudevent(obj: Any, reader: Reader, prefix: str = "") -> CloudEvent:
    """One structured-mode CloudEvent, checked against the 1.0 spec's required attributes.

    https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/spec.md (id, source,
    specversion "1.0", type required; ``data`` and ``data_base64`` exclusive). Extension
    attributes keep scalar values only; their names are not policed, because real producers
    (Google's audit-log events: ``methodName``) break the lower-case naming rule.
    """
    if not isinstance(obj, Mapping):
        reader.fail(prefix or None, f"expected a CloudEvent object, got {kind_of(obj)}")
    event = reader.mapping(obj, prefix or "event")
    version = reader.required_text(event.get("specversion"), (prefix, "specversion"))
    if version != "1.0":
        reader.fail((prefix, "specversion"), f"unsupported CloudEvents version {version!r}")
    if "data" in event and "data_base64" in event:
        reader.fail((prefix, "data_base64"), "data and data_base64 are mutually exclusive")
    data: Any = event.get("data")
    if "data_base64" in event:
        encoded = reader.text(event["data_base64"], (prefix, "data_base64"))
        data = reader.base64(encoded, (prefix, "data_base64")) if encoded else b""
    extensions = {
        key: value
        for key, value in event.items()
        if key not in _CONTEXT
        and key not in ("data", "data_base64")
        and isinstance(value, _SCALARS)
    }
    return CloudEvent(
        id=reader.required_text(event.get("id"), (prefix, "id")),
        source=reader.required_text(event.get("source"), (prefix, "source")),
        type=reader.required_text(event.get("type"), (prefix, "type")),
        time=reader.time(event.get("time"), (prefix, "time")),
        subject=reader.text(event.get("subject"), (prefix, "subject")),
        datacontenttype=reader.text(event.get("datacontenttype"), (prefix, "datacontenttype")),
        dataschema=reader.text(event.get("dataschema"), (prefix, "dataschema")),
        data=data,
        extensions=extensions,
    )


def options_reply(
    headers: Mapping[str, str], *, allowed_origins: tuple[str, ...] | None = None
) -> Reply:
    """The CloudEvents webhook validation answer to an HTTP OPTIONS request.

    https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/http-webhook.md#4-abuse-protection
    Echo ``WebHook-Request-Origin`` as ``WebHook-Allowed-Origin`` (when ``allowed_origins`` is
    given, only for those), and grant any requested rate.
    """
    r = Reader("webhook validation request")
    origin = r.required_text(headers.get("webhook-request-origin"), "WebHook-Request-Origin")
    if allowed_origins is not None and origin not in allowed_origins:
        r.fail("WebHook-Request-Origin", f"origin {origin!r} is not allowed to deliver here")
    answer = {"WebHook-Allowed-Origin": origin, "Allow": "POST, OPTIONS"}
    if headers.get("webhook-request-rate"):
        answer["WebHook-Allowed-Rate"] = "*"
    return Reply(kind="webhook-allowed-origin", status=200, headers=answer)


def is_count(text: str) -> bool:
    """1 to 18 ASCII digits: ``str.isdigit`` alone also says yes to "²" and other scripts'
    digits, which ``int`` then refuses (a 500), and to 5,000 digits (too slow to convert)."""
    return ascii_int(text) is not None
