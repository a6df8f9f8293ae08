"""CloudEvents 1.0 over HTTP to ``POST /events/cloudevents``: binary, structured and batch.

The content mode follows the HTTP binding
(https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/bindings/http-protocol-binding.md):

* ``Content-Type: application/cloudevents-batch+json``: a JSON array of structured events
  (an empty array is an empty batch);
* ``Content-Type: application/cloudevents+json``: one structured event;
* otherwise ``ce-*`` headers carry the attributes (values percent-decoded) and the body is the
  data, its media type the ``Content-Type`` (binary mode: how Eventarc delivers);
* without either, a JSON object with ``specversion`` (or an array of them) is read as
  structured: senders often post ``application/json``.

Every event must carry ``id``, ``source``, ``type`` and ``specversion`` "1.0" (a ``time``, if
present, must be RFC 3339; ``data`` and ``data_base64`` are exclusive). Known types map to
their provider's change events: ``google.cloud.audit.log.v1.written`` (Eventarc's audit-log
events: the data is a ``LogEntry``), ``google.cloud.pubsub.topic.v1.messagePublished`` (the
data is a push envelope) and ``Microsoft.*`` (Event Grid in the CloudEvents schema); see
``gcp`` and ``azure``. Any other type is a generic change event: fleetwarden reads the
extension attributes ``cluster``, ``nodepool`` (or ``pool``), ``actor`` and ``operation`` (one
of the canonical operation names; anything else is ``other``). An event naming no cluster is
kept, flagged NO_CLUSTER; an ``actor`` that is not a string is noted in ``detail.notes`` and
the event has no actor (attribution never refuses a delivery).

The OPTIONS validation handshake of the webhook spec is ``options_reply`` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation
from fleetwarden.formats.events import (
    CloudEvent,
    Parsed,
    Reader,
    at,
    azure,
    compact,
    gcp,
    kind_of,
    options_reply,
    read_cloudevent,
    safe_text,
    tolerate,
    with_notes,
)

__all__ = ["BATCH", "STRUCTURED", "change_from_cloudevent", "options_reply", "parse"]

WHERE = "cloudevents payload"
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
_OPERATIONS = {op.value: op for op in Operation}


def parse(body: Any, headers: Mapping[str, str], received_at: datetime) -> Parsed:
    r = Reader(WHERE)
    media = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if media == BATCH or (
        media != STRUCTURED and "ce-specversion" not in headers and isinstance(body, list)
    ):
        if not isinstance(body, list):
            r.fail(None, f"a batch must be a JSON array, got {kind_of(body)}")
        return Parsed(
            [
                change_from_cloudevent(read_cloudevent(item, r, f"[{i}]"), r, f"[{i}]", received_at)
                for i, item in enumerate(body)
            ]
        )
    if media == STRUCTURED or media.startswith("application/cloudevents"):
        return Parsed([change_from_cloudevent(read_cloudevent(body, r), r, "", received_at)])
    if "ce-specversion" in headers:
        return Parsed([change_from_cloudevent(_binary(body, headers, r), r, "", received_at)])
    if isinstance(body, Mapping) and "specversion" in body:
        return Parsed([change_from_cloudevent(read_cloudevent(body, r), r, "", received_at)])
    r.fail(
        None,
        "not a CloudEvent: expected ce-* headers (binary mode), Content-Type "
        f"{STRUCTURED} (structured) or {BATCH} (batch)",
    )


def _binary(body: Any, headers: Mapping[str, str], r: Reader) -> CloudEvent:
    attributes = {
        name[3:]: unquote(value)
        for name, value in headers.items()
        if name.startswith("ce-") and len(name) > 3 and isinstance(value, str)
    }
    version = r.required_text(attributes.get("specversion"), "ce-specversion")
    if version != "1.0":
        r.fail("ce-specversion", f"unsupported CloudEvents version {version!r}")
    content_type = headers.get("content-type") or None
    data: Any = body
    if isinstance(body, bytes | bytearray) and _is_json(content_type):
        data = r.json_text(bytes(body), "body")
    context = {"specversion", "id", "source", "type", "time", "subject", "dataschema"}
    return CloudEvent(
        id=r.required_text(attributes.get("id"), "ce-id"),
        source=r.required_text(attributes.get("source"), "ce-source"),
        type=r.required_text(attributes.get("type"), "ce-type"),
        time=r.time(attributes.get("time"), "ce-time"),
        subject=attributes.get("subject") or None,
        datacontenttype=content_type,
        dataschema=attributes.get("dataschema") or None,
        data=data,
        extensions={k: v for k, v in attributes.items() if k not in context},
    )


def _is_json(media: str | None) -> bool:
    base = (media or "").split(";")[0].strip().lower()
    return base == "application/json" or base.endswith("+json") or base.endswith("/json")


def change_from_cloudevent(
    ce: CloudEvent, reader: Reader, prefix: str, received_at: datetime
) -> ChangeEvent:
    """A checked CloudEvent as a change event, through its provider's mapping when known."""
    r = reader
    data = ce.data
    if isinstance(data, bytes) and _is_json(ce.datacontenttype):
        data = r.json_text(data, at(prefix, "data_base64"))
    if ce.type == gcp.AUDIT_LOG_TYPE and isinstance(data, Mapping) and "protoPayload" in data:
        return gcp.change_from_log_entry(
            data,
            r,
            at(prefix, "data"),
            event_id=ce.id,
            source=ce.source,
            received_at=received_at,
            time=ce.time,
        )
    if ce.type == gcp.MESSAGE_TYPE and isinstance(data, Mapping) and "message" in data:
        return gcp.change_from_message(
            data["message"],
            r,
            at(prefix, "data.message"),
            source=ce.source,
            received_at=received_at,
            event_id=ce.id,
            time=ce.time,
        )
    if ce.type.startswith("Microsoft."):
        return azure.change_from_event(
            event_id=ce.id,
            topic=ce.source,
            event_type=ce.type,
            subject=ce.subject,
            time=ce.time,
            data=data,
            reader=r,
            prefix=at(prefix, "data"),
            received_at=received_at,
        )
    ext = ce.extensions
    cluster = _extension(ext, "cluster", r, prefix)
    pool = _extension(ext, "nodepool", r, prefix) or _extension(ext, "pool", r, prefix)
    operation = _OPERATIONS.get(_extension(ext, "operation", r, prefix) or "", Operation.OTHER)
    notes: list[str] = []  # attribution fields ignored, and why
    actor = tolerate(notes, lambda: _extension(ext, "actor", r, prefix))
    return ChangeEvent(
        id=ce.id,
        source=ce.source,
        type=ce.type,
        provider=EventSource.CLOUDEVENTS,
        operation=operation,
        time=ce.time,
        subject=ce.subject,
        cluster=cluster,
        pool=pool,
        actor=actor,
        flags=() if cluster else (EventFlag.NO_CLUSTER,),
        received_at=received_at,
        detail=with_notes(
            compact(
                {
                    "datacontenttype": safe_text(ce.datacontenttype, 100),
                    "dataschema": safe_text(ce.dataschema, 300),
                }
            ),
            notes,
        ),
    )


def _extension(ext: Mapping[str, Any], name: str, r: Reader, prefix: str) -> str | None:
    return r.text(ext.get(name), (prefix, name))
