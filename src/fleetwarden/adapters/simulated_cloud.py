"""The demo's simulated cloud: after a change to the simulated fleet, the provider's change
event as a real delivery would carry it, posted to the service's gateway over HTTP.

Shapes (as in the providers' published samples): AWS -- an EventBridge ``AWS API Call via
CloudTrail`` event from ``aws.eks`` (``UpdateNodegroupConfig``, ``requestParameters.name`` /
``nodegroupName``, ``userIdentity.arn``), as an API destination posts it; Azure -- an Event
Grid array with one ``Microsoft.Resources.ResourceWriteSuccess`` event on an AKS agent pool
(``data.resourceUri``, ``operationName``, ``claims``); Google Cloud -- a Pub/Sub push envelope
whose ``message.data`` is a GKE ``AuditLog`` LogEntry (``UpdateNodePool``, ``resourceName``
``projects/<p>/locations/<l>/clusters/<c>/nodePools/<np>``, ``principalEmail``), base64.
Each delivery is authenticated like the real one is configured here: a bearer token in the
``Authorization`` header (EventBridge connection, Event Grid delivery attribute, Pub/Sub
push with a token).

What this module does not do: sign with the providers' own keys (a demo has none), or
decide what changed (``app.demoing.changed_pools`` does).
"""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Any

import httpx
import orjson

__all__ = ["PROVIDERS", "client", "delivery", "post"]

# the demo fleet's clusters and their clouds (``adapters.simulated``)
PROVIDERS = {"prod-eu-1": "aws", "prod-us-1": "gcp", "prod-asia-1": "azure"}
_ACCOUNT = "123456789012"
_SUBSCRIPTION = "0b1f6471-1bf0-4dda-aec3-111122223333"
_PROJECT = "fleet-demo"


def _ts(now: datetime) -> str:
    return now.isoformat(timespec="seconds").replace("+00:00", "Z")


def _aws(cluster: str, pool: str, actor: str, now: datetime) -> dict[str, Any]:
    arn = actor if actor.startswith("arn:") else f"arn:aws:iam::{_ACCOUNT}:user/{actor}"
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "AWS API Call via CloudTrail",
        "source": "aws.eks",
        "account": _ACCOUNT,
        "time": _ts(now),
        "region": "eu-west-1",
        "resources": [],
        "detail": {
            "eventVersion": "1.08",
            "userIdentity": {"type": "IAMUser", "arn": arn, "accountId": _ACCOUNT},
            "eventTime": _ts(now),
            "eventSource": "eks.amazonaws.com",
            "eventName": "UpdateNodegroupConfig",
            "awsRegion": "eu-west-1",
            "requestParameters": {
                "name": cluster,
                "nodegroupName": pool,
                "labels": {"addOrUpdateLabels": {"changed-by": actor}},
            },
            "eventID": str(uuid.uuid4()),
            "eventType": "AwsApiCall",
        },
    }


def _azure(cluster: str, pool: str, actor: str, now: datetime) -> list[dict[str, Any]]:
    group = f"/subscriptions/{_SUBSCRIPTION}/resourceGroups/fleet"
    uri = (
        f"{group}/providers/Microsoft.ContainerService/managedClusters/{cluster}/agentPools/{pool}"
    )
    return [
        {
            "topic": f"/subscriptions/{_SUBSCRIPTION}",
            "subject": uri,
            "eventType": "Microsoft.Resources.ResourceWriteSuccess",
            "eventTime": now.isoformat().replace("+00:00", "Z"),
            "id": str(uuid.uuid4()),
            "data": {
                "authorization": {
                    "scope": uri,
                    "action": "Microsoft.ContainerService/managedClusters/agentPools/write",
                },
                "claims": {
                    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn": actor,
                },
                "correlationId": str(uuid.uuid4()),
                "resourceProvider": "Microsoft.ContainerService",
                "resourceUri": uri,
                "operationName": "Microsoft.ContainerService/managedClusters/agentPools/write",
                "status": "Succeeded",
                "subscriptionId": _SUBSCRIPTION,
                "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
            },
            "dataVersion": "",
            "metadataVersion": "1",
        }
    ]


def _gcp(cluster: str, pool: str, actor: str, now: datetime) -> dict[str, Any]:
    name = f"projects/{_PROJECT}/locations/us-central1/clusters/{cluster}/nodePools/{pool}"
    entry = {
        "insertId": uuid.uuid4().hex[:12],
        "logName": f"projects/{_PROJECT}/logs/cloudaudit.googleapis.com%2Factivity",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "authenticationInfo": {"principalEmail": actor},
            "methodName": "google.container.v1.ClusterManager.UpdateNodePool",
            "resourceName": name,
            "serviceName": "container.googleapis.com",
        },
        "resource": {
            "type": "gke_nodepool",
            "labels": {
                "cluster_name": cluster,
                "nodepool_name": pool,
                "location": "us-central1",
                "project_id": _PROJECT,
            },
        },
        "severity": "NOTICE",
        "timestamp": now.isoformat().replace("+00:00", "Z"),
    }
    return {
        "subscription": f"projects/{_PROJECT}/subscriptions/fleetwarden-push",
        "message": {
            "attributes": {"logging.googleapis.com/timestamp": _ts(now)},
            "data": base64.b64encode(orjson.dumps(entry)).decode(),
            "messageId": str(uuid.uuid4().int)[:16],
            "publishTime": now.isoformat().replace("+00:00", "Z"),
        },
    }


def delivery(cluster: str, pool: str, actor: str, now: datetime) -> tuple[str, bytes]:
    """The gateway route (``aws``, ``azure``, ``gcp``) and body of the change event the
    cluster's cloud sends for a change of ``pool`` by ``actor``."""
    provider = PROVIDERS.get(cluster, "aws")
    body: Any
    if provider == "azure":
        body = _azure(cluster, pool, actor, now)
    elif provider == "gcp":
        body = _gcp(cluster, pool, actor, now)
    else:
        body = _aws(cluster, pool, actor, now)
    return provider, orjson.dumps(body)


def client(base: str, *, timeout: float = 10.0) -> httpx.AsyncClient:
    """A client for the demo's own gateway at ``base`` (a loopback URL): never through a
    proxy, as Go never proxies a loopback server (``adapters.proxies``); httpx's own reading of
    ``HTTP_PROXY`` would send it there unless ``NO_PROXY`` named the address."""
    return httpx.AsyncClient(base_url=base, timeout=timeout, trust_env=False)


async def post(client: httpx.AsyncClient, source: str, body: bytes, token: str) -> int:
    """POST one delivery to ``/events/<source>``; the HTTP status (0: no answer)."""
    try:
        resp = await client.post(
            f"/events/{source}",
            content=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
    except httpx.HTTPError:
        return 0
    return resp.status_code
