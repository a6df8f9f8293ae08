"""Never a 5xx for anything a client sends, on a real ``fleetwarden serve`` subprocess over
real sockets: headers (any bytes), query strings and bodies on every route; and every refusal
counted in ``fleetwarden_events_rejected_total{source, reason}``.

The known failures come first, each pinned (they were 500s with a traceback, uncounted): a
signature header with a non-ASCII byte or a 400-digit ``t=``, ``GET /api/events?limit=²``, lone
surrogates in JSON carried inside a body (an SNS ``Message``, Pub/Sub ``data``). Then a fuzz
run over every route; then the bounds: ``limits.batchEvents`` on every batch form and the
request-head limit.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from urllib.parse import quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.core.signatures import sign
from fleetwarden.formats.events import SOURCES
from tests.e2e.test_gateway import EKS_EVENT
from tests.support.nodes import node
from tests.support.serve_proc import Serve, raw_request, rejected, serve

READ = "read-token-0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef"
SOURCE_TOKEN = "source-token-0123456789abcdef"
SECRET = "hmac-secret-0123456789abcdef"
BEARER = [(b"Authorization", f"Bearer {SOURCE_TOKEN}".encode())]
JSON = [(b"Content-Type", b"application/json")]


def _config(tmp, **extra):
    (tmp / "pools.yaml").write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\ncluster: prod-eu-1\n"
        "pools:\n  general:\n    minSize: 1\n    labels: {team: platform}\n"
    )
    (tmp / "nodes.json").write_text(
        json.dumps(
            {
                "kind": "List",
                "items": [
                    node("n-1", labels={"team": "other", "eks.amazonaws.com/nodegroup": "general"})
                ],
            }
        )
    )
    (tmp / "web.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n"
        "  template:\n    spec:\n      containers: [{name: main, image: web:1}]\n"
    )
    return {
        "desired": [str(tmp / "pools.yaml")],
        "nodes": [f"prod-eu-1={tmp / 'nodes.json'}"],
        "workloads": {"apps": [{"name": "shop", "desired": [str(tmp / "web.yaml")]}]},
        "auth": {
            "read": {"bearerToken": READ},
            "admin": {"bearerToken": ADMIN},
            **{s: {"bearerToken": SOURCE_TOKEN, "hmacSecret": SECRET} for s in SOURCES},
        },
        **extra,
    }


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-input")
    with serve(tmp, _config(tmp)) as running:
        yield running
        assert "Traceback" not in running.log(), running.log()[-4000:]


def _counted(svc: Serve) -> float:
    return sum(rejected(svc.metrics(READ)).values())


def _accepted(svc: Serve) -> float:
    text = svc.metrics(READ)
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("fleetwarden_events_accepted_total{")
    )


def _sns(message: str) -> bytes:
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
            "TopicArn": "arn:aws:sns:eu-west-1:111122223333:fleetwarden-events",
            "Message": message,
            "Timestamp": "2024-05-01T11:59:59.200Z",
        }
    ).encode()


# --------------------------------------------------------------------------- the known 500s

KNOWN = {
    "signature with a non-ASCII byte": lambda: (
        b"POST",
        b"/events/aws",
        [(b"X-Fleetwarden-Signature", f"t={int(time.time())},v1=".encode() + b"\xe9" * 64)],
        json.dumps(EKS_EVENT).encode(),
    ),
    "signature with a 400-digit t": lambda: (
        b"POST",
        b"/events/aws",
        [(b"X-Fleetwarden-Signature", b"t=" + b"9" * 400 + b",v1=" + b"0" * 64)],
        json.dumps(EKS_EVENT).encode(),
    ),
    "limit=² percent-encoded": lambda: (
        b"GET",
        b"/api/events?limit=%C2%B2",
        [(b"Authorization", f"Bearer {READ}".encode())],
        b"",
    ),
    "limit=² as raw bytes": lambda: (
        b"GET",
        "/api/events?limit=²".encode(),
        [(b"Authorization", f"Bearer {READ}".encode())],
        b"",
    ),
    "minutes=² percent-encoded": lambda: (
        b"GET",
        b"/api/timeline?minutes=%C2%B2",
        [(b"Authorization", f"Bearer {READ}".encode())],
        b"",
    ),
    "a lone surrogate in an SNS Message": lambda: (
        b"POST",
        b"/events/aws",
        [*BEARER, *JSON, (b"x-amz-sns-message-type", b"Notification")],
        _sns(json.dumps(EKS_EVENT).replace("prod-eu-1", "prod\\ud800")),
    ),
    "a lone surrogate in Pub/Sub data": lambda: (
        b"POST",
        b"/events/gcp",
        [*BEARER, *JSON],
        json.dumps(
            {
                "message": {
                    "data": base64.b64encode(b'{"protoPayload": {"x": "\\udc00"}}').decode(),
                    "messageId": "m-1",
                    "publishTime": "2024-05-01T11:59:59.123Z",
                },
                "subscription": "projects/p/subscriptions/s",
            }
        ).encode(),
    ),
    "a lone surrogate in the body": lambda: (
        b"POST",
        b"/events/cloudevents",
        [*BEARER, (b"Content-Type", b"application/cloudevents+json")],
        b'{"specversion":"1.0","id":"\\ud800","source":"s","type":"t"}',
    ),
}


# what each answers now: the status, and a word of the reason where the app gives one
EXPECTED = {
    "signature with a non-ASCII byte": (401, b"v1="),
    "signature with a 400-digit t": (401, b"timestamp"),
    "limit=² percent-encoded": (400, b"limit"),
    "limit=² as raw bytes": (400, b"Invalid HTTP request"),  # the HTTP parser's own 400
    "minutes=² percent-encoded": (400, b"minutes"),
    "a lone surrogate in an SNS Message": (400, b"Message: not valid JSON"),
    "a lone surrogate in Pub/Sub data": (202, b"accepted"),  # opaque data, as documented
    "a lone surrogate in the body": (400, b"not valid JSON"),
}


@pytest.mark.parametrize("case", KNOWN, ids=list(KNOWN))
def test_a_known_500_is_now_an_answer_and_every_refusal_is_counted(svc, case):
    status, reason = EXPECTED[case]
    before = _counted(svc)
    r = raw_request(svc.port, *KNOWN[case]())
    assert r is not None and r.status == status and reason in r.body, (case, r)
    assert _counted(svc) == before + (1 if status >= 400 else 0)
    assert "Traceback" not in svc.log()


# --------------------------------------------------------------------------- fuzz

ROUTES = [
    *[(b"POST", f"/events/{s}".encode()) for s in SOURCES],
    (b"POST", b"/events/nope"),
    (b"OPTIONS", b"/events/azure"),
    (b"OPTIONS", b"/events/cloudevents"),
    (b"GET", b"/api/events"),
    (b"GET", b"/api/findings"),
    (b"GET", b"/api/decisions"),
    (b"POST", b"/api/decisions/d-1/approve"),
    (b"GET", b"/api/fleet/apps"),
    (b"GET", b"/api/fleet/versions"),
    (b"GET", b"/api/fleet/diff"),
    (b"GET", b"/api/clusters"),
    (b"GET", b"/api/timeline"),
    (b"GET", b"/api/incidents"),
    (b"GET", b"/api/fleet/grid"),
    (b"GET", b"/api/pools/prod-eu-1/general"),
    (b"POST", b"/api/decisions/d-1/deny"),
    (b"GET", b"/"),
    (b"GET", b"/ui/"),
    (b"GET", b"/ui/app.js"),
    (b"GET", b"/ui/app.css"),
    (b"GET", b"/ui/login"),
    (b"POST", b"/ui/login"),
    (b"POST", b"/ui/logout"),
    (b"GET", b"/favicon.ico"),
    (b"GET", b"/healthz"),
    (b"GET", b"/metrics"),
    (b"GET", b"/nope"),
]
_METHODS = [b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PATCH"]
# every byte a header value may carry on the wire (HTAB, SP, VCHAR, obs-text)
_VALUE = st.binary(max_size=60).map(
    lambda b: bytes(c for c in b if c == 9 or 32 <= c <= 126 or c >= 128).strip()
)
# what each header's value looks like, from its name: mostly well-formed around garbage (the
# shapes the code parses), sometimes raw bytes
_DIGITS = st.one_of(
    st.just("NOW"),  # the current time, put in when sent (inside the replay window)
    st.integers(min_value=0, max_value=10**450).map(str),
    st.sampled_from(["\u00b2", "+5", "1_0", "-1", ""]),
)
_SIGNATURE = st.tuples(_DIGITS, _VALUE, st.booleans()).map(
    lambda p: (
        (f"t={p[0]},".encode("latin-1") + b"v1=" + p[1])
        if p[2]
        else (b"v1=" + p[1] + f",t={p[0]}".encode("latin-1"))
    )
)
_HEADERS = {
    b"Authorization": st.one_of(
        _VALUE.map(lambda v: b"Bearer " + v), _VALUE.map(lambda v: b"Basic " + v), _VALUE
    ),
    b"X-Fleetwarden-Signature": st.one_of(_SIGNATURE, _VALUE),
    b"Cookie": st.one_of(
        _VALUE.map(lambda v: b"fw_session=" + v),
        st.tuples(_DIGITS, _VALUE).map(
            lambda p: b"fw_session=" + p[0].encode("latin-1") + b"." + p[1]
        ),
        _VALUE,
    ),
    b"Origin": st.one_of(_VALUE.map(lambda v: b"http://" + v), _VALUE),
    b"Content-Type": st.one_of(
        st.sampled_from(
            [
                b"application/json",
                b"application/cloudevents+json",
                b"application/cloudevents-batch+json",
                b"text/plain",
            ]
        ),
        _VALUE,
    ),
    b"ce-time": st.one_of(_DIGITS.map(lambda d: d.encode("latin-1")), _VALUE),
    **{
        name: _VALUE
        for name in (
            b"Accept",
            b"ce-specversion",
            b"ce-id",
            b"ce-source",
            b"ce-type",
            b"aeg-event-type",
            b"x-amz-sns-message-type",
            b"WebHook-Request-Origin",
            b"WebHook-Request-Rate",
            b"Expect",
            b"Upgrade",
            b"X-Other",
        )
    },
}
_HEADER = st.sampled_from(
    [b"Authorization", b"X-Fleetwarden-Signature", b"Cookie"] * 3 + list(_HEADERS)
).flatmap(lambda name: st.tuples(st.just(name), _HEADERS[name]))
_QUERY_KEYS = [
    *(b"limit", b"app", b"status", b"token", b"source", b"cluster", b"cursor", b"minutes", b"x"),
]
_QUERY_VALUE = st.one_of(
    st.binary(max_size=30).map(lambda b: quote_from_bytes(b).encode()),  # any bytes, encoded
    # raw bytes as a sloppy client sends them (no space, #, controls: those end the target)
    st.binary(max_size=30).map(lambda b: bytes(c for c in b if c > 32 and c not in b"#%\x7f")),
    st.integers(min_value=-(10**30), max_value=10**30).map(lambda i: str(i).encode()),
    st.sampled_from(["²".encode(), "١٢".encode(), b"1e3", b"0x10", b" 5", b"5 "]),
)
_BODIES = st.one_of(
    st.just(json.dumps(EKS_EVENT).encode()),
    st.binary(max_size=200),
    st.text(max_size=40).map(lambda t: json.dumps({"token": t, "id": t}).encode()),
    st.just(b"token=" + READ.encode()),
)


@st.composite
def requests(draw):
    method, path = draw(st.sampled_from(ROUTES))
    if draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(_METHODS))
    pairs = draw(st.lists(st.tuples(st.sampled_from(_QUERY_KEYS), _QUERY_VALUE), max_size=3))
    target = path + (b"?" + b"&".join(k + b"=" + v for k, v in pairs) if pairs else b"")
    headers = draw(st.lists(_HEADER, max_size=5))
    creds = draw(st.sampled_from(["none", "read", "admin", "source", "hmac", "cookie"]))
    body = draw(_BODIES) if method in (b"POST", b"PUT", b"PATCH") else b""
    host = draw(
        st.sampled_from([b"127.0.0.1", b"localhost", b"evil.example", None, b"[::1]:1", b"\xff"])
    )
    return method, target, headers, creds, body, host, draw(st.booleans())


FUZZ_EXAMPLES, FUZZ_REQUESTS_EACH = 400, 10  # 4,000 requests


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(drawn=st.lists(requests(), min_size=FUZZ_REQUESTS_EACH, max_size=FUZZ_REQUESTS_EACH))
def test_fuzz_headers_query_strings_and_bodies_on_every_route_never_5xx(svc, session, drawn):
    """Each answer is below 500; each 4xx is exactly one more count in the rejected metric
    (counted over the ten requests an example sends: reading /metrics around every single
    request was two thirds of this test's time); each 202 is a request that carried a
    source's own credentials."""
    before = _counted(svc)
    answered = []
    for request in drawn:
        r = _send(svc, session, request)
        answered.append((request, r.status))
    refused = sum(1 for _, status in answered if status >= 400)
    assert _counted(svc) - before == refused, answered


def _send(svc: Serve, session: bytes, request) -> Any:
    method, target, headers, creds, body, host, order = request
    extra = {
        "none": [],
        "read": [(b"Authorization", f"Bearer {READ}".encode())],
        "admin": [(b"Authorization", f"Bearer {ADMIN}".encode())],
        "source": BEARER,
        "hmac": [(b"X-Fleetwarden-Signature", sign(SECRET, body, int(time.time())).encode())],
        "cookie": [(b"Cookie", session)],
    }[creds]
    if host == b"127.0.0.1":
        host = b"127.0.0.1:" + str(svc.port).encode()
    now = str(int(time.time())).encode()
    headers = [(k, v.replace(b"NOW", now)) for k, v in headers]
    sent = [*headers, *extra] if order else [*extra, *headers]  # the last of a name wins
    r = raw_request(svc.port, method, target, sent, body, host=host)
    assert r is not None, ("the connection closed without an answer", request)
    assert r.status < 500, (request, r)
    if r.status == 202 and b'"accepted"' in r.body:
        assert creds in ("source", "hmac") or any(
            v.startswith(b"Bearer " + SOURCE_TOKEN.encode()) for _, v in headers
        ), request
    return r


@pytest.fixture(scope="module")
def session(svc):
    """The session cookie the login form sets (name=value)."""
    r = httpx.post(f"{svc.base}/ui/login", data={"token": READ}, follow_redirects=False, timeout=10)
    assert r.status_code == 303
    return r.headers["set-cookie"].split(";")[0].encode()
