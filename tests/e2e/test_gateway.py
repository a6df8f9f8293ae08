"""The event gateway over HTTP (ASGI, in process) with a real SQLite queue file.

Pins the contract: 202 once stored, 401 without valid credentials and nothing stored, 413 over
the body limit, 400 with the reason for a body that does not parse, 429 with Retry-After when the
queue is full, the providers' handshakes; and a fuzz run that never gets a 5xx.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.app.ingesting import SourceAuth
from fleetwarden.app.service_config import GatewayConfig
from fleetwarden.core.signatures import sign
from fleetwarden.entrypoints.gateway import create_app
from fleetwarden.formats.events import SOURCES, parsers

TOKEN = "gw-test-token"
SECRET = "gw-test-secret"

EKS_EVENT = {
    "version": "0",
    "id": "7bf73129-1428-4cd3-a780-95db273d1602",
    "detail-type": "AWS API Call via CloudTrail",
    "source": "aws.eks",
    "account": "123456789012",
    "time": "2026-11-29T10:00:00Z",
    "region": "eu-west-1",
    "resources": [],
    "detail": {
        "eventVersion": "1.08",
        "userIdentity": {"type": "IAMUser", "arn": "arn:aws:iam::123456789012:user/alice"},
        "eventTime": "2026-11-29T10:00:00Z",
        "eventSource": "eks.amazonaws.com",
        "eventName": "UpdateNodegroupConfig",
        "awsRegion": "eu-west-1",
        "requestParameters": {
            "name": "prod-eu-1",
            "nodegroupName": "general",
            "scalingConfig": {"desiredSize": 5},
        },
        "eventID": "e1",
    },
}


class Harness:
    def __init__(self, tmp: Path, **config) -> None:
        self.queue = SqliteQueue(tmp / "queue.db", max_depth=config.pop("max_depth", 1000))
        auth = {s: SourceAuth(hmac_secrets=(SECRET,), bearer_tokens=(TOKEN,)) for s in SOURCES}
        self.config = GatewayConfig(auth=auth, known_pools={"prod-eu-1": {"general"}}, **config)
        self.app = create_app(self.config, self.queue, parsers())
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://gw"
        )

    async def post(self, source: str, body, *, auth: str | None = "bearer", headers=None):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"content-type": "application/json", **(headers or {})}
        if auth == "bearer":
            h["authorization"] = f"Bearer {TOKEN}"
        elif auth == "hmac":
            h["x-fleetwarden-signature"] = sign(SECRET, raw, int(time.time()))
        return await self.client.post(f"/events/{source}", content=raw, headers=h)

    async def close(self) -> None:
        await self.client.aclose()
        await self.queue.close()


@pytest.fixture()
async def gw(tmp_path):
    h = Harness(tmp_path)
    yield h
    await h.close()


async def test_authenticated_event_is_stored_then_acknowledged(gw):
    r = await gw.post("aws", EKS_EVENT)
    assert r.status_code == 202 and r.json() == {"accepted": 1, "ids": [EKS_EVENT["id"]]}
    (d,) = await gw.queue.get_batch(10, timeout=1)
    e = d.event
    assert (e.cluster, e.pool, e.operation.value, e.actor) == (
        "prod-eu-1",
        "general",
        "scale",
        "arn:aws:iam::123456789012:user/alice",
    )
    assert e.flags == ()
    api = await gw.client.get("/api/events?limit=5")
    assert api.json()[0]["id"] == EKS_EVENT["id"]


async def test_hmac_signature_also_authenticates(gw):
    assert (await gw.post("aws", EKS_EVENT, auth="hmac")).status_code == 202


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong"},
        {"authorization": "Basic Zm9vOmJhcg=="},
        {"x-fleetwarden-signature": "t=1,v1=00"},
    ],
    ids=["none", "bad-bearer", "bad-basic", "stale-signature"],
)
async def test_no_or_bad_credentials_are_401_and_nothing_is_stored(gw, source, headers):
    r = await gw.post(source, EKS_EVENT, auth=None, headers=headers)
    assert r.status_code == 401 and r.json()["error"]
    assert await gw.queue.depth() == 0


async def test_unknown_cluster_is_kept_and_flagged(gw):
    other = json.loads(json.dumps(EKS_EVENT))
    other["id"] = "other-1"
    other["detail"]["requestParameters"]["name"] = "mystery"
    assert (await gw.post("aws", other)).status_code == 202
    (d,) = await gw.queue.get_batch(10, timeout=1)
    assert [f.value for f in d.event.flags] == ["unknown-cluster"]


async def test_body_limit_is_413(tmp_path):
    h = Harness(tmp_path, body_limit=2048)
    try:
        r = await h.post("aws", b"{" + b" " * 4096 + b"}")
        assert r.status_code == 413
        assert await h.queue.depth() == 0
    finally:
        await h.close()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "empty body"),
        (b"[1, 2, 3]", "aws payload"),
        (json.dumps({**EKS_EVENT, "detail": "nope"}).encode(), "detail"),
    ],
)
async def test_malformed_bodies_are_400_with_the_reason(gw, body, needle):
    r = await gw.post("aws", body)
    assert r.status_code == 400
    assert needle in r.json()["error"]
    assert await gw.queue.depth() == 0


async def test_queue_over_its_limit_is_429_with_retry_after(tmp_path):
    h = Harness(tmp_path, max_depth=2)
    try:
        for i in range(2):
            ev = {**EKS_EVENT, "id": f"fill-{i}"}
            assert (await h.post("aws", ev)).status_code == 202
        r = await h.post("aws", {**EKS_EVENT, "id": "one-too-many"})
        assert r.status_code == 429 and r.headers["retry-after"]
        assert await h.queue.depth() == 2
    finally:
        await h.close()


async def test_redelivery_of_the_same_event_is_stored_once_and_counted(gw):
    for _ in range(3):
        assert (await gw.post("aws", EKS_EVENT)).status_code == 202
    assert await gw.queue.depth() == 1
    text = (await gw.client.get("/metrics")).text
    assert "fleetwarden_events_duplicate_total 2.0" in text


async def test_a_forged_cloudevent_cannot_shadow_the_aws_event_of_the_same_source_and_id(gw):
    """A CloudEvents sender picks ``source`` and ``id`` freely: the one the real EventBridge
    event will have, and a forged actor. Keys are namespaced by the route that authenticated
    the delivery, so the genuine event is stored too, with its own actor."""
    forged = {
        "specversion": "1.0",
        "id": EKS_EVENT["id"],
        "source": "aws.eks",
        "type": "aws.eks.UpdateNodegroupConfig",
        "cluster": "prod-eu-1",
        "nodepool": "general",
        "actor": "arn:aws:iam::123456789012:user/mallory",
        "data": {},
    }
    r = await gw.post(
        "cloudevents", forged, headers={"content-type": "application/cloudevents+json"}
    )
    assert r.status_code == 202, r.text
    assert (await gw.post("aws", EKS_EVENT)).status_code == 202
    got = {d.event.route: d.event for d in await gw.queue.get_batch(10, timeout=1)}
    assert set(got) == {"cloudevents", "aws"}
    assert got["aws"].key != got["cloudevents"].key
    assert (got["aws"].source, got["aws"].id) == (got["cloudevents"].source, EKS_EVENT["id"])
    assert got["aws"].actor == "arn:aws:iam::123456789012:user/alice"
    assert got["cloudevents"].actor == "arn:aws:iam::123456789012:user/mallory"


async def test_event_grid_subscription_validation_echoes_the_code(gw):
    # https://learn.microsoft.com/en-us/azure/event-grid/webhook-event-delivery
    validation = [
        {
            "id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66",
            "topic": "/subscriptions/xx",
            "subject": "",
            "data": {
                "validationCode": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6",
                "validationUrl": "https://rp-eastus2.eventgrid.azure.net/x",
            },
            "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
            "eventTime": "2018-01-25T22:12:19.4556811Z",
            "metadataVersion": "1",
            "dataVersion": "1",
        }
    ]
    r = await gw.post("azure", validation, headers={"aeg-event-type": "SubscriptionValidation"})
    assert r.status_code == 200
    assert r.json() == {"validationResponse": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"}
    assert await gw.queue.depth() == 0


async def test_cloudevents_webhook_options_handshake(gw):
    # https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/http-webhook.md#4-abuse-protection
    r = await gw.client.options(
        "/events/azure",
        headers={
            "WebHook-Request-Origin": "eventemitter.example.com",
            "WebHook-Request-Rate": "120",
        },
    )
    assert r.status_code == 200
    assert r.headers["webhook-allowed-origin"] == "eventemitter.example.com"
    assert r.headers["webhook-allowed-rate"]


async def test_real_azure_batch_sample_is_accepted(gw, realdata):
    body = (realdata / "events" / "azure-eventgrid-MultipleEventsInSameBatch.json").read_bytes()
    r = await gw.post("azure", body)
    assert r.status_code == 202 and r.json()["accepted"] >= 2


async def test_event_grid_event_with_claims_that_are_not_json_is_accepted_and_attributed(
    gw, realdata
):
    """The real ResourceDelete sample carries claims as JSON text: cut short, Event Grid would
    dead-letter a refused delivery. It is stored (202), attributed to data.caller, and the
    event says why the claims were ignored; one without a caller has no actor."""
    sample = json.loads(
        (realdata / "events" / "azure-eventgrid-ResourceDeleteSuccessEvent.json").read_text()
    )
    with_caller = json.loads(json.dumps(sample))
    with_caller[0]["data"]["claims"] = with_caller[0]["data"]["claims"][:20]
    with_caller[0]["data"]["caller"] = "dave@contoso.com"
    bare = json.loads(json.dumps(sample))
    bare[0]["id"] = "no-caller-1"
    bare[0]["data"]["claims"] = "[1, 2, 3]"
    for body in (with_caller, bare):
        r = await gw.post("azure", body, headers={"aeg-event-type": "Notification"})
        assert r.status_code == 202, r.text
    stored = {d.event.id: d.event for d in await gw.queue.get_batch(10, timeout=1)}
    deleted = stored[sample[0]["id"]]
    assert deleted.actor == "dave@contoso.com"
    [note] = deleted.detail["notes"]
    assert note.startswith("[0].data.claims: not valid JSON")
    assert stored["no-caller-1"].actor is None
    assert (
        stored["no-caller-1"].detail["notes"][0].startswith("[0].data.claims: expected an object")
    )
    api = {e["id"]: e for e in (await gw.client.get("/api/events?limit=5")).json()}
    assert api[sample[0]["id"]]["actor"] == "dave@contoso.com"
    assert api[sample[0]["id"]]["detail"]["notes"] == [note]


async def test_broken_attribution_is_accepted_on_every_route_identity_still_refused(gw):
    identity = json.loads(json.dumps(EKS_EVENT))
    identity["detail"]["userIdentity"] = "root"
    assert (await gw.post("aws", identity)).status_code == 202
    (d,) = await gw.queue.get_batch(10, timeout=1)
    assert d.event.actor is None and d.event.detail["notes"]
    argo = {"app": "payments", "cluster": "prod-eu-1", "operation": "Succeeded", "actor": 7}
    assert (await gw.post("argocd", argo)).status_code == 202
    flux = {
        "involvedObject": {"kind": "Kustomization", "name": "apps"},
        "reportingController": {"name": "kustomize-controller"},
    }
    assert (await gw.post("flux", flux)).status_code == 202
    # what identifies the change is still a precise 400, with the field named
    unnamed = json.loads(json.dumps(identity))
    unnamed["detail"]["eventName"] = 5
    r = await gw.post("aws", unnamed)
    assert r.status_code == 400 and "detail.eventName" in r.json()["error"]
    r = await gw.post("flux", {**flux, "involvedObject": {"kind": "Kustomization"}})
    assert r.status_code == 400 and "involvedObject.name" in r.json()["error"]


AKS_TOPIC = (
    "/subscriptions/7f2c1d3e-0a1b-4c2d-8e9f-0a1b2c3d4e5f/resourceGroups/rg/providers/"
    "Microsoft.ContainerService/managedClusters/prod-eu-1"
)


def _aks_event(event_id: str, data: dict) -> list[dict]:
    # https://learn.microsoft.com/en-us/azure/event-grid/event-schema-aks
    return [
        {
            "topic": AKS_TOPIC,
            "subject": "prod-eu-1",
            "eventType": "Microsoft.ContainerService.NewKubernetesVersionAvailable",
            "id": event_id,
            "data": data,
            "dataVersion": "1",
            "metadataVersion": "1",
            "eventTime": "2021-07-01T04:52:57.0000000Z",
        }
    ]


async def test_aks_version_event_is_stored_with_its_versions_and_a_wrong_type_is_a_400(gw):
    versions = {
        "latestSupportedKubernetesVersion": "1.20.7",
        "latestStableKubernetesVersion": "1.19.11",
        "lowestMinorKubernetesVersion": "1.18.19",
        "latestPreviewKubernetesVersion": "1.21.1",
    }
    r = await gw.post("azure", _aks_event("aks-v-1", versions))
    assert r.status_code == 202, r.text
    (stored,) = (await gw.client.get("/api/events?limit=5")).json()
    assert {k: stored["detail"][k] for k in versions} == versions
    r = await gw.post(
        "azure", _aks_event("aks-v-2", {**versions, "lowestMinorKubernetesVersion": 1.18})
    )
    assert r.status_code == 400 and "data.lowestMinorKubernetesVersion" in r.json()["error"]


async def test_metrics_count_received_accepted_rejected(gw):
    await gw.post("aws", EKS_EVENT)
    await gw.post("aws", EKS_EVENT, auth=None)
    await gw.post("aws", b"{")
    text = (await gw.client.get("/metrics")).text
    assert 'fleetwarden_events_received_total{source="aws"} 3.0' in text
    assert 'fleetwarden_events_accepted_total{source="aws"} 1.0' in text
    assert 'fleetwarden_events_rejected_total{reason="unauthorized",source="aws"} 1.0' in text
    assert 'fleetwarden_events_rejected_total{reason="malformed",source="aws"} 1.0' in text
    assert "fleetwarden_queue_depth 1.0" in text


async def test_unknown_source_and_bad_limit(gw):
    assert (await gw.client.post("/events/nope", content=b"{}")).status_code == 404
    assert (await gw.client.get("/api/events?limit=abc")).status_code == 400
    assert (await gw.client.get("/healthz")).json() == {"status": "ok"}


@pytest.mark.parametrize("limit", ["²", "١٢", "9" * 5000, "+5", " 5"])
async def test_a_limit_in_other_digits_or_too_long_is_400_not_500(gw, limit):
    """str.isdigit says yes to "²" and Arabic-Indic digits, and int() then refuses "²"."""
    r = await gw.client.get("/api/events", params={"limit": limit})
    assert r.status_code == 400 and "limit" in r.json()["error"]


async def test_json_inside_a_body_with_a_lone_surrogate_is_a_400_naming_the_field(gw):
    """The standard library's json reads "\\ud800" into a str nothing can store (it was a 500
    when queued); JSON inside a string is now read like a body."""
    message = json.dumps(EKS_EVENT).replace("prod-eu-1", "prod\\ud800")
    sns = {"Type": "Notification", "MessageId": "m-1", "Message": message}
    r = await gw.post("aws", sns, headers={"x-amz-sns-message-type": "Notification"})
    assert r.status_code == 400 and "Message: not valid JSON" in r.json()["error"]
    assert await gw.queue.depth() == 0


# --- fuzz: >= 10,000 generated bodies and headers over every route ----------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
_header_names = st.sampled_from(
    [
        "content-type",
        "ce-specversion",
        "ce-id",
        "ce-source",
        "ce-type",
        "ce-time",
        "aeg-event-type",
        "x-amz-sns-message-type",
        "webhook-request-origin",
        "x-other",
    ]
)
_bodies = st.one_of(
    _json.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.just(json.dumps(EKS_EVENT).encode()),
)


_request = st.tuples(
    st.sampled_from([*SOURCES, "nope"]),
    _bodies,
    st.dictionaries(
        _header_names,
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
        max_size=4,
    ),
    st.sampled_from(["bearer", "hmac", None]),
)
FUZZ_EXAMPLES, FUZZ_REQUESTS_EACH = 1_020, 10  # 10,200 requests


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(requests=st.lists(_request, min_size=FUZZ_REQUESTS_EACH, max_size=FUZZ_REQUESTS_EACH))
def test_fuzz_never_5xx_and_unauthenticated_never_stores(tmp_path_factory, requests):
    """Requests are drawn ten to an example: hypothesis's own cost per example (generation
    and its mutations) was three quarters of this test's time at one request an example."""
    h = _fuzz_harness(tmp_path_factory)

    async def go():
        for source, body, headers, authed in requests:
            before = await h.queue.depth()
            r = await h.post(source, body, auth=authed, headers=headers)
            assert r.status_code < 500, r.text
            if authed is None and source != "nope":
                assert r.status_code == 401
                assert await h.queue.depth() == before

    asyncio.run(go())


_FUZZ: dict[str, Harness] = {}


def _fuzz_harness(factory) -> Harness:
    if "h" not in _FUZZ:
        _FUZZ["h"] = Harness(factory.mktemp("fuzz"), max_depth=10_000_000)
    return _FUZZ["h"]
