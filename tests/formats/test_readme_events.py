"""The README documents what `serve` reads from a CloudEvent and the Argo CD notification
template (they were only in source files): the documented examples go through the real
readers and give what the README says, and the documented template is the reader's own."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from fleetwarden.core.events import Operation
from fleetwarden.formats.events import argocd, cloudevents

README = Path(__file__).resolve().parents[2] / "README.md"
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("### Sending events: the CloudEvents attributes and the Argo CD template")
    return text[start : text.index("\n### ", start + 1)]


def _json_blocks() -> list[object]:
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)```", _section(), re.S)]


def test_the_documented_cloudevent_gives_the_documented_change():
    event = _json_blocks()[0]
    (change,) = cloudevents.parse(event, {"content-type": cloudevents.STRUCTURED}, NOW).events
    assert (change.cluster, change.pool, change.actor, change.operation) == (
        "prod-eu-1",
        "general",
        "ci:node-pools",
        Operation.UPDATE,
    )


def test_the_same_attributes_as_binary_mode_headers():
    event = _json_blocks()[0]
    assert isinstance(event, dict)
    headers = {f"ce-{k}": str(v) for k, v in event.items() if k != "data"}
    headers["content-type"] = "application/json"
    body = json.dumps(event["data"]).encode()
    (change,) = cloudevents.parse(body, headers, NOW).events
    assert (change.cluster, change.pool, change.operation) == (
        "prod-eu-1",
        "general",
        Operation.UPDATE,
    )
    for header in ("ce-cluster: prod-eu-1", "ce-nodepool: general", "ce-actor", "ce-operation"):
        assert header in _section()


def test_every_extension_attribute_and_operation_read_is_documented():
    section = _section()
    for name in ("cluster", "nodepool", "pool", "actor", "operation"):
        assert f"| `{name}`" in section or f"(or `{name}`)" in section, name
    row = next(line for line in section.splitlines() if line.startswith("| `operation`"))
    listed = set(re.findall(r"`([a-z]+)`", row.split("|")[2]))
    assert listed == {op.value for op in Operation}


def test_the_documented_argocd_template_is_the_one_the_reader_documents():
    template = _json_blocks()[1]
    doc = argocd.__doc__ or ""
    in_source = json.loads(doc[doc.index("    {") : doc.index("    }") + 5])
    assert template == in_source


def test_a_rendered_template_gives_the_documented_event():
    template = _json_blocks()[1]
    assert isinstance(template, dict)
    rendered = {
        **{k: "" for k in template},  # what Argo CD renders for a field it has no value for
        "app": "shop",
        "namespace": "argocd",
        "cluster": "prod-eu-1",
        "operation": "Succeeded",
        "finishedAt": "2026-12-01T10:00:00Z",
        "actor": "alice",
        "automated": "false",
        "trigger": "on-sync-succeeded",
    }
    (change,) = argocd.parse(rendered, {}, NOW).events
    assert (change.cluster, change.operation, change.actor, change.outcome) == (
        "prod-eu-1",
        Operation.SYNC,
        "alice",
        "success",
    )
    automated = {**rendered, "actor": "", "automated": "true", "cluster": "", "server": "https://k"}
    (change,) = argocd.parse(automated, {}, NOW).events
    assert (change.cluster, change.actor) == ("https://k", "argocd:automated-sync")
