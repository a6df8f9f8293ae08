"""Event payloads -> canonical change events, per gateway route.

Real samples come from ../shared/realdata/events (every file there must appear in the table
below, so a new sample forces a decision). Where the corpus has no sample of a kind (EKS
node-group CloudTrail calls, GKE node-pool audit entries, Event Grid's validation event, AKS
agent-pool resource events, GKE cluster notifications, Flux and Argo CD webhook bodies), the
payload is built from the provider's published reference, cited next to it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.events import (
    SOURCES,
    Parsed,
    Reader,
    Reply,
    argocd,
    body_id,
    looks_secret,
    options_reply,
    parsers,
)
from tests.conftest import REALDATA, realdata_files

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PARSE = parsers()


def parse(source: str, body: Any, headers: dict[str, str] | None = None) -> Parsed:
    return PARSE[source](body, headers or {}, NOW)


def one(source: str, body: Any, headers: dict[str, str] | None = None) -> ChangeEvent:
    parsed = parse(source, body, headers)
    assert parsed.reply is None
    assert len(parsed.events) == 1, parsed.events
    return parsed.events[0]


def refused(source: str, body: Any, headers: dict[str, str] | None = None) -> FormatError:
    with pytest.raises(FormatError) as info:
        parse(source, body, headers)
    assert info.value.path == f"{source} payload"
    return info.value


def load(name: str) -> Any:
    return json.loads((REALDATA / "events" / name).read_text())


# --- delivery wrappers ---------------------------------------------------------------------


def push(
    payload: Any,
    *,
    attributes: dict[str, str] | None = None,
    message_id: str = "9876543210",
    subscription: str = "projects/acme-prod/subscriptions/fleetwarden",
) -> dict[str, Any]:
    """A wrapped Pub/Sub push body, as https://cloud.google.com/pubsub/docs/push shows it."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    message: dict[str, Any] = {
        "data": base64.b64encode(data).decode(),
        "messageId": message_id,
        "message_id": message_id,
        "publishTime": "2024-05-01T11:59:59.123Z",
        "publish_time": "2024-05-01T11:59:59.123Z",
    }
    if attributes is not None:
        message["attributes"] = attributes
    return {"message": message, "subscription": subscription}


def eventarc_audit_headers(entry: dict[str, Any], event_id: str = "ev-1") -> dict[str, str]:
    """Eventarc's binary-mode headers for an audit-log event (type and source as Google's
    structured sample in the corpus spells them; the body is the LogEntry)."""
    proto = entry["protoPayload"]
    return {
        "content-type": "application/json; charset=utf-8",
        "ce-specversion": "1.0",
        "ce-id": event_id,
        "ce-type": "google.cloud.audit.log.v1.written",
        "ce-source": "//cloudaudit.googleapis.com/projects/acme-prod/logs/activity",
        "ce-time": "2024-05-01T11:59:51Z",
        "ce-subject": f"{proto.get('serviceName')}/{proto.get('resourceName')}",
        "ce-methodname": str(proto.get("methodName")),
    }


def sns_notification(event: dict[str, Any]) -> dict[str, Any]:
    """An SNS HTTP(S) Notification carrying an EventBridge event.
    https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html"""
    return {
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": "arn:aws:sns:eu-west-1:111122223333:fleetwarden-events",
        "Message": json.dumps(event),
        "Timestamp": "2024-05-01T11:59:59.200Z",
        "SignatureVersion": "1",
        "Signature": "EXAMPLEw6JRN...",
        "SigningCertURL": "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-f3ec.pem",
        "UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe&Subscripti...",
    }


# --- the real corpus: one row per (sample, route) -------------------------------------------


@dataclass(frozen=True)
class Expect:
    id: str
    operation: Operation
    provider: EventSource
    cluster: str | None = None
    pool: str | None = None
    actor: str | None = None
    flags: tuple[EventFlag, ...] = (EventFlag.NO_CLUSTER,)
    outcome: str | None = None


@dataclass(frozen=True)
class Refused:
    field: str
    needle: str


ASG_ID = "12345678-1234-1234-1234-123456789012"
ROBOT = "robot@test-project.iam.gserviceaccount.com"
NC, FAILED = EventFlag.NO_CLUSTER, EventFlag.FAILED
AWS, AZ, GCP = EventSource.AWS, EventSource.AZURE, EventSource.GCP
AZ_ID = "25b3b0d0-d79b-44d5-9963-440d4e6a9bba"

# (file, route, how it is delivered, expected events or the refusal)
CORPUS: list[tuple[str, str, str, list[Expect] | Refused]] = [
    ("aws-autoscaling-event-launch-successful.json", "aws", "post",
     [Expect(ASG_ID, Operation.SCALE, AWS, outcome="success")]),
    ("aws-autoscaling-event-launch-unsuccessful.json", "aws", "post",
     [Expect(ASG_ID, Operation.SCALE, AWS, flags=(NC, FAILED), outcome="failure")]),
    ("aws-autoscaling-event-lifecycle-action.json", "aws", "post",
     [Expect(ASG_ID, Operation.SCALE, AWS)]),
    ("aws-autoscaling-event-terminate-action.json", "aws", "post",
     [Expect(ASG_ID, Operation.SCALE, AWS)]),
    ("aws-autoscaling-event-terminate-successful.json", "aws", "post",
     [Expect(ASG_ID, Operation.SCALE, AWS, outcome="success")]),
    # an EventBridge event of another service: accepted, about no cluster
    ("aws-ecs-container-instance-state-change.json", "aws", "post",
     [Expect("8952ba83-7be2-4ab5-9c32-6687532d15a2", Operation.OTHER, AWS)]),
    # Lambda envelopes are not HTTP deliveries: refused with the way to subscribe instead
    ("aws-sns-event.json", "aws", "post", Refused("Records", "Lambda event envelope")),
    ("aws-sqs-event.json", "aws", "post", Refused("Records", "Lambda event envelope")),
    # Event Grid schema: every event of the batch is kept; none is about a cluster
    ("azure-eventgrid-MultipleEventsInSameBatch.json", "azure", "post",
     [Expect("602a88ef-0001-00e6-1233-1646070610ea", Operation.OTHER, AZ),
      Expect("4c2359fe-001e-00ba-0e04-58586806d298", Operation.OTHER, AZ),
      Expect("4c2359fe-001e-00ba-0e04-58586806d298", Operation.OTHER, AZ),
      Expect("dede87b0-3656-419c-acaf-70c95ddc60f5", Operation.OTHER, AZ)]),
    # claims/authorization as JSON text (an older SDK payload): read, no identity in them
    ("azure-eventgrid-ResourceDeleteSuccessEvent.json", "azure", "post",
     [Expect(AZ_ID, Operation.DELETE, AZ, outcome="success")]),
    # the event type says Failure (the sample's status field says Succeeded): type wins
    ("azure-eventgrid-ResourceWriteFailureEvent.json", "azure", "post",
     [Expect(AZ_ID, Operation.UPDATE, AZ, flags=(NC, FAILED), outcome="failure")]),
    ("azure-eventgrid-ResourceWriteSuccessEvent.json", "azure", "post",
     [Expect(AZ_ID, Operation.UPDATE, AZ, outcome="success")]),
    # a JSON schema is not an event
    ("cloudevents-spec-json-schema.json", "cloudevents", "post",
     Refused("", "not a CloudEvent")),
    # bare LogEntry data: refused on the push route, parsed once pushed or posted by Eventarc
    ("gcp-auditlog-LogEntryData-bigqueryjobcompleted.json", "gcp", "post",
     Refused("message", "bare LogEntry")),
    ("gcp-auditlog-LogEntryData-bigqueryjobcompleted.json", "gcp", "push",
     [Expect("9876543210", Operation.OTHER, GCP, actor=ROBOT, outcome="success")]),
    ("gcp-auditlog-LogEntryData-bigqueryjobcompleted.json", "cloudevents", "eventarc",
     [Expect("ev-1", Operation.OTHER, GCP, actor=ROBOT, outcome="success")]),
    ("gcp-auditlog-LogEntryData-monitoringCreateTimeSeries.json", "gcp", "push",
     [Expect("9876543210", Operation.OTHER, GCP, actor=ROBOT, outcome="success")]),
    ("gcp-auditlog-LogEntryData-monitoringCreateTimeSeries.json", "cloudevents", "eventarc",
     [Expect("ev-1", Operation.OTHER, GCP, actor=ROBOT, outcome="success")]),
    ("gcp-auditlog-LogEntryData-pubsubCreateTopic.json", "gcp", "push",
     [Expect("9876543210", Operation.OTHER, GCP, actor=ROBOT, outcome="success")]),
    ("gcp-auditlog-LogEntryData-pubsubCreateTopic.json", "gcp", "post",
     Refused("message", "bare LogEntry")),
    # a push envelope whose data is opaque text: kept (Pub/Sub would redeliver a refusal)
    ("gcp-cloudevent-binary-pubsub-complex.json", "gcp", "post",
     [Expect("message-id", Operation.OTHER, GCP)]),
    ("gcp-cloudevent-structured-auditlog.json", "cloudevents", "structured",
     [Expect("projects/test-project/logs/cloudaudit.googleapis.com%2Fdata_access1234567123456789",
             Operation.OTHER, GCP, actor=ROBOT, outcome="success")]),
    ("gcp-cloudevent-structured-pubsub.json", "cloudevents", "structured",
     [Expect("3103425958877813", Operation.OTHER, GCP)]),
    ("gcp-pubsub-MessagePublishedData-binary.json", "gcp", "post",
     [Expect("message-id", Operation.OTHER, GCP)]),
    ("gcp-pubsub-MessagePublishedData-text.json", "gcp", "post",
     [Expect("message-id", Operation.OTHER, GCP)]),
]  # fmt: skip


def deliver(route: str, how: str, body: Any) -> Parsed:
    if how == "push":
        return parse(route, push(body))
    if how == "eventarc":
        return parse(route, body, eventarc_audit_headers(body))
    if how == "structured":
        return parse(route, body, {"content-type": "application/cloudevents+json"})
    return parse(route, body)


@pytest.mark.realdata
def test_every_corpus_event_sample_has_a_pinned_outcome(realdata):
    """A new sample in the corpus must be given a row (accepted with its mapping, or refused)."""
    names = {p.name for p in realdata_files("events", ".json")}
    assert names == {row[0] for row in CORPUS}


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "route", "how", "expected"),
    CORPUS,
    ids=[f"{row[0].removesuffix('.json')}@{row[1]}:{row[2]}" for row in CORPUS],
)
def test_real_sample_maps_to_the_pinned_canonical_events(realdata, name, route, how, expected):
    body = load(name)
    if isinstance(expected, Refused):
        with pytest.raises(FormatError) as info:
            deliver(route, how, body)
        assert info.value.path == f"{route} payload"
        assert (info.value.field or "") == expected.field
        assert expected.needle in info.value.reason
        return
    parsed = deliver(route, how, body)
    assert parsed.reply is None
    got = [
        Expect(e.id, e.operation, e.provider, e.cluster, e.pool, e.actor, e.flags, e.outcome)
        for e in parsed.events
    ]
    assert got == expected
    for event in parsed.events:
        assert event.received_at == NOW
        json.dumps(event.to_json())  # storable as is


@pytest.mark.realdata
def test_autoscaling_sample_keeps_a_small_detail_without_the_lifecycle_token(realdata):
    event = one("aws", load("aws-autoscaling-event-lifecycle-action.json"))
    assert event.detail == {
        "detailType": "EC2 Instance-launch Lifecycle Action",
        "autoScalingGroup": "my-asg",
        "instanceId": "i-1234567890abcdef0",
        "lifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
        "lifecycleHook": "my-lifecycle-hook",
    }
    assert "87654321-4321-4321-4321-210987654321" not in json.dumps(event.to_json())
    assert event.region == "us-west-2" and event.account == "123456789012"
    assert event.subject == "my-asg"


@pytest.mark.realdata
def test_same_audit_entry_pushed_or_posted_by_eventarc_reads_the_same(realdata):
    entry = load("gcp-auditlog-LogEntryData-pubsubCreateTopic.json")
    pushed = one("gcp", push(entry))
    posted = one("cloudevents", entry, eventarc_audit_headers(entry))
    for attr in ("operation", "actor", "subject", "time", "account", "provider", "flags"):
        assert getattr(pushed, attr) == getattr(posted, attr), attr
    assert (
        pushed.subject == "pubsub.googleapis.com/projects/test-project/topics/test-auditlogs-source"
    )
    assert pushed.detail["methodName"] == "google.pubsub.v1.Publisher.CreateTopic"
    # the service-account key name is not an actor and is not kept
    assert "90f662482321f1ca8e82ea675b1a1c30c1fe681f" not in json.dumps(pushed.to_json())


@pytest.mark.realdata
def test_eventarc_binary_pubsub_body_reads_on_the_cloudevents_route(realdata):
    """The corpus' binary-mode Pub/Sub sample is the body Eventarc posts with ce-* headers."""
    headers = {
        "content-type": "application/json",
        "ce-specversion": "1.0",
        "ce-id": "3103425958877813",
        "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        "ce-source": "//pubsub.googleapis.com/projects/test-project/topics/my-topic",
        "ce-time": "2021-02-05T04:06:14.109Z",
    }
    event = one("cloudevents", load("gcp-cloudevent-binary-pubsub-complex.json"), headers)
    assert (event.id, event.provider, event.flags) == ("3103425958877813", GCP, (NC,))
    assert event.source == "//pubsub.googleapis.com/projects/test-project/topics/my-topic"


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name", ["gcp-cloudevent-structured-auditlog.json", "gcp-cloudevent-structured-pubsub.json"]
)
def test_structured_samples_are_valid_against_the_cloudevents_json_schema(realdata, name):
    validator = cloudevents_validator()
    validator.validate(load(name))


def cloudevents_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((REALDATA / "events" / "cloudevents-spec-json-schema.json").read_text())
    return jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )


# --- AWS: reference-built EKS CloudTrail events ---------------------------------------------

ALICE = "arn:aws:sts::111122223333:assumed-role/PlatformAdmin/alice"


def eks_call(
    name: str,
    params: dict[str, Any] | None,
    *,
    response: dict[str, Any] | None = None,
    error: tuple[str, str] | None = None,
    event_id: str = "a3c2b5e8-6f0e-4a57-9b36-2d8c7b1f0e11",
    source: str = "aws.eks",
) -> dict[str, Any]:
    """An EKS API call as EventBridge delivers it from CloudTrail.

    Envelope: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html
    and https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-cloudtrail.html
    (detail-type "AWS API Call via CloudTrail"); detail: the EKS CloudTrail entry of
    https://docs.aws.amazon.com/eks/latest/userguide/understanding-service-name-entries.html,
    requestParameters holding the URI parameters (name, nodegroupName) and the request body of
    https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html.
    """
    detail: dict[str, Any] = {
        "eventVersion": "1.08",
        "userIdentity": {
            "type": "AssumedRole",
            "principalId": "AROAEXAMPLEID:alice",
            "arn": ALICE,
            "accountId": "111122223333",
            "accessKeyId": "ASIAEXAMPLEKEYID1234",
            "sessionContext": {
                "sessionIssuer": {
                    "type": "Role",
                    "arn": "arn:aws:iam::111122223333:role/PlatformAdmin",
                    "userName": "PlatformAdmin",
                }
            },
        },
        "eventTime": "2024-05-01T11:59:58Z",
        "eventSource": "eks.amazonaws.com" if source == "aws.eks" else "autoscaling.amazonaws.com",
        "eventName": name,
        "awsRegion": "eu-west-1",
        "sourceIPAddress": "203.0.113.10",
        "userAgent": "aws-cli/2.15.30 Python/3.11.8 Linux/6.5.0",
        "requestParameters": params,
        "responseElements": response,
        "requestID": "0c9b5b3e-5f8c-4f39-9df5-7f5b6f7e2a01",
        "eventID": "b4e0d7c1-2a9e-4d6f-8c3b-1e2f3a4b5c6d",
        "readOnly": False,
        "eventType": "AwsApiCall",
        "managementEvent": True,
        "recipientAccountId": "111122223333",
    }
    if error:
        detail["errorCode"], detail["errorMessage"] = error
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "AWS API Call via CloudTrail",
        "source": source,
        "account": "111122223333",
        "time": "2024-05-01T11:59:58Z",
        "region": "eu-west-1",
        "resources": [],
        "detail": detail,
    }


SCALE_CALL = eks_call(
    "UpdateNodegroupConfig",
    {
        "name": "prod-eu",
        "nodegroupName": "general",
        "scalingConfig": {"minSize": 2, "maxSize": 10, "desiredSize": 6},
        "clientRequestToken": "7f6e5d4c-3b2a-1908-f7e6-d5c4b3a29180",
    },
    response={"update": {"id": "e1a3f5b7-0000-4c2d-9e8f-aaaabbbbcccc", "status": "InProgress"}},
)


def test_eks_scaling_change_names_cluster_pool_fields_and_actor():
    event = one("aws", SCALE_CALL)
    assert (event.operation, event.cluster, event.pool) == (Operation.SCALE, "prod-eu", "general")
    assert event.changed == (
        "scalingConfig.desiredSize",
        "scalingConfig.maxSize",
        "scalingConfig.minSize",
    )
    assert event.actor == ALICE
    assert (event.outcome, event.flags) == ("success", ())
    assert event.type == "aws.eks.UpdateNodegroupConfig"
    assert event.time == datetime(2024, 5, 1, 11, 59, 58, tzinfo=UTC)
    assert (event.region, event.account) == ("eu-west-1", "111122223333")
    assert event.detail["scalingConfig"] == {"minSize": 2, "maxSize": 10, "desiredSize": 6}
    assert event.detail["updateId"] == "e1a3f5b7-0000-4c2d-9e8f-aaaabbbbcccc"
    text = json.dumps(event.to_json())
    assert "7f6e5d4c-3b2a-1908" not in text  # the client request token is not kept
    assert "ASIAEXAMPLEKEYID1234" not in text and "203.0.113.10" not in text


def test_eks_label_and_taint_change_is_an_update_listing_them():
    event = one(
        "aws",
        eks_call(
            "UpdateNodegroupConfig",
            {
                "name": "prod-eu",
                "nodegroupName": "gpu",
                "labels": {"addOrUpdateLabels": {"team": "ml"}, "removeLabels": ["old"]},
                "taints": {
                    "addOrUpdateTaints": [{"key": "gpu", "value": "true", "effect": "NO_SCHEDULE"}]
                },
                "updateConfig": {"maxUnavailable": 1},
            },
        ),
    )
    assert event.operation is Operation.UPDATE
    assert event.changed == ("labels", "taints", "updateConfig.maxUnavailable")


@pytest.mark.parametrize(
    ("name", "params", "operation", "changed"),
    [
        (
            "CreateNodegroup",
            {
                "name": "prod-eu",
                "nodegroupName": "batch",
                "scalingConfig": {"minSize": 0, "maxSize": 5, "desiredSize": 1},
                "instanceTypes": ["m5.large"],
                "subnets": ["subnet-0a1b2c3d"],
                "nodeRole": "arn:aws:iam::111122223333:role/eks-node",
            },
            Operation.CREATE,
            (),
        ),
        (
            "UpdateNodegroupVersion",
            {
                "name": "prod-eu",
                "nodegroupName": "batch",
                "version": "1.29",
                "releaseVersion": "1.29.3-20240424",
            },
            Operation.UPGRADE,
            ("version", "releaseVersion"),
        ),
        ("DeleteNodegroup", {"name": "prod-eu", "nodegroupName": "batch"}, Operation.DELETE, ()),
    ],
)
def test_eks_nodegroup_lifecycle_calls(name, params, operation, changed):
    # request syntax: https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html,
    # .../API_UpdateNodegroupVersion.html, .../API_DeleteNodegroup.html
    event = one("aws", eks_call(name, params))
    assert (event.operation, event.cluster, event.pool) == (operation, "prod-eu", "batch")
    assert event.changed == changed
    assert event.actor == ALICE


def test_eks_call_that_failed_is_kept_and_flagged():
    event = one(
        "aws",
        eks_call(
            "DeleteNodegroup",
            {"name": "prod-eu", "nodegroupName": "batch"},
            error=("ResourceInUseException", "Nodegroup batch is currently being updated"),
        ),
    )
    assert event.flags == (EventFlag.FAILED,)
    assert event.outcome == "failure"
    assert event.detail["errorCode"] == "ResourceInUseException"


def test_eks_cluster_name_from_response_or_tagged_arn():
    created = one(
        "aws",
        eks_call(
            "CreateNodegroup",
            {"nodegroupName": "spot"},
            response={"nodegroup": {"clusterName": "prod-us", "nodegroupName": "spot"}},
        ),
    )
    assert (created.cluster, created.pool) == ("prod-us", "spot")
    tagged = one(
        "aws",
        eks_call(
            "TagResource",
            {
                "resourceArn": "arn:aws:eks:eu-west-1:111122223333:nodegroup/prod-eu/gpu/"
                "8ec7d2a1-1111-2222-3333-444455556666",
                "tags": {"owner": "ml"},
            },
        ),
    )
    assert (tagged.operation, tagged.cluster, tagged.pool) == (Operation.UPDATE, "prod-eu", "gpu")


def test_other_eks_calls_are_kept_as_other_or_without_cluster():
    listed = one("aws", eks_call("ListNodegroups", {"name": "prod-eu"}))
    assert (listed.operation, listed.cluster, listed.flags) == (Operation.OTHER, "prod-eu", ())
    unnamed = one("aws", eks_call("ListClusters", None))
    assert unnamed.flags == (EventFlag.NO_CLUSTER,)


# https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html (resources:
# the ARNs of the resources involved); AWS Health's EKS events name the cluster there
def _health(resources: list[str]) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "account": "123456789012",
        "time": "2023-01-26T01:43:21Z",
        "region": "us-west-2",
        "resources": resources,
        "detail": {
            "service": "EKS",
            "eventTypeCode": "AWS_EKS_PLANNED_LIFECYCLE_EVENT",
            "eventTypeCategory": "plannedChange",
        },
    }


def test_an_eventbridge_event_naming_an_eks_cluster_by_arn_is_about_that_cluster():
    """It was flagged no-cluster though its resources name the cluster."""
    event = one("aws", _health(["arn:aws:eks:us-west-2:123456789012:cluster/prod-eu-1"]))
    assert (event.operation, event.cluster, event.pool, event.flags) == (
        Operation.OTHER,
        "prod-eu-1",
        None,
        (),
    )
    assert event.detail["eventTypeCode"] == "AWS_EKS_PLANNED_LIFECYCLE_EVENT"
    ng = "arn:aws:eks:us-west-2:123456789012:nodegroup/prod-eu-1/gpu/8ec7d2a1-1111-2222-3333-4444"
    event = one("aws", _health(["arn:aws:ec2:us-west-2:123456789012:instance/i-1", ng]))
    assert (event.cluster, event.pool) == ("prod-eu-1", "gpu")
    assert one("aws", _health(["arn:aws:ec2:us-west-2:1:instance/i-1"])).flags == (
        EventFlag.NO_CLUSTER,
    )


_NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,30}", fullmatch=True)


@settings(max_examples=100)
@given(cluster=_NAME, pool=st.none() | _NAME, partition=st.sampled_from(["aws", "aws-cn"]))
def test_any_eks_arn_in_resources_names_its_cluster_and_pool(cluster, pool, partition):
    arn = f"arn:{partition}:eks:eu-west-1:111122223333:cluster/{cluster}"
    if pool is not None:
        arn = f"arn:{partition}:eks:eu-west-1:111122223333:nodegroup/{cluster}/{pool}/abc-1"
    event = one("aws", _health([arn]))
    assert (event.cluster, event.pool, event.flags) == (cluster, pool, ())


def test_eventbridge_via_sns_is_the_same_event_as_direct_delivery():
    direct = one("aws", SCALE_CALL)
    via_sns = one("aws", sns_notification(SCALE_CALL), {"x-amz-sns-message-type": "Notification"})
    assert via_sns == direct
    assert via_sns.key == direct.key  # a copy through both paths dedupes


def test_sns_raw_message_delivery_is_the_event_itself():
    assert one("aws", SCALE_CALL, {"x-amz-sns-message-type": "Notification"}) == one(
        "aws", SCALE_CALL
    )


def test_sns_notification_must_carry_an_eventbridge_event():
    hello = {**sns_notification(SCALE_CALL), "Message": "Hello from SNS!"}
    assert refused("aws", hello).field == "Message"
    alarm = {**sns_notification(SCALE_CALL), "Message": json.dumps({"AlarmName": "x"})}
    assert "EventBridge" in refused("aws", alarm).reason
    inner = json.loads(json.dumps(SCALE_CALL))
    inner["detail"]["eventName"] = 42
    error = refused("aws", sns_notification(inner))
    assert error.field == "Message.detail.eventName"


# An Auto Scaling group's own SNS notifications (not EventBridge): the Message holds the same
# fields as the EventBridge event's detail, plus Service and Event; lifecycle hooks send a
# LifecycleTransition. https://docs.aws.amazon.com/autoscaling/ec2/userguide/
# ec2-auto-scaling-sns-notifications.html, .../prepare-for-lifecycle-notifications.html
ASG_NOTIFICATIONS = {
    "autoscaling:EC2_INSTANCE_LAUNCH": "aws-autoscaling-event-launch-successful.json",
    "autoscaling:EC2_INSTANCE_LAUNCH_ERROR": "aws-autoscaling-event-launch-unsuccessful.json",
    "autoscaling:EC2_INSTANCE_TERMINATE": "aws-autoscaling-event-terminate-successful.json",
    "autoscaling:EC2_INSTANCE_LAUNCHING": "aws-autoscaling-event-lifecycle-action.json",
    "autoscaling:EC2_INSTANCE_TERMINATING": "aws-autoscaling-event-terminate-action.json",
}


def _asg_message(name: str, group: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the EventBridge sample, the group's own notification of the same event)."""
    bridge = load(ASG_NOTIFICATIONS[name])
    if group is not None:
        bridge["detail"]["AutoScalingGroupName"] = group
    message = {
        **bridge["detail"],
        "Service": "AWS Auto Scaling",
        "AccountId": "123456789012",
        "AutoScalingGroupARN": "arn:aws:autoscaling:us-west-2:123456789012:autoScalingGroup:"
        "042cba90:autoScalingGroupName/" + bridge["detail"]["AutoScalingGroupName"],
        "Time": "2016-09-30T20:00:00.000Z",
    }
    if "LifecycleTransition" not in message:
        message["Event"] = name
    return bridge, message


@pytest.mark.parametrize("name", sorted(ASG_NOTIFICATIONS))
def test_an_auto_scaling_groups_own_notification_is_its_eventbridge_event(name):
    """Refused with a 400 before: SNS retried, then dropped a real scaling event."""
    bridge, message = _asg_message(name, group="eks-general-20c0e6c4-fdc6-e1b6-2a7d-0e3c1e3a0f21")
    via_sns = one("aws", {**sns_notification(bridge), "Message": json.dumps(message)})
    direct = one("aws", bridge)
    for attr in ("type", "operation", "pool", "outcome", "flags", "subject", "source"):
        assert getattr(via_sns, attr) == getattr(direct, attr), attr
    assert via_sns.pool == "general"
    assert via_sns.id == "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324"  # SNS keeps it on a retry
    assert (via_sns.region, via_sns.account) == ("us-west-2", "123456789012")


def test_an_auto_scaling_test_notification_stores_nothing():
    test = {
        "AccountId": "123456789012",
        "RequestId": "4e6156f4-a9e2-11e3-b7d2-3f7a4bd1e0b5",
        "AutoScalingGroupARN": "arn:aws:autoscaling:us-west-2:123456789012:autoScalingGroup:x",
        "AutoScalingGroupName": "my-asg",
        "Service": "AWS Auto Scaling",
        "Event": "autoscaling:TEST_NOTIFICATION",
        "Time": "2016-09-30T19:00:36.414Z",
    }
    parsed = parse("aws", {**sns_notification({}), "Message": json.dumps(test)}, None)
    assert parsed.events == [] and parsed.reply is None


@settings(max_examples=60)
@given(event=st.text(min_size=1, max_size=40).filter(lambda t: t not in ASG_NOTIFICATIONS))
def test_an_unknown_auto_scaling_notification_is_refused_naming_it(event):
    assume(event != "autoscaling:TEST_NOTIFICATION" and event not in ("", "null"))
    message = {"Service": "AWS Auto Scaling", "Event": event, "AutoScalingGroupName": "g"}
    error = refused("aws", {**sns_notification({}), "Message": json.dumps(message)})
    assert (
        error.field == "Message.Event" and "unknown EC2 Auto Scaling notification" in error.reason
    )


# https://docs.aws.amazon.com/sns/latest/dg/http-subscription-confirmation-json.html
CONFIRMATION = {
    "Type": "SubscriptionConfirmation",
    "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
    "Token": "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3",
    "TopicArn": "arn:aws:sns:us-west-2:123456789012:MyTopic",
    "Message": "You have chosen to subscribe to the topic "
    "arn:aws:sns:us-west-2:123456789012:MyTopic.\nTo confirm the subscription, visit the "
    "SubscribeURL included in this message.",
    "SubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription"
    "&TopicArn=arn:aws:sns:us-west-2:123456789012:MyTopic&Token=2336412f37fb687f5d51e6e2",
    "Timestamp": "2012-04-26T20:45:04.751Z",
    "SignatureVersion": "1",
    "Signature": "EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjwu6A4VbeS0QHVCkhRS7fUQvi2e",
    "SigningCertURL": "https://sns.us-west-2.amazonaws.com/"
    "SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem",
}


def test_sns_subscription_confirmation_asks_the_caller_to_visit_the_checked_url():
    parsed = parse("aws", CONFIRMATION, {"x-amz-sns-message-type": "SubscriptionConfirmation"})
    assert parsed.events == []
    assert parsed.reply == Reply(
        kind="sns-subscribe", status=None, url=CONFIRMATION["SubscribeURL"]
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription",
        "https://sns.us-west-2.amazonaws.com.evil.example/?Action=ConfirmSubscription",
        "https://evil.example/?Action=ConfirmSubscription&h=sns.us-west-2.amazonaws.com",
        "https://user:pw@sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription",
        "https://sns.us-west-2.amazonaws.com:8443/?Action=ConfirmSubscription",
        "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription",  # not the topic's
        "https://sns.us-west-2.amazonaws.com/?Action=Publish",
        "https://[::1/?Action=ConfirmSubscription",
        "file:///etc/passwd",
    ],
)
def test_sns_subscribe_url_elsewhere_than_sns_is_refused(url):
    error = refused("aws", {**CONFIRMATION, "SubscribeURL": url})
    assert error.field == "SubscribeURL"


def test_sns_unsubscribe_confirmation_is_acknowledged_and_stores_nothing():
    body = {**CONFIRMATION, "Type": "UnsubscribeConfirmation"}
    assert parse("aws", body) == Parsed([])


def test_sns_type_header_and_body_must_agree():
    error = refused("aws", CONFIRMATION, {"x-amz-sns-message-type": "Notification"})
    assert error.field == "Type"
    assert refused("aws", {**CONFIRMATION, "Type": "Subscribe"}).field == "Type"


def autoscaling(detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    """Shaped as the corpus' aws-lambda-go autoscaling samples."""
    return {
        "version": "0",
        "id": "0e6c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
        "detail-type": detail_type,
        "source": "aws.autoscaling",
        "account": "111122223333",
        "time": "2024-05-01T11:58:00Z",
        "region": "eu-west-1",
        "resources": ["arn:aws:autoscaling:eu-west-1:111122223333:autoScalingGroup:x"],
        "detail": detail,
    }


@pytest.mark.parametrize(
    ("detail", "cluster", "pool"),
    [
        # EKS managed node groups: eks-<nodegroup>-<uuid>
        ({"AutoScalingGroupName": "eks-general-4cc4b1e4-7d2a-1f3e-5b6c-9d8e7f6a5b4c"}, None,
         "general"),
        ({"AutoScalingGroupName": "eks-ng-gpu-a100-4cc4b1e4-7d2a-1f3e-5b6c-9d8e7f6a5b4c"}, None,
         "ng-gpu-a100"),
        # tags name both, whatever the group is called
        ({"AutoScalingGroupName": "custom-asg", "Tags": [
            {"Key": "eks:cluster-name", "Value": "prod-eu"},
            {"Key": "eks:nodegroup-name", "Value": "general"}]}, "prod-eu", "general"),
        ({"AutoScalingGroupName": "custom-asg",
          "Tags": {"kubernetes.io/cluster/prod-us": "owned"}}, "prod-us", None),
        ({"AutoScalingGroupName": "custom-asg", "Tags": {
            "k8s.io/cluster-autoscaler/enabled": "true",
            "k8s.io/cluster-autoscaler/prod-ap": "owned"}}, "prod-ap", None),
        # eksctl self-managed groups name cluster and pool
        ({"AutoScalingGroupName": "eksctl-prod-eu-nodegroup-ng-1-NodeGroup-1ABCDEF23GHIJ"},
         "prod-eu", "ng-1"),
        ({"AutoScalingGroupName": "my-auto-scaling-group"}, None, None),
    ],
)  # fmt: skip
def test_autoscaling_group_names_and_tags_give_cluster_and_pool(detail, cluster, pool):
    # EKS runs each managed node group as an Auto Scaling group it creates and tags
    # (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html; the tag keys
    # eks:cluster-name / eks:nodegroup-name appear in the node-group service-linked role policy:
    # https://docs.aws.amazon.com/eks/latest/userguide/using-service-linked-roles-eks-nodegroups.html
    # )
    # the group is named eks-<nodegroup>-<uuid>. Cluster Autoscaler discovery tags:
    # https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md
    event = one("aws", autoscaling("EC2 Instance Launch Successful", detail))
    assert (event.operation, event.cluster, event.pool) == (Operation.SCALE, cluster, pool)
    assert (EventFlag.NO_CLUSTER in event.flags) == (cluster is None)


def test_autoscaling_api_call_through_cloudtrail_is_a_scale_of_the_group_pool():
    # https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_SetDesiredCapacity.html
    body = eks_call(
        "SetDesiredCapacity",
        {
            "autoScalingGroupName": "eks-general-4cc4b1e4-7d2a-1f3e-5b6c-9d8e7f6a5b4c",
            "desiredCapacity": 9,
            "honorCooldown": False,
        },
        source="aws.autoscaling",
    )
    event = one("aws", body)
    assert (event.operation, event.pool, event.actor) == (Operation.SCALE, "general", ALICE)
    assert event.changed == ("desiredCapacity",)
    assert event.detail["desiredCapacity"] == 9
    update = eks_call(
        "UpdateAutoScalingGroup",
        {"autoScalingGroupName": "custom", "launchTemplate": {"version": "7"}},
        source="aws.autoscaling",
    )
    assert one("aws", update).operation is Operation.UPDATE


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], None),
        ("text", None),
        ({}, "detail-type"),
        ({**SCALE_CALL, "id": 7}, "id"),
        ({**SCALE_CALL, "id": ""}, "id"),
        ({**SCALE_CALL, "source": None}, "source"),
        ({**SCALE_CALL, "detail": []}, "detail"),
        ({**SCALE_CALL, "time": "yesterday"}, "time"),
        ({**SCALE_CALL, "resources": "arn"}, "resources"),
        ({**SCALE_CALL, "resources": [1]}, "resources[0]"),
        ({**SCALE_CALL, "region": ["eu"]}, "region"),
        ({**SCALE_CALL, "detail": {**SCALE_CALL["detail"], "eventName": None}}, "detail.eventName"),
        ({**SCALE_CALL, "detail": {**SCALE_CALL["detail"], "requestParameters": [1]}},
         "detail.requestParameters"),
        ({**SCALE_CALL, "detail": {**SCALE_CALL["detail"], "requestParameters": {
            "name": "c", "nodegroupName": 3}}}, "detail.requestParameters.nodegroupName"),
        ({**SCALE_CALL, "detail": {**SCALE_CALL["detail"], "requestParameters": {
            "name": "c", "scalingConfig": {"desiredSize": "6"}}}},
         "detail.requestParameters.scalingConfig.desiredSize"),
        ({**SCALE_CALL, "detail": {**SCALE_CALL["detail"], "eventTime": "noon"}},
         "detail.eventTime"),
        (autoscaling("EC2 Instance Launch Successful", {"AutoScalingGroupName": 1}),
         "detail.AutoScalingGroupName"),
        (autoscaling("EC2 Instance Launch Successful", {"Tags": [{"Key": "a", "Value": 2}]}),
         "detail.Tags[0].Value"),
        (autoscaling("EC2 Instance Launch Successful", {"Tags": ["eks:cluster-name"]}),
         "detail.Tags[0]"),
        (eks_call("CreateNodegroup", {"nodegroupName": "p"},
                  response={"nodegroup": {"clusterName": 1}}),
         "detail.responseElements.nodegroup.clusterName"),
        (eks_call("CreateNodegroup", {"name": "c"}, response={"nodegroup": []}),
         "detail.responseElements.nodegroup"),
        (eks_call("UpdateNodegroupConfig", {"name": "c"}, response={"update": {"id": 4}}),
         "detail.responseElements.update.id"),
        (eks_call("UpdateNodegroupConfig", {"name": "c", "scalingConfig": [6]}),
         "detail.requestParameters.scalingConfig"),
        (eks_call("UpdateNodegroupVersion", {"name": "c", "version": 1.31}),
         "detail.requestParameters.version"),
        (eks_call("TagResource", {"resourceArn": False}), "detail.requestParameters.resourceArn"),
        (eks_call("UpdateAutoScalingGroup", {"autoScalingGroupName": "g", "minSize": "1"},
                  source="aws.autoscaling"), "detail.requestParameters.minSize"),
        (sns_notification({**SCALE_CALL, "detail": {**SCALE_CALL["detail"], "requestParameters": {
            "name": "c", "scalingConfig": {"maxSize": True}}}}),
         "Message.detail.requestParameters.scalingConfig.maxSize"),
        (sns_notification({**SCALE_CALL, "resources": ["a", None, 2]}), "Message.resources[2]"),
        ({"Type": "Notification"}, "Message"),
        ({"Type": 3}, "Type"),
        ({**CONFIRMATION, "SubscribeURL": None}, "SubscribeURL"),
    ],
)  # fmt: skip
def test_aws_wrong_shapes_name_the_field(body, field):
    assert refused("aws", body).field == field


# --- Azure ---------------------------------------------------------------------------------

SUB = "7f2c1d3e-0a1b-4c2d-8e9f-0a1b2c3d4e5f"
POOL_URI = (
    f"/subscriptions/{SUB}/resourcegroups/rg-aks/providers/Microsoft.ContainerService/"
    "managedClusters/aks-prod/agentPools/nodepool1"
)


def arm_event(
    event_type: str = "Microsoft.Resources.ResourceWriteSuccess",
    *,
    operation: str = "Microsoft.ContainerService/managedClusters/agentPools/write",
    uri: str = POOL_URI,
    claims: dict[str, str] | None = None,
    event_id: str = "4f7a1c2e-9b8d-4e6f-a1b2-c3d4e5f6a7b8",
) -> dict[str, Any]:
    """A resource event from a subscription topic, Event Grid schema.

    Schema: https://learn.microsoft.com/en-us/azure/event-grid/event-schema-resource-groups
    (data: authorization, claims, correlationId, httpRequest, resourceProvider, resourceUri,
    operationName, status, subscriptionId, tenantId); AKS agent pool resource ids:
    https://learn.microsoft.com/en-us/rest/api/aks/agent-pools/create-or-update
    """
    return {
        "subject": uri,
        "eventType": event_type,
        "eventTime": "2024-05-01T11:59:57.1234567Z",
        "id": event_id,
        "data": {
            "authorization": {
                "scope": uri,
                "action": operation,
                "evidence": {"role": "Contributor", "principalType": "User"},
            },
            "claims": claims
            if claims is not None
            else {
                "aud": "https://management.core.windows.net/",
                "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn": "alice@contoso.com",
                "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name": "alice@contoso.com",
                "name": "Alice Example",
                "appid": "04b07795-8ddb-461a-bbee-02f9e1bf7b46",
                "ipaddr": "203.0.113.20",
            },
            "correlationId": "d2f4b6a8-1c3e-4f5a-9b7d-0e2c4a6b8d1f",
            "httpRequest": {
                "clientRequestId": "e3a5c7b9-2d4f-4a6c-8e0b-1f3d5b7a9c2e",
                "clientIpAddress": "203.0.113.20",
                "method": "PUT",
                "url": f"https://management.azure.com{uri}?api-version=2024-02-01",
            },
            "resourceProvider": "Microsoft.ContainerService",
            "resourceUri": uri,
            "operationName": operation,
            "status": "Succeeded",
            "subscriptionId": SUB,
            "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
        },
        "dataVersion": "2",
        "metadataVersion": "1",
        "topic": f"/subscriptions/{SUB}",
    }


def as_cloudevent(event: dict[str, Any]) -> dict[str, Any]:
    """The same event in Event Grid's CloudEvents 1.0 schema (source = topic).
    https://learn.microsoft.com/en-us/azure/event-grid/cloud-event-schema"""
    return {
        "specversion": "1.0",
        "id": event["id"],
        "source": event["topic"],
        "type": event["eventType"],
        "subject": event["subject"],
        "time": event["eventTime"],
        "datacontenttype": "application/json",
        "data": event["data"],
    }


def test_aks_agent_pool_write_names_cluster_pool_and_upn_actor():
    event = one("azure", [arm_event()], {"aeg-event-type": "Notification"})
    assert (event.operation, event.cluster, event.pool) == (
        Operation.UPDATE,
        "aks-prod",
        "nodepool1",
    )
    assert event.actor == "alice@contoso.com"
    assert (event.outcome, event.flags, event.account) == ("success", (), SUB)
    assert event.source == f"/subscriptions/{SUB}"
    assert event.detail["operationName"].endswith("agentPools/write")
    text = json.dumps(event.to_json())
    assert "203.0.113.20" not in text and "e3a5c7b9" not in text  # request details not kept


def test_azure_cloudevents_schema_single_and_batch_read_like_the_event_grid_schema():
    grid = one("azure", [arm_event()])
    single = one(
        "azure", as_cloudevent(arm_event()), {"content-type": "application/cloudevents+json"}
    )
    batch = parse("azure", [as_cloudevent(arm_event()), as_cloudevent(arm_event(event_id="2"))])
    assert single == grid
    assert [e.id for e in batch.events] == [grid.id, "2"]
    cloudevents_validator().validate(as_cloudevent(arm_event()))


@pytest.mark.parametrize(
    ("claims", "actor"),
    [
        ({"name": "Bob", "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name": "bob@x.io"},
         "bob@x.io"),
        ({"appid": "11111111-2222-3333-4444-555555555555"},
         "appid:11111111-2222-3333-4444-555555555555"),
        ({}, None),
    ],
)  # fmt: skip
def test_azure_actor_falls_back_to_name_then_app_id(claims, actor):
    event = one("azure", [arm_event("Microsoft.Resources.ResourceDeleteSuccess", claims=claims)])
    assert event.operation is Operation.DELETE
    assert event.actor == actor


def test_azure_claims_given_as_json_text_are_read():
    body = arm_event(claims={})
    body["data"]["claims"] = json.dumps({"upn": "carol@contoso.com"})
    assert one("azure", [body]).actor == "carol@contoso.com"


def test_azure_caller_is_the_last_fallback():
    body = arm_event(claims={})
    body["data"]["caller"] = "dave@contoso.com"
    assert one("azure", [body]).actor == "dave@contoso.com"


def test_aks_node_image_upgrade_action_and_failed_write():
    upgrade = one(
        "azure",
        [
            arm_event(
                "Microsoft.Resources.ResourceActionSuccess",
                operation="Microsoft.ContainerService/managedClusters/agentPools/"
                "upgradeNodeImageVersion/action",
            )
        ],
    )
    assert (upgrade.operation, upgrade.pool) == (Operation.UPGRADE, "nodepool1")
    failed = one("azure", [arm_event("Microsoft.Resources.ResourceWriteFailure")])
    assert (failed.flags, failed.outcome) == ((EventFlag.FAILED,), "failure")
    cluster = one(
        "azure",
        [arm_event(uri=POOL_URI.rsplit("/agentPools/", 1)[0],
                   operation="Microsoft.ContainerService/managedClusters/write")],
    )  # fmt: skip
    assert (cluster.cluster, cluster.pool) == ("aks-prod", None)


def test_aks_node_pool_rolling_events_are_upgrades_of_the_named_pool():
    # https://learn.microsoft.com/en-us/azure/event-grid/event-schema-aks
    # data: ContainerServiceNodePoolRolling*EventData {nodePoolName}; topic: the cluster
    cluster_id = POOL_URI.rsplit("/agentPools/", 1)[0]
    body = [
        {
            "topic": cluster_id,
            "subject": "aks-prod",
            "eventType": "Microsoft.ContainerService.NodePoolRollingFailed",
            "id": "0d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a",
            "data": {"nodePoolName": "nodepool1"},
            "eventTime": "2024-05-01T11:50:00Z",
            "dataVersion": "1",
            "metadataVersion": "1",
        }
    ]
    event = one("azure", body)
    assert (event.operation, event.cluster, event.pool) == (
        Operation.UPGRADE,
        "aks-prod",
        "nodepool1",
    )
    assert event.flags == (EventFlag.FAILED,)


AKS_CLUSTER = POOL_URI.rsplit("/agentPools/", 1)[0]
# data of each AKS event, as https://learn.microsoft.com/en-us/azure/event-grid/event-schema-aks
# shows it (the TypeSpec: Azure/azure-rest-api-specs, specification/eventgrid/data-plane/
# EventGridSystemEvents/Microsoft.ContainerService/ContainerService.tsp)
AKS_DATA = {
    "NewKubernetesVersionAvailable": {
        "latestSupportedKubernetesVersion": "1.20.7",
        "latestStableKubernetesVersion": "1.19.11",
        "lowestMinorKubernetesVersion": "1.18.19",
        "latestPreviewKubernetesVersion": "1.21.1",
    },
    "ClusterSupportEnded": {"kubernetesVersion": "1.23.15"},
    "ClusterSupportEnding": {"kubernetesVersion": "1.24.10"},
    "NodePoolRollingStarted": {"nodePoolName": "nodepool1"},
    "NodePoolRollingSucceeded": {"nodePoolName": "nodepool1"},
    "NodePoolRollingFailed": {"nodePoolName": "nodepool1"},
}


def aks_event(name: str, data: Any) -> dict[str, Any]:
    return {
        "topic": AKS_CLUSTER,
        "subject": "aks-prod",
        "eventType": f"Microsoft.ContainerService.{name}",
        "id": "1234567890abcdef1234567890abcdef12345678",
        "data": data,
        "dataVersion": "1",
        "metadataVersion": "1",
        "eventTime": "2021-07-01T04:52:57.0000000Z",
    }


@pytest.mark.parametrize("name", sorted(AKS_DATA))
@pytest.mark.parametrize("schema", ["eventgrid", "cloudevents"])
def test_aks_event_data_the_schema_defines_is_kept_in_the_detail(name, schema):
    """The versions of NewKubernetesVersionAvailable / ClusterSupport*, the pool of
    NodePoolRolling*: kept in the stored detail, on both delivery schemas."""
    body = aks_event(name, {**AKS_DATA[name], "notInTheSchema": "dropped"})
    event = one("azure", [body] if schema == "eventgrid" else as_cloudevent(body))
    assert event.cluster == "aks-prod"
    for key, value in AKS_DATA[name].items():
        assert event.detail[key] == value
    assert "notInTheSchema" not in event.detail
    assert json.loads(json.dumps(event.to_json()))["detail"] == event.detail


def test_aks_preview_version_is_optional():
    data = {
        k: v for k, v in AKS_DATA["NewKubernetesVersionAvailable"].items() if "Preview" not in k
    }
    event = one("azure", [aks_event("NewKubernetesVersionAvailable", data)])
    assert "latestPreviewKubernetesVersion" not in event.detail
    assert event.detail["latestStableKubernetesVersion"] == "1.19.11"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(AKS_DATA)),
    bad=st.one_of(
        st.integers(), st.floats(allow_nan=False), st.booleans(),
        st.lists(st.text(max_size=3), min_size=1, max_size=2),
        st.dictionaries(st.text(max_size=3), st.text(max_size=3), min_size=1, max_size=2),
    ),
    data=st.data(),
)  # fmt: skip
def test_aks_event_data_of_the_wrong_type_is_refused_naming_the_field(name, bad, data):
    key = data.draw(st.sampled_from(sorted(AKS_DATA[name])))
    body = aks_event(name, {**AKS_DATA[name], key: bad})
    for delivered in ([body], as_cloudevent(body)):
        error = refused("azure", delivered)
        assert error.field is not None and error.field.endswith(f"data.{key}")
        assert "expected a string" in error.reason


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(sorted(AKS_DATA)),
    values=st.dictionaries(
        st.sampled_from(sorted({k for d in AKS_DATA.values() for k in d})),
        st.none() | st.text(max_size=30),
    ),
)
def test_any_aks_event_with_string_data_keeps_exactly_the_schema_fields(name, values):
    event = one("azure", [aks_event(name, values)])
    kept = {k for k in event.detail if k in {f for d in AKS_DATA.values() for f in d}}
    assert kept <= set(AKS_DATA[name])
    for key in kept:
        assert isinstance(event.detail[key], str) and event.detail[key] == values[key][:80]


# https://learn.microsoft.com/en-us/azure/event-grid/webhook-event-delivery
VALIDATION = [
    {
        "id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66",
        "topic": "/subscriptions/xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
        "subject": "",
        "data": {
            "validationCode": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6",
            "validationUrl": "https://rp-eastus2.eventgrid.azure.net:553/eventsubscriptions/"
            "myeventsub/validate?id=0000000000-0000-0000-0000-00000000000000"
            "&t=2022-10-28T04:23:35.1981776Z&apiVersion=2018-05-01-preview&token=1A1A1A1A",
        },
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
        "eventTime": "2022-10-28T04:23:35.1981776Z",
        "metadataVersion": "1",
        "dataVersion": "1",
    }
]


def test_event_grid_validation_echoes_the_code_and_stores_nothing():
    parsed = parse("azure", VALIDATION, {"aeg-event-type": "SubscriptionValidation"})
    assert parsed.events == []
    assert parsed.reply == Reply(
        kind="eventgrid-validation",
        status=200,
        body={"validationResponse": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"},
    )


def test_validation_header_without_a_validation_event_is_refused():
    error = refused("azure", [arm_event()], {"aeg-event-type": "SubscriptionValidation"})
    assert "SubscriptionValidation" in error.reason


def test_cloudevents_options_handshake_echoes_the_origin():
    # https://learn.microsoft.com/en-us/azure/event-grid/end-point-validation-cloud-events-schema
    reply = options_reply(
        {"webhook-request-origin": "eventgrid.azure.net", "webhook-request-rate": "120"}
    )
    assert reply.kind == "webhook-allowed-origin" and reply.status == 200
    assert reply.headers["WebHook-Allowed-Origin"] == "eventgrid.azure.net"
    assert reply.headers["WebHook-Allowed-Rate"] == "*"
    with pytest.raises(FormatError, match="WebHook-Request-Origin"):
        options_reply({})
    with pytest.raises(FormatError, match="not allowed"):
        options_reply(
            {"webhook-request-origin": "evil.example"}, allowed_origins=("eventgrid.azure.net",)
        )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (7, None),
        ([], None),
        ([5], "[0]"),
        ([{"id": "x"}], "[0].eventType"),
        ([{**arm_event(), "id": None}], "[0].id"),
        ([{**arm_event(), "eventType": 1}], "[0].eventType"),
        ([{**arm_event(), "eventTime": "soon"}], "[0].eventTime"),
        ([{**arm_event(), "topic": {}}], "[0].topic"),
        ([{**arm_event(), "data": {**arm_event()["data"], "resourceUri": 9}}],
         "[0].data.resourceUri"),
        ([{**VALIDATION[0], "data": {"validationCode": 12}}], "[0].data.validationCode"),
        ([{**VALIDATION[0], "data": None}], "[0].data"),
        ({**as_cloudevent(arm_event()), "specversion": "0.3"}, "specversion"),
        ([as_cloudevent(arm_event()), {**as_cloudevent(arm_event()), "source": ""}],
         "[1].source"),
    ],
)  # fmt: skip
def test_azure_wrong_shapes_name_the_field(body, field):
    assert refused("azure", body).field == field


# --- GCP -----------------------------------------------------------------------------------

GKE_POOL = "projects/acme-prod/locations/europe-west1/clusters/gke-prod/nodePools/general"


def gke_audit(
    method: str,
    request: dict[str, Any],
    *,
    resource_name: str = GKE_POOL,
    status: dict[str, Any] | None = None,
    operation: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An Admin Activity audit LogEntry for a GKE method.

    LogEntry/AuditLog structure:
    https://cloud.google.com/logging/docs/audit/understanding-audit-logs and
    https://cloud.google.com/logging/docs/reference/audit/auditlog/rest/Shared.Types/AuditLog;
    service container.googleapis.com and the ClusterManager method names (v1, v1beta1, LRO
    entries first/last):
    https://cloud.google.com/kubernetes-engine/docs/how-to/audit-logging-container;
    request bodies:
    https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools
    """
    return {
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "status": status or {},
            "authenticationInfo": {"principalEmail": "alice@example.com"},
            "requestMetadata": {
                "callerIp": "203.0.113.7",
                "callerSuppliedUserAgent": "google-cloud-sdk gcloud/470.0.0 command/"
                "gcloud.container.node-pools.resize",
            },
            "serviceName": "container.googleapis.com",
            "methodName": method,
            "authorizationInfo": [
                {"permission": "container.clusters.update", "granted": True,
                 "resourceAttributes": {}}
            ],
            "resourceName": resource_name,
            "request": request,
            "response": {
                "@type": "type.googleapis.com/google.container.v1.Operation",
                "name": "operation-1714564790123-4f1c2a3b",
                "status": "RUNNING",
            },
            "resourceLocation": {"currentLocations": ["europe-west1"]},
        },
        "insertId": "1x2y3z4w5v6u",
        "resource": {
            "type": "gke_nodepool",
            "labels": labels
            if labels is not None
            else {
                "project_id": "acme-prod",
                "location": "europe-west1",
                "cluster_name": "gke-prod",
                "nodepool_name": "general",
            },
        },
        "timestamp": "2024-05-01T11:59:50.123456Z",
        "severity": "NOTICE",
        "logName": "projects/acme-prod/logs/cloudaudit.googleapis.com%2Factivity",
        "operation": operation
        or {"id": "operation-1714564790123-4f1c2a3b", "producer": "container.googleapis.com",
            "first": True, "last": True},
        "receiveTimestamp": "2024-05-01T11:59:51.000000Z",
    }  # fmt: skip


RESIZE = gke_audit(
    "google.container.v1.ClusterManager.SetNodePoolSize",
    {
        "@type": "type.googleapis.com/google.container.v1.SetNodePoolSizeRequest",
        "name": GKE_POOL,
        "nodeCount": 5,
    },
)


def test_gke_node_pool_resize_names_cluster_pool_count_and_principal():
    event = one("gcp", push(RESIZE))
    assert (event.operation, event.cluster, event.pool) == (Operation.SCALE, "gke-prod", "general")
    assert event.actor == "alice@example.com"
    assert event.changed == ("nodeCount",)
    assert (event.region, event.account, event.outcome) == ("europe-west1", "acme-prod", "success")
    assert event.detail["nodeCount"] == 5
    assert event.id == "9876543210"
    assert event.source == "//pubsub.googleapis.com/projects/acme-prod/subscriptions/fleetwarden"
    assert event.time == datetime(2024, 5, 1, 11, 59, 50, 123456, tzinfo=UTC)
    assert "203.0.113.7" not in json.dumps(event.to_json())


@pytest.mark.parametrize(
    ("method", "request_", "resource_name", "labels", "operation", "pool", "changed"),
    [
        ("google.container.v1.ClusterManager.SetNodePoolAutoscaling",
         {"name": GKE_POOL, "autoscaling": {"enabled": True, "minNodeCount": 1,
                                            "maxNodeCount": 8}},
         GKE_POOL, None, Operation.SCALE, "general",
         ("autoscaling.enabled", "autoscaling.maxNodeCount", "autoscaling.minNodeCount")),
        ("google.container.v1.ClusterManager.SetNodePoolManagement",
         {"name": GKE_POOL, "management": {"autoUpgrade": False, "autoRepair": True}},
         GKE_POOL, None, Operation.UPDATE, "general",
         ("management.autoRepair", "management.autoUpgrade")),
        ("google.container.v1.ClusterManager.UpdateNodePool",
         {"name": GKE_POOL, "nodeVersion": "1.29.4-gke.1043002", "imageType": "COS_CONTAINERD"},
         GKE_POOL, None, Operation.UPGRADE, "general", ("imageType", "nodeVersion")),
        # v1beta1 and the older zones/ resource names
        ("google.container.v1beta1.ClusterManager.UpdateNodePool",
         {"projectId": "acme-prod", "zone": "europe-west1-b", "clusterId": "gke-old",
          "nodePoolId": "np-1", "labels": {"labels": {"team": "web"}},
          "taints": {"taints": [{"key": "k", "value": "v", "effect": "NO_SCHEDULE"}]}},
         "projects/acme-prod/zones/europe-west1-b/clusters/gke-old/nodePools/np-1", {},
         Operation.UPDATE, "np-1", ("labels", "taints")),
        # a creation names the cluster as the resource and the pool in the request
        ("google.container.v1.ClusterManager.CreateNodePool",
         {"parent": "projects/acme-prod/locations/europe-west1/clusters/gke-prod",
          "nodePool": {"name": "batch", "initialNodeCount": 1,
                       "config": {"machineType": "e2-standard-4"}}},
         "projects/acme-prod/locations/europe-west1/clusters/gke-prod", {},
         Operation.CREATE, "batch", ()),
        ("google.container.v1.ClusterManager.DeleteNodePool", {"name": GKE_POOL}, GKE_POOL,
         None, Operation.DELETE, "general", ()),
        ("google.container.v1.ClusterManager.RollbackNodePoolUpgrade", {"name": GKE_POOL},
         GKE_POOL, None, Operation.UPGRADE, "general", ()),
    ],
)  # fmt: skip
def test_gke_node_pool_methods(method, request_, resource_name, labels, operation, pool, changed):
    entry = gke_audit(method, request_, resource_name=resource_name, labels=labels)
    event = one("gcp", push(entry))
    assert (event.operation, event.pool, event.changed) == (operation, pool, changed)
    assert event.cluster in ("gke-prod", "gke-old")
    assert event.actor == "alice@example.com"


def test_gke_long_running_operation_start_has_no_outcome_and_failure_is_flagged():
    started = gke_audit(
        "google.container.v1.ClusterManager.DeleteNodePool",
        {"name": GKE_POOL},
        operation={"id": "op-1", "producer": "container.googleapis.com", "first": True},
    )
    assert one("gcp", push(started)).outcome is None
    denied = gke_audit(
        "google.container.v1.ClusterManager.SetNodePoolSize",
        {"name": GKE_POOL, "nodeCount": 50},
        status={"code": 7, "message": "Required 'container.clusters.update' permission"},
    )
    event = one("gcp", push(denied))
    assert (event.flags, event.outcome) == ((EventFlag.FAILED,), "failure")
    assert event.detail["statusCode"] == 7


def test_gke_audit_entry_through_eventarc_binary_mode_reads_the_same():
    pushed = one("gcp", push(RESIZE))
    posted = one("cloudevents", RESIZE, eventarc_audit_headers(RESIZE, "ev-9"))
    assert posted.id == "ev-9"
    assert posted.source == "//cloudaudit.googleapis.com/projects/acme-prod/logs/activity"
    for attr in ("operation", "cluster", "pool", "actor", "changed", "time", "flags"):
        assert getattr(posted, attr) == getattr(pushed, attr), attr


# https://cloud.google.com/kubernetes-engine/docs/tutorials/cluster-notifications-slack and
# https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-notifications (attributes
# cluster_location, cluster_name, project_id, type_url, payload; data a sentence); payload:
# https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1beta1/UpgradeEvent
UPGRADE_NOTICE = {
    "cluster_location": "us-central1-c",
    "cluster_name": "cluster-1",
    "payload": json.dumps(
        {
            "resourceType": "NODE_POOL",
            "operation": "operation-upgrade",
            "operationStartTime": "2024-05-07T20:09:35.528855756Z",
            "currentVersion": "1.28.7-gke.1026000",
            "targetVersion": "1.29.1-gke.1589017",
            "resource": "projects/my-project/locations/us-central1-c/clusters/cluster-1/"
            "nodePools/default-pool",
        }
    ),
    "project_id": "my-project",
    "type_url": "type.googleapis.com/google.container.v1beta1.UpgradeEvent",
}


def test_gke_upgrade_notification_is_an_upgrade_of_the_pool():
    sentence = (
        b"Node pool projects/my-project/locations/us-central1-c/clusters/cluster-1/nodePools/"
        b"default-pool is upgrading to version 1.29.1-gke.1589017."
    )
    event = one("gcp", push(sentence, attributes=UPGRADE_NOTICE))
    assert (event.operation, event.cluster, event.pool) == (
        Operation.UPGRADE,
        "cluster-1",
        "default-pool",
    )
    assert (event.region, event.account) == ("us-central1-c", "my-project")
    assert event.type == "google.container.v1beta1.UpgradeEvent"
    assert event.detail["targetVersion"] == "1.29.1-gke.1589017"
    assert event.detail["message"].startswith("Node pool projects/my-project")
    assert event.time == datetime(2024, 5, 7, 20, 9, 35, 528855, tzinfo=UTC)


def test_gke_master_upgrade_and_available_notices_concern_the_cluster():
    master = {
        **UPGRADE_NOTICE,
        "payload": json.dumps(
            {
                "resourceType": "MASTER",
                "operation": "operation-1662536672793-9f8f675f",
                "operationStartTime": "2022-09-07T07:44:32.793341429Z",
                "currentVersion": "1.23.7-gke.1400",
                "targetVersion": "1.23.8-gke.1900",
            }
        ),
    }
    event = one("gcp", push(b"Master is upgrading to version 1.23.8-gke.1900.", attributes=master))
    assert (event.operation, event.cluster, event.pool) == (Operation.UPGRADE, "cluster-1", None)
    available = {
        **UPGRADE_NOTICE,
        "type_url": "type.googleapis.com/google.container.v1beta1.UpgradeAvailableEvent",
        "payload": json.dumps({"version": "1.29.2-gke.1060000", "resourceType": "MASTER"}),
    }
    event = one("gcp", push(b"New version available", attributes=available))
    assert (event.operation, event.cluster) == (Operation.OTHER, "cluster-1")


# UpgradeInfoEvent (google/container/v1/cluster_service.proto): state, startTime, eventType
# END_OF_SUPPORT | COS_MILESTONE_VERSION_UPDATE | UPGRADE_LIFECYCLE | DISRUPTION_EVENT
def _upgrade_info(**payload: Any) -> dict[str, str]:
    body = {
        "resourceType": "NODE_POOL",
        "currentVersion": "1.28.7-gke.1026000",
        "resource": "projects/my-project/locations/us-central1-c/clusters/cluster-1/"
        "nodePools/default-pool",
        **payload,
    }
    return {
        **UPGRADE_NOTICE,
        "type_url": "type.googleapis.com/google.container.v1beta1.UpgradeInfoEvent",
        "payload": json.dumps(body),
    }


def test_gke_end_of_support_notice_is_not_an_upgrade():
    """An END_OF_SUPPORT UpgradeInfoEvent announces a date: it was read as an UPGRADE of the
    pool (and would be taken for the provider changing it)."""
    attrs = _upgrade_info(
        eventType="END_OF_SUPPORT",
        standardSupportEndTime="2024-08-01T00:00:00Z",
        description="Version 1.28 reaches end of standard support on 2024-08-01",
    )
    event = one("gcp", push(b"Version 1.28 reaches end of support.", attributes=attrs))
    assert (event.operation, event.cluster, event.pool) == (
        Operation.OTHER,
        "cluster-1",
        "default-pool",
    )
    assert event.changed == ()
    assert event.detail["eventType"] == "END_OF_SUPPORT"
    assert event.detail["description"].startswith("Version 1.28 reaches end")


def test_gke_upgrade_lifecycle_info_is_an_upgrade_with_its_outcome_and_start():
    attrs = _upgrade_info(
        eventType="UPGRADE_LIFECYCLE",
        state="SUCCEEDED",
        startTime="2024-05-07T20:09:35Z",
        targetVersion="1.29.1-gke.1589017",
    )
    event = one("gcp", push(b"Node pool upgrade succeeded.", attributes=attrs))
    assert (event.operation, event.pool, event.outcome) == (
        Operation.UPGRADE,
        "default-pool",
        "success",
    )
    assert event.time == datetime(2024, 5, 7, 20, 9, 35, tzinfo=UTC)


@settings(max_examples=100)
@given(
    event_type=st.sampled_from(
        [
            None,
            "UPGRADE_LIFECYCLE",
            "END_OF_SUPPORT",
            "COS_MILESTONE_VERSION_UPDATE",
            "DISRUPTION_EVENT",
            "EVENT_TYPE_UNSPECIFIED",
        ]
    ),
    state=st.sampled_from([None, "SCHEDULED", "STARTED", "SUCCEEDED", "FAILED", "CANCELED"]),
)
def test_only_the_upgrade_lifecycle_is_read_as_an_upgrade(event_type, state):
    """Property: an UpgradeInfoEvent is an UPGRADE exactly when it is about the upgrade
    lifecycle (or says no type, as before the field) and not merely scheduled."""
    payload = {k: v for k, v in (("eventType", event_type), ("state", state)) if v}
    event = one("gcp", push(b"x", attributes=_upgrade_info(**payload)))
    lifecycle = event_type in (None, "UPGRADE_LIFECYCLE", "EVENT_TYPE_UNSPECIFIED")
    upgrade = lifecycle and state != "SCHEDULED"
    assert (event.operation is Operation.UPGRADE) == upgrade
    assert event.changed == (("version",) if upgrade else ())


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (None, None),
        ({}, "message"),
        ({"message": "x"}, "message"),
        ({"message": {"data": "@@@", "messageId": "1"}}, "message.data"),
        ({"message": {"data": "e30=", "messageId": 1}}, "message.messageId"),
        ({"message": {"data": "e30="}}, "message.messageId"),
        ({"message": {"messageId": "1", "attributes": {"a": 1}}}, "message.attributes.a"),
        ({"message": {"messageId": "1", "publishTime": "then"}}, "message.publishTime"),
        ({**push(RESIZE), "subscription": 3}, "subscription"),
        ({**push(RESIZE), "deliveryAttempt": "2"}, "deliveryAttempt"),
        (push({**RESIZE, "protoPayload": "x"}), "message.data.protoPayload"),
        (push({**RESIZE, "protoPayload": {**RESIZE["protoPayload"], "methodName": 5}}),
         "message.data.protoPayload.methodName"),
        (push({**RESIZE, "protoPayload": {**RESIZE["protoPayload"], "status": {"code": "7"}}}),
         "message.data.protoPayload.status.code"),
        (push({**RESIZE, "resource": {"labels": {"cluster_name": 1}}}),
         "message.data.resource.labels.cluster_name"),
        (push({**RESIZE, "operation": {"first": "yes"}}), "message.data.operation.first"),
        (push({**RESIZE, "timestamp": "late"}), "message.data.timestamp"),
        (push(b"x", attributes={**UPGRADE_NOTICE, "payload": "{"}),
         "message.attributes.payload"),
        (push(b"x", attributes={**UPGRADE_NOTICE, "payload": "[1]"}),
         "message.attributes.payload"),
        (push(b"x", attributes={**UPGRADE_NOTICE, "payload": '{"resource": 3}'}),
         "message.attributes.payload.resource"),
    ],
)  # fmt: skip
def test_gcp_wrong_shapes_name_the_field(body, field):
    assert refused("gcp", body).field == field


# --- CloudEvents ---------------------------------------------------------------------------

GENERIC = {
    "specversion": "1.0",
    "id": "A234-1234-1234",
    "source": "https://ci.example.com/pipelines/nodepools",
    "type": "com.example.nodepool.resized",
    "time": "2024-05-01T11:00:00Z",
    "subject": "prod-eu/general",
    "datacontenttype": "application/json",
    "cluster": "prod-eu",
    "nodepool": "general",
    "actor": "ci-bot",
    "operation": "scale",
    "data": {"desired": 6},
}


def test_structured_cloudevent_reads_fleetwarden_extension_attributes():
    event = one("cloudevents", GENERIC, {"content-type": "application/cloudevents+json"})
    assert (event.operation, event.cluster, event.pool, event.actor) == (
        Operation.SCALE,
        "prod-eu",
        "general",
        "ci-bot",
    )
    assert (event.provider, event.flags) == (EventSource.CLOUDEVENTS, ())
    assert (event.id, event.source, event.type, event.subject) == (
        "A234-1234-1234",
        "https://ci.example.com/pipelines/nodepools",
        "com.example.nodepool.resized",
        "prod-eu/general",
    )
    cloudevents_validator().validate(GENERIC)


def test_binary_cloudevent_reads_percent_encoded_headers():
    # header values are percent-encoded: section 3.1.3.2 of
    # https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/bindings/http-protocol-binding.md
    headers = {
        "content-type": "application/json",
        "ce-specversion": "1.0",
        "ce-id": "b-1",
        "ce-source": "/tools/resizer",
        "ce-type": "com.example.nodepool.resized",
        "ce-subject": "pool%20general",
        "ce-cluster": "prod-eu",
        "ce-pool": "general",
        "ce-operation": "not-an-operation",
    }
    event = one("cloudevents", {"desired": 6}, headers)
    assert (event.subject, event.cluster, event.pool) == ("pool general", "prod-eu", "general")
    assert event.operation is Operation.OTHER
    assert event.detail == {"datacontenttype": "application/json"}
    text = one("cloudevents", b"\x00\x01", {**headers, "content-type": "application/octet-stream"})
    assert text.id == "b-1"


def test_batch_maps_every_event_and_an_empty_batch_is_empty():
    second = {**GENERIC, "id": "A234-1234-1235", "cluster": "prod-us"}
    del second["nodepool"]
    parsed = parse(
        "cloudevents", [GENERIC, second], {"content-type": "application/cloudevents-batch+json"}
    )
    assert [(e.id, e.cluster, e.pool) for e in parsed.events] == [
        ("A234-1234-1234", "prod-eu", "general"),
        ("A234-1234-1235", "prod-us", None),
    ]
    assert parse("cloudevents", [], {"content-type": "application/cloudevents-batch+json"}) == (
        Parsed([])
    )


def test_cloudevent_without_cluster_is_kept_and_flagged():
    bare = {k: v for k, v in GENERIC.items() if k not in ("cluster", "nodepool", "actor")}
    event = one(
        "cloudevents", bare, {"content-type": "application/cloudevents+json; charset=utf-8"}
    )
    assert event.flags == (EventFlag.NO_CLUSTER,)


def test_azure_and_google_types_on_the_cloudevents_route_use_their_provider_mapping():
    azure_event = one("cloudevents", as_cloudevent(arm_event()))
    assert (azure_event.provider, azure_event.cluster, azure_event.actor) == (
        EventSource.AZURE,
        "aks-prod",
        "alice@contoso.com",
    )
    b64 = {
        **{k: v for k, v in as_cloudevent(arm_event()).items() if k != "data"},
        "data_base64": base64.b64encode(json.dumps(arm_event()["data"]).encode()).decode(),
    }
    assert one("cloudevents", b64).pool == "nodepool1"


@pytest.mark.parametrize(
    ("body", "headers", "field", "needle"),
    [
        ({**GENERIC, "specversion": "0.3"}, {}, "specversion", "unsupported"),
        ({k: v for k, v in GENERIC.items() if k != "id"}, {}, "id", "missing"),
        ({**GENERIC, "source": 5}, {}, "source", "string"),
        ({**GENERIC, "type": ""}, {}, "type", "missing"),
        ({**GENERIC, "time": "2024-13-45"}, {}, "time", "RFC 3339"),
        ({**GENERIC, "time": "9999-12-31T23:59:59-01:00"}, {}, "time", "out of range"),
        ({**GENERIC, "time": "0001-01-01T00:00:00+01:00"}, {}, "time", "out of range"),
        ({**GENERIC, "subject": 1}, {}, "subject", "string"),
        ({**GENERIC, "data_base64": "e30="}, {}, "data_base64", "exclusive"),
        ({k: v for k, v in GENERIC.items() if k != "data"} | {"data_base64": "!!"}, {},
         "data_base64", "base64"),
        ({**GENERIC, "cluster": 3}, {}, "cluster", "string"),
        ([GENERIC, {**GENERIC, "id": None}], {"content-type": "application/cloudevents-batch+json"},
         "[1].id", "missing"),
        ([GENERIC, 4], {"content-type": "application/cloudevents-batch+json"}, "[1]", "object"),
        (GENERIC, {"content-type": "application/cloudevents-batch+json"}, "", "array"),
        ("text", {"content-type": "application/cloudevents+json"}, "", "CloudEvent object"),
        ({}, {"ce-specversion": "1.0", "ce-source": "/s", "ce-type": "t"}, "ce-id", "missing"),
        ({}, {"ce-specversion": "1.0", "ce-id": "1", "ce-type": "t"}, "ce-source", "missing"),
        ({}, {"ce-specversion": "0.3", "ce-id": "1", "ce-source": "/s", "ce-type": "t"},
         "ce-specversion", "unsupported"),
        ({}, {"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t",
              "ce-time": "now"}, "ce-time", "RFC 3339"),
        (b"{", {"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t",
                "content-type": "application/json"}, "body", "JSON"),
        ({"hello": "world"}, {"content-type": "application/json"}, "", "not a CloudEvent"),
    ],
)  # fmt: skip
def test_cloudevents_violations_name_the_attribute(body, headers, field, needle):
    error = refused("cloudevents", body, headers)
    assert (error.field or "") == field
    assert needle in error.reason


# --- Argo CD -------------------------------------------------------------------------------


def render_template(template: str, app: dict[str, Any]) -> str:
    """Just enough of Go's text/template for the documented body: ``{{.app.a.b}}`` and
    ``{{with .app.a}}{{.b.c}}{{end}}`` over an unstructured Application."""

    def lookup(root: Any, path: str) -> Any:
        for part in path.strip(".").split("."):
            root = root.get(part) if isinstance(root, dict) else None
        return root

    def show(value: Any) -> str:
        if value is None:
            return "<no value>"
        return str(value).lower() if isinstance(value, bool) else str(value)

    def with_block(match: re.Match[str]) -> str:
        scope = lookup({"app": app}, match[1])
        return show(lookup(scope, match[2])) if scope else ""

    text = re.sub(r"\{\{with (\.[\w.]+)\}\}\{\{(\.[\w.]+)\}\}\{\{end\}\}", with_block, template)
    return re.sub(r"\{\{(\.[\w.]+)\}\}", lambda m: show(lookup({"app": app}, m[1])), text)


def documented_template() -> str:
    doc = argocd.__doc__ or ""
    start = doc.index("    {\n")
    return doc[start : doc.index("    }\n", start) + 6]


@pytest.mark.realdata
def test_documented_argocd_template_rendered_over_a_real_application_parses(realdata):
    app = yaml.safe_load(
        (realdata / "argocd" / "argocd-application-with-status-gke.yaml").read_text()
    )
    body = json.loads(render_template(documented_template(), app))
    event = one("argocd", body)
    assert (event.operation, event.cluster, event.pool) == (
        Operation.SYNC,
        "gke-alpha-01-europe-west1",
        None,
    )
    assert (event.actor, event.outcome, event.flags) == ("foo@example.com", "success", ())
    assert event.subject == "velero-test" and event.source == "argocd:argo-cd/velero-test"
    assert event.time == datetime(2024, 3, 5, 7, 33, 4, tzinfo=UTC)
    assert event.detail["revision"] == "rev1"  # status.sync.revision of that Application
    assert event.detail["healthStatus"] == "Healthy"
    assert "server" not in event.detail  # "<no value>" is absent, not a value


SYNCED = {
    "app": "payments",
    "namespace": "argocd",
    "project": "prod",
    "cluster": "prod-eu",
    "server": "https://prod-eu.example.com",
    "revision": "0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d",
    "syncStatus": "Synced",
    "healthStatus": "Healthy",
    "operation": "Succeeded",
    "startedAt": "2024-05-01T11:58:00Z",
    "finishedAt": "2024-05-01T11:58:30Z",
    "actor": "alice@example.com",
    "automated": "false",
    "trigger": "on-sync-succeeded",
}


def test_argocd_ids_are_stable_per_body_and_differ_between_bodies():
    first, again = one("argocd", SYNCED), one("argocd", json.loads(json.dumps(SYNCED)))
    assert first.id == again.id and first.key == again.key
    assert one("argocd", {**SYNCED, "revision": "ffff"}).id != first.id
    assert first.id == body_id(SYNCED, Reader("argocd payload"))


@pytest.mark.parametrize(
    ("changes", "operation", "outcome", "flags", "actor"),
    [
        ({}, Operation.SYNC, "success", (), "alice@example.com"),
        ({"operation": "Failed"}, Operation.SYNC, "failure", (EventFlag.FAILED,),
         "alice@example.com"),
        ({"operation": "Running", "finishedAt": ""}, Operation.SYNC, None, (),
         "alice@example.com"),
        ({"operation": "", "healthStatus": "Degraded"}, Operation.HEALTH, None, (),
         "alice@example.com"),
        ({"actor": "", "automated": "true"}, Operation.SYNC, "success", (),
         "argocd:automated-sync"),
        ({"actor": "<no value>", "automated": True}, Operation.SYNC, "success", (),
         "argocd:automated-sync"),
        ({"cluster": "<no value>", "server": ""}, Operation.SYNC, "success",
         (EventFlag.NO_CLUSTER,), "alice@example.com"),
    ],
)  # fmt: skip
def test_argocd_phases_health_and_actors(changes, operation, outcome, flags, actor):
    event = one("argocd", {**SYNCED, **changes})
    assert (event.operation, event.outcome, event.flags, event.actor) == (
        operation,
        outcome,
        flags,
        actor,
    )


def test_argocd_server_url_stands_in_for_a_missing_destination_name():
    assert one("argocd", {**SYNCED, "cluster": ""}).cluster == "https://prod-eu.example.com"


def test_argocd_extra_keys_are_ignored_and_credentials_never_kept():
    body = {
        **SYNCED,
        "token": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "context": {"argocdUrl": "https://cd.example.com"},
        "trigger": "Bearer abcdefghijklmnop",
        "revision": "password=hunter2",
    }
    event = one("argocd", body)
    text = json.dumps(event.to_json())
    assert "ghp_" not in text and "hunter2" not in text and "abcdefghijklmnop" not in text
    assert set(event.detail) <= {"app", "phase", "namespace", "project", "server", "revision",
                                 "syncStatus", "healthStatus", "trigger"}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([SYNCED], None),
        ({**SYNCED, "app": ""}, "app"),
        ({**SYNCED, "app": "<no value>"}, "app"),
        ({**SYNCED, "app": 5}, "app"),
        ({**SYNCED, "cluster": ["a"]}, "cluster"),
        ({**SYNCED, "operation": {}}, "operation"),
        ({**SYNCED, "finishedAt": "5 minutes ago"}, "finishedAt"),
    ],
)
def test_argocd_wrong_shapes_name_the_field(body, field):
    assert refused("argocd", body).field == field


# --- Flux ----------------------------------------------------------------------------------

# The event example of https://fluxoperator.dev/docs/crd/event (kustomize-controller),
# fields of fluxcd/pkg apis/event/v1beta1 Event
FLUX_ERROR = {
    "involvedObject": {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "name": "webapp",
        "namespace": "apps",
        "uid": "7d0cdc51-ddcf-4743-b223-83ca5c699632",
    },
    "metadata": {
        "kustomize.toolkit.fluxcd.io/revision": "main/731f7eaddfb6af01cb2173e18f0f75b0ba780ef1"
    },
    "severity": "error",
    "reason": "ValidationFailed",
    "message": "service/apps/webapp validation error: spec.type: Unsupported value: Ingress",
    "reportingController": "kustomize-controller",
    "timestamp": "2022-10-28T07:26:19Z",
}


def flux_alert_metadata(realdata: Path) -> dict[str, str]:
    """What notification-controller adds to an event's metadata for the corpus' Alert, once
    it is given ``spec.eventMetadata`` (and a ``summary``) as fleetwarden documents."""
    alert = yaml.safe_load((realdata / "flux" / "flux-alert-sample.yaml").read_text())
    alert["spec"]["eventMetadata"] = {"cluster": "prod-eu", "nodepool": "general"}
    alert["spec"]["summary"] = "prod-eu apps"
    return {**alert["spec"]["eventMetadata"], "summary": alert["spec"]["summary"]}


@pytest.mark.realdata
def test_flux_event_for_each_source_kind_of_the_real_alert(realdata):
    alert = yaml.safe_load((realdata / "flux" / "flux-alert-sample.yaml").read_text())
    extra = flux_alert_metadata(realdata)
    expected = {"Kustomization": Operation.SYNC, "GitRepository": Operation.OTHER}
    for source in alert["spec"]["eventSources"]:
        body = {
            **FLUX_ERROR,
            "involvedObject": {**FLUX_ERROR["involvedObject"], "kind": source["kind"]},
            "severity": alert["spec"]["eventSeverity"],
            "reason": "ReconciliationSucceeded",
            "metadata": {**FLUX_ERROR["metadata"], **extra},
        }
        event = one("flux", body)
        assert (event.operation, event.cluster, event.pool) == (
            expected[source["kind"]],
            "prod-eu",
            "general",
        )
        assert (event.outcome, event.flags) == ("success", ())
        assert event.detail["summary"] == "prod-eu apps"


def test_flux_error_event_without_cluster_metadata_is_kept_flagged():
    event = one("flux", FLUX_ERROR)
    assert (event.operation, event.outcome) == (Operation.SYNC, "failure")
    assert event.flags == (EventFlag.NO_CLUSTER, EventFlag.FAILED)
    assert event.subject == "Kustomization/apps/webapp"
    assert event.source == "flux:kustomize-controller"
    assert event.type == "io.fluxcd.kustomization.ValidationFailed"
    assert event.time == datetime(2022, 10, 28, 7, 26, 19, tzinfo=UTC)
    assert event.detail["revision"] == "main/731f7eaddfb6af01cb2173e18f0f75b0ba780ef1"
    assert one("flux", json.loads(json.dumps(FLUX_ERROR))).id == event.id


def test_flux_health_reasons_and_secret_looking_messages():
    health = one("flux", {**FLUX_ERROR, "reason": "HealthCheckFailed"})
    assert health.operation is Operation.HEALTH
    leaky = one("flux", {**FLUX_ERROR, "message": "apply failed: password=s3cr3t"})
    assert "s3cr3t" not in json.dumps(leaky.to_json())
    token = {**FLUX_ERROR, "metadata": {**FLUX_ERROR["metadata"], "token": "abc"}}
    assert "token" not in one("flux", token).detail


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("event", None),
        ({**FLUX_ERROR, "involvedObject": None}, "involvedObject"),
        ({**FLUX_ERROR, "involvedObject": []}, "involvedObject"),
        ({**FLUX_ERROR, "involvedObject": {"kind": "Kustomization"}}, "involvedObject.name"),
        ({**FLUX_ERROR, "involvedObject": {"name": "x", "kind": 1}}, "involvedObject.kind"),
        ({**FLUX_ERROR, "involvedObject": {**FLUX_ERROR["involvedObject"], "uid": 5}},
         "involvedObject.uid"),
        ({**FLUX_ERROR, "metadata": {"cluster": 1}}, "metadata.cluster"),
        ({**FLUX_ERROR, "metadata": "x"}, "metadata"),
        ({**FLUX_ERROR, "timestamp": "Oct 28"}, "timestamp"),
        ({**FLUX_ERROR, "severity": 2}, "severity"),
        ({**FLUX_ERROR, "message": ["m"]}, "message"),
    ],
)  # fmt: skip
def test_flux_wrong_shapes_name_the_field(body, field):
    assert refused("flux", body).field == field


# --- attribution-only fields never refuse a delivery ------------------------------------------
# A provider redelivers, then dead-letters, what the gateway refuses: a field that only says who
# made the change must not lose the change. The event is accepted, attributed from what else
# the payload says (else to no one) and detail.notes says what was ignored and why.


def _with(body: Any, path: str, value: Any) -> Any:
    """A deep copy of ``body`` with ``path`` (``a.b.0.c``; ``-`` deletes) set to ``value``."""
    body = json.loads(json.dumps(body))
    *parents, last = path.split(".")
    node = body
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value == "-":
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return body


def _pushed(name: str, path: str, value: Any) -> Any:
    return push(_with(load(name), path, value))


def _structured(body: Any) -> tuple[Any, dict[str, str]]:
    return body, {"content-type": "application/cloudevents+json"}


TOPIC = "gcp-auditlog-LogEntryData-pubsubCreateTopic.json"
DELETE = "azure-eventgrid-ResourceDeleteSuccessEvent.json"
WRITE = "azure-eventgrid-ResourceWriteSuccessEvent.json"

Delivery = Callable[[], tuple[Any, dict[str, str]]]  # the corpus is read when a test runs

# (id, route, body and headers, actor expected, field the note names)
TOLERATED: list[tuple[str, str, Delivery, str | None, str]] = [
    # Event Grid: claims not JSON (a real sample's JSON text, cut short) -> data.caller
    ("azure claims not JSON, caller", "azure",
     lambda: (_with(_with(load(DELETE), "0.data.claims", '{"upn": "x'),
                    "0.data.caller", "dave@contoso.com"), {}),
     "dave@contoso.com", "[0].data.claims"),
    # claims JSON but not an object, no caller -> no actor
    ("azure claims a JSON array", "azure",
     lambda: (_with(load(DELETE), "0.data.claims", "[1, 2]"), {}),
     None, "[0].data.claims"),
    ("azure claims a number", "azure",
     lambda: (_with(load(WRITE), "0.data.claims", 42), {}),
     None, "[0].data.claims"),
    # claims name the actor; a caller of another type is only noted
    ("azure caller not a string", "azure",
     lambda: (_with([arm_event()], "0.data.caller", {"oid": 1}), {}),
     "alice@contoso.com", "[0].data.caller"),
    # the same event in the CloudEvents schema, on both routes that take it
    ("azure cloudevent claims not JSON", "azure",
     lambda: _structured(_with(as_cloudevent(arm_event()), "data.claims", "{oops")),
     None, "data.claims"),
    ("azure cloudevent on /cloudevents", "cloudevents",
     lambda: _structured(_with(as_cloudevent(arm_event()), "data.claims", "{oops")),
     None, "data.claims"),
    # CloudTrail: userIdentity of another shape; a bad arn falls back to principalId
    ("aws userIdentity a string", "aws",
     lambda: (_with(SCALE_CALL, "detail.userIdentity", "root"), {}),
     None, "detail.userIdentity"),
    ("aws arn not a string", "aws",
     lambda: (_with(_with(SCALE_CALL, "detail.userIdentity.arn", 5),
                    "detail.userIdentity.principalId", "AIDAEXAMPLE"), {}),
     "AIDAEXAMPLE", "detail.userIdentity.arn"),
    # Cloud Audit Logs (a real entry, pushed): principalEmail broken -> principalSubject
    ("gcp principalEmail a list", "gcp",
     lambda: (_pushed(TOPIC, "protoPayload.authenticationInfo.principalEmail", []), {}),
     f"user:{ROBOT}", "message.data.protoPayload.authenticationInfo.principalEmail"),
    ("gcp authenticationInfo a string", "gcp",
     lambda: (_pushed(TOPIC, "protoPayload.authenticationInfo", ROBOT), {}),
     None, "message.data.protoPayload.authenticationInfo"),
    ("gcp requestMetadata a list", "gcp",
     lambda: (_pushed(TOPIC, "protoPayload.requestMetadata", ["x"]), {}),
     ROBOT, "message.data.protoPayload.requestMetadata"),
    # the real Eventarc structured audit event
    ("gcp eventarc principalEmail a number", "cloudevents",
     lambda: _structured(_with(load("gcp-cloudevent-structured-auditlog.json"),
                               "data.protoPayload.authenticationInfo.principalEmail", 7)),
     None, "data.protoPayload.authenticationInfo.principalEmail"),
    ("cloudevents actor a number", "cloudevents",
     lambda: _structured({**GENERIC, "actor": 3}),
     None, "actor"),
    ("argocd actor a number", "argocd",
     lambda: ({**SYNCED, "actor": 1}, {}),
     None, "actor"),
    ("argocd automated maybe", "argocd",
     lambda: ({**SYNCED, "actor": "", "automated": "maybe"}, {}),
     None, "automated"),
    ("argocd actor broken, automated", "argocd",
     lambda: ({**SYNCED, "actor": ["x"], "automated": True}, {}),
     "argocd:automated-sync", "actor"),
    ("flux reportingController an object", "flux",
     lambda: ({**FLUX_ERROR, "reportingController": {}}, {}),
     None, "reportingController"),
    ("flux reportingInstance a number", "flux",
     lambda: ({**FLUX_ERROR, "reportingInstance": 2}, {}),
     None, "reportingInstance"),
]  # fmt: skip


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("route", "delivery", "actor", "field"),
    [row[1:] for row in TOLERATED],
    ids=[row[0] for row in TOLERATED],
)
def test_a_broken_attribution_field_is_accepted_attributed_and_noted(
    realdata, route, delivery, actor, field
):
    body, headers = delivery()
    [event] = parse(route, body, headers).events
    assert event.actor == actor
    [note] = event.detail["notes"]
    assert note.startswith(f"{field}: ") and note.endswith("; ignored (attribution only)")
    json.dumps(event.to_json())  # stored as is


def test_the_note_never_quotes_a_credential_and_clean_payloads_carry_none():
    leaky = one("argocd", {**SYNCED, "actor": "", "automated": "token=abcdef0123456789"})
    assert leaky.detail["notes"] == ["automated: unreadable; ignored (attribution only)"]
    assert "abcdef" not in json.dumps(leaky.to_json())
    for route, body in (("aws", SCALE_CALL), ("azure", [arm_event()]), ("argocd", SYNCED),
                        ("flux", FLUX_ERROR), ("gcp", push(RESIZE))):  # fmt: skip
        assert "notes" not in one(route, body).detail


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        # the fields that identify the change are still refused, broken attribution or not
        ("azure", [_with(_with(arm_event(), "data.claims", "{"), "id", None)], "[0].id"),
        ("azure", [_with(_with(arm_event(), "data.claims", "{"), "data.resourceUri", 9)],
         "[0].data.resourceUri"),
        ("aws", _with(_with(SCALE_CALL, "detail.userIdentity", "root"), "detail.eventName", None),
         "detail.eventName"),
        ("gcp", push(_with(_with(RESIZE, "protoPayload.authenticationInfo", 1),
                           "protoPayload.methodName", 5)), "message.data.protoPayload.methodName"),
        ("argocd", {**SYNCED, "actor": 1, "app": 5}, "app"),
        ("flux", {**FLUX_ERROR, "reportingController": {}, "involvedObject": None},
         "involvedObject"),
    ],
)  # fmt: skip
def test_identifying_fields_are_still_refused_precisely(route, body, field):
    assert refused(route, body).field == field


# --- shared: secrets, canonical form ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", True),
        ("AKIAIOSFODNN7EXAMPLE", True),
        ("ghp_0123456789abcdefghijABCDEFGHIJ012345", True),
        ("password=hunter2", True),
        ("-----BEGIN RSA PRIVATE KEY-----", True),
        ("main/731f7eaddfb6af01cb2173e18f0f75b0ba780ef1", False),
        ("Healthy", False),
        ("service/apps/webapp validation error: spec.type", False),
    ],
)
def test_credential_detector(text, secret):
    assert looks_secret(text) is secret


def reference_bodies() -> list[tuple[str, Any, dict[str, str]]]:
    return [
        ("aws", SCALE_CALL, {}),
        ("aws", sns_notification(SCALE_CALL), {}),
        ("aws", CONFIRMATION, {}),
        ("aws", autoscaling("EC2 Instance Launch Successful", {"AutoScalingGroupName": "a"}), {}),
        ("azure", [arm_event()], {}),
        ("azure", VALIDATION, {}),
        ("azure", as_cloudevent(arm_event()), {}),
        ("gcp", push(RESIZE), {}),
        ("gcp", push(b"x", attributes=UPGRADE_NOTICE), {}),
        ("cloudevents", GENERIC, {"content-type": "application/cloudevents+json"}),
        ("cloudevents", RESIZE, eventarc_audit_headers(RESIZE)),
        ("argocd", SYNCED, {}),
        ("flux", FLUX_ERROR, {}),
    ]


def test_every_canonical_event_is_a_valid_cloudevent_and_round_trips():
    validator = cloudevents_validator()
    for source, body, headers in reference_bodies():
        for event in parse(source, body, headers).events:
            data = event.to_json()
            validator.validate({k: v for k, v in data.items() if v is not None})
            assert ChangeEvent.from_json(json.loads(json.dumps(data))) == event


def test_parsers_cover_every_gateway_source():
    assert set(PARSE) == set(SOURCES) == {"aws", "azure", "gcp", "cloudevents", "argocd", "flux"}


# --- fuzz: random and mutated bodies -> Parsed or FormatError, nothing else ---------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            *("", "1.0", "e30=", "{}", "[]", "<no value>", "Notification"),
            *("2024-05-01T11:00:00Z", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+14:00"),
        ]
    )
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=16,
)
HEADER_NAMES = [
    "content-type", "ce-specversion", "ce-id", "ce-source", "ce-type", "ce-time", "ce-subject",
    "ce-cluster", "x-amz-sns-message-type", "aeg-event-type", "webhook-request-origin",
]  # fmt: skip
HEADER_VALUES = [
    "application/json", "application/cloudevents+json", "application/cloudevents-batch+json",
    "text/plain", "1.0", "0.3", "Notification", "SubscriptionConfirmation",
    "SubscriptionValidation", "2024-05-01T11:00:00Z", "%zz", "",
]  # fmt: skip
headers_strategy = st.dictionaries(
    st.sampled_from(HEADER_NAMES) | st.text(max_size=6).map(str.lower),
    st.sampled_from(HEADER_VALUES) | st.text(max_size=10),
    max_size=6,
)


@st.composite
def mutated(draw: st.DrawFn, seed: Any) -> Any:
    """The seed with one to three random edits: a subtree replaced, a key dropped or added."""
    value = json.loads(json.dumps(seed)) if not isinstance(seed, bytes) else seed
    for _ in range(draw(st.integers(1, 3))):
        value = _mutate_once(draw, value)
    return value


def _mutate_once(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        action = draw(st.sampled_from(["descend", "replace", "drop", "add"]))
        if action == "descend":
            value[key] = _mutate_once(draw, value[key])
        elif action == "replace":
            value[key] = draw(json_values)
        elif action == "drop":
            del value[key]
        else:
            value[draw(st.text(max_size=8))] = draw(json_values)
        return value
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        value[index] = _mutate_once(draw, value[index])
        return value
    if isinstance(value, str) and value and draw(st.booleans()):
        # strings that carry JSON or base64 (an SNS Message, Pub/Sub data) get damaged too
        cut = draw(st.integers(0, len(value)))
        return value[:cut] + draw(st.text(max_size=3))
    return draw(json_values)


def seeds_for(source: str) -> list[tuple[Any, dict[str, str]]]:
    rows = [(body, headers) for s, body, headers in reference_bodies() if s == source]
    if REALDATA.is_dir():
        routes = {row[0]: row[1] for row in CORPUS}
        for path in realdata_files("events", ".json"):
            if routes.get(path.name) == source:
                rows.append((json.loads(path.read_text()), {}))
    if source == "gcp":
        rows.append((push(gke_audit("google.container.v1.ClusterManager.UpdateNodePool",
                                    {"name": GKE_POOL, "nodeVersion": "1.29"})), {}))  # fmt: skip
    return rows


def bodies_for(source: str) -> st.SearchStrategy[tuple[Any, dict[str, str]]]:
    seeded = st.sampled_from(seeds_for(source)).flatmap(
        lambda row: st.tuples(mutated(row[0]), st.just(row[1]) | headers_strategy)
    )
    random = st.tuples(json_values | st.binary(max_size=20), headers_strategy)
    if source == "gcp":  # mutate the LogEntry inside the base64 data too
        inner = mutated(RESIZE).map(push)
        seeded = seeded | st.tuples(inner, st.just({}))
    if source == "aws":  # and the EventBridge event inside an SNS Message
        seeded = seeded | st.tuples(mutated(SCALE_CALL).map(sns_notification), st.just({}))
    return seeded | random


@pytest.mark.parametrize("source", SOURCES)
def test_fuzzed_bodies_parse_or_raise_format_error_only(source):
    """2,000 bodies a source, drawn five to an example (hypothesis's own cost per example was
    most of this test's time)."""

    @settings(
        max_examples=400,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.lists(bodies_for(source), min_size=5, max_size=5))
    def check(cases: list[tuple[Any, dict[str, str]]]) -> None:
        for body, headers in cases:
            try:
                parsed = PARSE[source](body, headers, NOW)
            except FormatError as exc:
                assert exc.path == f"{source} payload"
                continue
            assert isinstance(parsed, Parsed)
            for event in parsed.events:
                assert isinstance(event, ChangeEvent) and event.id and event.source
                json.dumps(event.to_json())

    check()


@pytest.mark.parametrize("value", [{1: "a"}, {"a": 1, None: 2}, MappingProxyType({b"k": "v"})])
def test_an_object_whose_keys_are_not_strings_is_refused_by_name(value):
    """Decoded JSON always has string keys; a mapping built in code may not: it is refused."""
    with pytest.raises(FormatError) as info:
        Reader("test payload").mapping(value, ("detail", "labels"))
    assert info.value.field == "detail.labels"
    assert "object keys must be strings" in info.value.reason


@pytest.mark.parametrize("value", [{}, {"a": "b"}, MappingProxyType({"k": 1})])
def test_an_object_with_string_keys_is_given_back_as_it_is(value):
    assert Reader("test payload").mapping(value, "x") is value
