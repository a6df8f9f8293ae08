"""Azure Event Grid deliveries to ``POST /events/azure`` (Event Grid and CloudEvents schemas).

Accepted bodies: the Event Grid schema (an array of events with ``id``, ``topic``,
``subject``, ``eventType``, ``eventTime``, ``data``), the CloudEvents 1.0 schema (one
structured event, or an array of them when batching is on), or a mix in one array.

Handshakes: a ``Microsoft.EventGrid.SubscriptionValidationEvent`` is answered with
``Reply(kind="eventgrid-validation", status=200, body={"validationResponse": <code>})``;
the ``validationUrl`` (which carries a token) is neither followed nor kept. The CloudEvents
schema validates with the HTTP OPTIONS / ``WebHook-Request-Origin`` exchange instead: see
``fleetwarden.formats.events.options_reply`` (shared with the CloudEvents route).

Mapping:

* ``Microsoft.Resources.ResourceWrite*`` / ``ResourceDelete*`` / ``ResourceAction*``:
  ``data.resourceUri`` (else ``subject``)
  ``/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.ContainerService/
  managedClusters/<cluster>/agentPools/<pool>`` gives cluster and pool (case-insensitive
  segments); Write is UPDATE, Delete DELETE, an ``.../upgrade*/action`` UPGRADE; ``*Failure``
  and ``*Cancel`` flag FAILED. Event Grid does not carry the request body, so no changed fields.
* ``Microsoft.ContainerService.NodePoolRolling{Started,Succeeded,Failed}``: UPGRADE of
  ``data.nodePoolName`` on the cluster named by the topic (or subject).
* Every AKS event (``Microsoft.ContainerService.*``) keeps the data fields its published
  schema defines in ``detail``, and refuses one of the wrong type naming it:
  ``NewKubernetesVersionAvailable`` the ``latestSupported``/``latestStable``/``lowestMinor``/
  ``latestPreview`` ``KubernetesVersion`` strings, ``ClusterSupportEnding``/``Ended`` the
  cluster's ``kubernetesVersion``, ``NodePoolRolling*`` the ``nodePoolName``. Fields the schema
  does not define are not kept (``detail`` is an allow-list).
* The actor comes from ``data.claims`` (an object, or the JSON text of one, as older SDK test
  payloads show): the ``upn`` claim, then the ``name`` claim, ``unique_name``, ``email``, then
  ``appid`` (a service principal, reported as ``appid:<guid>``); ``data.caller`` as fallback.
  Claims that are not JSON or not an object, or a caller that is not a string, never refuse
  the delivery (Event Grid would dead-letter it): the event falls back to the caller, else no
  actor, and says why in ``detail.notes``.
* Any other event (Storage, Service Bus, non-AKS resources) parses to an event flagged
  NO_CLUSTER.

References: https://learn.microsoft.com/en-us/azure/event-grid/webhook-event-delivery,
https://learn.microsoft.com/en-us/azure/event-grid/event-schema-resource-groups,
https://learn.microsoft.com/en-us/javascript/api/@azure/eventgrid/resourcewritesuccesseventdata,
https://learn.microsoft.com/en-us/azure/event-grid/event-schema-aks (AKS data: the TypeSpec in
Azure/azure-rest-api-specs ``specification/eventgrid/data-plane/EventGridSystemEvents/
Microsoft.ContainerService/ContainerService.tsp``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation
from fleetwarden.formats.events import (
    Parsed,
    Reader,
    Reply,
    at,
    compact,
    kind_of,
    read_cloudevent,
    safe_text,
    tolerate,
    with_notes,
)

__all__ = ["VALIDATION_EVENT", "change_from_event", "parse"]

WHERE = "azure payload"
VALIDATION_EVENT = "Microsoft.EventGrid.SubscriptionValidationEvent"

_AKS = re.compile(
    r"/providers/Microsoft\.ContainerService/managedClusters/(?P<cluster>[^/]+)"
    r"(?:/agentPools/(?P<pool>[^/]+))?",
    re.IGNORECASE,
)
_SUBSCRIPTION = re.compile(r"^/subscriptions/(?P<id>[^/]+)", re.IGNORECASE)
_CLAIM_ORDER = (
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn",
    "upn",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
    "unique_name",
    "email",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
)
_ROLLING = "Microsoft.ContainerService.NodePoolRolling"
_AKS_EVENT = "Microsoft.ContainerService."
# data fields of each AKS event, as ContainerService.tsp defines them (all strings)
_VERSIONS = (
    "latestSupportedKubernetesVersion",
    "latestStableKubernetesVersion",
    "lowestMinorKubernetesVersion",
    "latestPreviewKubernetesVersion",
)
_AKS_DATA: dict[str, tuple[str, ...]] = {
    "NewKubernetesVersionAvailable": _VERSIONS,
    "ClusterSupportEnding": ("kubernetesVersion",),
    "ClusterSupportEnded": ("kubernetesVersion",),
    "NodePoolRollingStarted": ("nodePoolName",),
    "NodePoolRollingSucceeded": ("nodePoolName",),
    "NodePoolRollingFailed": ("nodePoolName",),
}


def parse(body: Any, headers: Mapping[str, str], received_at: datetime) -> Parsed:
    r = Reader(WHERE)
    if isinstance(body, Mapping):
        items, batch = [body], False
    elif isinstance(body, list):
        items, batch = body, True
    else:
        r.fail(None, f"expected an event array or a CloudEvent object, got {kind_of(body)}")
    if not items:
        r.fail(None, "empty event array")
    events: list[ChangeEvent] = []
    reply: Reply | None = None
    for i, item in enumerate(items):
        prefix = f"[{i}]" if batch else ""
        if not isinstance(item, Mapping):
            r.fail(prefix or None, f"expected an event object, got {kind_of(item)}")
        if "specversion" in item:
            ce = read_cloudevent(item, r, prefix)
            events.append(
                change_from_event(
                    event_id=ce.id,
                    topic=ce.source,
                    event_type=ce.type,
                    subject=ce.subject,
                    time=ce.time,
                    data=ce.data,
                    reader=r,
                    prefix=at(prefix, "data"),
                    received_at=received_at,
                )
            )
            continue
        if "eventType" not in item:
            r.fail(
                at(prefix, "eventType"),
                "missing: neither an Event Grid event (eventType) nor a CloudEvent (specversion)",
            )
        event = r.mapping(item, prefix or "event")
        event_type = r.required_text(event.get("eventType"), at(prefix, "eventType"))
        event_id = r.required_text(event.get("id"), at(prefix, "id"))
        time = r.time(event.get("eventTime"), at(prefix, "eventTime"))
        if event_type == VALIDATION_EVENT:
            data = r.mapping(event.get("data"), at(prefix, "data"), required=True)
            code = r.required_text(data.get("validationCode"), at(prefix, "data.validationCode"))
            reply = Reply(
                kind="eventgrid-validation", status=200, body={"validationResponse": code}
            )
            continue
        events.append(
            change_from_event(
                event_id=event_id,
                topic=r.text(event.get("topic"), at(prefix, "topic")),
                event_type=event_type,
                subject=r.text(event.get("subject"), at(prefix, "subject")),
                time=time,
                data=event.get("data"),
                reader=r,
                prefix=at(prefix, "data"),
                received_at=received_at,
            )
        )
    declared = headers.get("aeg-event-type")
    if declared == "SubscriptionValidation" and reply is None:
        r.fail(None, "aeg-event-type is SubscriptionValidation but no validation event came")
    return Parsed(events, reply)


def change_from_event(
    *,
    event_id: str,
    topic: str | None,
    event_type: str,
    subject: str | None,
    time: datetime | None,
    data: Any,
    reader: Reader,
    prefix: str,
    received_at: datetime,
) -> ChangeEvent:
    """One Event Grid event (either schema) as a change event."""
    r = reader
    fields = r.mapping(data, prefix) if isinstance(data, Mapping) or data is None else {}
    resource_uri = r.text(fields.get("resourceUri"), at(prefix, "resourceUri"))
    operation_name = r.text(fields.get("operationName"), at(prefix, "operationName"))
    status = r.text(fields.get("status"), at(prefix, "status"))
    notes: list[str] = []  # attribution fields ignored, and why
    claims = tolerate(notes, lambda: _claims(fields.get("claims"), r, at(prefix, "claims")))
    caller = tolerate(notes, lambda: r.text(fields.get("caller"), at(prefix, "caller")))
    actor = _actor(claims or {}, caller)
    cluster, pool = _aks_target(resource_uri or subject or "")
    operation, outcome = Operation.OTHER, None
    if event_type.startswith("Microsoft.Resources.Resource"):
        verb = event_type.removeprefix("Microsoft.Resources.Resource")
        if verb.startswith("Write"):
            operation = Operation.UPDATE
        elif verb.startswith("Delete"):
            operation = Operation.DELETE
        elif verb.startswith("Action"):
            action = (operation_name or "").lower()
            operation = Operation.UPGRADE if "/upgrade" in action else Operation.OTHER
        outcome = "success" if verb.endswith("Success") else "failure"
    elif event_type.startswith(_ROLLING):
        cluster = _aks_target(topic or "")[0] or _aks_target(subject or "")[0] or cluster
        pool = r.text(fields.get("nodePoolName"), at(prefix, "nodePoolName"))
        operation = Operation.UPGRADE
        phase = event_type.removeprefix(_ROLLING)
        outcome = {"Succeeded": "success", "Failed": "failure"}.get(phase)
    elif event_type.startswith(_AKS_EVENT):
        cluster = _aks_target(topic or "")[0] or _aks_target(subject or "")[0] or cluster
    aks: dict[str, str | None] = {}
    schema = (
        _AKS_DATA.get(event_type[len(_AKS_EVENT) :]) if event_type.startswith(_AKS_EVENT) else None
    )
    for name in schema or ():
        value = r.text(fields.get(name), at(prefix, name))
        aks[name] = safe_text(value, 80)
    flags = [] if cluster else [EventFlag.NO_CLUSTER]
    if outcome == "failure":
        flags.append(EventFlag.FAILED)
    subscription = _SUBSCRIPTION.match(resource_uri or topic or "")
    return ChangeEvent(
        id=event_id,
        source=topic or "/azure/eventgrid",
        type=event_type,
        provider=EventSource.AZURE,
        operation=operation,
        time=time,
        subject=subject,
        cluster=cluster,
        pool=pool,
        actor=actor,
        outcome=outcome,
        account=subscription["id"] if subscription else None,
        flags=tuple(flags),
        received_at=received_at,
        detail=with_notes(
            compact(
                {
                    "eventType": event_type,
                    "operationName": operation_name,
                    "status": safe_text(status, 40),
                    "resourceUri": safe_text(resource_uri, 400),
                    "correlationId": safe_text(fields.get("correlationId"), 80),
                    **aks,
                }
            ),
            notes,
        ),
    )


def _aks_target(resource: str) -> tuple[str | None, str | None]:
    match = _AKS.search(resource)
    if match is None:
        return None, None
    return match["cluster"], match["pool"]


def _claims(value: Any, r: Reader, field_: str) -> dict[str, str]:
    """Claims as an object, or the JSON text of one; only string claims are read."""
    if isinstance(value, str):
        value = r.json_text(value, field_) if value.strip() else None
    claims = r.mapping(value, field_)
    return {k: v for k, v in claims.items() if isinstance(v, str) and v}


def _actor(claims: Mapping[str, str], caller: str | None) -> str | None:
    for claim in _CLAIM_ORDER:
        if claims.get(claim):
            return claims[claim]
    if claims.get("appid"):
        return f"appid:{claims['appid']}"
    return caller
