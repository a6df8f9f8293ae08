"""The logs of a real ``fleetwarden serve``: JSON lines on stderr, context bound, no secret.

What is pinned: with ``--log-format json`` every stderr line is a JSON object with
``timestamp``, ``level``, ``event`` and ``logger`` (nothing on stdout); every line an HTTP
request causes carries its request id (the client's sane ``X-Request-Id``, else a generated
one; echoed in the answer); every line that handles a queued event -- the gateway's, the
worker's, the inspection's, the healer's -- carries the event key; and no configured secret
(source tokens, an HMAC secret, the read and admin tokens, a webhook URL and its signing
secret, the audit store's DSN password) nor a refused bearer token appears anywhere in the
output, whatever was posted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import pg_env
from tests.support.serve_proc import serve

AWS_TOKEN = "aws-token-Zq8TQk2LrYhA"
CE_HMAC = "ce-hmac-secret-Wm4pNs7Ev"
READ = "read-token-Jx5bHc9TuR"
ADMIN = "admin-token-Pd3sKf6GwN"
WEBHOOK_PATH = "hook-path-secret-Lq2VbN8Yc"
WEBHOOK_SECRET = "webhook-signing-secret-Tr7MxE"
DB_PASSWORD = "db-password-Gh4RzW1Ks"
WRONG_TOKEN = "wrong-token-Ub6QeL3Hd"  # refused: never logged either

EVENT = {
    "version": "0",
    "id": "b8a1c2de-0000-4000-8000-000000000001",
    "detail-type": "AWS API Call via CloudTrail",
    "source": "aws.eks",
    "account": "123456789012",
    "time": "2026-12-01T10:00:00Z",
    "region": "eu-west-1",
    "resources": [],
    "detail": {
        "eventSource": "eks.amazonaws.com",
        "eventName": "UpdateNodegroupConfig",
        "awsRegion": "eu-west-1",
        "eventTime": "2026-12-01T10:00:00Z",
        "userIdentity": {"type": "IAMUser", "arn": "arn:aws:iam::123456789012:user/alice"},
        "requestParameters": {
            "name": "duckboat",
            "nodegroupName": "custom-1",
            "scalingConfig": {"desiredSize": 2},
        },
        "eventID": "log-test-1",
    },
}
CLOUDEVENT = {"specversion": "1.0", "id": "ce-log-1", "source": "s", "type": "t"}


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


def _with_password(url: str, password: str) -> str:
    """``postgresql://postgres@host`` with a password (the test server trusts any)."""
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{password}@{host}"


def _signed(body: bytes, secret: str) -> str:
    t = str(int(time.time()))
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def _wait_for(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _lines(log: str) -> list[dict[str, Any]]:
    out = []
    for raw in log.splitlines():
        if raw.strip():
            try:
                out.append(json.loads(raw))
            except json.JSONDecodeError:
                pytest.fail(f"a stderr line is not JSON: {raw!r}")
    return out


def test_serve_logs_json_lines_with_request_id_and_event_key_and_no_secret(
    tmp_path: Path, realdata: Path, pg_url: str
) -> None:
    store = _with_password(pg_env.fresh_database(pg_url, "logs"), DB_PASSWORD)
    (tmp_path / "desired.yaml").write_text(
        "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
        "metadata: {name: duckboat}\n"
        "managedNodeGroups:\n  - {name: custom-1, instanceType: m5.large}\n"
    )
    nodes = realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json"
    config = {
        "store": store,
        "desired": [str(tmp_path / "desired.yaml")],
        "nodes": [f"duckboat={nodes}"],
        "debounceSeconds": 0.05,
        "auth": {
            "aws": {"bearerToken": AWS_TOKEN},
            "cloudevents": {"hmacSecret": CE_HMAC},
            "read": {"bearerToken": READ},
            "admin": {"bearerToken": ADMIN},
        },
        # nothing listens there: the relay fails and says so, without the URL or the secret
        "notify": [
            {
                "name": "feed",
                "kind": "webhook",
                "url": f"http://127.0.0.1:9/{WEBHOOK_PATH}",
                "secret": WEBHOOK_SECRET,
                "events": True,
            }
        ],
    }
    args = ["--log-format", "json", "--log-level", "debug"]
    with serve(tmp_path, config, args=args) as svc:
        read = {"Authorization": f"Bearer {READ}"}
        r = httpx.post(
            f"{svc.base}/events/aws",
            json=EVENT,
            headers={"Authorization": f"Bearer {AWS_TOKEN}", "X-Request-Id": "req-accepted-1"},
            timeout=10,
        )
        assert r.status_code == 202, r.text
        assert r.headers["x-request-id"] == "req-accepted-1"
        refused = httpx.post(
            f"{svc.base}/events/aws",
            json=EVENT,
            headers={"Authorization": f"Bearer {WRONG_TOKEN}", "X-Request-Id": "req-refused-1"},
            timeout=10,
        )
        assert refused.status_code == 401
        assert refused.headers["x-request-id"] == "req-refused-1"
        body = json.dumps(CLOUDEVENT).encode()
        signed = httpx.post(
            f"{svc.base}/events/cloudevents",
            content=body,
            headers={
                "content-type": "application/cloudevents+json",
                "X-Fleetwarden-Signature": _signed(body, CE_HMAC),
                "X-Request-Id": "not a sane id\t<script>",
            },
            timeout=10,
        )
        assert signed.status_code == 202, signed.text
        generated = signed.headers["x-request-id"]
        assert generated != "not a sane id\t<script>" and len(generated) == 32
        # the read side, with the token and then with the login cookie
        assert httpx.get(f"{svc.base}/api/findings", headers=read, timeout=10).status_code == 200
        login = httpx.post(
            f"{svc.base}/ui/login", data={"token": ADMIN}, timeout=10, follow_redirects=False
        )
        assert login.status_code == 303
        cookie = login.headers["set-cookie"].split(";")[0]
        assert (
            httpx.get(f"{svc.base}/api/events", headers={"Cookie": cookie}, timeout=10).status_code
            == 200
        )
        assert httpx.get(f"{svc.base}/api/events", timeout=10).status_code == 401

        # both events through the queue, the workers and the audit store
        _wait_for(
            lambda: len(httpx.get(f"{svc.base}/api/events", headers=read, timeout=10).json()) >= 2,
            "two events in the audit store",
        )
        _wait_for(lambda: '"finding decided"' in svc.log(), "a decision on the event's finding")
        _wait_for(lambda: '"event relay failed"' in svc.log(), "the relay's failure")
        assert (tmp_path / "serve.stderr").exists()
    log = svc.log()
    lines = _lines(log)

    for secret in (AWS_TOKEN, CE_HMAC, READ, ADMIN, WEBHOOK_PATH, WEBHOOK_SECRET):
        assert secret not in log, secret
    assert DB_PASSWORD not in log and WRONG_TOKEN not in log
    assert cookie.partition("=")[2] not in log  # the session cookie is a credential too

    for line in lines:
        assert {"timestamp", "level", "event", "logger"} <= line.keys(), line
        if line["logger"].startswith("fleetwarden"):
            assert line["event"] == line["event"].lower(), line

    queued = [x for x in lines if x["event"] == "events queued"]
    assert {x["request_id"] for x in queued} == {"req-accepted-1", generated}
    keys = {k for x in queued for k in x["event_keys"]}
    assert len(keys) == 2
    refusals = [x for x in lines if x["event"] == "delivery refused"]
    assert [x["request_id"] for x in refusals] == ["req-refused-1"]

    # every line that handles an event names it: recorded by the worker, the inspection it
    # caused, the healer's decision on the finding it was blamed for
    recorded = [x for x in lines if x["event"] == "event recorded"]
    assert {x["event_key"] for x in recorded} == keys
    eks_key = next(x["event_key"] for x in recorded if x["cluster"] == "duckboat")
    inspected = [x for x in lines if x["event"] == "pool inspected"]
    assert inspected and all(x["event_key"] == eks_key for x in inspected)
    assert all((x["cluster"], x["pool"]) == ("duckboat", "custom-1") for x in inspected)
    # the node dump's drift is found at start-up, before any event: decided without a cause
    decided = [x for x in lines if x["event"] == "finding decided"]
    assert decided and all(x.get("event_key", eks_key) == eks_key for x in decided)
    assert all((x["cluster"], x["pool"]) == ("duckboat", "custom-1") for x in decided)
