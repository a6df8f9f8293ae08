"""Argo CD notifications to ``POST /events/argocd``: the webhook template fleetwarden documents.

Argo CD's webhook service sends whatever body a template renders
(https://argo-cd.readthedocs.io/en/stable/operator-manual/notifications/services/webhook/), so
there is no fixed schema: fleetwarden reads this body, and ignores keys it does not know::

    {
      "app": "{{.app.metadata.name}}",
      "namespace": "{{.app.metadata.namespace}}",
      "project": "{{.app.spec.project}}",
      "cluster": "{{.app.spec.destination.name}}",
      "server": "{{.app.spec.destination.server}}",
      "revision": "{{.app.status.sync.revision}}",
      "syncStatus": "{{.app.status.sync.status}}",
      "healthStatus": "{{.app.status.health.status}}",
      "operation": "{{with .app.status.operationState}}{{.phase}}{{end}}",
      "startedAt": "{{with .app.status.operationState}}{{.startedAt}}{{end}}",
      "finishedAt": "{{with .app.status.operationState}}{{.finishedAt}}{{end}}",
      "actor": "{{with .app.status.operationState}}{{.operation.initiatedBy.username}}{{end}}",
      "automated": "{{with .app.status.operationState}}{{.operation.initiatedBy.automated}}{{end}}",
      "trigger": "on-sync-succeeded"
    }

wired in ``argocd-notifications-cm`` as::

    service.webhook.fleetwarden: |
      url: https://fleetwarden.example.com/events/argocd
      headers:
      - {name: Content-Type, value: application/json}
      - {name: Authorization, value: Bearer $fleetwarden-token}
    template.fleetwarden: |
      webhook:
        fleetwarden:
          method: POST
          body: |
            <the JSON above>

(subscribe it to the ``on-sync-*`` and ``on-health-degraded`` triggers; set ``trigger`` per
template if you keep one template per trigger). Only ``app`` is required. ``""`` and Go's
``<no value>`` read as absent.

Mapping: the cluster is ``cluster`` (the destination name, which fleetwarden's cluster names
follow), else ``server`` (the destination URL); neither flags NO_CLUSTER. An ``operation``
phase makes a SYNC (``Succeeded`` success, ``Failed``/``Error`` failure and FAILED), a
``healthStatus`` alone a HEALTH event. The actor is ``actor``, or ``argocd:automated-sync``
when ``automated`` is true; an ``actor`` or ``automated`` the template rendered oddly (not a
string, not a boolean) is noted in ``detail.notes`` and never refuses the delivery. Argo CD
apps do not name node pools: ``pool`` stays empty. The
body has no id, so the id is a hash of the canonical body: a redelivery is the same event.
``detail`` keeps an allow-list of these keys and drops any value that looks like a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation
from fleetwarden.formats.events import (
    Parsed,
    Reader,
    body_id,
    compact,
    kind_of,
    safe_text,
    tolerate,
    with_notes,
)

__all__ = ["parse"]

WHERE = "argocd payload"
_NO_VALUE = "<no value>"
_DETAIL_KEYS = (
    "namespace",
    "project",
    "server",
    "revision",
    "syncStatus",
    "healthStatus",
    "trigger",
)


def parse(body: Any, headers: Mapping[str, str], received_at: datetime) -> Parsed:
    r = Reader(WHERE)
    if not isinstance(body, Mapping):
        r.fail(
            None, f"expected the fleetwarden webhook template's JSON object, got {kind_of(body)}"
        )
    body = r.mapping(body, "body")

    def text(key: str) -> str | None:
        value = r.text(body.get(key), key)
        return None if value == _NO_VALUE else value

    app = text("app")
    if app is None:
        r.fail(
            "app", "missing: render {{.app.metadata.name}} into it (see the documented template)"
        )
    namespace = text("namespace")
    cluster = text("cluster") or text("server")
    phase = text("operation")
    health = text("healthStatus")
    sync = text("syncStatus")
    notes: list[str] = []  # attribution fields ignored, and why
    automated = tolerate(notes, lambda: _flag(body.get("automated"), r))
    actor = tolerate(notes, lambda: text("actor")) or (
        "argocd:automated-sync" if automated else None
    )
    if phase:
        operation = Operation.SYNC
    elif health:
        operation = Operation.HEALTH
    elif sync:
        operation = Operation.SYNC
    else:
        operation = Operation.OTHER
    outcome = {"Succeeded": "success", "Failed": "failure", "Error": "failure"}.get(phase or "")
    flags = [] if cluster else [EventFlag.NO_CLUSTER]
    if outcome == "failure":
        flags.append(EventFlag.FAILED)
    time = r.time(text("finishedAt"), "finishedAt") or r.time(text("startedAt"), "startedAt")
    return Parsed(
        [
            ChangeEvent(
                id=body_id(body, r),
                source=f"argocd:{namespace}/{app}" if namespace else f"argocd:{app}",
                type=f"io.argoproj.argocd.app.{operation.value}",
                provider=EventSource.ARGOCD,
                operation=operation,
                time=time,
                subject=app,
                cluster=cluster,
                actor=safe_text(actor, 200),
                outcome=outcome,
                flags=tuple(flags),
                received_at=received_at,
                detail=with_notes(
                    compact(
                        {
                            "app": safe_text(app, 200),
                            "phase": safe_text(phase, 40),
                            **{key: safe_text(text(key), 200) for key in _DETAIL_KEYS},
                        }
                    ),
                    notes,
                ),
            )
        ]
    )


def _flag(value: Any, r: Reader) -> bool:
    """``automated`` as the template renders it: a boolean, or its text."""
    if isinstance(value, bool):
        return value
    if value is None or value in ("", _NO_VALUE, "false", "False"):
        return False
    if value in ("true", "True"):
        return True
    r.fail("automated", f"expected true or false, got {kind_of(value)} {str(value)[:20]!r}")
