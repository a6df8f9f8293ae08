"""Kubernetes API-server audit logs: ``audit.k8s.io/v1`` ``Event`` objects, one JSON per line.

The log backend (``--audit-log-path``, ``--audit-log-format=json``, the default) writes one
``Event`` per line (k8s.io/apiserver/pkg/apis/audit/v1/types.go). Read here: ``auditID``,
``stage`` (``RequestReceived`` | ``ResponseStarted`` | ``ResponseComplete`` | ``Panic``),
``verb``, ``user.username`` and ``user.groups``, ``impersonatedUser.username`` (when present the
request acted as that user: it is the actor, the authenticated one is named in the reason),
``sourceIPs``, ``userAgent``, ``objectRef`` (``resource``, ``namespace``, ``name``,
``apiGroup``, ``apiVersion``, ``subresource``), ``responseStatus.code``,
``requestReceivedTimestamp`` and ``stageTimestamp`` (``MicroTime``: RFC 3339 with microseconds)
and ``annotations`` (``k8s.io/deprecated: "true"``, ``k8s.io/removed-release: "1.37"`` on a
request to a deprecated API version). Unknown fields are ignored (the type grows); the request
and response bodies (``RequestResponse`` level) are never read, so no token or Secret value
they hold goes further than this parser.

``parse_line`` returns an ``AuditEvent``, or None for what is not an event to count (a blank
line, another ``kind``); ``FormatError`` names the line and field otherwise. ``read_lines``
keeps going past bad lines and counts them: one torn or foreign line never hides the rest.
Parsing only: the file reading (rotation, a partial last line) is ``adapters.audit_logs``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fleetwarden.core.actors import AuditEvent
from fleetwarden.core.events import parse_time
from fleetwarden.formats.errors import FormatError

__all__ = ["AuditLogs", "AuditRead", "parse_line", "read_lines"]

API_VERSIONS = ("audit.k8s.io/v1",)
_STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


def _str(raw: Mapping[str, Any], key: str, path: str, line: int, *, where: str = "") -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        name = f"{where}.{key}" if where else key
        raise FormatError(
            path, f"expected a string, got {type(value).__name__}", field=name, line=line
        )
    return value


def _map(raw: Mapping[str, Any], key: str, path: str, line: int) -> Mapping[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FormatError(
            path, f"expected an object, got {type(value).__name__}", field=key, line=line
        )
    return value


def _strings(value: Any, path: str, line: int, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FormatError(path, "expected a list of strings", field=name, line=line)
    return tuple(value)


def parse_line(text: str, *, cluster: str, path: str, line: int) -> AuditEvent | None:
    """One line of an audit log: the event, None when there is nothing to read (blank line,
    an object of another kind), FormatError when it is not an audit event."""
    if not text.strip():
        return None
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, f"not JSON: {exc.__class__.__name__}", line=line) from None
    if not isinstance(raw, dict):
        raise FormatError(path, "expected a JSON object", line=line)
    if raw.get("kind") not in (None, "Event"):
        return None
    version = raw.get("apiVersion")
    if version is not None and version not in API_VERSIONS:
        raise FormatError(
            path, f"unsupported {version!r} (read: audit.k8s.io/v1)", field="apiVersion", line=line
        )
    audit_id = _str(raw, "auditID", path, line)
    verb = _str(raw, "verb", path, line)
    if not audit_id or not verb:
        raise FormatError(path, "missing", field="auditID" if not audit_id else "verb", line=line)
    stage = _str(raw, "stage", path, line)
    if stage and stage not in _STAGES:
        raise FormatError(path, f"unknown stage {stage!r}", field="stage", line=line)
    stamp = parse_time(raw.get("stageTimestamp"))
    received = parse_time(raw.get("requestReceivedTimestamp"))
    at = stamp or received
    if at is None:
        raise FormatError(path, "missing or not RFC 3339", field="stageTimestamp", line=line)
    user = _map(raw, "user", path, line)
    impersonated = _map(raw, "impersonatedUser", path, line)
    acting = impersonated or user
    username = _str(acting, "username", path, line, where="user")
    ref = _map(raw, "objectRef", path, line)
    status = _map(raw, "responseStatus", path, line)
    code = status.get("code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise FormatError(path, "expected an integer", field="responseStatus.code", line=line)
    notes = _map(raw, "annotations", path, line)
    annotations = tuple(sorted((str(k), str(v)) for k, v in notes.items() if isinstance(v, str)))
    return AuditEvent(
        id=audit_id,
        cluster=cluster,
        user=username,
        verb=verb,
        resource=_str(ref, "resource", path, line, where="objectRef"),
        name=_str(ref, "name", path, line, where="objectRef"),
        at=at,
        namespace=_str(ref, "namespace", path, line, where="objectRef") or None,
        user_agent=_str(raw, "userAgent", path, line),
        source_ips=_strings(raw.get("sourceIPs"), path, line, "sourceIPs"),
        groups=_strings(acting.get("groups"), path, line, "user.groups"),
        received_at=received,
        stage=stage,
        code=code,
        api_group=_str(ref, "apiGroup", path, line, where="objectRef"),
        api_version=_str(ref, "apiVersion", path, line, where="objectRef"),
        subresource=_str(ref, "subresource", path, line, where="objectRef"),
        annotations=annotations,
        field_manager=_field_manager(_str(raw, "requestURI", path, line)),
    )


def _field_manager(uri: str) -> str | None:
    """The ``fieldManager`` query parameter of a request URI (the last one, as the API server
    reads it), or None."""
    query = urlsplit(uri).query if "?" in uri else ""
    values = parse_qs(query, keep_blank_values=False).get("fieldManager")
    return values[-1] if values else None


@dataclass
class AuditRead:
    """What lines gave: the events, and the refused lines (counted; the first few kept with
    their reason for the report)."""

    events: list[AuditEvent] = field(default_factory=list)
    bad: int = 0
    errors: list[FormatError] = field(default_factory=list)
    keep_errors: int = 5

    def add(self, other: AuditRead) -> None:
        self.events.extend(other.events)
        self.bad += other.bad
        self.errors.extend(other.errors[: max(0, self.keep_errors - len(self.errors))])


def read_lines(lines: Iterable[str], *, cluster: str, path: str, first_line: int = 1) -> AuditRead:
    """Every event of ``lines`` (complete lines, without the partial tail of a file being
    written); bad lines are counted, never raised."""
    out = AuditRead()
    for n, text in enumerate(lines, start=first_line):
        try:
            event = parse_line(text, cluster=cluster, path=path, line=n)
        except FormatError as exc:
            out.bad += 1
            if len(out.errors) < out.keep_errors:
                out.errors.append(exc)
            continue
        if event is not None:
            out.events.append(event)
    return out


@dataclass
class AuditLogs:
    """What a one-shot read of a log and its rotated backups gave: events, bad lines, a torn
    last line (``partial``), the files read and the first errors."""

    events: list[AuditEvent] = field(default_factory=list)
    bad: int = 0
    partial: int = 0
    files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "events": len(self.events),
            "badLines": self.bad,
            "partialLines": self.partial,
            "errors": self.errors,
        }
