"""Exec credential plugins against real kube-apiservers (scripts/k8s-test-env).

Every plugin here is a real executable the test writes into a tmp dir
(``tests/support/exec_plugins.py``): it prints the ExecCredential the apiserver accepts (the
admin token from the test state, or a client certificate the test signs with the cluster's
client CA) and appends one line per run to a file, so runs are counted and their inputs
(argv, KUBERNETES_EXEC_INFO, a terminal or not) checked.

Pinned here: ``watch``, ``serve``, ``fleet`` and ``gate`` reach a cluster whose kubeconfig user
is ``exec`` (v1 and v1beta1); a credential that expires mid-watch is renewed while the watch
stream goes on; a token the server refuses (401) is replaced by the plugin's next one; a
client certificate from the plugin authenticates and its rotation moves new connections to
the new certificate; a failing or missing plugin is one error line with exit 2; Argo CD
cluster Secrets with ``execProviderConfig`` and ``awsAuthConfig`` (through a fake ``aws``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import os
import pty
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.ports.kube import Conflict, NotFound
from tests.e2e.test_cli_fleet import EXE
from tests.e2e.test_heal_live import _port
from tests.e2e.test_watch_live import Recorder, node_body, spec
from tests.support import k8s_env
from tests.support.exec_plugins import V1, V1BETA1, Reply, runs, write_plugin

pytestmark = pytest.mark.live

POOLS = """\
apiVersion: fleetwarden.io/v1alpha1
kind: NodePools
cluster: {cluster}
pools:
  general:
    provider: aws
    instanceTypes: [m5.large]
    minSize: 1
    maxSize: 50
    labels: {{team: platform}}
    taints: [{{key: dedicated, value: general, effect: NoSchedule}}]
"""


# --- helpers ------------------------------------------------------------------------------


def write_kubeconfig(
    k8s: dict[str, Any], path: Path, exec_spec: dict[str, Any], *, index: int = 0
) -> Path:
    """A kubeconfig with one context (the cluster's name) whose user is ``exec_spec``."""
    c = k8s["clusters"][index]
    ca = base64.b64encode(Path(c["dir"], "ca.crt").read_bytes()).decode()
    body = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": c["name"],
        "clusters": [
            {
                "name": c["name"],
                "cluster": {"server": c["server"], "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": "via-plugin", "user": {"exec": exec_spec}}],
        "contexts": [{"name": c["name"], "context": {"cluster": c["name"], "user": "via-plugin"}}],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body))
    return path


def admin(k8s: dict[str, Any], index: int = 0) -> KubeClient:
    return KubeClient(load_kubeconfig(Path(k8s["kubeconfig"]))[index])


async def put_node(api: KubeClient, name: str, **labels: str) -> None:
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"/api/v1/nodes/{name}")
    await api.request("POST", "/api/v1/nodes", body=node_body(name, **labels))


async def drop_nodes(api: KubeClient, *names: str) -> None:
    for name in names:
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"/api/v1/nodes/{name}")


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, **kw: Any):
    """The installed console script, as a pipeline runs it: no terminal on stdin."""
    full = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [EXE, *args],
        stdin=kw.pop("stdin", subprocess.DEVNULL),
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 120),
        cwd=cwd,
        env=full,
        **kw,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def finding(evs: list[dict[str, Any]], cluster: str, field: str) -> list[dict[str, Any]]:
    return [
        e["finding"]
        for e in evs
        if e["type"] == "finding.appeared"
        and e["finding"]["cluster"] == cluster
        and e["finding"]["field"] == field
    ]


async def until(cond: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = cond()
        if result:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def audit(k8s: dict[str, Any], index: int, **match: str) -> list[dict[str, Any]]:
    """Audit events of cluster ``index`` (1-based) on nodes whose fields match, any stage."""
    out = []
    for ev in k8s_env.audit_events(k8s["state_dir"], index, stage=None):
        if (ev.get("objectRef") or {}).get("resource") != "nodes":
            continue
        got = {
            "user": ev.get("user", {}).get("username", ""),
            "verb": ev.get("verb"),
            "stage": ev.get("stage"),
            "code": str((ev.get("responseStatus") or {}).get("code")),
        }
        if all(got[k] == v for k, v in match.items()):
            out.append(ev)
    return out


def client_certificate(k8s: dict[str, Any], user: str, index: int = 0) -> tuple[str, str]:
    """A client certificate for ``user`` in system:masters, signed by the cluster's client CA."""
    c = k8s["clusters"][index]
    ca_cert = x509.load_pem_x509_certificate(Path(c["client_ca_cert"]).read_bytes())
    ca_key = serialization.load_pem_private_key(Path(c["client_ca_key"]).read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                    x509.NameAttribute(NameOID.COMMON_NAME, user),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), pem_key.decode()


# --- (a)+(f) watch, v1 and v1beta1 ----------------------------------------------------------


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
async def test_watch_reaches_the_cluster_through_an_exec_kubeconfig(k8s, tmp_path, api_version):
    """`watch` with a kubeconfig user that is a plugin (command relative to the kubeconfig,
    as kubectl resolves it, run from elsewhere): one run, non-interactive, and the drift of a
    real node is reported."""
    c = k8s["clusters"][0]
    plugin = write_plugin(
        tmp_path / "bin", "token-plugin", [Reply(token=c["token"])], api_version=api_version
    )
    kc = write_kubeconfig(
        k8s,
        tmp_path / "conf" / "kubeconfig",
        {
            "apiVersion": api_version,
            "command": "../bin/token-plugin",
            "args": ["token", "--cluster", c["name"]],
            "interactiveMode": "IfAvailable",
        },
    )
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS.format(cluster=c["name"]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with admin(k8s) as api:
        await put_node(api, "exec-a-1", team="wrong")
        try:
            r = await asyncio.to_thread(
                run_cli,
                *("watch", "-k", str(kc), "-d", str(pools), "-o", "json"),
                *("--duration", "5", "--probe-interval", "1"),
                cwd=elsewhere,
            )
        finally:
            await drop_nodes(api, "exec-a-1")
    assert r.returncode == 0, r.stderr
    evs = events(r.stdout)
    (drift,) = finding(evs, c["name"], "labels.team")
    assert drift["actual"] == "wrong" and drift["nodes"] == ["exec-a-1"]
    health = [e["to"] for e in evs if e["type"] == "cluster.health"]
    assert health and health[-1] == "Healthy"
    (run,) = runs(plugin)  # cached: one run serves every request of the session
    assert run["argv"] == ["token", "--cluster", c["name"]]
    assert run["info"] == {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }
    assert run["tty"] is False
    assert c["token"] not in r.stdout + r.stderr


async def test_watch_lends_its_terminal_to_an_if_available_plugin(k8s, tmp_path):
    """kubectl's rule: stdin is a terminal -> the plugin runs interactively (it gets stdin
    and spec.interactive is true)."""
    c = k8s["clusters"][0]
    plugin = write_plugin(tmp_path / "bin", "login", [Reply(token=c["token"])], api_version=V1)
    kc = write_kubeconfig(
        k8s,
        tmp_path / "kubeconfig",
        {"apiVersion": V1, "command": str(plugin), "interactiveMode": "IfAvailable"},
    )
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS.format(cluster=c["name"]))
    master, terminal = pty.openpty()
    try:
        r = await asyncio.to_thread(
            run_cli,
            *("watch", "-k", str(kc), "-d", str(pools), "-o", "json", "--duration", "2"),
            stdin=terminal,
        )
    finally:
        os.close(terminal)
        os.close(master)
    assert r.returncode == 0, r.stderr
    (run,) = runs(plugin)
    assert run["tty"] is True and run["info"]["spec"]["interactive"] is True


# --- (a) serve ------------------------------------------------------------------------------


def _serve_config(tmp: Path, kc: Path, cluster: str, port: int) -> Path:
    pools = tmp / "pools.yaml"
    pools.write_text(POOLS.format(cluster=cluster))
    cfg = tmp / "svc.yaml"
    cfg.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{port}",
                "queuePath": str(tmp / "q.db"),
                "store": f"sqlite:///{tmp / 'audit.db'}",
                "desired": [str(pools)],
                "clusters": {
                    "kubeconfig": str(kc),
                    "contexts": [cluster],
                    "probeIntervalSeconds": 1,
                },
            }
        )
    )
    return cfg


async def test_serve_reaches_the_cluster_and_never_lends_the_plugin_a_terminal(k8s, tmp_path):
    """Even started from a terminal, serve runs an IfAvailable plugin without stdin."""
    c = k8s["clusters"][0]
    plugin = write_plugin(
        tmp_path / "bin", "token-plugin", [Reply(token=c["token"], expires_in=600)]
    )
    kc = write_kubeconfig(
        k8s, tmp_path / "kubeconfig", {"apiVersion": V1BETA1, "command": str(plugin)}
    )
    port = _port()
    cfg = _serve_config(tmp_path, kc, c["name"], port)
    master, terminal = pty.openpty()
    async with admin(k8s) as api:
        await put_node(api, "exec-s-1", team="wrong")
        proc = subprocess.Popen(
            [EXE, "serve", "-c", str(cfg)],
            stdin=terminal,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            no_reuse = httpx.Limits(max_keepalive_connections=0)
            async with httpx.AsyncClient(base_url=base, timeout=5, limits=no_reuse) as http:

                async def drift() -> list[dict[str, Any]]:
                    try:
                        found = (await http.get("/api/findings")).json()
                    except httpx.HTTPError:
                        return []
                    return [
                        f
                        for f in found
                        if f["cluster"] == c["name"]
                        and f["field"] == "labels.team"
                        and f["actual"] == "wrong"
                    ]

                deadline = time.monotonic() + 40
                while not await drift():
                    assert proc.poll() is None, proc.stderr.read().decode()
                    assert time.monotonic() < deadline, "serve reported no drift in 40 s"
                    await asyncio.sleep(0.2)
                clusters = (await http.get("/api/clusters")).json()
                assert c["token"] not in json.dumps(clusters)
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            os.close(terminal)
            os.close(master)
            await drop_nodes(api, "exec-s-1")
    assert runs(plugin) and all(not r["tty"] for r in runs(plugin))
    assert all(r["info"]["spec"]["interactive"] is False for r in runs(plugin))
    assert c["token"].encode() not in proc.stderr.read()


def test_serve_refuses_a_plugin_that_needs_a_terminal(k8s, tmp_path):
    c = k8s["clusters"][0]
    plugin = write_plugin(tmp_path / "bin", "login", [Reply(token=c["token"])], api_version=V1)
    kc = write_kubeconfig(
        k8s,
        tmp_path / "kubeconfig",
        {"apiVersion": V1, "command": str(plugin), "interactiveMode": "Always"},
    )
    r = run_cli("serve", "-c", str(_serve_config(tmp_path, kc, c["name"], _port())), timeout=60)
    assert r.returncode == 2, r.stderr
    assert "needs a terminal (interactiveMode: Always)" in r.stderr
    assert "never runs credential plugins interactively" in r.stderr
    assert f"context '{c['name']}'" in r.stderr and str(plugin) in r.stderr
    assert "Traceback" not in r.stderr and runs(plugin) == []


# --- (a) fleet and gate ---------------------------------------------------------------------

NS = "exec-live"
APP_DOC = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}, labels: {{app.kubernetes.io/instance: shop}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      nodeSelector: {{eks.amazonaws.com/nodegroup: general}}
      tolerations: [{{key: dedicated, value: general, effect: NoSchedule}}]
      containers: [{{name: main, image: "nginx:{tag}", resources: {{requests: {{cpu: 100m}}}}}}]
"""


async def test_fleet_and_gate_read_the_cluster_through_an_exec_kubeconfig(k8s, tmp_path):
    c = k8s["clusters"][0]
    plugin = write_plugin(tmp_path / "bin", "token-plugin", [Reply(token=c["token"])])
    kc = write_kubeconfig(
        k8s, tmp_path / "kubeconfig", {"apiVersion": V1BETA1, "command": str(plugin)}
    )
    desired = tmp_path / "git"
    desired.mkdir()
    (desired / "web.yaml").write_text(APP_DOC.format(ns=NS, tag="1.27"))
    (desired / "pools.yaml").write_text(POOLS.format(cluster=c["name"]))
    live = yaml.safe_load(APP_DOC.format(ns=NS, tag="1.26"))  # the cluster lags behind Git
    async with admin(k8s) as api:
        with contextlib.suppress(Conflict):
            await api.request(
                "POST",
                "/api/v1/namespaces",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            )
        path = f"/apis/apps/v1/namespaces/{NS}/deployments"
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"{path}/web")
        await api.request("POST", path, body=live)
        await put_node(api, "exec-g-1")
        # no node lifecycle controller here: lift the not-ready taint admission put on it
        await api.patch(
            "/api/v1/nodes/exec-g-1",
            {"spec": {"taints": node_body("x")["spec"]["taints"]}},
            content_type=JSON_MERGE,
        )
        await api.patch(
            "/api/v1/nodes/exec-g-1/status",
            {"status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}},
            content_type=JSON_MERGE,
        )
        try:
            base = ["--app", "shop", "--kubeconfig", str(kc), "--namespace", NS]
            diff = await asyncio.to_thread(
                run_cli, "fleet", "diff", *base, "-d", str(desired / "web.yaml"), "-o", "json"
            )
            gate = await asyncio.to_thread(
                run_cli, "gate", *base, "-d", str(desired), "--format", "json"
            )
        finally:
            await api.request("DELETE", f"{path}/web")
            await drop_nodes(api, "exec-g-1")
    assert diff.returncode == 1, diff.stderr
    (f,) = json.loads(diff.stdout)["findings"]
    assert (f["cluster"], f["field"], f["expected"], f["actual"]) == (
        c["name"],
        "image.main",
        "nginx:1.27",
        "nginx:1.26",
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr
    doc = json.loads(gate.stdout)
    assert doc["decision"] == "pass"
    (target,) = doc["targets"]
    assert target["cluster"] == c["name"] and target["schedulableOn"] == ["general"]
    assert len(runs(plugin)) == 2  # one per command
    assert c["token"] not in diff.stdout + diff.stderr + gate.stdout + gate.stderr


# --- (b) a credential that expires mid-watch ----------------------------------------------


async def test_a_credential_expiring_mid_watch_is_renewed_and_the_watch_goes_on(k8s, tmp_path):
    """Tokens that live 3 s: the plugin is run again and again (the probes ask for a fresh
    credential), while the node watch opened with the first token keeps delivering every
    change -- no relist, no second watch request."""
    c = k8s["clusters"][0]
    plugin = write_plugin(tmp_path, "short-lived", [Reply(token=c["token"], expires_in=3)])
    kc = write_kubeconfig(
        k8s, tmp_path / "kubeconfig", {"apiVersion": V1BETA1, "command": str(plugin)}
    )
    (ep,) = load_kubeconfig(kc)
    rec = Recorder()
    fleet = FleetWatcher(
        [spec(ep.name)], http_client_factory, rec.emit, settings=WatchSettings(probe_interval=0.5)
    )
    async with admin(k8s) as api:
        await put_node(api, "exec-b-1")
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            w = await rec.wait(lambda: (w := fleet.watcher(ep.name)) and w.synced.is_set() and w)
            await rec.wait(lambda: w.reflection.resource_version and len(rec.events) > 1)
            watches = len(audit(k8s, 1, user="fw-admin", verb="watch", stage="ResponseStarted"))
            for i in range(4):
                seen = len(runs(plugin))
                await until(lambda seen=seen: len(runs(plugin)) > seen, 15, "a plugin re-run")
                await api.patch(
                    "/api/v1/nodes/exec-b-1", {"metadata": {"labels": {"team": f"t{i}"}}}
                )
                await rec.wait(
                    lambda i=i: [
                        e
                        for e in rec.events
                        if getattr(e, "finding", None) is not None
                        and e.finding.field == "labels.team"
                        and e.finding.actual == f"t{i}"
                    ]
                )
            assert len(runs(plugin)) >= 5
            assert w.reflection.relists == 1  # the watch was never dropped and re-listed
            assert rec.lifecycle("cluster.watch_refused") == []
            after = audit(k8s, 1, user="fw-admin", verb="watch", stage="ResponseStarted")
            assert len(after) == watches  # the same stream all along
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await drop_nodes(api, "exec-b-1")


# --- (c) a token the server refuses, then a good one ----------------------------------------


async def test_a_rejected_token_is_replaced_through_refresh_on_401(k8s, tmp_path):
    c = k8s["clusters"][0]
    plugin = write_plugin(
        tmp_path / "bin",
        "flaky",
        [Reply(token="not-a-token-the-server-knows"), Reply(token=c["token"])],
    )
    kc = write_kubeconfig(
        k8s, tmp_path / "kubeconfig", {"apiVersion": V1BETA1, "command": str(plugin)}
    )
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS.format(cluster=c["name"]))
    refused_before = len(audit(k8s, 1, code="401"))
    async with admin(k8s) as api:
        await put_node(api, "exec-c-1", team="wrong")
        try:
            r = await asyncio.to_thread(
                run_cli, "watch", "-k", str(kc), "-d", str(pools), "-o", "json", "--duration", "3"
            )
        finally:
            await drop_nodes(api, "exec-c-1")
    assert r.returncode == 0, r.stderr
    evs = events(r.stdout)
    assert finding(evs, c["name"], "labels.team")
    assert not [e for e in evs if e["type"] == "cluster.watch_refused"]
    assert [x["argv"] for x in runs(plugin)] == [[], []]  # the bad token, then the good one
    # the apiserver did refuse the first token (its audit log has the 401 on nodes)
    assert len(audit(k8s, 1, code="401")) > refused_before


# --- (d) a failing or a missing plugin -------------------------------------------------------


@pytest.mark.parametrize("broken", ["fails", "missing"])
async def test_a_broken_plugin_is_one_clear_error_and_exit_2(k8s, tmp_path, broken):
    c = k8s["clusters"][0]
    if broken == "fails":
        plugin = write_plugin(
            tmp_path / "bin",
            "sso-plugin",
            [
                Reply(
                    exit=1,
                    stderr=f"[ERROR] cached token {c['token']} has expired\n"
                    "Run `aws sso login --profile prod` to sign in again.\n",
                )
            ],
        )
        command = str(plugin)
        spec_ = {"apiVersion": V1BETA1, "command": command}
        expected = [
            f"'{command}' failed with exit code 1: [ERROR] cached token <redacted> has expired",
            "| Run `aws sso login --profile prod` to sign in again.",
        ]
    else:
        command = "fw-no-such-credential-plugin"
        hint = "Install it with: pip install fw-no-such-credential-plugin"
        spec_ = {"apiVersion": V1BETA1, "command": command, "installHint": hint}
        expected = [f"'{command}' was not found on PATH; {hint}"]
    kc = write_kubeconfig(k8s, tmp_path / "kubeconfig", spec_)
    desired = tmp_path / "web.yaml"
    desired.write_text(APP_DOC.format(ns=NS, tag="1.27"))
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS.format(cluster=c["name"]))
    commands = {
        "watch": ["watch", "-k", str(kc), "-d", str(pools), "-o", "json", "--duration", "20"],
        "fleet": ["fleet", "diff", "--app", "shop", "-d", str(desired), "-k", str(kc)],
        "gate": ["gate", "--app", "shop", "-d", str(desired), "-d", str(pools), "-k", str(kc)],
    }
    for name, argv in commands.items():
        t0 = time.monotonic()
        r = await asyncio.to_thread(run_cli, *argv)
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert time.monotonic() - t0 < 15, name  # at once, not after the watch's duration
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, (name, r.stderr)
        line = lines[0]
        assert line.startswith("fleetwarden: error: context 'fw-test-1' of "), (name, line)
        assert f"exec credential plugin '{command}'" in line
        for needle in expected:
            assert needle in line, (name, line)
        assert "Traceback" not in r.stderr and c["token"] not in r.stderr + r.stdout
        assert r.stdout == ""


# --- (e) a client certificate from the plugin -----------------------------------------------


async def test_a_client_certificate_from_the_plugin_and_its_rotation(k8s, tmp_path):
    """The plugin's certificate authenticates (the apiserver sees its CN); when it expires
    the next one is used for new connections, while the watch opened with the first goes on
    over its connection."""
    first = client_certificate(k8s, "fw-cert-one")
    second = client_certificate(k8s, "fw-cert-two")
    plugin = write_plugin(
        tmp_path,
        "cert-plugin",
        [
            Reply(cert=first[0], key=first[1], expires_in=3),
            Reply(cert=second[0], key=second[1], expires_in=3600),
        ],
        api_version=V1,
    )
    kc = write_kubeconfig(
        k8s,
        tmp_path / "kubeconfig",
        {"apiVersion": V1, "command": str(plugin), "interactiveMode": "Never"},
    )
    (ep,) = load_kubeconfig(kc)
    seen: list[str] = []
    async with admin(k8s) as api, KubeClient(ep) as client:
        await put_node(api, "exec-e-1")
        try:
            listed = await client.list("/api/v1/nodes")

            async def follow() -> None:
                async for ev in client.watch(
                    "/api/v1/nodes", resource_version=listed.resource_version
                ):
                    seen.append(ev.object["metadata"]["name"])

            watcher = asyncio.create_task(follow())
            try:
                await until(lambda: audit(k8s, 1, user="fw-cert-one", verb="watch"), 10, "watch")
                # requests go on; once the first certificate is stale the plugin runs again
                deadline = time.monotonic() + 15
                while len(runs(plugin)) < 2:
                    assert time.monotonic() < deadline, "the certificate was never renewed"
                    await client.get("/api/v1/nodes/exec-e-1")
                    await asyncio.sleep(0.2)
                await client.get("/api/v1/nodes/exec-e-1")
                await put_node(api, "exec-e-2")
                await until(lambda: "exec-e-2" in seen, 10, "the watch to see exec-e-2")
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        finally:
            await drop_nodes(api, "exec-e-1", "exec-e-2")
    assert audit(k8s, 1, user="fw-cert-one", verb="list")
    assert audit(k8s, 1, user="fw-cert-two", verb="get")  # new connections: new certificate
    # the watch was opened once, with the first certificate, and never again
    assert len(audit(k8s, 1, user="fw-cert-one", verb="watch", stage="ResponseStarted")) == 1
    assert audit(k8s, 1, user="fw-cert-two", verb="watch") == []


# --- (g) Argo CD cluster Secrets with a credential plugin ----------------------------------

ARGO_NS = "argocd-exec"
ROLE = "arn:aws:iam::123456789012:role/argocd-manager"


@pytest.mark.parametrize("kind", ["execProviderConfig", "awsAuthConfig"])
async def test_argocd_cluster_secret_with_a_credential_plugin(k8s, tmp_path, kind):
    """`watch --argocd-secrets`: the cluster of a Secret whose config names a plugin is
    reached through it. awsAuthConfig runs `aws eks get-token` (argocd-k8s-auth is not on
    PATH here); the fake aws refuses any other arguments."""
    mgmt, target = k8s["clusters"][0], k8s["clusters"][1]
    bin_dir = tmp_path / "bin"
    ca = base64.b64encode(Path(target["dir"], "ca.crt").read_bytes()).decode()
    if kind == "execProviderConfig":
        plugin = write_plugin(
            bin_dir,
            "cluster-auth",
            [Reply(token=target["token"])],
            record_env=("FW_AUDIENCE",),
            expect_argv=["token", "--audience", "remote"],
        )
        config = {
            "execProviderConfig": {
                "command": str(plugin),
                "args": ["token", "--audience", "remote"],
                "env": {"FW_AUDIENCE": "remote-aud"},
                "apiVersion": V1BETA1,
                "installHint": "cluster-auth ships with the platform tools",
            },
            "tlsClientConfig": {"caData": ca},
        }
    else:
        plugin = write_plugin(
            bin_dir,
            "aws",
            [Reply(token=target["token"], expires_in=840)],
            expect_argv=["eks", "get-token", "--cluster-name", "prod-eu", "--role-arn", ROLE],
        )
        config = {
            "awsAuthConfig": {"clusterName": "prod-eu", "roleARN": ROLE},
            "tlsClientConfig": {"caData": ca},
        }
    data = {"name": "remote", "server": target["server"], "config": json.dumps(config)}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"cluster-remote-{kind.lower()}",
            "namespace": ARGO_NS,
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
        },
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS.format(cluster="remote"))
    path = f"/api/v1/namespaces/{ARGO_NS}/secrets"
    async with admin(k8s, 0) as api, admin(k8s, 1) as tapi:
        with contextlib.suppress(Conflict):
            await api.request(
                "POST",
                "/api/v1/namespaces",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ARGO_NS}},
            )
        await api.request("POST", path, body=secret)
        await put_node(tapi, "exec-g-remote", team="wrong")
        try:
            r = await asyncio.to_thread(
                run_cli,
                *("watch", "-k", k8s["kubeconfig"], "--context", mgmt["name"]),
                *("--argocd-secrets", ARGO_NS, "-d", str(pools), "-o", "json"),
                *("--duration", "6"),
                env={"PATH": os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])},
            )
        finally:
            await api.request("DELETE", f"{path}/{secret['metadata']['name']}")
            await drop_nodes(tapi, "exec-g-remote")
    assert r.returncode == 0, r.stderr
    evs = events(r.stdout)
    added = [e for e in evs if e["type"] == "cluster.added" and e["cluster"] == "remote"]
    assert added and added[0]["source"] == "argocd-secret"
    (drift,) = finding(evs, "remote", "labels.team")
    assert drift["nodes"] == ["exec-g-remote"]
    assert not [
        e for e in evs if e.get("cluster") == "remote" and e["type"] == "cluster.watch_refused"
    ]
    plugin_runs = runs(plugin)
    assert plugin_runs and all(x["info"]["spec"]["interactive"] is False for x in plugin_runs)
    if kind == "execProviderConfig":
        assert plugin_runs[0]["env"]["FW_AUDIENCE"] == "remote-aud"
    assert target["token"] not in r.stdout + r.stderr
