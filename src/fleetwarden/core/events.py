"""Change events: every node-pool or cluster change, from any source, in one canonical form.

The shape follows CloudEvents 1.0 (``id``, ``source``, ``type``, ``time``, ``subject``) with
fleetwarden's extensions: which cluster and pool changed, the provider, the operation, the
changed fields where the payload says, and the **actor** — who did it (CloudTrail
``userIdentity.arn``, Azure ``claims``/``caller``, GCP ``authenticationInfo.principalEmail``).

Identity (``key``): ``(route, source, id)``. ``route`` is the gateway route the event came
through, set by the gateway after the request authenticated with that route's own credential
(``auth.<route>``): it is the sender's identity, which a payload cannot choose. ``source`` and
``id`` are the payload's (CloudEvents: unique per source), so a redelivery is the same event,
while a sender on one route can never reuse another route's key (a CloudEvent claiming
``source: aws.eks`` is not the EventBridge event of that id). Events made without a route
(tests, events queued by older versions) keep the key of ``(source, id)``.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = ["ChangeEvent", "EventFlag", "EventSource", "Operation", "dedupe_key", "parse_time"]


class EventSource(StrEnum):
    """Where a change event came from (a cloud's audit log, a GitOps controller, the API
    server): ``ChangeEvent.provider``. Not who provisions a pool (``pools.Provisioner``)."""

    AWS = "aws"
    AZURE = "azure"
    GCP = "gcp"
    CLOUDEVENTS = "cloudevents"
    ARGOCD = "argocd"
    FLUX = "flux"
    KUBERNETES = "kubernetes"


class Operation(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    SCALE = "scale"
    UPGRADE = "upgrade"
    SYNC = "sync"
    HEALTH = "health"
    OTHER = "other"


class EventFlag(StrEnum):
    UNKNOWN_CLUSTER = "unknown-cluster"  # names a cluster fleetwarden does not know
    UNKNOWN_POOL = "unknown-pool"  # names a pool no desired state defines
    NO_CLUSTER = "no-cluster"  # the payload names no cluster at all
    FAILED = "failed"  # the change itself failed at the provider (kept: someone tried)


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    id: str
    source: str
    type: str
    provider: EventSource
    operation: Operation
    time: datetime | None = None
    subject: str | None = None
    cluster: str | None = None
    pool: str | None = None
    changed: tuple[str, ...] = ()
    actor: str | None = None
    outcome: str | None = None  # "success" | "failure" where the payload says
    region: str | None = None
    account: str | None = None
    flags: tuple[EventFlag, ...] = ()
    received_at: datetime | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)  # small, secret-free extract
    route: str | None = None  # the authenticated gateway route (see the module docstring)
    _key: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def key(self) -> str:
        """The dedupe key (``dedupe_key``), computed on first use and kept: the gateway, the
        queue and the workers all need it, but not for the routeless event a parser makes
        before ``via`` names the route."""
        key = self._key
        if key is None:
            key = dedupe_key(self.source, self.id, route=self.route)
            object.__setattr__(self, "_key", key)
        return key

    def via(self, route: str, *, flags: tuple[EventFlag, ...] | None = None) -> ChangeEvent:
        """The event as received on ``route`` (its key then lives in that route's namespace),
        with ``flags`` instead of its own when given: the gateway's one copy of each event."""
        flags = self.flags if flags is None else flags
        if self.route == route and flags == self.flags:
            return self
        return _replace(self, route=route, flags=flags)

    def replaced(self, **changes: Any) -> ChangeEvent:
        """``dataclasses.replace``, at a third of its cost (every event the gateway takes is
        copied once)."""
        return _replace(self, **changes)

    def with_flags(self, *flags: EventFlag) -> ChangeEvent:
        merged = tuple(dict.fromkeys((*self.flags, *flags)))
        return _replace(self, flags=merged)

    @property
    def delivery_delay(self) -> float | None:
        """Seconds from the change (the provider's event time) to its receipt here: the
        provider's own delivery delay, apart from fleetwarden's time to detect. None when
        either time is unknown; a receipt stamped before the event time (clock skew) is 0."""
        if self.time is None or self.received_at is None:
            return None
        return max(0.0, (self.received_at - self.time).total_seconds())

    def to_json(self) -> dict[str, Any]:
        return {
            "specversion": "1.0",
            "id": self.id,
            "source": self.source,
            "type": self.type,
            "time": _iso(self.time),
            "subject": self.subject,
            "provider": self.provider.value,
            "operation": self.operation.value,
            "cluster": self.cluster,
            "pool": self.pool,
            "changed": list(self.changed),
            "actor": self.actor,
            "outcome": self.outcome,
            "region": self.region,
            "account": self.account,
            "flags": [f.value for f in self.flags],
            "receivedAt": _received_iso(self.received_at),
            "detail": dict(self.detail),
            "route": self.route,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChangeEvent:
        return cls(
            id=str(data["id"]),
            source=str(data["source"]),
            type=str(data["type"]),
            provider=EventSource(data["provider"]),
            operation=Operation(data["operation"]),
            time=parse_time(data.get("time")),
            subject=data.get("subject"),
            cluster=data.get("cluster"),
            pool=data.get("pool"),
            changed=tuple(data.get("changed") or ()),
            actor=data.get("actor"),
            outcome=data.get("outcome"),
            region=data.get("region"),
            account=data.get("account"),
            flags=tuple(EventFlag(f) for f in data.get("flags") or ()),
            received_at=parse_time(data.get("receivedAt")),
            detail=dict(data.get("detail") or {}),
            route=data.get("route"),
        )

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()


_INIT_FIELDS = tuple(name for name, f in ChangeEvent.__dataclass_fields__.items() if f.init)
# one C call reads every field: ``via`` runs for each event the gateway takes
_INIT_VALUES = operator.attrgetter(*_INIT_FIELDS)
_INDEX = {name: i for i, name in enumerate(_INIT_FIELDS)}
# each slot's own setter: a copy is made without the frozen __init__'s twenty
# object.__setattr__ calls (a third of the cost); the copy's key is computed anew
_SETTERS = tuple(vars(ChangeEvent)[name].__set__ for name in (*_INIT_FIELDS, "_key"))


def _replace(event: ChangeEvent, **changes: Any) -> ChangeEvent:
    values = [*_INIT_VALUES(event), None]
    for name, value in changes.items():
        i = _INDEX.get(name)
        if i is None:
            raise TypeError(f"ChangeEvent has no field {name!r} to replace")
        values[i] = value
    copy = object.__new__(ChangeEvent)
    for set_value, value in zip(_SETTERS, values, strict=True):
        set_value(copy, value)
    return copy


def dedupe_key(source: str, event_id: str, *, route: str | None = None) -> str:
    """The event's identity as 32 hex digits: ``(route, source, id)``, or ``(source, id)``
    for an event that came through no route (the form older versions stored). The routed
    form prefixes route and source with their lengths, so no choice of text in one part can
    imitate another."""
    if route is None:
        text = f"{source}\0{event_id}"
    else:
        text = f"{len(route)}:{route}{len(source)}:{source}{event_id}"
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:32]


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value.isoformat().replace("+00:00", "Z")


def _received_iso(value: datetime | None) -> str | None:
    """``_iso`` of a receipt time: the events of one delivery share it (one datetime
    object), so the last one's text is kept."""
    global _last_received
    last = _last_received  # one read: another thread may rebind it, never change it
    if value is last[0] and value is not None:
        return last[1]
    text = _iso(value)
    _last_received = (value, text)  # a datetime is immutable: the same object, the same text
    return text


_last_received: tuple[datetime | None, str | None] = (None, None)


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 timestamps as providers send them (``Z``, offsets, 7-digit fractions)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    # Python 3.11 takes at most 6 fractional digits; Azure sends 7. The fraction is the
    # digits right after the point: an offset's digits that follow are no part of it
    if "." in text:
        head, _, rest = text.partition(".")
        count = len(rest) - len(rest.lstrip("0123456789"))
        digits, tail = rest[:count], rest[count:]
        text = f"{head}.{digits[:6]}{tail}" if digits else f"{head}{tail}"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
