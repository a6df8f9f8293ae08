"""Slack incoming webhooks: a Block Kit message per batch, one section per finding.

Payload (``slack_messages``), per Slack's message payload and Block Kit references
(https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks,
https://docs.slack.dev/reference/block-kit/blocks)::

    {"text": "<fallback for notifications>",
     "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "...", "emoji": true}},
                {"type": "section", "text": {"type": "mrkdwn", "text": "..."}},   # per finding
                {"type": "context", "elements": [{"type": "mrkdwn", "text": "..."}]}]}

Firing sections start with :rotating_light:, resolved ones with :white_check_mark: (Block Kit has
no colour bar; that exists only in legacy attachments, which this sink does not use). Slack's
limits are respected: at most 50 blocks a message (a big batch is split into several messages),
header text 150 characters, section text 3000; ``&``, ``<`` and ``>`` in values are escaped as
Slack's formatting guide asks, so a label value cannot become a link or a mention.

The webhook URL is the credential: it is never logged or put in an error (``JsonPoster``).
Slack answers 200 ``ok``; 400 ``invalid_payload``, 403/404/410 (revoked, no such channel,
archived) are permanent; 429 and 5xx are retried.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from fleetwarden.adapters.notify import JsonPoster, RetryPolicy
from fleetwarden.core.findings import JsonValue
from fleetwarden.core.notifying import Batch, Notification, Status, Trigger

__all__ = ["MAX_BLOCKS", "SlackSink", "slack_messages"]

MAX_BLOCKS = 50
MAX_HEADER = 150
MAX_SECTION = 3000
MAX_NODES_SHOWN = 10
SECTIONS_PER_MESSAGE = MAX_BLOCKS - 2  # a header and a context block around them

FIRING_ICON = ":rotating_light:"
RESOLVED_ICON = ":white_check_mark:"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(value: JsonValue | str, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    # a backtick would end the code span early
    return "`" + _escape(text.replace("`", "'")) + "`"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(n: Notification) -> str:
    f = n.finding
    return _escape(f"{f.cluster}/{f.pool}" if f.pool else f.cluster)


def _section_text(n: Notification) -> str:
    f = n.finding
    what = _code(f"{f.layer.value} {f.field}")
    since = n.since.strftime("%Y-%m-%d %H:%M UTC")
    if n.status is Status.RESOLVED:
        lines = [
            f"{RESOLVED_ICON} *Resolved* {what} on *{_where(n)}*",
            f"was {(n.previous_severity or f.severity).value.upper()}, firing since {since}",
        ]
        if n.reason:
            lines.append(f"reason: {_escape(n.reason)}")
    else:
        lines = [
            f"{FIRING_ICON} *{f.severity.value.upper()}* {what} on *{_where(n)}*",
            f"expected {_code(f.expected)} → actual {_code(f.actual)}",
        ]
        if f.nodes:
            shown = ", ".join(_code(x, 80) for x in f.nodes[:MAX_NODES_SHOWN])
            more = len(f.nodes) - MAX_NODES_SHOWN
            lines.append(
                f"nodes ({len(f.nodes)}): {shown}" + (f" and {more} more" if more > 0 else "")
            )
        if f.message:
            lines.append(_escape(f.message))
        if n.trigger is Trigger.CHANGED and n.changes:
            lines.append("changed: " + ", ".join(sorted(c.value for c in n.changes)))
        elif n.trigger in (Trigger.REPEAT, Trigger.RETRY):
            lines.append(f"still firing since {since} (message {n.sequence})")
    if n.decision:
        action = n.decision.get("action") or n.decision.get("decision")
        if action:
            mode = n.decision.get("mode")
            lines.append(
                f"policy: {_escape(str(action))}" + (f" ({_escape(str(mode))})" if mode else "")
            )
    return _cut("\n".join(lines), MAX_SECTION)


def _title(batch: Batch, part: int, parts: int) -> str:
    firing, resolved = len(batch.firing), len(batch.resolved)
    where = batch.cluster or "several clusters"
    if batch.cluster and batch.pool:
        where = f"{batch.cluster}/{batch.pool}"
    if resolved == 0:
        head = f"🚨 Drift firing: {firing} finding{'s' if firing != 1 else ''}"
    elif firing == 0:
        head = f"✅ Drift resolved: {resolved} finding{'s' if resolved != 1 else ''}"
    else:
        head = f"Drift: {firing} firing, {resolved} resolved"
    suffix = f" (part {part}/{parts})" if parts > 1 else ""
    return _cut(f"{head} in {where}{suffix}", MAX_HEADER)


def slack_messages(
    batch: Batch, *, per_message: int = SECTIONS_PER_MESSAGE
) -> list[dict[str, Any]]:
    """The message(s) for ``batch``: more than ``per_message`` findings are split."""
    per_message = max(1, min(per_message, SECTIONS_PER_MESSAGE))
    notes = list(batch.notifications)
    chunks = [notes[i : i + per_message] for i in range(0, len(notes), per_message)] or [[]]
    out = []
    for i, chunk in enumerate(chunks, 1):
        title = _title(batch, i, len(chunks))
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": title, "emoji": True}}
        ]
        blocks += [
            {"type": "section", "text": {"type": "mrkdwn", "text": _section_text(n)}} for n in chunk
        ]
        context = f"fleetwarden · delivery {batch.key}"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
        out.append({"text": title, "blocks": blocks})
    return out


class SlackSink:
    """Posts ``slack_messages`` to one incoming-webhook URL (a secret)."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        timeout: float = 5.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        **poster: Any,
    ) -> None:
        self.name = name
        self._poster = JsonPoster(
            name, url, timeout=timeout, retry=retry, transport=transport, **poster
        )

    def __repr__(self) -> str:
        return f"SlackSink(name={self.name!r}, endpoint={self._poster.endpoint!r})"

    async def send(self, batch: Batch) -> None:
        for message in slack_messages(batch):
            await self._poster.post(json.dumps(message, ensure_ascii=False).encode())

    async def aclose(self) -> None:
        await self._poster.aclose()
