"""Flux notification-controller events to ``POST /events/flux`` (``generic`` providers).

A Provider of type ``generic`` (or ``generic-hmac``) posts the controller's event as JSON
(``fluxcd/pkg/apis/event/v1beta1.Event``; see
https://fluxcd.io/flux/components/notification/providers/ and
https://fluxoperator.dev/docs/crd/event):
``involvedObject`` (``kind``, ``namespace``, ``name``, ``uid``, ``apiVersion``,
``resourceVersion``), ``severity`` (trace/info/error), ``timestamp``, ``message``, ``reason``,
``metadata`` (string values, e.g. ``kustomize.toolkit.fluxcd.io/revision``, plus the Alert's
``spec.summary`` as ``summary`` and its ``spec.eventMetadata``), ``reportingController`` and
``reportingInstance``.

The event names no cluster by itself: name it in the Alert, and fleetwarden reads it from
``metadata``::

    apiVersion: notification.toolkit.fluxcd.io/v1beta3
    kind: Alert
    spec:
      providerRef: {name: fleetwarden}
      eventMetadata:
        cluster: prod-eu-1        # fleetwarden's cluster name
        nodepool: general         # optional: a pool this Kustomization/HelmRelease manages
      eventSources: [{kind: Kustomization, name: '*'}, {kind: HelmRelease, name: '*'}]

(keys ``cluster``/``clusterName`` and ``nodepool``/``pool``); without one the event is kept
and flagged NO_CLUSTER. Kustomization and HelmRelease events are SYNCs, reasons about health
HEALTH events, source events OTHER; ``severity: error`` or a ``*Failed`` reason flags FAILED.
The body has no id, so the id is a hash of the canonical body (a redelivery is the same event).
``reportingController`` and ``reportingInstance`` only say who reported: one of another shape
is noted in ``detail.notes`` (the source is then ``flux``), never refused.
``detail`` keeps the object, reason, revision and a credential-free excerpt of the message.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation
from fleetwarden.formats.events import (
    Parsed,
    Reader,
    at,
    body_id,
    compact,
    kind_of,
    safe_text,
    tolerate,
    with_notes,
)

__all__ = ["parse"]

WHERE = "flux payload"
_SYNCING = frozenset({"Kustomization", "HelmRelease"})


def parse(body: Any, headers: Mapping[str, str], received_at: datetime) -> Parsed:
    r = Reader(WHERE)
    if not isinstance(body, Mapping):
        r.fail(None, f"expected a Flux event object, got {kind_of(body)}")
    body = r.mapping(body, "body")
    obj = r.mapping(body.get("involvedObject"), "involvedObject", required=True)
    kind = r.required_text(obj.get("kind"), "involvedObject.kind")
    name = r.required_text(obj.get("name"), "involvedObject.name")
    namespace = r.text(obj.get("namespace"), "involvedObject.namespace")
    for key in ("uid", "apiVersion", "resourceVersion"):
        r.text(obj.get(key), at("involvedObject", key))
    severity = r.text(body.get("severity"), "severity")
    reason = r.text(body.get("reason"), "reason") or ""
    message = r.text(body.get("message"), "message")
    notes: list[str] = []  # attribution fields ignored, and why
    controller = tolerate(
        notes, lambda: r.text(body.get("reportingController"), "reportingController")
    )
    tolerate(notes, lambda: r.text(body.get("reportingInstance"), "reportingInstance"))
    metadata = r.strings(body.get("metadata"), "metadata")
    time = r.time(body.get("timestamp"), "timestamp")

    cluster = metadata.get("cluster") or metadata.get("clusterName") or None
    pool = metadata.get("nodepool") or metadata.get("pool") or None
    if "health" in reason.lower():
        operation = Operation.HEALTH
    elif kind in _SYNCING:
        operation = Operation.SYNC
    else:
        operation = Operation.OTHER
    if severity == "error" or reason.endswith("Failed"):
        outcome: str | None = "failure"
    elif reason.endswith("Succeeded"):
        outcome = "success"
    else:
        outcome = None
    flags = [] if cluster else [EventFlag.NO_CLUSTER]
    if outcome == "failure":
        flags.append(EventFlag.FAILED)
    revision = next(
        (v for k, v in sorted(metadata.items()) if k == "revision" or k.endswith("/revision")),
        None,
    )
    subject = f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
    return Parsed(
        [
            ChangeEvent(
                id=body_id(body, r),
                source=f"flux:{controller}" if controller else "flux",
                type=f"io.fluxcd.{kind.lower()}.{reason or 'event'}",
                provider=EventSource.FLUX,
                operation=operation,
                time=time,
                subject=subject,
                cluster=cluster,
                pool=pool,
                outcome=outcome,
                flags=tuple(flags),
                received_at=received_at,
                detail=with_notes(
                    compact(
                        {
                            "kind": kind,
                            "namespace": namespace,
                            "name": name,
                            "reason": reason,
                            "severity": severity,
                            "revision": safe_text(revision, 200),
                            "summary": safe_text(metadata.get("summary"), 200),
                            "message": safe_text(message, 300),
                        }
                    ),
                    notes,
                ),
            )
        ]
    )
