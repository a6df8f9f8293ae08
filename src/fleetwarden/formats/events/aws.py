"""AWS deliveries to ``POST /events/aws``: EventBridge events and SNS HTTPS messages.

Accepted bodies:

* an EventBridge event, as an API destination posts it (``id``, ``source``, ``detail-type``,
  ``detail``, ``time``, ``region``, ``account``, ``resources``);
* an SNS HTTP(S) message: ``Notification`` whose ``Message`` is an EventBridge event as JSON
  text (the EventBridge -> SNS -> HTTPS path; with raw message delivery the body is the event
  itself) or an EC2 Auto Scaling group notification (an Auto Scaling group's own notification
  configuration or lifecycle hook, ``Service: "AWS Auto Scaling"``: ``Event``
  ``autoscaling:EC2_INSTANCE_LAUNCH[_ERROR]`` / ``..._TERMINATE[_ERROR]`` or a
  ``LifecycleTransition``, read as the EventBridge event of the same name, its id the SNS
  ``MessageId``; ``autoscaling:TEST_NOTIFICATION`` is acknowledged, nothing stored; see
  https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-sns-notifications.html
  and .../prepare-for-lifecycle-notifications.html), ``SubscriptionConfirmation`` (answered
  with ``Reply(kind="sns-subscribe")`` whose
  ``url`` is checked to be ``https://sns.<region>.amazonaws.com/?Action=ConfirmSubscription...``
  in the topic's region; the gateway decides whether to GET it) and
  ``UnsubscribeConfirmation`` (acknowledged, nothing stored).

Mapping:

* ``AWS API Call via CloudTrail`` from ``aws.eks``: ``detail.eventName`` is the operation
  (``CreateNodegroup``, ``UpdateNodegroupConfig``, ``UpdateNodegroupVersion``,
  ``DeleteNodegroup``, cluster calls...), the cluster is ``requestParameters.name`` (the URI
  parameter; ``clusterName`` also read), the pool ``requestParameters.nodegroupName``, the actor
  ``userIdentity.arn`` (else ``principalId``, ``invokedBy``; a ``userIdentity`` of another shape
  is noted in ``detail.notes``, never refused); ``errorCode`` flags FAILED.
  ``UpdateNodegroupConfig`` lists its changed fields (``scalingConfig.desiredSize``,
  ``labels``, ``taints``, ``updateConfig.*``...).
  The same for ``aws.autoscaling`` API calls on an Auto Scaling group (``SetDesiredCapacity``,
  ``UpdateAutoScalingGroup``...).
* EC2 Auto Scaling events (``EC2 Instance Launch/Terminate Successful/Unsuccessful``, the
  lifecycle actions): a SCALE of the pool named by the group: EKS managed groups are
  ``eks-<nodegroup>-<uuid>``, eksctl self-managed ones ``eksctl-<cluster>-nodegroup-<ng>-...``;
  ``detail.Tags`` (when an event carries them) name it through ``eks:cluster-name``,
  ``eks:nodegroup-name``, ``alpha.eksctl.io/*``, ``kubernetes.io/cluster/<name>`` or
  ``k8s.io/cluster-autoscaler/<name>``. An event
  that names no cluster is kept with the NO_CLUSTER flag.
* Any other EventBridge event (AWS Health's ``AWS_EKS_*`` events, EC2 state changes...) parses
  to an OTHER event on the EKS cluster (and node group) its ``resources`` name by ARN (``arn:
  aws:eks:<region>:<account>:cluster/<name>``, ``nodegroup/<cluster>/<name>/<id>``: the
  resource ARNs the event structure documents), else flagged NO_CLUSTER.

Refused: a Lambda ``Records`` envelope (SNS/SQS to Lambda), which is not an HTTP delivery.

References: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html,
https://docs.aws.amazon.com/sns/latest/dg/http-subscription-confirmation-json.html,
https://docs.aws.amazon.com/eks/latest/userguide/understanding-service-name-entries.html.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation
from fleetwarden.formats.events import (
    Parsed,
    Reader,
    Reply,
    at,
    compact,
    kind_of,
    safe_text,
    tolerate,
    tolerated_name,
    with_notes,
)

__all__ = ["parse"]

WHERE = "aws payload"
CLOUDTRAIL = "AWS API Call via CloudTrail"

_EKS_CALLS: dict[str, Operation] = {
    "CreateNodegroup": Operation.CREATE,
    "DeleteNodegroup": Operation.DELETE,
    "UpdateNodegroupConfig": Operation.UPDATE,
    "UpdateNodegroupVersion": Operation.UPGRADE,
    "CreateCluster": Operation.CREATE,
    "DeleteCluster": Operation.DELETE,
    "UpdateClusterConfig": Operation.UPDATE,
    "UpdateClusterVersion": Operation.UPGRADE,
    "TagResource": Operation.UPDATE,
    "UntagResource": Operation.UPDATE,
}
_ASG_CALLS: dict[str, Operation] = {
    "SetDesiredCapacity": Operation.SCALE,
    "UpdateAutoScalingGroup": Operation.UPDATE,
    "CreateAutoScalingGroup": Operation.CREATE,
    "DeleteAutoScalingGroup": Operation.DELETE,
    "TerminateInstanceInAutoScalingGroup": Operation.SCALE,
    "StartInstanceRefresh": Operation.UPGRADE,
}
_ASG_EVENTS: dict[str, tuple[Operation, str | None]] = {
    "EC2 Instance Launch Successful": (Operation.SCALE, "success"),
    "EC2 Instance Launch Unsuccessful": (Operation.SCALE, "failure"),
    "EC2 Instance Terminate Successful": (Operation.SCALE, "success"),
    "EC2 Instance Terminate Unsuccessful": (Operation.SCALE, "failure"),
    "EC2 Instance-launch Lifecycle Action": (Operation.SCALE, None),
    "EC2 Instance-terminate Lifecycle Action": (Operation.SCALE, None),
}
# an Auto Scaling group's SNS notifications -> the EventBridge detail-type of the same event
_ASG_SERVICE = "AWS Auto Scaling"
_ASG_NOTIFICATIONS: dict[str, str] = {
    "autoscaling:EC2_INSTANCE_LAUNCH": "EC2 Instance Launch Successful",
    "autoscaling:EC2_INSTANCE_LAUNCH_ERROR": "EC2 Instance Launch Unsuccessful",
    "autoscaling:EC2_INSTANCE_TERMINATE": "EC2 Instance Terminate Successful",
    "autoscaling:EC2_INSTANCE_TERMINATE_ERROR": "EC2 Instance Terminate Unsuccessful",
    "autoscaling:EC2_INSTANCE_LAUNCHING": "EC2 Instance-launch Lifecycle Action",
    "autoscaling:EC2_INSTANCE_TERMINATING": "EC2 Instance-terminate Lifecycle Action",
}
_ARN_REGION = re.compile(r"^arn:aws[\w-]*:[a-z0-9-]+:(?P<region>[a-z0-9-]+):")
# request fields that name the target or make the call idempotent: not changes
_IDENTITY_PARAMS = frozenset({"name", "clusterName", "nodegroupName", "clientRequestToken"})
_SCALING = frozenset({"desiredCapacity", "minSize", "maxSize"})

_EKS_MANAGED_ASG = re.compile(
    r"^eks-(?P<pool>.+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
_EKSCTL_ASG = re.compile(r"^eksctl-(?P<cluster>.+?)-nodegroup-(?P<pool>.+)-NodeGroup-[^-]+$")
_EKS_ARN = re.compile(
    r"^arn:aws[\w-]*:eks:[^:]*:[^:]*:(?:cluster/(?P<cluster>[^/]+)"
    r"|nodegroup/(?P<ng_cluster>[^/]+)/(?P<pool>[^/]+)(?:/.*)?)$"
)
# tag keys that end in the cluster name (the autoscaler's "enabled" marker is not a name)
_CLUSTER_TAG_PREFIXES = ("kubernetes.io/cluster/", "k8s.io/cluster-autoscaler/")
_SNS_HOST = re.compile(r"^sns\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_TOPIC_ARN = re.compile(r"^arn:aws[\w-]*:sns:(?P<region>[a-z0-9-]+):\d+:[\w.-]+$")


def parse(body: Any, headers: Mapping[str, str], received_at: datetime) -> Parsed:
    r = Reader(WHERE)
    if not isinstance(body, Mapping):
        r.fail(None, f"expected a JSON object, got {kind_of(body)}")
    body = r.mapping(body, "body")
    if "Records" in body:
        r.fail(
            "Records",
            "a Lambda event envelope is not an HTTP delivery: subscribe the gateway to the SNS "
            "topic over HTTPS, or point an EventBridge API destination at it",
        )
    if "Type" in body:
        return _sns(body, headers, received_at, r)
    if "detail-type" in body:
        return Parsed([_eventbridge(body, received_at, r, "")])
    r.fail(
        "detail-type",
        "missing: expected an EventBridge event (detail-type, source, detail) or an SNS "
        "HTTP message (Type)",
    )


def _sns(
    body: Mapping[str, Any], headers: Mapping[str, str], received_at: datetime, r: Reader
) -> Parsed:
    kind = r.required_text(body.get("Type"), "Type")
    declared = headers.get("x-amz-sns-message-type")
    if declared and declared != kind:
        r.fail("Type", f"{kind!r} disagrees with the x-amz-sns-message-type header {declared!r}")
    topic = r.text(body.get("TopicArn"), "TopicArn")
    r.text(body.get("MessageId"), "MessageId")
    if kind == "SubscriptionConfirmation":
        url = r.required_text(body.get("SubscribeURL"), "SubscribeURL")
        _check_subscribe_url(url, topic, r)
        return Parsed([], Reply(kind="sns-subscribe", status=None, url=url))
    if kind == "UnsubscribeConfirmation":
        return Parsed([])
    if kind != "Notification":
        r.fail(
            "Type",
            f"unknown SNS message type {kind!r} (expected Notification, "
            "SubscriptionConfirmation or UnsubscribeConfirmation)",
        )
    message = r.required_text(body.get("Message"), "Message")
    inner = r.json_text(message, "Message")
    if isinstance(inner, Mapping) and inner.get("Service") == _ASG_SERVICE:
        return _asg_notification(body, inner, received_at, r)
    if not isinstance(inner, Mapping) or "detail-type" not in inner:
        r.fail(
            "Message",
            "expected the JSON text of an EventBridge event (with detail-type) or of an EC2 "
            "Auto Scaling notification (Service: AWS Auto Scaling)",
        )
    return Parsed([_eventbridge(inner, received_at, r, "Message")])


def _asg_notification(
    body: Mapping[str, Any], message: Mapping[str, Any], received_at: datetime, r: Reader
) -> Parsed:
    """An Auto Scaling group's own SNS notification, as the EventBridge event it matches."""
    event = r.text(message.get("Event"), "Message.Event")
    transition = r.text(message.get("LifecycleTransition"), "Message.LifecycleTransition")
    if event == "autoscaling:TEST_NOTIFICATION":
        return Parsed([])  # sent once when the notification is configured: nothing happened
    detail_type = _ASG_NOTIFICATIONS.get(event or transition or "")
    if detail_type is None:
        r.fail(
            "Message.Event",
            f"unknown EC2 Auto Scaling notification {event or transition!r} (expected one of "
            f"{', '.join(sorted(_ASG_NOTIFICATIONS))})",
        )
    group_arn = r.text(message.get("AutoScalingGroupARN"), "Message.AutoScalingGroupARN")
    region = _ARN_REGION.match(group_arn or r.text(body.get("TopicArn"), "TopicArn") or "")
    base: dict[str, Any] = {
        "id": r.required_text(body.get("MessageId"), "MessageId"),
        "source": "aws.autoscaling",
        "provider": EventSource.AWS,
        "time": r.time(message.get("Time"), "Message.Time")
        or r.time(body.get("Timestamp"), "Timestamp"),
        "region": region["region"] if region else None,
        "account": r.text(message.get("AccountId"), "Message.AccountId"),
        "received_at": received_at,
    }
    return Parsed([_autoscaling(detail_type, message, base, r, "Message")])


def _check_subscribe_url(url: str, topic: str | None, r: Reader) -> None:
    """Only a confirmation URL on SNS itself, in the topic's region: never an arbitrary URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        r.fail("SubscribeURL", "not a valid URL")
    host = parts.hostname or ""
    match = _SNS_HOST.match(host)
    if parts.scheme != "https" or match is None:
        r.fail("SubscribeURL", "must be an https://sns.<region>.amazonaws.com/ URL")
    if parts.username is not None or parts.password is not None or port not in (None, 443):
        r.fail("SubscribeURL", "must not carry credentials or a non-default port")
    query = parse_qs(parts.query)
    if query.get("Action") != ["ConfirmSubscription"]:
        r.fail("SubscribeURL", "must be a ConfirmSubscription action")
    topic_match = _TOPIC_ARN.match(topic or "")
    if topic_match and topic_match["region"] != match["region"]:
        r.fail("SubscribeURL", f"region {match['region']!r} is not the topic's region")


def _eventbridge(
    ev: Mapping[str, Any], received_at: datetime, r: Reader, prefix: str
) -> ChangeEvent:
    ev = r.mapping(ev, prefix or "body")
    detail_type = r.required_text(ev.get("detail-type"), (prefix, "detail-type"))
    source = r.required_text(ev.get("source"), (prefix, "source"))
    detail = r.mapping(ev.get("detail"), (prefix, "detail"))
    resources = [
        r.text(item, (at(prefix, "resources"), i))
        for i, item in enumerate(r.items(ev.get("resources"), (prefix, "resources")))
    ]
    base: dict[str, Any] = {
        "id": r.required_text(ev.get("id"), (prefix, "id")),
        "source": source,
        "provider": EventSource.AWS,
        "time": r.time(ev.get("time"), (prefix, "time")),
        "region": r.text(ev.get("region"), (prefix, "region")),
        "account": r.text(ev.get("account"), (prefix, "account")),
        "received_at": received_at,
    }
    where = at(prefix, "detail")
    if detail_type == CLOUDTRAIL:
        return _cloudtrail(detail, base, r, where)
    if source == "aws.autoscaling":
        return _autoscaling(detail_type, detail, base, r, where)
    cluster, pool = _eks_resource(resources)
    return ChangeEvent(
        type=f"{source}.{detail_type.replace(' ', '')}",
        operation=Operation.OTHER,
        subject=next((res for res in resources if res), None),
        cluster=cluster,
        pool=pool,
        flags=() if cluster else (EventFlag.NO_CLUSTER,),
        detail=compact(
            {
                "detailType": detail_type,
                "eventTypeCode": safe_text(detail.get("eventTypeCode"), 120),
            }
        ),
        **base,
    )


def _eks_resource(resources: list[str | None]) -> tuple[str | None, str | None]:
    """The EKS cluster (and node group) the first EKS ARN among ``resources`` names."""
    for arn in resources:
        match = _EKS_ARN.match(arn or "")
        if match:
            return match["cluster"] or match["ng_cluster"], match["pool"]
    return None, None


def _cloudtrail(
    detail: Mapping[str, Any], base: dict[str, Any], r: Reader, where: str
) -> ChangeEvent:
    name = r.required_text(detail.get("eventName"), (where, "eventName"))
    params = r.mapping(detail.get("requestParameters"), (where, "requestParameters"))
    response = r.mapping(detail.get("responseElements"), (where, "responseElements"))
    who = at(where, "userIdentity")
    notes: list[str] = []  # attribution fields ignored, and why
    identity = tolerate(notes, lambda: r.mapping(detail.get("userIdentity"), who)) or {}
    actor = tolerated_name(notes, r, identity, who, ("arn", "principalId", "invokedBy"))
    error = r.text(detail.get("errorCode"), (where, "errorCode"))
    event_time = r.time(detail.get("eventTime"), (where, "eventTime"))
    region = r.text(detail.get("awsRegion"), (where, "awsRegion"))
    account = r.text(detail.get("recipientAccountId"), (where, "recipientAccountId"))
    base = {
        **base,
        "time": event_time or base["time"],
        "region": region or base["region"],
        "account": base["account"] or account,
    }
    source = base["source"]
    cluster: str | None = None
    pool: str | None = None
    changed: tuple[str, ...] = ()
    operation = Operation.OTHER
    extra: dict[str, Any] = {}
    req = at(where, "requestParameters")
    if source == "aws.eks":
        resp = at(where, "responseElements")
        cluster, pool = _eks_target(params, response, r, req, resp)
        operation = _EKS_CALLS.get(name, Operation.OTHER)
        if name == "UpdateNodegroupConfig":
            changed = _changed_paths(params, r, req)
            if changed and all(c.startswith("scalingConfig.") for c in changed):
                operation = Operation.SCALE
        elif name == "UpdateNodegroupVersion":
            changed = tuple(
                k for k in ("version", "releaseVersion", "launchTemplate") if k in params
            )
        extra = {
            "scalingConfig": _scaling(params.get("scalingConfig"), r, req),
            "version": r.text(params.get("version"), (req, "version")),
            "releaseVersion": r.text(params.get("releaseVersion"), (req, "releaseVersion")),
            "updateId": _update_id(response, r, resp),
        }
    elif source == "aws.autoscaling":
        group = r.text(params.get("autoScalingGroupName"), (req, "autoScalingGroupName"))
        cluster, pool = _asg_target(group, params.get("tags"), r, at(req, "tags"))
        operation = _ASG_CALLS.get(name, Operation.OTHER)
        changed = tuple(
            sorted(k for k in params if k not in ("autoScalingGroupName", "tags", "honorCooldown"))
        )
        if name == "UpdateAutoScalingGroup" and changed and set(changed) <= _SCALING:
            operation = Operation.SCALE
        extra = {
            "autoScalingGroup": group,
            "desiredCapacity": r.integer(params.get("desiredCapacity"), (req, "desiredCapacity")),
            "minSize": r.integer(params.get("minSize"), (req, "minSize")),
            "maxSize": r.integer(params.get("maxSize"), (req, "maxSize")),
        }
    flags = [] if cluster else [EventFlag.NO_CLUSTER]
    if error:
        flags.append(EventFlag.FAILED)
    return ChangeEvent(
        type=f"{source}.{name}",
        operation=operation,
        subject=f"{cluster}/{pool}" if cluster and pool else cluster or pool,
        cluster=cluster,
        pool=pool,
        changed=changed,
        actor=actor,
        outcome="failure" if error else "success",
        flags=tuple(flags),
        detail=with_notes(
            compact(
                {
                    "eventName": name,
                    "eventSource": r.text(detail.get("eventSource"), (where, "eventSource")),
                    "errorCode": error,
                    "errorMessage": safe_text(detail.get("errorMessage"), 200),
                    "userAgent": safe_text(detail.get("userAgent"), 120),
                    **compact(extra),
                }
            ),
            notes,
        ),
        **base,
    )


def _eks_target(
    params: Mapping[str, Any], response: Mapping[str, Any], r: Reader, req: str, resp: str
) -> tuple[str | None, str | None]:
    cluster = r.text(params.get("name"), (req, "name")) or r.text(
        params.get("clusterName"), (req, "clusterName")
    )
    pool = r.text(params.get("nodegroupName"), (req, "nodegroupName"))
    nodegroup = r.mapping(response.get("nodegroup"), (resp, "nodegroup"))
    cluster = cluster or r.text(nodegroup.get("clusterName"), (resp, "nodegroup.clusterName"))
    pool = pool or r.text(nodegroup.get("nodegroupName"), (resp, "nodegroup.nodegroupName"))
    arn = r.text(params.get("resourceArn"), (req, "resourceArn"))
    match = _EKS_ARN.match(arn or "")
    if match and not cluster:
        cluster = match["cluster"] or match["ng_cluster"]
        pool = pool or match["pool"]
    return cluster, pool


def _changed_paths(params: Mapping[str, Any], r: Reader, where: str) -> tuple[str, ...]:
    """Leaf paths of the sized settings; labels and taints as a whole (their keys are data)."""
    paths: list[str] = []
    for key, value in params.items():
        if key in _IDENTITY_PARAMS:
            continue
        if key in ("scalingConfig", "updateConfig", "nodeRepairConfig") and value is not None:
            section = r.mapping(value, (where, key))
            paths.extend(f"{key}.{sub}" for sub, v in section.items() if v is not None)
        else:
            paths.append(key)
    return tuple(sorted(paths))


def _scaling(value: Any, r: Reader, req: str) -> dict[str, int]:
    """``requestParameters.scalingConfig``'s sizes (under ``req``, the parameters' path)."""
    if value is None:
        return {}
    where = at(req, "scalingConfig")
    section = r.mapping(value, where)
    out: dict[str, int] = {}
    for key in ("minSize", "maxSize", "desiredSize"):
        number = r.integer(section.get(key), (where, key))
        if number is not None:
            out[key] = number
    return out


def _update_id(response: Mapping[str, Any], r: Reader, where: str) -> str | None:
    update = r.mapping(response.get("update"), (where, "update"))
    return r.text(update.get("id"), (where, "update.id"))


def _autoscaling(
    detail_type: str, detail: Mapping[str, Any], base: dict[str, Any], r: Reader, where: str
) -> ChangeEvent:
    group = r.text(detail.get("AutoScalingGroupName"), (where, "AutoScalingGroupName"))
    cluster, pool = _asg_target(group, detail.get("Tags"), r, at(where, "Tags"))
    operation, outcome = _ASG_EVENTS.get(detail_type, (Operation.OTHER, None))
    if "Instance Refresh" in detail_type:
        operation = Operation.UPGRADE
    flags = [] if cluster else [EventFlag.NO_CLUSTER]
    if outcome == "failure":
        flags.append(EventFlag.FAILED)
    return ChangeEvent(
        type=f"aws.autoscaling.{detail_type.replace(' ', '')}",
        operation=operation,
        subject=group,
        cluster=cluster,
        pool=pool,
        outcome=outcome,
        flags=tuple(flags),
        detail=compact(
            {
                "detailType": detail_type,
                "autoScalingGroup": group,
                "instanceId": r.text(detail.get("EC2InstanceId"), (where, "EC2InstanceId")),
                "statusCode": r.text(detail.get("StatusCode"), (where, "StatusCode")),
                "lifecycleTransition": r.text(
                    detail.get("LifecycleTransition"), (where, "LifecycleTransition")
                ),
                "lifecycleHook": r.text(
                    detail.get("LifecycleHookName"), (where, "LifecycleHookName")
                ),
                "description": safe_text(detail.get("Description"), 200),
                "cause": safe_text(detail.get("Cause"), 200),
                "statusMessage": safe_text(detail.get("StatusMessage"), 200),
            }
        ),
        **base,
    )


def _asg_target(
    group: str | None, tags_value: Any, r: Reader, where: str
) -> tuple[str | None, str | None]:
    """(cluster, pool) of an Auto Scaling group, from its tags first, then its name."""
    tags = _tags(tags_value, r, where)
    cluster = tags.get("eks:cluster-name") or tags.get("alpha.eksctl.io/cluster-name")
    pool = tags.get("eks:nodegroup-name") or tags.get("alpha.eksctl.io/nodegroup-name")
    if not cluster:
        cluster = next(
            (
                key.removeprefix(prefix)
                for prefix in _CLUSTER_TAG_PREFIXES
                for key in sorted(tags)
                if key.startswith(prefix) and key.removeprefix(prefix) not in ("", "enabled")
            ),
            None,
        )
    if group and not pool:
        if managed := _EKS_MANAGED_ASG.match(group):
            pool = managed["pool"]
        elif eksctl := _EKSCTL_ASG.match(group):
            cluster, pool = cluster or eksctl["cluster"], eksctl["pool"]
    return cluster or None, pool or None


def _tags(value: Any, r: Reader, where: str) -> dict[str, str]:
    """Tags as a mapping, or as the list of ``{Key, Value}`` (or ``{key, value}``) AWS uses."""
    if value is None or isinstance(value, Mapping):
        return r.strings(value, where)
    out: dict[str, str] = {}
    for i, item in enumerate(r.items(value, where)):
        tag = r.mapping(item, (where, i), required=True)
        key = r.text(tag.get("Key", tag.get("key")), at(at(where, i), "Key"))
        val = tag.get("Value", tag.get("value"))
        if key:
            out[key] = r.text(val, at(at(where, i), "Value")) or ""
    return out
