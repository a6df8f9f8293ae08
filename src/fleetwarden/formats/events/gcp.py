"""Google Cloud deliveries to ``POST /events/gcp``: Pub/Sub push envelopes.

The body is the wrapped push format ``{"message": {"data": <base64>, "attributes": {...},
"messageId", "publishTime"}, "subscription": ...}`` (``message_id``/``publish_time`` spellings
too). What the message carries decides the mapping:

* a Cloud Audit Logs ``LogEntry`` (a log sink to Pub/Sub) whose ``protoPayload`` is an
  ``AuditLog`` for GKE: ``methodName`` ``google.container.v1.ClusterManager.CreateNodePool`` /
  ``DeleteNodePool`` / ``SetNodePoolSize`` / ``SetNodePoolAutoscaling`` /
  ``SetNodePoolManagement`` / ``UpdateNodePool`` / ``RollbackNodePoolUpgrade`` (v1beta1 too),
  cluster methods likewise; ``resourceName`` ``projects/<p>/locations|zones/<l>/clusters/<c>
  [/nodePools/<np>]`` (or the ``gke_nodepool``/``gke_cluster`` resource labels, or the request)
  gives cluster and pool; the actor is ``authenticationInfo.principalEmail`` (else
  ``principalSubject``; an ``authenticationInfo`` or ``requestMetadata`` of another shape is
  noted in ``detail.notes``, never refused: Pub/Sub would redeliver it); a non-zero
  ``status.code`` flags FAILED; the first entry of a long-running operation has no outcome yet.
  Changed fields come from the request (``nodeCount``, ``autoscaling.*``, ``management.*``,
  ``nodeVersion``, ``imageType``...). Audit entries of other services parse to OTHER events
  flagged NO_CLUSTER, with their actor.
* a GKE cluster notification: attributes ``type_url``
  (``type.googleapis.com/google.container.v1beta1.UpgradeEvent``...), ``cluster_name``,
  ``cluster_location``, ``project_id`` and ``payload`` (the event as JSON text; ``data`` is a
  human sentence). ``UpgradeEvent`` is an UPGRADE of the ``resource`` (a node pool when it
  names one); so is an ``UpgradeInfoEvent`` about the upgrade lifecycle (``eventType``
  ``UPGRADE_LIFECYCLE``, or none as before that field), unless its ``state`` is only
  ``SCHEDULED``; its other event types (``END_OF_SUPPORT``, ``COS_MILESTONE_VERSION_UPDATE``,
  ``DISRUPTION_EVENT``) announce and change nothing: OTHER events, their ``eventType`` kept.
  ``UpgradeAvailableEvent``, ``SecurityBulletinEvent`` and others are OTHER events on the
  cluster.
* anything else is kept as an OTHER event flagged NO_CLUSTER (Pub/Sub would otherwise redeliver
  a refused message until it dead-letters); its data is not stored.

Refused: a bare ``LogEntry`` (that is Eventarc's binary-mode CloudEvent body: post it to
``/events/cloudevents``) and anything that is not a push envelope.

References: https://cloud.google.com/pubsub/docs/push,
https://cloud.google.com/kubernetes-engine/docs/how-to/audit-logging-container,
https://cloud.google.com/logging/docs/audit/understanding-audit-logs,
https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-notifications.
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
    at,
    compact,
    kind_of,
    maybe_json,
    safe_text,
    tolerate,
    tolerated_name,
    with_notes,
)

__all__ = [
    "AUDIT_LOG_TYPE",
    "MESSAGE_TYPE",
    "change_from_log_entry",
    "change_from_message",
    "parse",
]

WHERE = "gcp payload"
AUDIT_LOG_TYPE = "google.cloud.audit.log.v1.written"
MESSAGE_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"

_GKE_RESOURCE = re.compile(
    r"^(?://container\.googleapis\.com/)?projects/(?P<project>[^/]+)/(?:locations|zones)/"
    r"(?P<location>[^/]+)/clusters/(?P<cluster>[^/]+)(?:/nodePools/(?P<pool>[^/]+))?"
)
_METHODS: dict[str, Operation] = {
    "CreateNodePool": Operation.CREATE,
    "DeleteNodePool": Operation.DELETE,
    "SetNodePoolSize": Operation.SCALE,
    "SetNodePoolAutoscaling": Operation.SCALE,
    "SetNodePoolManagement": Operation.UPDATE,
    "UpdateNodePool": Operation.UPDATE,
    "RollbackNodePoolUpgrade": Operation.UPGRADE,
    "CompleteNodePoolUpgrade": Operation.UPGRADE,
    "CreateCluster": Operation.CREATE,
    "DeleteCluster": Operation.DELETE,
    "UpdateCluster": Operation.UPDATE,
    "UpdateMaster": Operation.UPGRADE,
}
# request fields naming the target, not changing it
_IDENTITY = frozenset(
    {"@type", "projectId", "zone", "clusterId", "nodePoolId", "name", "location", "etag"}
)
# request sections whose leaves are reported one by one
_SECTIONS = ("autoscaling", "management")


def parse(body: Any, headers: Mapping[str, str], received_at: datetime) -> Parsed:
    r = Reader(WHERE)
    if not isinstance(body, Mapping):
        r.fail(None, f"expected a Pub/Sub push envelope object, got {kind_of(body)}")
    if "message" not in body:
        if "protoPayload" in body or "logName" in body:
            r.fail(
                "message",
                "a bare LogEntry is not a Pub/Sub push envelope: deliver it through a Pub/Sub "
                "push subscription, or post Eventarc's CloudEvent to /events/cloudevents",
            )
        r.fail("message", "missing: expected a Pub/Sub push envelope {message, subscription}")
    envelope = r.mapping(body, "body")
    subscription = r.text(envelope.get("subscription"), "subscription")
    r.integer(envelope.get("deliveryAttempt"), "deliveryAttempt")
    source = (
        f"//pubsub.googleapis.com/{subscription}" if subscription else "//pubsub.googleapis.com"
    )
    event = change_from_message(
        envelope.get("message"), r, "message", source=source, received_at=received_at
    )
    return Parsed([event])


def change_from_message(
    value: Any,
    reader: Reader,
    prefix: str,
    *,
    source: str,
    received_at: datetime,
    event_id: str | None = None,
    time: datetime | None = None,
) -> ChangeEvent:
    """One ``PubsubMessage`` as a change event; ``event_id`` overrides its ``messageId``."""
    r = reader
    message = r.mapping(value, prefix, required=True)
    message_id = r.text(message.get("messageId"), at(prefix, "messageId")) or r.text(
        message.get("message_id"), at(prefix, "message_id")
    )
    event_id = event_id or message_id
    if not event_id:
        r.fail(at(prefix, "messageId"), "missing (expected a non-empty string)")
    published = r.time(message.get("publishTime"), at(prefix, "publishTime")) or r.time(
        message.get("publish_time"), at(prefix, "publish_time")
    )
    attributes = r.strings(message.get("attributes"), at(prefix, "attributes"))
    encoded = r.text(message.get("data"), at(prefix, "data"))
    raw = r.base64(encoded, at(prefix, "data")) if encoded else b""
    type_url = attributes.get("type_url", "")
    if type_url.startswith("type.googleapis.com/google.container."):
        return _cluster_notification(
            type_url, attributes, raw, r, prefix, event_id, source, published or time, received_at
        )
    payload = maybe_json(raw) if raw else None
    if isinstance(payload, Mapping) and "protoPayload" in payload:
        return change_from_log_entry(
            payload,
            r,
            at(prefix, "data"),
            event_id=event_id,
            source=source,
            received_at=received_at,
            time=published or time,
        )
    return ChangeEvent(
        id=event_id,
        source=source,
        type=MESSAGE_TYPE,
        provider=EventSource.GCP,
        operation=Operation.OTHER,
        time=published or time,
        flags=(EventFlag.NO_CLUSTER,),
        received_at=received_at,
        detail={"bytes": len(raw), "attributes": sorted(attributes)[:20]},
    )


def change_from_log_entry(
    value: Any,
    reader: Reader,
    prefix: str,
    *,
    event_id: str,
    source: str,
    received_at: datetime,
    time: datetime | None = None,
) -> ChangeEvent:
    """A Cloud Audit Logs ``LogEntry`` (``protoPayload`` an ``AuditLog``) as a change event."""
    r = reader
    entry = r.mapping(value, prefix or "entry", required=True)
    p = at(prefix, "protoPayload")
    proto = r.mapping(entry.get("protoPayload"), p, required=True)
    method = r.text(proto.get("methodName"), at(p, "methodName")) or ""
    service = r.text(proto.get("serviceName"), at(p, "serviceName"))
    resource_name = r.text(proto.get("resourceName"), at(p, "resourceName"))
    notes: list[str] = []  # attribution fields ignored, and why
    who = at(p, "authenticationInfo")
    auth = tolerate(notes, lambda: r.mapping(proto.get("authenticationInfo"), who)) or {}
    actor = tolerated_name(notes, r, auth, who, ("principalEmail", "principalSubject"))
    status = r.mapping(proto.get("status"), at(p, "status"))
    code = r.integer(status.get("code"), at(p, "status.code"))
    request = r.mapping(proto.get("request"), at(p, "request"))
    metadata = (
        tolerate(notes, lambda: r.mapping(proto.get("requestMetadata"), at(p, "requestMetadata")))
        or {}
    )
    resource = r.mapping(entry.get("resource"), at(prefix, "resource"))
    labels = r.strings(resource.get("labels"), at(prefix, "resource.labels"))
    lro = r.mapping(entry.get("operation"), at(prefix, "operation"))
    first = r.boolean(lro.get("first"), at(prefix, "operation.first"))
    last = r.boolean(lro.get("last"), at(prefix, "operation.last"))
    when = r.time(entry.get("timestamp"), at(prefix, "timestamp")) or time

    gke = service == "container.googleapis.com" or method.startswith("google.container.")
    cluster = pool = project = location = None
    operation = Operation.OTHER
    changed: tuple[str, ...] = ()
    if gke:
        cluster, pool, project, location = _gke_target(resource_name, labels, request, r, p)
        short = method.rsplit(".", 1)[-1]
        operation = _METHODS.get(short) or (
            Operation.UPDATE if short.startswith(("Set", "Update")) else Operation.OTHER
        )
        changed = _changed(short, request, r, at(p, "request"))
        if short == "UpdateNodePool" and "nodeVersion" in request:
            operation = Operation.UPGRADE
        if short == "UpdateCluster" and any(
            c in changed for c in ("update.desiredMasterVersion", "update.desiredNodeVersion")
        ):
            operation = Operation.UPGRADE
    failed = code is not None and code != 0
    outcome = "failure" if failed else (None if first and not last else "success")
    flags = [] if cluster else [EventFlag.NO_CLUSTER]
    if failed:
        flags.append(EventFlag.FAILED)
    return ChangeEvent(
        id=event_id,
        source=source,
        type=AUDIT_LOG_TYPE,
        provider=EventSource.GCP,
        operation=operation,
        time=when,
        subject=f"{service}/{resource_name}" if service and resource_name else resource_name,
        cluster=cluster,
        pool=pool,
        changed=changed,
        actor=actor,
        outcome=outcome,
        region=location or labels.get("location"),
        account=project or labels.get("project_id"),
        flags=tuple(flags),
        received_at=received_at,
        detail=with_notes(
            compact(
                {
                    "methodName": method,
                    "serviceName": service,
                    "resourceName": safe_text(resource_name, 300),
                    "statusCode": code,
                    "statusMessage": safe_text(status.get("message"), 200),
                    "operationId": safe_text(lro.get("id"), 200),
                    "first": first,
                    "last": last,
                    "nodeCount": _int_or_none(request.get("nodeCount")),
                    "nodeVersion": safe_text(request.get("nodeVersion"), 60),
                    "userAgent": safe_text(metadata.get("callerSuppliedUserAgent"), 120),
                }
            ),
            notes,
        ),
    )


def _gke_target(
    resource_name: str | None,
    labels: Mapping[str, str],
    request: Mapping[str, Any],
    r: Reader,
    p: str,
) -> tuple[str | None, str | None, str | None, str | None]:
    cluster = labels.get("cluster_name")
    pool = labels.get("nodepool_name")
    project = labels.get("project_id")
    location = labels.get("location")
    for candidate in (
        resource_name,
        r.text(request.get("name"), at(p, "request.name")),
        r.text(request.get("parent"), at(p, "request.parent")),
    ):
        match = _GKE_RESOURCE.match(candidate or "")
        if match:
            cluster = cluster or match["cluster"]
            pool = pool or match["pool"]
            project = project or match["project"]
            location = location or match["location"]
    cluster = cluster or r.text(request.get("clusterId"), at(p, "request.clusterId"))
    pool = pool or r.text(request.get("nodePoolId"), at(p, "request.nodePoolId"))
    if not pool and request.get("nodePool") is not None:
        created = r.mapping(request.get("nodePool"), at(p, "request.nodePool"))
        pool = r.text(created.get("name"), at(p, "request.nodePool.name"))
    return cluster, pool, project, location


def _changed(short: str, request: Mapping[str, Any], r: Reader, where: str) -> tuple[str, ...]:
    if short.startswith(("Create", "Delete", "Get", "List")):
        return ()
    paths: list[str] = []
    for key, value in request.items():
        if key in _IDENTITY or value is None:
            continue
        if key in _SECTIONS or (key == "update" and short == "UpdateCluster"):
            section = r.mapping(value, at(where, key))
            paths.extend(f"{key}.{sub}" for sub, v in section.items() if v is not None)
        else:
            paths.append(key)
    return tuple(sorted(paths))


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cluster_notification(
    type_url: str,
    attributes: Mapping[str, str],
    raw: bytes,
    r: Reader,
    prefix: str,
    event_id: str,
    source: str,
    published: datetime | None,
    received_at: datetime,
) -> ChangeEvent:
    kind = type_url.rsplit("/", 1)[-1]
    short = kind.rsplit(".", 1)[-1]
    where = at(prefix, "attributes.payload")
    if attributes.get("payload"):
        payload = r.json_text(attributes["payload"], where)
    else:  # older notifications put the event in data
        where = at(prefix, "data")
        decoded = maybe_json(raw) if raw else None
        payload = decoded if isinstance(decoded, Mapping) else {}
    if not isinstance(payload, Mapping):
        r.fail(where, f"expected the notification as a JSON object, got {kind_of(payload)}")
    payload = r.mapping(payload, where)
    resource = r.text(payload.get("resource"), at(where, "resource"))
    resource_type = r.text(payload.get("resourceType"), at(where, "resourceType"))
    state = r.text(payload.get("state"), at(where, "state"))
    cluster = attributes.get("cluster_name") or None
    pool = None
    match = _GKE_RESOURCE.match(resource or "")
    if match:
        cluster = cluster or match["cluster"]
        pool = match["pool"]
    event_type = r.text(payload.get("eventType"), at(where, "eventType"))
    operation = Operation.UPGRADE if _is_upgrade(short, event_type, state) else Operation.OTHER
    outcome = {"SUCCEEDED": "success", "FAILED": "failure", "CANCELED": "failure"}.get(state or "")
    flags = [] if cluster else [EventFlag.NO_CLUSTER]
    if outcome == "failure":
        flags.append(EventFlag.FAILED)
    started = r.time(payload.get("operationStartTime"), at(where, "operationStartTime")) or r.time(
        payload.get("startTime"), at(where, "startTime")
    )
    text = (
        raw.decode("utf-8", "replace") if raw and not isinstance(maybe_json(raw), Mapping) else None
    )
    return ChangeEvent(
        id=event_id,
        source=source,
        type=kind,
        provider=EventSource.GCP,
        operation=operation,
        time=started or published,
        subject=resource or cluster,
        cluster=cluster,
        pool=pool,
        changed=("version",) if operation is Operation.UPGRADE and pool else (),
        outcome=outcome,
        region=attributes.get("cluster_location") or (match["location"] if match else None),
        account=attributes.get("project_id") or (match["project"] if match else None),
        flags=tuple(flags),
        received_at=received_at,
        detail=compact(
            {
                "typeUrl": kind,
                "resourceType": resource_type,
                "state": state,
                "eventType": event_type,
                "description": safe_text(payload.get("description"), 300),
                "currentVersion": safe_text(payload.get("currentVersion"), 60),
                "targetVersion": safe_text(payload.get("targetVersion"), 60),
                "message": safe_text(text, 300),
            }
        ),
    )


# UpgradeInfoEvent.EventType (google/container/v1/cluster_service.proto): only the upgrade
# lifecycle is an upgrade; the notification predates the field, so none means that too
_UPGRADE_INFO_UPGRADES = frozenset({"", "EVENT_TYPE_UNSPECIFIED", "UPGRADE_LIFECYCLE"})


def _is_upgrade(short: str, event_type: str | None, state: str | None) -> bool:
    if short == "UpgradeEvent":
        return True
    if short != "UpgradeInfoEvent":
        return False
    return (event_type or "") in _UPGRADE_INFO_UPGRADES and state != "SCHEDULED"
