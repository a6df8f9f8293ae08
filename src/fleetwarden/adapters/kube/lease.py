"""A coordination.k8s.io/v1 Lease as the leader-election ``LeaseStore``.

Writes are optimistic: an update PUTs the whole object carrying the ``resourceVersion`` it was
read at, so the API server refuses it (409 Conflict) when anyone wrote in between; a create of
a name that exists is a 409 too. ``acquireTime``/``renewTime`` are ``MicroTime``: RFC 3339 in
UTC with exactly six fractional digits (``2026-12-01T02:03:04.000005Z``), as the API server
writes them; reading accepts any RFC 3339 time (fewer digits, an offset).

Errors are the Kubernetes port's (the client maps HTTP and transport failures); a Lease whose
spec cannot be read raises ``ApiError`` naming the field.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from fleetwarden.core.leadership import LeaseRecord
from fleetwarden.ports.kube import ApiError, NotFound, ObjectApi

__all__ = ["KubeLeaseStore", "format_micro_time", "parse_micro_time"]


class LeaseSpec(TypedDict):
    holderIdentity: NotRequired[str]
    leaseDurationSeconds: NotRequired[int]
    acquireTime: NotRequired[str]
    renewTime: NotRequired[str]
    leaseTransitions: NotRequired[int]


def format_micro_time(value: datetime) -> str:
    """Kubernetes MicroTime: UTC, microseconds, ``Z``."""
    if value.tzinfo is None:
        raise ValueError("MicroTime needs an aware datetime")
    # isoformat, not strftime: %Y does not pad years before 1000 to four digits
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_micro_time(text: str) -> datetime:
    """An RFC 3339 time (``Z`` or an offset, 0-9 fractional digits) as an aware datetime."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    main, sep, rest = value.partition(".")
    if sep:  # Python reads at most 6 fractional digits: drop the nanoseconds
        digits = len(rest) - len(rest.lstrip("0123456789"))
        rest = rest[: min(digits, 6)] + rest[digits:]
        value = f"{main}.{rest}"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return parsed.astimezone(UTC)


class KubeLeaseStore:
    """The Lease ``namespace/name`` on the cluster ``api`` talks to."""

    def __init__(self, api: ObjectApi, *, namespace: str, name: str) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.where = f"{api.cluster}/{namespace}/{name}"
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._path = f"{self._collection}/{name}"

    async def read(self) -> tuple[LeaseRecord, str] | None:
        try:
            obj = await self.api.get(self._path)
        except NotFound:
            return None
        return self._decoded(obj)

    async def create(self, record: LeaseRecord) -> str:
        body = self._object(record, version=None)
        return self._decoded(await self.api.create(self._collection, body))[1]

    async def update(self, record: LeaseRecord, version: str) -> str:
        body = self._object(record, version=version)
        return self._decoded(await self.api.replace(self._path, body))[1]

    def _object(self, record: LeaseRecord, *, version: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if version is not None:
            meta["resourceVersion"] = version
        spec: LeaseSpec = {
            "holderIdentity": record.holder_identity,
            "leaseDurationSeconds": record.lease_duration_seconds,
            "leaseTransitions": record.lease_transitions,
        }
        if record.acquire_time is not None:
            spec["acquireTime"] = format_micro_time(record.acquire_time)
        if record.renew_time is not None:
            spec["renewTime"] = format_micro_time(record.renew_time)
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }

    def _decoded(self, obj: Any) -> tuple[LeaseRecord, str]:
        if not isinstance(obj, dict):
            raise ApiError(self.api.cluster, f"{self._path}: the answer is not a Lease object")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise ApiError(self.api.cluster, f"{self._path}: metadata.resourceVersion is missing")
        spec: LeaseSpec = obj.get("spec") or {}
        times: dict[str, datetime | None] = {}
        for key in ("acquireTime", "renewTime"):
            raw = spec.get(key)
            try:
                times[key] = parse_micro_time(raw) if isinstance(raw, str) and raw else None
            except ValueError:
                raise ApiError(
                    self.api.cluster, f"{self._path}: spec.{key} is not a time: {raw!r}"
                ) from None
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions", 0)
        for key, number in (("leaseDurationSeconds", duration), ("leaseTransitions", transitions)):
            if number is not None and (not isinstance(number, int) or number < 0):
                raise ApiError(
                    self.api.cluster, f"{self._path}: spec.{key} is not a count: {number!r}"
                )
        record = LeaseRecord(
            holder_identity=spec.get("holderIdentity") or "",
            # a Lease written without a duration by another tool: judge it as 1 s, so a
            # record that nobody renews is not held forever
            lease_duration_seconds=duration or 1,
            acquire_time=times["acquireTime"],
            renew_time=times["renewTime"],
            lease_transitions=transitions or 0,
        )
        return record, version
