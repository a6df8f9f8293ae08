"""Workloads seen live through the watchers, on a real kube-apiserver.

The real manifests are applied the way Argo CD applies them; a FleetWatcher that follows the
app lists and watches the six kinds and must say nothing. Then every planted change comes out
as exactly one finding event, with the field manager that made it (``changedBy``); an
HPA-owned scale and a status-only write say nothing and cost no diff; reverting clears; a new
desired state (as after an Argo CD refresh) re-diffs at once; Secret content never reaches
the cache. With a ServiceAccount that may not list Secrets, the refusal is reported once and
the other kinds are watched all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import http_client_factory
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.app.workload_watching import WorkloadWatchSettings
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import AppDesired, DesiredApps
from fleetwarden.core.tracking import FindingEvent, app_scope
from fleetwarden.ports.kube import NotFound
from tests.e2e.test_cli_fleet import EXE
from tests.e2e.test_watch_live import Recorder
from tests.e2e.test_workloads_live import (
    APP,
    PATHS,
    _create,
    _ensure_namespace,
    apply_like_argocd,
    desired_objects,
    endpoint,  # noqa: F401  (the fixture)
    set_image,
)

pytestmark = pytest.mark.live

NS = "watch-live"
SECRET_VALUE = "live-test-not-a-real-secret"


def desired_apps(docs: list[dict[str, Any]]) -> DesiredApps:
    objs = [wl.ObjectIndex.wrap(d, source="git") for d in docs]
    return DesiredApps([AppDesired(APP, {None: [o for o in objs if o is not None]})])


def workload_events(rec: Recorder) -> list[FindingEvent]:
    return [
        e for e in rec.events if isinstance(e, FindingEvent) and e.finding.layer.value == "WORKLOAD"
    ]


async def _delete_namespace_objects(api: KubeClient, ns: str) -> None:
    for path in PATHS.values():
        listed = await api.list(path.format(ns=ns))
        for item in listed.items:
            with contextlib.suppress(NotFound):
                await api.request("DELETE", f"{path.format(ns=ns)}/{item['metadata']['name']}")


async def test_watchers_follow_the_app_live(endpoint, realdata):  # noqa: F811
    docs = desired_objects(realdata)
    rec = Recorder()
    fleet = FleetWatcher(
        [],
        http_client_factory,
        rec.emit,
        settings=WatchSettings(probe_interval=5),
        desired_apps=desired_apps(docs),
        workload_settings=WorkloadWatchSettings(namespaces=(NS,)),
    )
    async with KubeClient(endpoint) as api:
        await _ensure_namespace(api, NS)
        await _delete_namespace_objects(api, NS)
        for obj in docs:
            await apply_like_argocd(api, obj, namespace=NS)
        runner = asyncio.create_task(fleet.run([endpoint]))
        try:
            w = await rec.wait(
                lambda: (
                    (c := fleet.watcher(endpoint.name))
                    and c.workloads
                    and c.workloads.synced.is_set()
                    and c.workloads
                )
            )
            assert len(w.index) >= len(docs)
            assert workload_events(rec) == []  # applied as in Git: not one finding
            assert SECRET_VALUE not in repr([o.body for o in w.index.objects.values()])
            diffs = w.diffs

            # status-only writes (what the controllers do all day) cost no diff
            deploys = w.reflections[PATHS["Deployment"].format(ns=NS)]
            for n in (1, 2):
                seen = deploys.events
                await api.patch(
                    PATHS["Deployment"].format(ns=NS) + "/loadgenerator/status",
                    {"status": {"observedGeneration": n, "replicas": n}},
                    content_type=JSON_MERGE,
                )
                await rec.wait(lambda seen=seen: deploys.events > seen)
            assert w.diffs == diffs
            # kubectl scale deployment/podinfo: the HPA owns its replicas
            await api.patch(
                PATHS["Deployment"].format(ns=NS) + "/podinfo/scale",
                {"spec": {"replicas": 4}},
                content_type=JSON_MERGE,
            )
            # kubectl set image, by its own field manager
            await set_image(api, NS, "loadgenerator", "loadgenerator:v0.10.7")
            image = await rec.wait(lambda: rec.findings("finding.appeared", "image.main"))
            assert len(image) == 1
            f = image[0].finding
            assert (f.cluster, f.pool, f.actual) == (
                endpoint.name,
                f"Deployment/{NS}/loadgenerator",
                "loadgenerator:v0.10.7",
            )
            assert f.extra["changedBy"]["manager"] == "kubectl-set"
            assert [e.finding.field for e in workload_events(rec)] == ["image.main"]
            # the scale and the image change re-diffed the app (the scale found nothing)
            assert w.diffs - diffs == 2

            # kubectl edit configmap: a configuration finding
            await api.patch(
                PATHS["ConfigMap"].format(ns=NS) + "/collector-gateway-config-template",
                {"data": {"collector-gateway-config-template.yaml": "receivers: {}\n"}},
                content_type=JSON_MERGE,
            )
            await rec.wait(
                lambda: rec.findings("finding.appeared", "config.collector-gateway-config-template")
            )
            # a Secret edited in the cluster: its content digest changes, its value never shows
            await api.patch(
                PATHS["Secret"].format(ns=NS) + "/cart-credentials",
                {"stringData": {"password": "changed-by-hand"}},
                content_type=JSON_MERGE,
            )
            secret = await rec.wait(
                lambda: rec.findings("finding.appeared", "secret.cart-credentials")
            )
            text = repr(secret[0].finding.to_json())
            assert "changed-by-hand" not in text and SECRET_VALUE not in text

            # revert the image: the finding clears
            await set_image(api, NS, "loadgenerator", "loadgenerator")
            await rec.wait(lambda: rec.findings("finding.cleared", "image.main"))

            # Git moves on (an Argo CD refresh): the cluster now lags behind
            newer = copy.deepcopy(docs)
            gen = next(d for d in newer if d["metadata"]["name"] == "loadgenerator")
            gen["spec"]["template"]["spec"]["containers"][0]["image"] = "loadgenerator:v0.11.0"
            await fleet.set_desired(desired_apps(newer))
            lag = await rec.wait(
                lambda: [
                    e
                    for e in rec.findings("finding.appeared", "image.main")
                    if e.finding.expected == "loadgenerator:v0.11.0"
                ]
            )
            assert lag[0].finding.actual == "loadgenerator"

            # a workload deleted in the cluster: "in Git, missing in the cluster"
            await api.request("DELETE", PATHS["StatefulSet"].format(ns=NS) + "/database-primary")
            gone = await rec.wait(
                lambda: [
                    e
                    for e in rec.findings("finding.appeared", "workload")
                    if e.finding.pool == f"StatefulSet/{NS}/database-primary"
                ]
            )
            assert gone[0].finding.actual is None

            # nothing was reported twice
            keys = [(e.type, e.finding.id) for e in workload_events(rec)]
            assert len(keys) == len(set(keys))
            current = {f.field for f in fleet.tracker.current() if f.layer.value == "WORKLOAD"}
            assert current == {
                "image.main",
                "config.collector-gateway-config-template",
                "secret.cart-credentials",
                "workload",
            }
            assert {s for s in fleet.tracker.scopes_of(endpoint.name) if s[1] == app_scope(APP)}
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await _delete_namespace_objects(api, NS)


HOOK_NS = "watch-rbac"
SA = "fleetwarden-watch"


async def _watcher_rbac(api: KubeClient) -> None:
    """A ServiceAccount that may list and watch every kind but Secrets, in HOOK_NS."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{HOOK_NS}"
    read = ["get", "list", "watch"]
    await _create(
        api,
        f"/api/v1/namespaces/{HOOK_NS}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}},
    )
    await _create(
        api,
        f"{rbac}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": SA},
            "rules": [
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments", "statefulsets", "daemonsets"],
                    "verbs": read,
                },
                {
                    "apiGroups": ["autoscaling"],
                    "resources": ["horizontalpodautoscalers"],
                    "verbs": read,
                },
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": read},
            ],
        },
    )
    await _create(
        api,
        f"{rbac}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": SA},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SA},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": HOOK_NS}],
        },
    )


async def test_a_kind_the_token_may_not_list_is_reported_and_the_rest_is_watched(
    endpoint,  # noqa: F811
    realdata,
):
    docs = [d for d in desired_objects(realdata) if d["kind"] in ("Deployment", "Secret")]
    async with KubeClient(endpoint) as api:
        await _ensure_namespace(api, HOOK_NS)
        await _watcher_rbac(api)  # list and watch workloads, no Secrets
        for obj in docs:
            await apply_like_argocd(api, obj, namespace=HOOK_NS)
        granted = await api.request(
            "POST",
            f"/api/v1/namespaces/{HOOK_NS}/serviceaccounts/{SA}/token",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600},
            },
        )
        token = granted["status"]["token"]
    as_gate = dataclasses.replace(
        endpoint, credentials=dataclasses.replace(endpoint.credentials, token=token)
    )
    rec = Recorder()
    fleet = FleetWatcher(
        [],
        http_client_factory,
        rec.emit,
        settings=WatchSettings(probe_interval=5),
        desired_apps=desired_apps(docs),
        workload_settings=WorkloadWatchSettings(namespaces=(HOOK_NS,)),
    )
    runner = asyncio.create_task(fleet.run([as_gate]))
    try:

        def refusals() -> list[Any]:
            found = rec.lifecycle("cluster.watch_refused")
            return found if {"secrets", "nodes"} <= {e.details["resource"] for e in found} else []

        refused = await rec.wait(refusals)  # no Secrets, and (this account) no Nodes either
        resources = {e.details["resource"] for e in refused}
        assert not resources & {"deployments", "configmaps", "horizontalpodautoscalers"}
        assert all("forbidden" in e.details["reason"].lower() for e in refused)
        w = await rec.wait(
            lambda: (
                (c := fleet.watcher(endpoint.name)) and c.workloads.synced.is_set() and c.workloads
            )
        )
        assert {k.kind for k in w.index.objects} >= {"Deployment"}
        assert "Secret" not in {k.kind for k in w.index.objects}
        # the Secret it cannot see is not called missing: the app's workloads compare clean
        fields = {e.finding.field for e in workload_events(rec)}
        assert fields == set(), fields  # not "secret.cart-credentials: missing"
        await asyncio.sleep(0.5)
        assert len(rec.lifecycle("cluster.watch_refused")) == len(refused)  # said once
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


CLI_NS = "watch-cli"


async def test_watch_command_follows_an_app(endpoint, k8s, realdata, tmp_path):  # noqa: F811
    """`fleetwarden watch --follow APP=PATH -o json`: the installed CLI prints one line for the
    drift made by hand, with its author, and nothing for the app applied as in Git."""
    docs = desired_objects(realdata)
    (tmp_path / "rendered.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "pools.yaml").write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n"
        f"cluster: {endpoint.name}\npools:\n  general:\n    minSize: 0\n"
    )
    kubeconfig = Path(k8s["kubeconfig"])
    context = next(
        c["name"]
        for c in yaml.safe_load(kubeconfig.read_text())["contexts"]
        if c["context"]["cluster"] == endpoint.name
    )
    async with KubeClient(endpoint) as api:
        await _ensure_namespace(api, CLI_NS)
        await _delete_namespace_objects(api, CLI_NS)
        for obj in docs:
            await apply_like_argocd(api, obj, namespace=CLI_NS)
        proc = await asyncio.create_subprocess_exec(
            EXE, "watch", "-k", str(kubeconfig), "--context", context,
            "-d", str(tmp_path / "pools.yaml"),
            "--follow", f"{APP}={tmp_path / 'rendered.yaml'}", "--namespace", CLI_NS,
            "-o", "json", "--duration", "60",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        lines: list[dict[str, Any]] = []

        async def read() -> None:
            assert proc.stdout is not None
            async for line in proc.stdout:
                lines.append(json.loads(line))

        reader = asyncio.create_task(read())
        try:
            await _wait(lambda: any(e["type"] == "cluster.added" for e in lines), proc)
            await asyncio.sleep(2)  # the first list and diff: nothing to say
            assert not [e for e in lines if e.get("finding", {}).get("layer") == "WORKLOAD"], lines
            await set_image(api, CLI_NS, "loadgenerator", "lg:9", manager="kubectl-edit")
            found = await _wait(
                lambda: [e for e in lines if e.get("finding", {}).get("field") == "image.main"],
                proc,
            )
            assert found[0]["type"] == "finding.appeared"
            assert found[0]["finding"]["actual"] == "lg:9"
            assert found[0]["finding"]["changedBy"]["manager"] == "kubectl-edit"
        finally:
            if proc.returncode is None:
                proc.terminate()
            await proc.wait()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            await _delete_namespace_objects(api, CLI_NS)


async def _wait(cond: Any, proc: Any, timeout: float = 30) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if result := cond():
            return result
        if proc.returncode is not None:
            err = await proc.stderr.read()
            raise AssertionError(f"watch exited {proc.returncode}: {err.decode()[-2000:]}")
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


def test_watch_follow_is_checked():
    r = subprocess.run(
        [EXE, "watch", "-k", "/nonexistent", "-d", "/nonexistent", "--follow", "shop"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
