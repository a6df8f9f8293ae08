"""The front door of a real ``fleetwarden serve`` subprocess: the read side closed by default,
the Host check, the login form and its cookie, and the bounds on what one request may carry
(``limits.batchEvents`` on every batch form, ``limits.headerBytes``).

What is pinned: ``auth.read`` protects ``/api/*``, ``/ui/`` and ``/metrics`` (401 without it,
``metrics.public`` opens ``/metrics`` only); ``allowedHosts`` (default: the loopback names and
the listen host) refuses any other ``Host`` with 400 on every route but ``/healthz``; the login
form sets an HttpOnly, SameSite=Strict cookie that opens the read side and nothing else;
``serve`` will not listen on a non-loopback address without ``auth.read`` (exit 2, one line)
unless ``auth.read.public``; every refusal is counted.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time

import httpx
import pytest

from fleetwarden.core.access import LOOPBACK_HOSTS, session_value
from fleetwarden.formats.errors import FormatError
from fleetwarden.wiring.service_config import (
    exposure_problem,
    service_config_from,
    without_credentials,
)
from tests.e2e.test_gateway import EKS_EVENT
from tests.formats.test_events import GENERIC, arm_event, as_cloudevent
from tests.support.serve_proc import EXE, free_port, raw_request, rejected, serve

READ = "read-token-for-the-door-tests"
ADMIN = "admin-token-for-the-door-tests"
SOURCE = "source-token-for-the-door-tests"

READ_ROUTES = [
    "/api/events",
    "/api/findings",
    "/api/decisions",
    "/api/clusters",
    "/api/fleet/apps",
    "/ui/",
    "/ui/app.js",
    "/ui/index.html",
    "/metrics",
]


def _config(**extra):
    return {
        "auth": {
            "read": {"bearerToken": READ},
            "admin": {"bearerToken": ADMIN},
            "aws": {"bearerToken": SOURCE},
            "azure": {"bearerToken": SOURCE},
            "cloudevents": {"bearerToken": SOURCE},
        },
        **extra,
    }


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("door"), _config(limits={"batchEvents": 5})) as s:
        yield s


def get(svc, path, *, host=None, **headers):
    h = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    host_header = (host or f"127.0.0.1:{svc.port}").encode()
    r = raw_request(svc.port, b"GET", path.encode(), h, host=host_header)
    assert r is not None
    return r


def counted(svc):
    return rejected(svc.metrics(READ))


# --------------------------------------------------------------------------- the read side


@pytest.mark.parametrize("path", READ_ROUTES)
def test_the_read_side_needs_a_read_token_and_takes_the_admin_token_too(svc, path):
    before = counted(svc)
    r = get(svc, path)
    assert r.status == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    family = "metrics" if path == "/metrics" else path.split("/")[1]
    assert (
        counted(svc).get((family, "unauthorized"), 0) == before.get((family, "unauthorized"), 0) + 1
    )
    assert get(svc, path, authorization=f"Bearer {SOURCE}").status == 401  # a source's token
    assert get(svc, path, authorization=f"Bearer {READ}x").status == 401
    assert get(svc, path, authorization=f"Bearer {READ}").status == 200
    assert get(svc, path, authorization=f"Bearer {ADMIN}").status == 200


def test_the_dashboard_without_a_session_answers_401_with_the_login_form(svc):
    r = get(svc, "/ui/")
    assert r.status == 401 and b'<form id="login"' in r.body and b'action="/ui/login"' in r.body
    csp = r.headers["content-security-policy"]
    assert "form-action 'self'" in csp and "script-src" not in csp  # no script on this page
    assert get(svc, "/ui/login").status == 200
    assert get(svc, "/ui/app.css").status == 200  # the form's stylesheet
    assert get(svc, "/healthz").status == 200


def test_the_login_form_sets_an_httponly_samesite_strict_cookie_that_opens_the_read_side(svc):
    with httpx.Client(base_url=svc.base, follow_redirects=False) as client:
        wrong = client.post("/ui/login", data={"token": "not-it"})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        assert b'<p id="error">' in wrong.content  # the page says so (nothing reflected)
        ok = client.post("/ui/login", data={"token": READ})
        assert ok.status_code == 303 and ok.headers["location"] == "/ui/"
        cookie = ok.headers["set-cookie"]
        attrs = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
        assert {"httponly", "path", "max-age"} <= attrs
        assert "samesite=strict" in cookie.lower()
        assert READ not in cookie  # an HMAC of the token, never the token
        assert "secure" not in attrs  # plain http on loopback: a Secure cookie would be lost
        name_value = cookie.split(";")[0]
        for path in READ_ROUTES:
            assert client.get(path, headers={"cookie": name_value}).status_code == 200, path
        # the cookie opens the read side only: an event route keeps its own credentials
        r = client.post("/events/aws", json=EKS_EVENT, headers={"cookie": name_value})
        assert r.status_code == 401
        out = client.post("/ui/logout", headers={"cookie": name_value})
        assert out.status_code == 303 and 'fw_session=""' in out.headers["set-cookie"]


def test_a_forged_or_expired_session_is_refused(svc):
    future = int(time.time()) + 3600
    good = session_value(READ, future)
    assert get(svc, "/api/findings", cookie=f"fw_session={good}").status == 200
    past = int(time.time()) - 1
    for forged in (
        session_value("other-token", future),
        session_value(READ, past),  # expired
        good[:-1] + ("0" if good[-1] != "0" else "1"),
        f"{future}.",
        f"{'9' * 400}.{good.split('.')[1]}",
        "x" * 5000,
    ):
        assert get(svc, "/api/findings", cookie=f"fw_session={forged}").status == 401, forged


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site", "origin": "http://127.0.0.1"},
    ],
)
def test_a_login_posted_from_another_site_is_refused(svc, headers):
    r = httpx.post(
        f"{svc.base}/ui/login", data={"token": READ}, headers=headers, follow_redirects=False
    )
    assert r.status_code == 403 and "set-cookie" not in r.headers


def test_event_routes_keep_their_own_credentials(svc):
    r = httpx.post(
        f"{svc.base}/events/aws", json=EKS_EVENT, headers={"authorization": f"Bearer {READ}"}
    )
    assert r.status_code == 401
    r = httpx.post(
        f"{svc.base}/events/aws", json=EKS_EVENT, headers={"authorization": f"Bearer {SOURCE}"}
    )
    assert r.status_code == 202


def test_metrics_public_opens_metrics_and_nothing_else(tmp_path):
    with serve(tmp_path, _config(metrics={"public": True})) as s:
        assert httpx.get(f"{s.base}/metrics").status_code == 200
        assert httpx.get(f"{s.base}/api/findings").status_code == 401
        assert httpx.get(f"{s.base}/ui/", follow_redirects=False).status_code == 401


# --------------------------------------------------------------------------- Host


@pytest.mark.parametrize(
    "path", ["/api/findings", "/ui/", "/metrics", "/ui/login", "/", "/nope", "/events/aws"]
)
@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:1", "127.0.0.2", "localhost.evil.example", None, "\xff"]
)
def test_another_host_is_refused_on_every_route_but_healthz(svc, path, host):
    """DNS rebinding: a page on evil.example whose name now points to 127.0.0.1 sends
    Host: evil.example -- it reaches the socket, never the data."""
    h = [(b"Authorization", f"Bearer {READ}".encode())]
    body = json.dumps(EKS_EVENT).encode()
    method = b"POST" if path.startswith("/events/") else b"GET"
    raw_host = None if host is None else host.encode("latin-1")
    before = sum(v for (_, reason), v in counted(svc).items() if reason == "host")
    r = raw_request(
        svc.port, method, path.encode(), h, body if method == b"POST" else b"", host=raw_host
    )
    assert r is not None and r.status == 400 and b"allowedHosts" in r.body, (path, host, r)
    after = sum(v for (_, reason), v in counted(svc).items() if reason == "host")
    assert after == before + 1
    healthz = raw_request(svc.port, b"GET", b"/healthz", [], host=raw_host)
    assert healthz is not None and healthz.status == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"])
def test_the_loopback_names_are_allowed_by_default_with_or_without_a_port(svc, host):
    for value in (host, f"{host}:{svc.port}"):
        assert get(svc, "/api/findings", host=value, authorization=f"Bearer {READ}").status == 200


def test_allowed_hosts_replace_the_default_and_take_wildcards(tmp_path):
    config = _config(allowedHosts=["fleetwarden.example.com", "*.svc.cluster.local"])
    with serve(tmp_path, config) as s:
        ok = {"authorization": f"Bearer {READ}"}
        for host, status in (
            ("fleetwarden.example.com", 200),
            ("fleetwarden.example.com:443", 200),
            ("fleetwarden.fleetwarden.svc.cluster.local:8080", 200),
            ("svc.cluster.local", 400),
            ("127.0.0.1", 400),  # the list replaces the default
        ):
            assert get(s, "/api/findings", host=host, **ok).status == status, host
        assert httpx.get(f"{s.base}/healthz").status_code == 200  # kubelet probes by pod IP


# --------------------------------------------------------------------------- exposure


def test_serve_refuses_a_non_loopback_listen_without_auth_read_in_one_line(tmp_path):
    cfg = tmp_path / "svc.yaml"
    cfg.write_text(json.dumps({"listen": "0.0.0.0:8080", "queuePath": str(tmp_path / "q.db")}))
    r = subprocess.run([EXE, "serve", "-c", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "auth.read" in lines[0] and "0.0.0.0:8080" in lines[0], r.stderr
    assert not (tmp_path / "q.db").exists()  # refused before anything was opened


@pytest.mark.parametrize("read", [{"public": True}, {"bearerToken": READ}])
def test_serve_listens_on_every_address_with_auth_read_or_when_told_it_is_public(tmp_path, read):
    port = free_port()
    with serve(tmp_path, {"listen": f"0.0.0.0:{port}", "auth": {"read": read}}) as s:
        assert s.port == port
        r = httpx.get(f"http://127.0.0.1:{port}/healthz")
        assert r.status_code == 200
        # the listen host is allowed, but 0.0.0.0 is no name: a client uses loopback names
        # or an allowedHosts entry
        headers = {"authorization": f"Bearer {READ}"} if "bearerToken" in read else {}
        assert (
            httpx.get(f"http://127.0.0.1:{port}/api/findings", headers=headers).status_code == 200
        )


@pytest.mark.parametrize(
    ("listen", "read", "refused"),
    [
        ("127.0.0.1:8080", None, False),
        ("127.9.9.9:8080", None, False),
        ("localhost:8080", None, False),
        ("0.0.0.0:8080", None, True),
        ("10.0.0.5:8080", None, True),
        ("fleetwarden.example.com:8080", None, True),
        ("0.0.0.0:8080", {"bearerToken": "t"}, False),
        ("0.0.0.0:8080", {"public": True}, False),
        ("0.0.0.0:8080", {"public": False}, True),
    ],
)
def test_exposure_rule(listen, read, refused):
    raw = {"listen": listen, **({"auth": {"read": read}} if read is not None else {})}
    cfg = service_config_from(raw, source="svc.yaml")
    assert (exposure_problem(cfg) is not None) == refused


def test_default_allowed_hosts_are_the_loopback_names_and_the_listen_host():
    cfg = service_config_from(
        {"listen": "10.0.0.5:8080", "auth": {"read": {"public": True}}}, source="x"
    )
    assert cfg.allowed_hosts == frozenset({*LOOPBACK_HOSTS, "10.0.0.5"})
    assert service_config_from({}, source="x").batch_events == 1000


def test_read_tokens_come_from_env_or_file_and_token_and_public_are_exclusive(tmp_path):
    secret = tmp_path / "read-token"
    secret.write_text("from-a-file\n")
    raw = {"auth": {"read": {"bearerToken": ["env:FW_READ", f"file:{secret}"]}}}
    cfg = service_config_from(raw, source="x", env={"FW_READ": "from-env"})
    assert cfg.read.tokens == ("from-env", "from-a-file")
    assert "from-env" not in repr(cfg)
    with pytest.raises(FormatError, match=r"auth\.read"):
        service_config_from({"auth": {"read": {"bearerToken": "t", "public": True}}}, source="x")


def test_the_store_and_a_nats_url_with_credentials_come_from_env_or_file_never_printed(tmp_path):
    url = tmp_path / "queue-url"
    url.write_text("nats://fw:s3cret@127.0.0.1:4222\n")
    raw = {"queue": f"file:{url}", "store": "env:FW_STORE"}
    cfg = service_config_from(raw, source="x", env={"FW_STORE": "sqlite:///audit.db"})
    assert (cfg.queue, cfg.store) == ("nats://fw:s3cret@127.0.0.1:4222", "sqlite:///audit.db")
    assert "s3cret" not in repr(cfg)
    assert without_credentials(cfg.queue) == "nats://127.0.0.1:4222"
    with pytest.raises(FormatError, match="nats://"):
        service_config_from({"queue": "env:Q"}, source="x", env={"Q": "redis://h"})


# --------------------------------------------------------------------------- bounds


def _ce(i):
    return {**GENERIC, "id": f"batch-{i}", "cluster": f"c-{i}"}


@pytest.mark.parametrize(
    ("form", "make", "content_type"),
    [
        (
            "cloudevents batch",
            lambda n: [_ce(i) for i in range(n)],
            "application/cloudevents-batch+json",
        ),
        ("cloudevents array", lambda n: [_ce(i) for i in range(n)], "application/json"),
        (
            "event grid array",
            lambda n: [arm_event(event_id=f"eg-{i}") for i in range(n)],
            "application/json",
        ),
        (
            "event grid cloudevents array",
            lambda n: [as_cloudevent(arm_event(event_id=f"egce-{i}")) for i in range(n)],
            "application/cloudevents-batch+json",
        ),
    ],
)
def test_batch_events_caps_every_batch_form_with_413(svc, form, make, content_type):
    route = "/events/cloudevents" if form.startswith("cloudevents") else "/events/azure"
    headers = {"authorization": f"Bearer {SOURCE}", "content-type": content_type}
    before = counted(svc)
    over = httpx.post(svc.base + route, content=json.dumps(make(6)), headers=headers)
    assert over.status_code == 413 and "batchEvents" in over.json()["error"], over.text
    source = route.rsplit("/", 1)[1]
    assert (
        counted(svc)[(source, "too_many_events")] == before.get((source, "too_many_events"), 0) + 1
    )
    at = httpx.post(svc.base + route, content=json.dumps(make(5)), headers=headers)
    assert at.status_code == 202 and at.json()["accepted"] == 5


def test_the_default_batch_limit_is_1000(tmp_path):
    with serve(tmp_path, _config()) as s:
        headers = {
            "authorization": f"Bearer {SOURCE}",
            "content-type": "application/cloudevents-batch+json",
        }
        small = [
            {"specversion": "1.0", "id": str(i), "source": "s", "type": "t"} for i in range(1001)
        ]
        r = httpx.post(s.base + "/events/cloudevents", content=json.dumps(small), headers=headers)
        assert r.status_code == 413
        r = httpx.post(
            s.base + "/events/cloudevents", content=json.dumps(small[:1000]), headers=headers
        )
        assert r.status_code == 202 and r.json()["accepted"] == 1000


def test_a_request_head_over_the_limit_is_431_and_counted(svc):
    before = counted(svc).get(("http", "headers_too_large"), 0)
    big = raw_request(svc.port, b"GET", b"/healthz", [(b"X-Big", b"a" * 17_000)])
    assert big is not None and big.status == 431
    many = raw_request(
        svc.port, b"GET", b"/healthz", [(b"X-%d" % i, b"v" * 100) for i in range(200)]
    )
    assert many is not None and many.status == 431
    url = raw_request(svc.port, b"GET", b"/healthz?" + b"q" * 17_000, [])
    assert url is not None and url.status == 431
    ok = raw_request(svc.port, b"GET", b"/healthz", [(b"X-Big", b"a" * 15_000)])
    assert ok is not None and ok.status == 200
    assert counted(svc)[("http", "headers_too_large")] == before + 3


def test_an_endless_header_is_cut_off_at_the_limit_not_buffered(svc):
    """One header that never ends: the answer comes once the limit is passed, while the
    client is still sending (it was buffered for as long as the client liked)."""
    with socket.create_connection(("127.0.0.1", svc.port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
        answer = b""
        for _ in range(200):  # at most 200 x 64 KiB = 12.5 MiB, if it were never cut off
            try:
                s.sendall(b"a" * 65536)
            except OSError:
                break  # the server closed the connection
            s.settimeout(0.01)
            try:
                answer += s.recv(4096)
            except TimeoutError:
                continue
            finally:
                s.settimeout(10)
            if answer:
                break
        answer += s.recv(4096) if not answer else b""
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]


def test_the_header_limit_is_configurable(tmp_path):
    with serve(tmp_path, _config(limits={"headerBytes": 2048})) as s:
        r = raw_request(s.port, b"GET", b"/healthz", [(b"X-Big", b"a" * 3000)])
        assert r is not None and r.status == 431
