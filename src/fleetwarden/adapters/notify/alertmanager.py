"""Alertmanager's v2 API: ``POST <base>/api/v2/alerts`` with a list of ``postableAlert``.

Schema: ``postableAlerts`` in https://github.com/prometheus/alertmanager/blob/main/api/v2/
openapi.yaml (labels and annotations are string maps; ``startsAt``/``endsAt`` RFC 3339
date-times; ``generatorURL`` a URI). Semantics, from https://prometheus.io/docs/alerting/latest/
clients/ and ``postAlertsHandler`` in ``api/v2/api.go``:

* labels identify an alert; annotations are replaced by the latest ones received;
* an alert without ``endsAt`` gets ``now + resolve_timeout`` (default 5 min): a client must
  re-send a firing alert more often than that (the docs say every 30 s to 3 min) — so give this
  sink a ``SinkPolicy(renotify_every=timedelta(minutes=1))``, or set ``firing_ttl`` longer than
  the re-notify interval to have ``endsAt = at + firing_ttl`` sent instead (and
  ``group_by=GroupBy.ALL``, so each round of repeats is one POST);
* ``endsAt`` in the past resolves it; ``endsAt`` before ``startsAt`` is rejected (400), so it
  is never sent earlier than ``startsAt``; empty label values are dropped by Alertmanager, so
  ``pool`` is simply omitted for findings of no pool.

Labels: ``alertname=FleetwardenDrift``, ``cluster``, ``pool``, ``layer``, ``field``,
``severity``, ``finding_id`` (plus ``static_labels``, which cannot override these). Because
``severity`` is a label, a severity change makes a new Alertmanager alert: the one carrying
the previous severity is ended in the same POST.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import httpx

from fleetwarden.adapters.notify import JsonPoster, RetryPolicy
from fleetwarden.core.findings import Severity
from fleetwarden.core.notifying import Batch, Notification, Status, timestamp

__all__ = ["ALERTNAME", "AlertmanagerSink", "postable_alerts"]

ALERTNAME = "FleetwardenDrift"
PATH = "/api/v2/alerts"
MAX_NODES_SHOWN = 20
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _labels(n: Notification, severity: Severity, static: Mapping[str, str]) -> dict[str, str]:
    f = n.finding
    labels = {
        **static,
        "alertname": ALERTNAME,
        "cluster": f.cluster,
        "layer": f.layer.value,
        "field": f.field,
        "severity": severity.value,
        "finding_id": f.id,
    }
    if f.pool:
        labels["pool"] = f.pool
    return labels


def _annotations(n: Notification) -> dict[str, str]:
    f = n.finding
    where = f"{f.cluster}/{f.pool}" if f.pool else f.cluster
    summary = f"{where}: {f.layer.value} {f.field} drifted"
    lines = [f"expected {_text(f.expected)}, actual {_text(f.actual)}"]
    if f.nodes:
        shown = ", ".join(f.nodes[:MAX_NODES_SHOWN])
        more = len(f.nodes) - MAX_NODES_SHOWN
        lines.append(f"nodes ({len(f.nodes)}): {shown}" + (f" and {more} more" if more > 0 else ""))
    if f.message:
        lines.append(f.message)
    if f.source:
        lines.append(f"desired state from {f.source}")
    out = {"summary": summary, "description": "\n".join(lines)}
    if n.decision:
        out["policy_decision"] = json.dumps(dict(n.decision), sort_keys=True, default=str)
    return out


def postable_alerts(
    batch: Batch,
    *,
    static_labels: Mapping[str, str] | None = None,
    generator_url: str | None = None,
    firing_ttl: timedelta | None = None,
) -> list[dict[str, Any]]:
    """The ``postableAlerts`` body for ``batch``. ``generator_url`` may hold ``{finding_id}``."""
    static = dict(static_labels or {})
    out: list[dict[str, Any]] = []

    def alert(n: Notification, severity: Severity, ends: datetime | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "labels": _labels(n, severity, static),
            "annotations": _annotations(n),
            "startsAt": timestamp(n.since),
        }
        if ends is not None:
            body["endsAt"] = timestamp(max(ends, n.since))
        if generator_url:
            body["generatorURL"] = generator_url.replace("{finding_id}", n.id)
        return body

    for n in batch.notifications:
        if n.status is Status.RESOLVED:
            # the alert Alertmanager knows carries the severity it was last sent
            out.append(alert(n, n.previous_severity or n.finding.severity, n.at))
            continue
        old = n.previous_severity
        if old is not None and old is not n.finding.severity:
            out.append(alert(n, old, n.at))
        out.append(alert(n, n.finding.severity, n.at + firing_ttl if firing_ttl else None))
    return out


class AlertmanagerSink:
    """Posts ``postable_alerts`` to one Alertmanager. For an HA pair, configure one sink per
    replica (Prometheus, too, sends to every replica)."""

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        bearer_token: str | None = None,
        static_labels: Mapping[str, str] | None = None,
        generator_url: str | None = None,
        firing_ttl: timedelta | None = None,
        timeout: float = 5.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        **poster: Any,
    ) -> None:
        if firing_ttl is not None and firing_ttl <= timedelta(0):
            raise ValueError(f"sink {name!r}: firing_ttl must be positive")
        for label in static_labels or {}:
            if not _LABEL_NAME.fullmatch(label):
                raise ValueError(f"sink {name!r}: {label!r} is not a valid Alertmanager label name")
        self.name = name
        self.static_labels = dict(static_labels or {})
        self.generator_url = generator_url
        self.firing_ttl = firing_ttl
        headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else None
        self._poster = JsonPoster(
            name,
            base_url.rstrip("/") + PATH,
            headers=headers,
            secret_path=False,
            secrets=[bearer_token] if bearer_token else [],
            timeout=timeout,
            retry=retry,
            transport=transport,
            **poster,
        )

    def __repr__(self) -> str:
        return f"AlertmanagerSink(name={self.name!r}, endpoint={self._poster.endpoint!r})"

    async def send(self, batch: Batch) -> None:
        alerts = postable_alerts(
            batch,
            static_labels=self.static_labels,
            generator_url=self.generator_url,
            firing_ttl=self.firing_ttl,
        )
        if alerts:
            await self._poster.post(json.dumps(alerts).encode())

    async def aclose(self) -> None:
        await self._poster.aclose()
