"""``fleetwarden deprecations --live`` on a real kube-apiserver (issue 14, item 8): a client
that calls an API deprecated in 1.34 and removed in 1.37 (networking.k8s.io/v1beta1
IPAddress, served by this 1.36 apiserver once enabled with --runtime-config) is listed at
target 1.37 from /metrics, and with its user and user agent from the audit log; at 1.36 the
same API is only deprecated (exit 0)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import k8s_env

pytestmark = pytest.mark.live

AGENT = "legacy-ipam/0.3.1 (linux/amd64)"
RUNTIME = "--runtime-config=networking.k8s.io/v1beta1=true"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An apiserver of our own (the shared ones keep their flags) serving the beta API."""
    state_dir = tmp_path_factory.mktemp("k8s-deprecated")
    k8s_env.start_clusters(1, state_dir, apiserver_args=[RUNTIME])
    try:
        yield k8s_env.load_state(state_dir)
    finally:
        k8s_env.stop_clusters(state_dir)


def call_deprecated_api(state: dict[str, Any], times: int) -> None:
    c = state["clusters"][0]
    ctx = ssl.create_default_context(cafile=str(Path(c["dir"]) / "ca.crt"))
    headers = {"Authorization": f"Bearer {c['token']}", "User-Agent": AGENT}
    with httpx.Client(base_url=c["server"], verify=ctx, headers=headers, timeout=10) as http:
        for _ in range(times):
            r = http.get("/apis/networking.k8s.io/v1beta1/ipaddresses")
            assert r.status_code == 200, r.text
            assert "deprecated" in r.headers.get("Warning", "")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetwarden", "deprecations", "--live", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_a_client_of_an_api_removed_at_the_target_is_listed_with_its_user_and_agent(cluster):
    call_deprecated_api(cluster, 3)
    c = cluster["clusters"][0]
    kc, log = cluster["kubeconfig"], c["audit_log"]
    r = run("-k", kc, "-t", "1.37", "--audit-log", log, "--format", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    (use,) = [u for u in out["live"] if u["resource"] == "ipaddresses"]
    assert use["apiVersion"] == "networking.k8s.io/v1beta1"
    assert (use["removedIn"], use["removed"], use["source"]) == ("1.37", True, "metrics+audit")
    # the table's row of the API (IPAddress), and where that row comes from
    assert use["origin"]["source"] == "kubernetes"
    assert use["origin"]["file"] == "networking/v1beta1/zz_generated.prerelease-lifecycle.go"
    (client,) = [x for x in use["clients"] if x["userAgent"] == AGENT]
    assert client["user"] == "fw-admin" and client["requests"] == 3
    assert out["errors"] == [] and out["auditLogs"][c["name"]]["badLines"] == 0
    assert c["token"] not in r.stdout + r.stderr

    # without the audit log: the metric alone says what, not who
    r = run("-k", kc, "-t", "1.37", "--format", "json")
    (use,) = [u for u in json.loads(r.stdout)["live"] if u["resource"] == "ipaddresses"]
    assert (use["source"], use["clients"]) == ("metrics", [])

    # at 1.36 the API is deprecated, not removed: exit 0 (1 with --fail-on deprecated)
    r = run("-k", kc, "-t", "1.36", "--audit-log", log)
    assert r.returncode == 0, r.stderr
    assert "networking.k8s.io/v1beta1" in r.stdout and AGENT.split()[0] in r.stdout
    assert run("-k", kc, "-t", "1.36", "--fail-on", "deprecated").returncode == 1


def test_an_unreachable_cluster_is_a_one_line_error_and_exit_2(cluster, tmp_path):
    kc = Path(cluster["kubeconfig"]).read_text()
    server = cluster["clusters"][0]["server"]
    dead = tmp_path / "kubeconfig"
    dead.write_text(kc.replace(server, "https://127.0.0.1:1"))
    r = run("-k", str(dead), "-t", "1.37")
    assert r.returncode == 2
    assert "not read" in r.stdout and "Traceback" not in r.stdout + r.stderr
    r = run("-k", str(dead), "-t", "1.37", "--audit-log", f"nope={tmp_path / 'a.log'}")
    assert r.returncode == 2 and "no such cluster" in r.stderr


def test_metrics_refused_to_the_credentials_still_name_clients_from_the_audit_log(
    cluster, tmp_path
):
    """fw-viewer may not GET /metrics (403): that is the cluster's error, and its audit log
    alone still says who calls what (source: audit)."""
    call_deprecated_api(cluster, 1)
    c = cluster["clusters"][0]
    viewer = tmp_path / "kubeconfig"
    viewer.write_text(
        Path(cluster["kubeconfig"]).read_text().replace(c["token"], c["viewer_token"])
    )
    r = run("-k", str(viewer), "-t", "1.37", "--audit-log", c["audit_log"], "-o", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    (error,) = out["errors"]
    assert error["cluster"] == c["name"] and "403" in error["error"]
    (use,) = [u for u in out["live"] if u["resource"] == "ipaddresses"]
    assert use["source"] == "audit" and use["removed"] is True
    assert any(x["userAgent"] == AGENT for x in use["clients"])
    assert c["viewer_token"] not in r.stdout + r.stderr
