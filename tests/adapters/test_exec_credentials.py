"""Running exec credential plugins (real executables written per test, no API server):
inputs (args, env, KUBERNETES_EXEC_INFO), caching until expiry, one shared run for concurrent
requests, refresh after a 401, the fallback command, and every failure as one clear
``CredentialError`` that names the plugin and never shows a token."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import check_unattended, load_kubeconfig
from fleetwarden.adapters.kube.exec_credentials import ExecCredentialSource, redact
from fleetwarden.core.clusters import (
    ClusterEndpoint,
    Credentials,
    ExecConfig,
    InteractiveMode,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import CredentialError, Transient, Unauthorized
from fleetwarden.ports.sources import FixedClock
from tests.support.exec_plugins import V1, V1BETA1, Reply, runs, write_plugin

TOKEN = "tok-" + "a1b2c3d4" * 6
CA = b"-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n"


def endpoint(plugin: ExecConfig, **changes: object) -> ClusterEndpoint:
    ep = ClusterEndpoint(
        "prod",
        "https://prod.example.com:6443",
        credentials=Credentials(exec=plugin),
        ca_pem=CA,
    )
    return dataclasses.replace(ep, **changes)


def config(command: Path | str, **fields: object) -> ExecConfig:
    return ExecConfig(
        str(command), str(fields.pop("api_version", V1BETA1)), origin="context 'prod'", **fields
    )


async def test_the_plugin_gets_its_args_env_and_exec_info(tmp_path):
    plugin = write_plugin(
        tmp_path, "plug", [Reply(token=TOKEN)], record_env=("FW_REGION", "HOME", "PATH")
    )
    cfg = config(
        plugin,
        args=("token", "--cluster", "prod"),
        env=(("FW_REGION", "eu-west-1"),),
        provide_cluster_info=True,
        cluster_config='{"audience": "prod-aud"}',
    )
    source = ExecCredentialSource(endpoint(cfg))
    cred = await source.get()
    assert cred.token == TOKEN and cred.expires_at is None
    (run,) = runs(plugin)
    assert run["argv"] == ["token", "--cluster", "prod"]
    assert run["env"]["FW_REGION"] == "eu-west-1"
    assert run["env"]["HOME"] == os.environ.get("HOME")  # the process env is passed on
    assert run["info"] == {
        "apiVersion": V1BETA1,
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://prod.example.com:6443",
                "certificate-authority-data": base64.b64encode(CA).decode(),
                "config": {"audience": "prod-aud"},
            },
        },
    }
    assert run["tty"] is False  # never the terminal when not interactive


async def test_cached_until_shortly_before_expiry_then_run_again(tmp_path):
    plugin = write_plugin(
        tmp_path, "plug", [Reply(token="one", expires_in=600), Reply(token="two")]
    )
    clock = FixedClock(datetime.now(UTC))
    source = ExecCredentialSource(endpoint(config(plugin)), clock=clock)
    assert (await source.get()).token == "one"
    clock.advance(timedelta(seconds=500))
    assert (await source.get()).token == "one"  # cached: the plugin is not run per request
    assert len(runs(plugin)) == 1
    clock.advance(timedelta(seconds=75))  # 25 s before expiry: inside the 30 s refresh window
    assert (await source.get()).token == "two"
    assert len(runs(plugin)) == 2


async def test_concurrent_requests_share_one_plugin_run(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token=TOKEN, sleep=0.3)])
    source = ExecCredentialSource(endpoint(config(plugin)))
    creds = await asyncio.gather(*(source.get() for _ in range(25)))
    assert {c.token for c in creds} == {TOKEN}
    assert len(runs(plugin)) == 1 and source.runs == 1


async def test_concurrent_requests_share_one_failure_too(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(exit=1, stderr="no", sleep=0.2)])
    source = ExecCredentialSource(endpoint(config(plugin)))
    results = await asyncio.gather(*(source.get() for _ in range(10)), return_exceptions=True)
    assert all(isinstance(r, CredentialError) for r in results)
    assert len(runs(plugin)) == 1


async def test_refresh_after_401_runs_once_for_all_who_saw_the_stale_credential(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token="stale"), Reply(token="fresh")])
    source = ExecCredentialSource(endpoint(config(plugin)))
    stale = await source.get()
    fresh = await asyncio.gather(*(source.refresh(stale) for _ in range(5)))
    assert {c.token for c in fresh} == {"fresh"}
    assert len(runs(plugin)) == 2
    # a request that still holds the stale one after the rotation gets the new one, no run
    assert (await source.refresh(stale)).token == "fresh" and len(runs(plugin)) == 2


async def test_expire_makes_the_next_request_run_the_plugin(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token="one"), Reply(token="two")])
    source = ExecCredentialSource(endpoint(config(plugin)))
    one = await source.get()
    source.expire(one)
    assert (await source.get()).token == "two"


async def test_v1_and_v1beta1_outputs_must_match_the_configured_version(tmp_path):
    v1 = write_plugin(tmp_path, "v1", [Reply(token="t")], api_version=V1)
    cfg = config(v1, api_version=V1, interactive_mode=InteractiveMode.NEVER)
    assert (await ExecCredentialSource(endpoint(cfg)).get()).token == "t"
    assert runs(v1)[0]["info"]["apiVersion"] == V1
    wrong = ExecCredentialSource(endpoint(config(v1)))  # configured v1beta1, prints v1
    with pytest.raises(CredentialError) as err:
        await wrong.get()
    assert "printed no usable ExecCredential: apiVersion: the plugin is configured for" in str(
        err.value
    )


async def test_a_failing_plugin_is_one_clear_error_with_its_stderr_but_no_token(tmp_path):
    noisy = (
        f"error: could not refresh the session (cached token {TOKEN} rejected)\n"
        "  Run `aws sso login --profile prod` and try again.\n" + "more detail. " * 200
    )
    plugin = write_plugin(tmp_path, "plug", [Reply(exit=3, stderr=noisy)])
    source = ExecCredentialSource(endpoint(config(plugin, install_hint="brew install x")))
    with pytest.raises(CredentialError) as err:
        await source.get()
    message = err.value.reason
    assert message.startswith(f"context 'prod': exec credential plugin '{plugin}' failed with ")
    assert "exit code 3: error: could not refresh the session (cached token <redacted>" in message
    assert "rejected) | Run `aws sso login --profile prod` and try again. | more detail." in message
    assert message.endswith("...")  # truncated
    assert TOKEN not in message and "\n" not in message and len(message) < 700
    assert str(err.value).startswith("prod: ")  # as a KubeError it names the cluster


async def test_a_missing_plugin_names_the_command_and_the_install_hint(tmp_path):
    hint = "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin"
    cfg = config("gke-gcloud-auth-plugin-missing", install_hint=hint)
    with pytest.raises(CredentialError) as err:
        await ExecCredentialSource(endpoint(cfg), environ={"PATH": str(tmp_path)}).get()
    assert err.value.reason == (
        "context 'prod': exec credential plugin 'gke-gcloud-auth-plugin-missing' was not "
        f"found on PATH; {hint}"
    )
    absent = config(tmp_path / "bin" / "nope")
    with pytest.raises(CredentialError, match="does not exist"):
        await ExecCredentialSource(endpoint(absent)).get()


async def test_a_plugin_that_is_not_executable_cannot_be_started(tmp_path):
    script = tmp_path / "plug"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(CredentialError, match="could not be started: Permission denied"):
        await ExecCredentialSource(endpoint(config(script))).get()


async def test_a_hung_plugin_is_killed_at_the_timeout(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token="late", sleep=60)])
    source = ExecCredentialSource(endpoint(config(plugin)), timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(CredentialError, match=r"did not finish within 0.5 s"):
        await source.get()
    assert time.monotonic() - t0 < 5


async def test_interactive_mode_always_needs_a_terminal(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token="t")])
    cfg = config(plugin, interactive_mode=InteractiveMode.ALWAYS)
    source = ExecCredentialSource(
        endpoint(cfg), interactive=False, not_interactive_because="serve has no terminal"
    )
    with pytest.raises(CredentialError) as err:
        await source.get()
    assert "needs a terminal (interactiveMode: Always): serve has no terminal" in err.value.reason
    assert runs(plugin) == []  # never started
    # IfAvailable without a terminal runs, non-interactively
    lenient = ExecCredentialSource(
        endpoint(dataclasses.replace(cfg, interactive_mode=InteractiveMode.IF_AVAILABLE))
    )
    assert (await lenient.get()).token == "t"
    assert runs(plugin)[0]["info"]["spec"]["interactive"] is False


def test_serve_refuses_an_always_interactive_context_before_it_starts(tmp_path):
    cfg = config("kubelogin", interactive_mode=InteractiveMode.ALWAYS)
    with pytest.raises(FormatError) as err:
        check_unattended([endpoint(cfg)], where="clusters.kubeconfig")
    assert "never runs credential plugins interactively" in str(err.value)
    assert "'kubelogin'" in str(err.value) and "context 'prod'" in str(err.value)
    check_unattended(
        [endpoint(dataclasses.replace(cfg, interactive_mode=InteractiveMode.NEVER))], where="x"
    )


async def test_the_fallback_runs_when_the_first_command_is_not_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    aws = write_plugin(bin_dir, "aws", [Reply(token="from-aws-cli")])
    cfg = config(
        "argocd-k8s-auth",
        args=("aws", "--cluster-name", "prod"),
        fallback=("aws", ("eks", "get-token", "--cluster-name", "prod")),
    )
    source = ExecCredentialSource(endpoint(cfg), environ={"PATH": str(bin_dir)})
    assert (await source.get()).token == "from-aws-cli"
    assert runs(aws)[0]["argv"] == ["eks", "get-token", "--cluster-name", "prod"]
    # with argocd-k8s-auth on PATH, that one runs
    first = write_plugin(bin_dir, "argocd-k8s-auth", [Reply(token="from-argocd-k8s-auth")])
    source = ExecCredentialSource(endpoint(cfg), environ={"PATH": str(bin_dir)})
    assert (await source.get()).token == "from-argocd-k8s-auth"
    assert runs(first)[0]["argv"] == ["aws", "--cluster-name", "prod"]
    with pytest.raises(CredentialError, match="neither 'argocd-k8s-auth' nor 'aws' is on PATH"):
        await ExecCredentialSource(endpoint(cfg), environ={"PATH": str(tmp_path)}).get()


def test_relative_commands_resolve_against_the_kubeconfig_directory(tmp_path):
    """kubectl's rule: a command with a path separator is relative to the kubeconfig's
    directory; a bare name is looked up on PATH when it runs."""
    (tmp_path / "conf").mkdir()
    kc = tmp_path / "conf" / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n- {name: c, cluster: {server: 'https://h:6443'}}\n"
        "users:\n"
        "- {name: rel, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1,"
        " command: ./bin/plugin}}}\n"
        "- {name: bare, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1,"
        " command: aws}}}\n"
        "contexts:\n- {name: a, context: {cluster: c, user: rel}}\n"
        "- {name: b, context: {cluster: c, user: bare}}\n"
    )
    a, b = load_kubeconfig(kc)
    assert a.credentials.exec.command == str(tmp_path / "conf" / "bin" / "plugin")
    assert b.credentials.exec.command == "aws"
    assert a.credentials.exec.origin == f"context 'a' of {kc}"


def test_redaction_keeps_words_and_paths_but_not_tokens():
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW0ifQ.c2ln"
    text = f"token {jwt} for /usr/local/bin/gke-gcloud-auth-plugin at ip-10-0-1-23.internal"
    shown = redact(text, ("hunter2-password",))
    assert "eyJzdWIi" not in shown and "/usr/local/bin/gke-gcloud-auth-plugin" in shown
    assert "ip-10-0-1-23.internal" in shown
    assert redact("pw hunter2-password!", ("hunter2-password",)) == "pw <redacted>!"


@pytest.mark.parametrize(
    ("stderr", "secret"),
    [
        # a short JWT: its payload and signature segments were under the 32-character run
        (
            "Authorization: Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9."
            "eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
            "c2lnbmF0dXJl",
        ),
        ("request failed: Authorization: Bearer abcdef.0123456789abcdef", "0123456789abcdef"),
        ("login failed for user=ci password=hunter2-short", "hunter2-short"),
        ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE is not authorized", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_a_plugins_stderr_never_shows_a_short_credential(stderr, secret):
    shown = redact(stderr)
    assert secret not in shown and "<redacted>" in shown and "[" not in shown


@settings(max_examples=100)
@given(token=st.from_regex(r"[A-Za-z0-9_-]{6,31}", fullmatch=True))
def test_a_bearer_credential_of_any_length_is_redacted(token):
    """Property: whatever follows ``Bearer`` in a plugin's stderr is not quoted back."""
    assume(token.lower() not in ("bearer", "basic", "digest", "negotiate", "token"))
    assert token not in redact(f"Error: Authorization: Bearer {token} rejected")


# --- KubeClient over an exec plugin (httpx's transport seam: no server needed) -------------


def _server(accept: set[str], seen: list[str]) -> httpx.MockTransport:
    """An API server that takes only the tokens in ``accept`` (and records what it saw)."""

    def handle(request: httpx.Request) -> httpx.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        seen.append(token)
        if token not in accept:
            return httpx.Response(401, json={"kind": "Status", "message": "Unauthorized"})
        if request.url.params.get("watch"):
            line = (
                '{"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "2"}}}'
            )
            return httpx.Response(200, content=(line + "\n").encode())
        return httpx.Response(200, json={"items": [], "metadata": {"resourceVersion": "1"}})

    return httpx.MockTransport(handle)


async def test_a_401_reruns_the_plugin_and_retries_the_request_once(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token="rejected"), Reply(token="accepted")])
    seen: list[str] = []
    async with KubeClient(
        endpoint(config(plugin), ca_pem=None), transport=_server({"accepted"}, seen)
    ) as client:
        listed = await client.list("/api/v1/nodes")
        assert listed.resource_version == "1"
        assert seen == ["rejected", "accepted"] and len(runs(plugin)) == 2
        await client.get("/version")  # the fresh token is cached: no further run
        assert len(runs(plugin)) == 2


async def test_a_token_the_server_keeps_refusing_is_unauthorized_not_a_loop(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token="rejected")])
    seen: list[str] = []
    async with KubeClient(
        endpoint(config(plugin), ca_pem=None), transport=_server(set(), seen)
    ) as client:
        with pytest.raises(Unauthorized):
            await client.list("/api/v1/nodes")
    # the plugin ran again after the 401 but gave the same token: not sent a second time
    assert seen == ["rejected"] and len(runs(plugin)) == 2


async def test_a_watch_refused_with_401_opens_again_with_a_fresh_credential(tmp_path):
    plugin = write_plugin(tmp_path, "plug", [Reply(token="rejected"), Reply(token="accepted")])
    seen: list[str] = []
    async with KubeClient(
        endpoint(config(plugin), ca_pem=None), transport=_server({"accepted"}, seen)
    ) as client:
        events = [e async for e in client.watch("/api/v1/nodes", resource_version="1")]
    assert [e.object["metadata"]["name"] for e in events] == ["n1"]
    assert seen == ["rejected", "accepted"]


async def test_a_watch_ended_by_a_401_error_event_gets_a_fresh_credential_next_time(tmp_path):
    """The server may end a watch over its credential (an ERROR event with code 401): the
    reflector's retry (a Transient) then runs with the plugin's next credential."""
    plugin = write_plugin(tmp_path, "plug", [Reply(token="first"), Reply(token="second")])

    def handle(request: httpx.Request) -> httpx.Response:
        error = '{"type": "ERROR", "object": {"kind": "Status", "code": 401, "message": "expired"}}'
        return httpx.Response(200, content=(error + "\n").encode())

    async with KubeClient(
        endpoint(config(plugin), ca_pem=None), transport=httpx.MockTransport(handle)
    ) as client:
        with pytest.raises(Transient) as err:
            async for _ in client.watch("/api/v1/nodes", resource_version="1"):
                pass
        assert err.value.status == 401
        assert len(runs(plugin)) == 1
        source = client.exec_source
        assert source is not None and (await source.get()).token == "second"


async def test_a_client_certificate_that_does_not_load_is_a_credential_error(tmp_path):
    bogus = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
    key = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"
    plugin = write_plugin(tmp_path, "plug", [Reply(cert=bogus, key=key)])
    async with KubeClient(
        endpoint(config(plugin), ca_pem=None), transport=_server(set(), [])
    ) as client:
        for expected_runs in (1, 2):  # dropped after the failure: the next request asks again
            with pytest.raises(CredentialError) as err:
                await client.get("/version")
            assert "returned a client certificate and key that do not load" in err.value.reason
            assert len(runs(plugin)) == expected_runs
