"""Notification sinks over real HTTP: Starlette receivers served by uvicorn on 127.0.0.1.

Pins the exact payloads (generic webhook with a signature that ``check_signature`` accepts,
Slack Block Kit structure and limits, Alertmanager ``postableAlerts`` validated against the
schema of Alertmanager's OpenAPI spec), the retry contract (5xx and 429 retried with bounded,
jittered back-off; 4xx not; N attempts then ``NotifyError``; timeouts), that no URL or token
ends up in an error, a repr or a log line, and the ``Notifier`` shell end to end: sinks in
parallel under a timeout, outcomes recorded, failed deliveries retried, a bounded queue.

``httpx.MockTransport`` is used only to inject faults a real server cannot produce on demand.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import socket
import time
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import jsonschema
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fleetwarden.adapters.notify import JsonPoster, RetryPolicy, redact_url
from fleetwarden.adapters.notify.alertmanager import ALERTNAME, AlertmanagerSink, postable_alerts
from fleetwarden.adapters.notify.slack import MAX_BLOCKS, SlackSink, slack_messages
from fleetwarden.adapters.notify.webhook import (
    SIGNATURE_HEADER,
    WebhookSink,
    events_payload,
    webhook_payload,
)
from fleetwarden.app.notifying import BatchResult, Notifier
from fleetwarden.core import notifying
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.notifying import Batch, GroupBy, SinkPolicy, Status
from fleetwarden.core.signatures import check_signature
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.notify import NotifyError
from fleetwarden.ports.sources import FixedClock
from tests.support.clocks import TickingClock

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SLACK_SECRET = "T0SECRET/B0SECRET/xoxSecretWebhookToken"
HMAC_SECRET = "whsec-test-secret"
BEARER = "am-bearer-token-secret"

# --- a real HTTP receiver ---------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """Records every POST; answers from a per-path script of replies (then 200 ``ok``)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.script: dict[str, list[Reply]] = {}
        self.base = ""
        self._arrived = asyncio.Condition()
        self.app = Starlette(routes=[Route("/{path:path}", self._endpoint, methods=["POST"])])

    async def _endpoint(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        async with self._arrived:
            self.requests.append(Received(path, dict(request.headers), body))
            self._arrived.notify_all()
        queue = self.script.get(path) or []
        reply = queue.pop(0) if queue else Reply()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return Response(reply.body, status_code=reply.status, headers=reply.headers)

    def url(self, path: str) -> str:
        return self.base + path

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    async def wait_for(self, path: str, count: int, timeout: float = 5.0) -> list[Received]:
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.at(path)) >= count)
        return self.at(path)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(r.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(10):
        while not server.started:  # a condition with a deadline, not a fixed sleep
            await asyncio.sleep(0.01)
    r.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        yield r
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


class Sleeps:
    """Replaces asyncio.sleep in the retry loop: back-off is recorded, not waited."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


# --- values -----------------------------------------------------------------------------------


def finding(field_: str = "labels.team", **kw: Any) -> Finding:
    values: dict[str, Any] = {
        "cluster": "prod-eu-1",
        "pool": "general",
        "layer": Layer.L1,
        "field": field_,
        "expected": "platform",
        "actual": "payments",
        "severity": Severity.HIGH,
        "nodes": ("ip-10-0-1-5", "ip-10-0-1-6"),
        "source": "eksctl.yaml",
    }
    values.update(kw)
    return Finding(**values)


def plan_batch(
    *events: FindingEvent, sink: str = "s", group_by: GroupBy = GroupBy.ALL, decisions=None
) -> Batch:
    policy = SinkPolicy(sink, group_by=group_by)
    plan = notifying.plan(
        notifying.NotifierState(), events, now=T0, sinks=[policy], decisions=decisions
    )
    (batch,) = notifying.batches(plan.notifications, [policy])
    return batch


def fire_then_clear(f: Finding, sink: str = "s") -> tuple[Batch, Batch]:
    policy = SinkPolicy(sink)
    first = notifying.plan(
        notifying.NotifierState(),
        [FindingEvent(FindingEventType.APPEARED, f, T0)],
        now=T0,
        sinks=[policy],
    )
    later = T0 + timedelta(minutes=30)
    second = notifying.plan(
        first.state, [FindingEvent(FindingEventType.CLEARED, f, later)], now=later, sinks=[policy]
    )
    return Batch(sink, first.notifications), Batch(sink, second.notifications)


def appeared(f: Finding, at: datetime = T0) -> FindingEvent:
    return FindingEvent(FindingEventType.APPEARED, f, at)


EPOCH = datetime.fromtimestamp(0, UTC)


def unix(seconds: float) -> FixedClock:
    return FixedClock(datetime.fromtimestamp(seconds, UTC))


# --- generic webhook --------------------------------------------------------------------------


async def test_webhook_posts_the_exact_payload_signed_so_check_signature_accepts_it(receiver):
    now = 1_740_830_400
    sink = WebhookSink("hooks", receiver.url("/hook/abc123"), secret=HMAC_SECRET, clock=unix(now))
    batch = plan_batch(
        appeared(finding()), decisions={finding().id: {"action": "remediate", "mode": "dry-run"}}
    )
    try:
        await sink.send(batch)
    finally:
        await sink.aclose()
    (req,) = receiver.at("/hook/abc123")
    assert req.json() == json.loads(json.dumps(webhook_payload(batch)))
    body = req.json()
    assert body["version"] == 1 and body["delivery"] == batch.key
    assert (body["cluster"], body["pool"], body["counts"]) == (
        "prod-eu-1",
        "general",
        {"firing": 1, "resolved": 0},
    )
    (n,) = body["notifications"]
    assert n["status"] == "firing" and n["finding"]["field"] == "labels.team"
    assert n["decision"] == {"action": "remediate", "mode": "dry-run"}
    assert req.headers["content-type"] == "application/json"
    assert req.headers["x-fleetwarden-delivery"] == batch.key
    header = req.headers[SIGNATURE_HEADER.lower()]
    assert header.startswith(f"t={now},v1=")
    assert check_signature(header, req.body, [HMAC_SECRET], now=now).ok
    assert not check_signature(header, req.body + b" ", [HMAC_SECRET], now=now).ok
    assert not check_signature(header, req.body, ["other"], now=now).ok


async def test_webhook_sends_change_events_with_their_keys_signed(receiver):
    """A sink that follows events gets them batched, each with the key receivers dedupe by;
    the delivery id is the same for the same batch (a resend after a crash)."""
    now = 1_740_830_400
    sink = WebhookSink("feed", receiver.url("/feed"), secret=HMAC_SECRET, clock=unix(now))
    events = [("k1", {"id": "e1", "source": "aws.eks"}), ("k2", {"id": "e2", "source": "aws.eks"})]
    try:
        await sink.send_events(events)
        await sink.send_events(events)
    finally:
        await sink.aclose()
    first, again = receiver.at("/feed")
    body = first.json()
    assert body == events_payload("feed", events)
    assert body["kind"] == "events" and body["sink"] == "feed"
    assert body["events"] == [
        {"key": "k1", "event": {"id": "e1", "source": "aws.eks"}},
        {"key": "k2", "event": {"id": "e2", "source": "aws.eks"}},
    ]
    assert first.headers["x-fleetwarden-delivery"] == body["delivery"]
    assert again.headers["x-fleetwarden-delivery"] == body["delivery"]
    assert events_payload("feed", events[:1])["delivery"] != body["delivery"]
    assert check_signature(
        first.headers[SIGNATURE_HEADER.lower()], first.body, [HMAC_SECRET], now=now
    ).ok


async def test_webhook_without_a_secret_sends_no_signature(receiver):
    sink = WebhookSink("hooks", receiver.url("/hook"))
    await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    (req,) = receiver.at("/hook")
    assert SIGNATURE_HEADER.lower() not in req.headers


async def test_webhook_signs_every_attempt_afresh(receiver):
    receiver.script["/hook"] = [Reply(502)]
    sink = WebhookSink(
        "hooks",
        receiver.url("/hook"),
        secret=HMAC_SECRET,
        clock=TickingClock(EPOCH, step=1000),  # each signature one reading: t=1000, 2000
        sleep=Sleeps(),
    )
    await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    first, second = receiver.at("/hook")
    assert first.headers["x-fleetwarden-delivery"] == second.headers["x-fleetwarden-delivery"]
    assert check_signature(
        second.headers["x-fleetwarden-signature"], second.body, [HMAC_SECRET], now=2000
    ).ok
    assert first.headers["x-fleetwarden-signature"].startswith("t=1000,")


# --- Slack ------------------------------------------------------------------------------------


def assert_block_kit(message: dict[str, Any]) -> None:
    """The parts of Slack's message/Block Kit format this sink relies on, with its limits."""
    assert set(message) == {"text", "blocks"} and message["text"]
    blocks = message["blocks"]
    assert 1 <= len(blocks) <= MAX_BLOCKS
    assert blocks[0]["type"] == "header"
    assert blocks[0]["text"]["type"] == "plain_text" and len(blocks[0]["text"]["text"]) <= 150
    assert blocks[-1]["type"] == "context"
    assert 1 <= len(blocks[-1]["elements"]) <= 10
    for block in blocks[1:-1]:
        assert block["type"] == "section"
        assert block["text"]["type"] == "mrkdwn" and 0 < len(block["text"]["text"]) <= 3000


async def test_slack_message_has_a_header_a_section_per_finding_and_a_context(receiver):
    url = receiver.url(f"/services/{SLACK_SECRET}")
    sink = SlackSink("slack-ops", url)
    a = finding("labels.team")
    b = finding("taints.dedicated", severity=Severity.CRITICAL, nodes=("n1",))
    batch = plan_batch(appeared(a), appeared(b))
    await sink.send(batch)
    await sink.aclose()
    (req,) = receiver.at(f"/services/{SLACK_SECRET}")
    message = req.json()
    assert message == slack_messages(batch)[0]
    assert_block_kit(message)
    header, s1, s2, context = message["blocks"]
    assert header["text"]["text"] == "🚨 Drift firing: 2 findings in prod-eu-1/general"
    assert header["text"]["emoji"] is True
    assert message["text"] == header["text"]["text"]
    assert s1["text"]["text"].splitlines() == [
        ":rotating_light: *HIGH* `L1 labels.team` on *prod-eu-1/general*",
        "expected `platform` → actual `payments`",
        "nodes (2): `ip-10-0-1-5`, `ip-10-0-1-6`",
    ]
    assert s2["text"]["text"].startswith(":rotating_light: *CRITICAL* `L1 taints.dedicated`")
    assert batch.key in context["elements"][0]["text"]


def test_slack_resolved_is_the_green_check_style():
    _, clear = fire_then_clear(finding())
    (message,) = slack_messages(clear)
    assert_block_kit(message)
    header, section, _ = message["blocks"]
    assert header["text"]["text"].startswith("✅ Drift resolved: 1 finding")
    assert section["text"]["text"].splitlines() == [
        ":white_check_mark: *Resolved* `L1 labels.team` on *prod-eu-1/general*",
        "was HIGH, firing since 2025-03-01 12:00 UTC",
    ]


def test_slack_escapes_control_characters_so_values_cannot_become_links_or_mentions():
    f = finding(actual="<!channel> & <https://evil|click>", message="a `b` <@U1>")
    (message,) = slack_messages(plan_batch(appeared(f)))
    text = message["blocks"][1]["text"]["text"]
    assert "<" not in text and ">" not in text.replace("→", "")
    assert "&lt;!channel&gt; &amp; &lt;https://evil|click&gt;" in text


def test_slack_splits_big_batches_under_the_50_block_limit_and_truncates_long_text():
    events = [appeared(finding(f"labels.k{i}", actual="x" * 5000)) for i in range(120)]
    batch = plan_batch(*events)
    messages = slack_messages(batch)
    assert len(messages) == 3
    for m in messages:
        assert_block_kit(m)
    sections = [b for m in messages for b in m["blocks"] if b["type"] == "section"]
    assert len(sections) == 120
    assert messages[0]["blocks"][0]["text"]["text"].endswith("(part 1/3)")


def test_slack_shows_the_policy_decision_and_what_changed():
    f = finding()
    policy = SinkPolicy("s")
    first = notifying.plan(notifying.NotifierState(), [appeared(f)], now=T0, sinks=[policy])
    changed = FindingEvent(
        FindingEventType.CHANGED, finding(nodes=("ip-10-0-1-5", "ip-10-0-1-6", "n3")), T0
    )
    plan = notifying.plan(
        first.state,
        [changed],
        now=T0,
        sinks=[policy],
        decisions={f.id: {"action": "cordon", "mode": "dry-run"}},
    )
    (message,) = slack_messages(Batch("s", plan.notifications))
    text = message["blocks"][1]["text"]["text"]
    assert "changed: nodes_added" in text and "policy: cordon (dry-run)" in text


# --- Alertmanager -----------------------------------------------------------------------------

# The postableAlerts schema of Alertmanager's API v2, translated from its Swagger 2.0 definitions
# (postableAlerts, postableAlert, alert, labelSet) in
# https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml
# (read at commit 07d03b6c2c7e747335198f07d382060721dd2831).
AM_SCHEMA: dict[str, Any] = {
    "$ref": "#/definitions/postableAlerts",
    "definitions": {
        "labelSet": {"type": "object", "additionalProperties": {"type": "string"}},
        "alert": {
            "type": "object",
            "required": ["labels"],
            "properties": {
                "labels": {"$ref": "#/definitions/labelSet"},
                "generatorURL": {"type": "string", "format": "uri"},
            },
        },
        "postableAlert": {
            "allOf": [
                {
                    "type": "object",
                    "properties": {
                        "startsAt": {"type": "string", "format": "date-time"},
                        "endsAt": {"type": "string", "format": "date-time"},
                        "annotations": {"$ref": "#/definitions/labelSet"},
                    },
                },
                {"$ref": "#/definitions/alert"},
            ]
        },
        "postableAlerts": {"type": "array", "items": {"$ref": "#/definitions/postableAlert"}},
    },
}
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time")
def _is_datetime(value: object) -> bool:
    return not isinstance(value, str) or bool(_RFC3339.fullmatch(value))


@FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    return not isinstance(value, str) or bool(urlsplit(value).scheme and urlsplit(value).netloc)


POSTABLE_KEYS = {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}


def validate_postable_alerts(body: Any) -> None:
    """The OpenAPI schema, plus what Alertmanager's handler checks beyond it."""
    jsonschema.Draft4Validator(AM_SCHEMA, format_checker=FORMATS).validate(body)
    for alert in body:
        assert set(alert) <= POSTABLE_KEYS, f"unknown fields {set(alert) - POSTABLE_KEYS}"
        assert alert["labels"].get("alertname")
        assert all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", k) for k in alert["labels"])
        assert all(v != "" for v in alert["labels"].values())
        if "endsAt" in alert:
            assert alert["endsAt"] >= alert["startsAt"], "Alertmanager rejects end < start"


def test_schema_check_itself_catches_bad_payloads():
    """The validator can fail: wrong label types and bad timestamps are rejected."""
    with pytest.raises(jsonschema.ValidationError):
        validate_postable_alerts([{"labels": {"alertname": 1}}])
    with pytest.raises(jsonschema.ValidationError):
        validate_postable_alerts([{"labels": {"alertname": "x"}, "startsAt": "yesterday"}])
    with pytest.raises(jsonschema.ValidationError):
        validate_postable_alerts([{"annotations": {}}])


async def test_alertmanager_firing_posts_schema_valid_alerts_to_api_v2(receiver):
    sink = AlertmanagerSink(
        "am",
        receiver.base,
        bearer_token=BEARER,
        static_labels={"team": "platform", "severity": "ignored"},
        generator_url="https://fleetwarden.example/findings/{finding_id}",
    )
    f = finding()
    batch = plan_batch(appeared(f), appeared(finding("labels.x", pool=None)))
    await sink.send(batch)
    await sink.aclose()
    (req,) = receiver.at("/api/v2/alerts")
    assert req.headers["authorization"] == f"Bearer {BEARER}"
    body = req.json()
    validate_postable_alerts(body)
    first, second = body
    assert first["labels"] == {
        "alertname": ALERTNAME,
        "team": "platform",
        "cluster": "prod-eu-1",
        "pool": "general",
        "layer": "L1",
        "field": "labels.team",
        "severity": "high",
        "finding_id": f.id,
    }
    assert "pool" not in second["labels"], "no pool: label omitted, never empty"
    assert first["startsAt"] == "2025-03-01T12:00:00Z"
    assert "endsAt" not in first, "firing: Alertmanager applies resolve_timeout"
    assert first["generatorURL"] == f"https://fleetwarden.example/findings/{f.id}"
    assert first["annotations"]["summary"] == "prod-eu-1/general: L1 labels.team drifted"
    assert first["annotations"]["description"].splitlines() == [
        "expected platform, actual payments",
        "nodes (2): ip-10-0-1-5, ip-10-0-1-6",
        "desired state from eksctl.yaml",
    ]


def test_alertmanager_resolve_sets_ends_at_to_the_clear_time():
    fire, clear = fire_then_clear(finding())
    (alert,) = postable_alerts(clear)
    validate_postable_alerts([alert])
    assert alert["startsAt"] == "2025-03-01T12:00:00Z"
    assert alert["endsAt"] == "2025-03-01T12:30:00Z"
    assert alert["labels"] == postable_alerts(fire)[0]["labels"], "same labels: same alert"


def test_alertmanager_firing_ttl_sets_ends_at_ahead():
    (alert,) = postable_alerts(plan_batch(appeared(finding())), firing_ttl=timedelta(minutes=10))
    validate_postable_alerts([alert])
    assert alert["endsAt"] == "2025-03-01T12:10:00Z"


def test_alertmanager_severity_change_ends_the_alert_with_the_old_severity_label():
    f = finding(severity=Severity.MEDIUM)
    policy = SinkPolicy("am")
    first = notifying.plan(notifying.NotifierState(), [appeared(f)], now=T0, sinks=[policy])
    later = T0 + timedelta(minutes=5)
    up = FindingEvent(FindingEventType.CHANGED, finding(severity=Severity.CRITICAL), later)
    second = notifying.plan(first.state, [up], now=later, sinks=[policy])
    body = postable_alerts(Batch("am", second.notifications))
    validate_postable_alerts(body)
    ended, firing = body
    assert ended["labels"]["severity"] == "medium" and ended["endsAt"] == "2025-03-01T12:05:00Z"
    assert firing["labels"]["severity"] == "critical" and "endsAt" not in firing
    # and the final resolve ends the critical one, not the medium one
    gone = FindingEvent(FindingEventType.CLEARED, finding(severity=Severity.CRITICAL), later)
    third = notifying.plan(second.state, [gone], now=later, sinks=[policy])
    (resolved,) = postable_alerts(Batch("am", third.notifications))
    assert resolved["labels"]["severity"] == "critical" and "endsAt" in resolved


def test_alertmanager_rejects_invalid_static_label_names():
    with pytest.raises(ValueError, match="label name"):
        AlertmanagerSink("am", "http://am:9093", static_labels={"bad-name": "x"})


async def test_alertmanager_400_is_permanent_and_quotes_its_reason(receiver):
    receiver.script["/api/v2/alerts"] = [Reply(400, "start time must be before end time")]
    sink = AlertmanagerSink("am", receiver.base, sleep=Sleeps())
    with pytest.raises(NotifyError) as info:
        await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    assert info.value.status == 400 and not info.value.retryable and info.value.attempts == 1
    assert "start time must be before end time" in str(info.value)
    assert len(receiver.at("/api/v2/alerts")) == 1


# --- retries, give-up, timeouts ---------------------------------------------------------------


async def test_a_500_is_retried_with_jittered_backoff_then_succeeds(receiver):
    receiver.script["/hook"] = [Reply(500, "boom"), Reply(503, "busy")]
    sleeps = Sleeps()
    sink = WebhookSink(
        "hooks",
        receiver.url("/hook"),
        retry=RetryPolicy(attempts=3, base=0.5, cap=4.0),
        sleep=sleeps,
        rng=random.Random(7),
    )
    await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    assert len(receiver.at("/hook")) == 3
    assert len(sleeps.waits) == 2
    assert 0 <= sleeps.waits[0] <= 0.5 and 0 <= sleeps.waits[1] <= 1.0, "full jitter, doubling"
    assert len({r.body for r in receiver.at("/hook")}) == 1, "the same body every time"


async def test_gives_up_after_n_attempts_with_one_notify_error(receiver):
    receiver.script["/services/x"] = [Reply(503, "unavailable")] * 10
    sleeps = Sleeps()
    sink = SlackSink(
        "slack", receiver.url("/services/x"), retry=RetryPolicy(attempts=4, cap=2.0), sleep=sleeps
    )
    with pytest.raises(NotifyError) as info:
        await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    err = info.value
    assert (err.sink, err.status, err.attempts, err.retryable) == ("slack", 503, 4, True)
    assert "HTTP 503: unavailable (after 4 attempts)" in str(err)
    assert len(receiver.at("/services/x")) == 4
    assert len(sleeps.waits) == 3 and max(sleeps.waits) <= 2.0, "back-off is capped"


async def test_429_retry_after_is_honoured_up_to_the_cap(receiver):
    receiver.script["/hook"] = [
        Reply(429, "slow down", {"Retry-After": "3"}),
        Reply(429, "slow down", {"Retry-After": "999"}),
    ]
    sleeps = Sleeps()
    sink = WebhookSink("hooks", receiver.url("/hook"), retry=RetryPolicy(cap=4.0), sleep=sleeps)
    await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    assert sleeps.waits == [3.0, 4.0]


@pytest.mark.parametrize("status", [400, 403, 404, 410])
async def test_client_errors_are_not_retried(receiver, status):
    receiver.script["/hook"] = [Reply(status, "channel_not_found")]
    sink = WebhookSink("hooks", receiver.url("/hook"), sleep=Sleeps())
    with pytest.raises(NotifyError) as info:
        await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    assert info.value.status == status and info.value.attempts == 1
    assert len(receiver.at("/hook")) == 1


async def test_a_receiver_slower_than_the_timeout_is_a_retryable_timeout(receiver):
    receiver.script["/slow"] = [Reply(delay=3.0), Reply(delay=3.0)]
    sink = WebhookSink(
        "hooks", receiver.url("/slow"), timeout=0.2, retry=RetryPolicy(attempts=2), sleep=Sleeps()
    )
    started = time.monotonic()
    with pytest.raises(NotifyError) as info:
        await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    assert time.monotonic() - started < 2.0
    assert "timed out (after 2 attempts)" in str(info.value) and info.value.retryable


async def test_connection_refused_is_a_retryable_notify_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = WebhookSink(
        "hooks", f"http://127.0.0.1:{port}/hook", retry=RetryPolicy(attempts=2), sleep=Sleeps()
    )
    with pytest.raises(NotifyError) as info:
        await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    assert info.value.retryable and info.value.status is None and info.value.attempts == 2
    assert "ConnectError" in str(info.value)


# --- secrets ----------------------------------------------------------------------------------


async def test_no_secret_in_errors_reprs_tracebacks_or_logs(receiver, caplog):
    """Slack's URL is the credential; webhook secrets and bearer tokens are, too. Even a
    receiver that echoes them back in its error body must not get them into ours."""
    caplog.set_level(logging.DEBUG)
    slack_path, hook_path = f"/services/{SLACK_SECRET}", f"/h/{SLACK_SECRET}"
    receiver.script[slack_path] = [
        Reply(500, f"no route {receiver.url(slack_path)}"),
        Reply(404, f"no_service {slack_path}"),
    ]
    receiver.script[hook_path] = [Reply(401, f"bad token Bearer {BEARER} / {HMAC_SECRET}")]
    receiver.script["/api/v2/alerts"] = [Reply(403, f"token {BEARER} is not allowed")]
    slack = SlackSink(
        "slack-ops", receiver.url(slack_path), retry=RetryPolicy(attempts=2), sleep=Sleeps()
    )
    hook = WebhookSink(
        "hooks",
        receiver.url(hook_path),
        secret=HMAC_SECRET,
        headers={"Authorization": f"Bearer {BEARER}"},
    )
    am = AlertmanagerSink("am", receiver.base, bearer_token=BEARER)
    errors = []
    for sink in (slack, hook, am):
        with pytest.raises(NotifyError) as info:
            await sink.send(plan_batch(appeared(finding())))
        errors.append(info.value)
    rendered = "\n".join(
        [
            *(str(e) for e in errors),
            *(repr(e) for e in errors),
            *("".join(traceback.format_exception(e)) for e in errors),
            repr(slack),
            repr(hook),
            repr(am),
            repr(slack._poster),
            caplog.text,
        ]
    )
    for secret in ("T0SECRET", "xoxSecretWebhookToken", HMAC_SECRET, BEARER):
        assert secret not in rendered, secret
    for e in errors:
        assert e.__cause__ is None and e.__context__ is None
    assert "slack-ops" in str(errors[0]) and "/…" in str(errors[0])
    assert "<redacted>" in str(errors[1]) and "<redacted>" in str(errors[2])
    assert "HTTP Request: POST http://127.0.0.1" in caplog.text, "httpx still logs, redacted"
    for sink in (slack, hook, am):
        await sink.aclose()


async def test_an_exception_text_holding_the_url_is_not_passed_on():
    """Fault injection: a transport error whose message quotes the secret URL."""

    def explode(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError(f"connection reset while talking to {request.url}")

    url = f"https://hooks.slack.com/services/{SLACK_SECRET}"
    sink = SlackSink(
        "slack",
        url,
        transport=httpx.MockTransport(explode),
        retry=RetryPolicy(attempts=2),
        sleep=Sleeps(),
    )
    with pytest.raises(NotifyError) as info:
        await sink.send(plan_batch(appeared(finding())))
    await sink.aclose()
    assert SLACK_SECRET not in str(info.value) and "T0SECRET" not in str(info.value)
    assert "POST https://hooks.slack.com/…: ReadError (after 2 attempts)" in str(info.value)


def test_bad_urls_are_refused_without_quoting_them():
    with pytest.raises(ValueError) as info:
        SlackSink("slack", f"hooks.slack.com/services/{SLACK_SECRET}")
    assert SLACK_SECRET not in str(info.value)


def test_redact_url_keeps_host_and_drops_user_info_path_and_query(no_proxy_env):
    assert redact_url("https://u:p@hooks.slack.com:8443/services/T/B/X?tok=1") == (
        "https://hooks.slack.com:8443/…"
    )
    assert redact_url("http://am:9093/api/v2/alerts?x=1", keep_path=True) == (
        "http://am:9093/api/v2/alerts"
    )
    assert redact_url("http://u:p@[fd00::1]:3128") == "http://[fd00::1]:3128"  # a proxy's
    assert (
        repr(JsonPoster("p", "https://h/secret")) == "JsonPoster(sink='p', endpoint='https://h/…')"
    )


# --- the Notifier shell, end to end -----------------------------------------------------------


async def test_notifier_sends_to_every_sink_and_records_outcomes(receiver):
    outcomes: list[BatchResult] = []

    async def audit(o: BatchResult) -> None:
        outcomes.append(o)

    sinks = [
        (SinkPolicy("hooks"), WebhookSink("hooks", receiver.url("/hook"), secret=HMAC_SECRET)),
        (
            SinkPolicy("slack", min_severity=Severity.CRITICAL),
            SlackSink("slack", receiver.url("/services/x")),
        ),
        (SinkPolicy("am", group_by=GroupBy.ALL), AlertmanagerSink("am", receiver.base)),
    ]
    notifier = Notifier(sinks, clock=FixedClock(T0), on_outcome=audit, tick_every=3600)
    high, crit = finding("labels.a"), finding("labels.b", severity=Severity.CRITICAL)
    notifier.handle(appeared(high))
    notifier.handle(LifecycleEvent(LifecycleType.UPGRADED, "prod-eu-1", T0))  # ignored
    notifier.handle(appeared(crit))
    assert notifier.pending == 2 and notifier.stats.events == 2
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(notifier.run())
        await receiver.wait_for("/hook", 2)
        await receiver.wait_for("/services/x", 1)
        await receiver.wait_for("/api/v2/alerts", 1)
        async with asyncio.timeout(5):
            await notifier.drain()
        task.cancel()
    assert len(outcomes) == 4 and all(o.ok for o in outcomes)
    assert {o.sink for o in outcomes} == {"hooks", "slack", "am"}
    (am_req,) = receiver.at("/api/v2/alerts")
    validate_postable_alerts(am_req.json())
    assert len(am_req.json()) == 2
    (slack_req,) = receiver.at("/services/x")
    assert "CRITICAL" in slack_req.json()["blocks"][1]["text"]["text"]
    record = outcomes[0].to_json()
    assert record["ok"] and record["delivery"] and record["notifications"][0]["status"] == "firing"
    assert notifier.stats.delivered == 4 and notifier.stats.failed == 0
    for _, sink in sinks:
        await sink.aclose()


async def test_run_sends_due_repeats_on_its_own(receiver):
    """The background loop ticks every ``tick_every`` seconds: a still-firing alert is
    repeated once the (fake) clock has passed ``renotify_every``."""
    sink = AlertmanagerSink("am", receiver.base)
    clock = FixedClock(T0)
    policy = SinkPolicy("am", renotify_every=timedelta(minutes=1), group_by=GroupBy.ALL)
    notifier = Notifier([(policy, sink)], clock=clock, tick_every=0.05)
    await notifier.process([appeared(finding())])
    clock.advance(timedelta(minutes=1))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(notifier.run())
        first, repeat = await receiver.wait_for("/api/v2/alerts", 2)
        task.cancel()
    assert repeat.json()[0]["labels"] == first.json()[0]["labels"]
    assert repeat.json()[0]["startsAt"] == first.json()[0]["startsAt"] == "2025-03-01T12:00:00Z"
    await sink.aclose()


async def test_a_hanging_sink_times_out_without_holding_back_the_others(receiver):
    receiver.script["/slow"] = [Reply(delay=5.0)]
    slow = WebhookSink("slow", receiver.url("/slow"), timeout=30.0)
    fast = WebhookSink("fast", receiver.url("/fast"))
    clock = FixedClock(T0)
    notifier = Notifier(
        [(SinkPolicy("slow", retry_after=timedelta(minutes=1)), slow), (SinkPolicy("fast"), fast)],
        clock=clock,
        send_timeout=0.5,
    )
    started = time.monotonic()
    outcomes = await notifier.process([appeared(finding())])
    assert time.monotonic() - started < 3.0
    by_sink = {o.sink: o for o in outcomes}
    assert by_sink["fast"].ok
    assert not by_sink["slow"].ok and "no answer within 0.5 s" in by_sink["slow"].error
    # the failed firing is retried once retry_after has passed; the fast sink is not re-sent
    assert await notifier.tick() == []
    clock.advance(timedelta(minutes=1))
    receiver.script["/slow"] = []
    (retry,) = await notifier.tick()
    assert retry.sink == "slow" and retry.ok
    assert retry.batch.notifications[0].trigger is notifying.Trigger.RETRY
    assert len(receiver.at("/fast")) == 1
    await slow.aclose()
    await fast.aclose()


async def test_after_a_failure_the_rest_of_that_sinks_round_is_deferred(receiver):
    receiver.script["/down"] = [Reply(404, "gone")]
    sink = WebhookSink("down", receiver.url("/down"))
    notifier = Notifier([(SinkPolicy("down"), sink)], clock=FixedClock(T0))
    outcomes = await notifier.process([appeared(finding(f"labels.{i}")) for i in range(5)])
    assert [o.ok for o in outcomes] == [False] * 5
    assert len(receiver.at("/down")) == 1, "one failed request, not five"
    assert "earlier message to this sink failed" in outcomes[1].error
    await sink.aclose()


async def test_resolve_follows_firing_through_the_notifier(receiver):
    sink = WebhookSink("hooks", receiver.url("/hook"))
    notifier = Notifier([(SinkPolicy("hooks"), sink)], clock=FixedClock(T0))
    f = finding()
    await notifier.process([appeared(f)])
    await notifier.process([appeared(f)])  # duplicate: nothing sent
    await notifier.process([FindingEvent(FindingEventType.CLEARED, f, T0)])
    statuses = [r.json()["notifications"][0]["status"] for r in receiver.at("/hook")]
    assert statuses == ["firing", "resolved"]
    await sink.aclose()


async def test_the_queue_is_bounded_and_counts_what_it_drops():
    class Never:
        name = "never"

        async def send(self, batch: Batch) -> None:  # pragma: no cover - never run
            raise AssertionError

        async def aclose(self) -> None:
            return None

    notifier = Notifier([(SinkPolicy("never"), Never())], queue_size=2)
    for i in range(3):
        notifier.handle(appeared(finding(f"labels.{i}")))
    assert notifier.stats.dropped == 1 and notifier.pending == 2 and notifier.stats.events == 2


async def test_an_outcome_hook_failure_does_not_lose_the_state_update(receiver):
    def broken(o: BatchResult) -> None:
        raise RuntimeError("audit store down")

    sink = WebhookSink("hooks", receiver.url("/hook"))
    notifier = Notifier([(SinkPolicy("hooks"), sink)], clock=FixedClock(T0), on_outcome=broken)
    f = finding()
    (outcome,) = await notifier.process([appeared(f)])
    assert outcome.ok and notifier.stats.outcome_hook_failures == 1
    assert notifier.state.alert("hooks", f.id) is not None
    await sink.aclose()


async def test_sink_and_policy_names_must_pair_up():
    sink = WebhookSink("a", "http://127.0.0.1:1/x")
    with pytest.raises(ValueError, match="paired"):
        Notifier([(SinkPolicy("b"), sink)])
    with pytest.raises(ValueError, match="unique"):
        Notifier([(SinkPolicy("a"), sink), (SinkPolicy("a"), sink)])
    await sink.aclose()


def test_statuses_are_what_the_payloads_say():
    fire, clear = fire_then_clear(finding())
    assert [n.status for n in fire.notifications] == [Status.FIRING]
    assert webhook_payload(clear)["counts"] == {"firing": 0, "resolved": 1}
