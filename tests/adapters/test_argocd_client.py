"""ArgoCDClient against the Argo CD simulator, every exchange checked against Argo CD's own
OpenAPI document (realdata/argocd/argocd-api-swagger.json, loaded here, never copied).

``SpecChecker`` turns the Swagger 2.0 definitions into JSON Schema and validates, for every
request the client sends, its path, query parameters and body, and for every answer the
simulator gives, its body against the operation's response (``default``: ``runtimeError``).
Where the swagger (generated from Argo CD's protobuf files) and the JSON argocd-server really
writes (Go's encoding/json over the same types) differ, the checker follows the wire by rule,
listed in ``WIRE_TYPES`` and ``INLINED``; everything else is as the spec says, and stricter:
objects may not carry properties the spec does not name.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from jsonschema import Draft4Validator, FormatChecker

from fleetwarden.adapters.argocd.client import ArgoCDClient, Requested, was_applied
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator, load_applications
from fleetwarden.adapters.workload_sources import app_from_argocd, parse_argo_ref
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.argocd import (
    ArgoConflict,
    ArgoError,
    ArgoForbidden,
    ArgoNotFound,
    ArgoOutcomeUnknown,
    ArgoUnauthorized,
    ArgoUnavailable,
    CallRecord,
    OperationPhase,
    OperationState,
    SyncResource,
)
from tests.conftest import REALDATA

pytestmark = pytest.mark.realdata

SPEC_FILE = "argocd/argocd-api-swagger.json"
GKE_APP = "argocd/argocd-application-with-status-gke.yaml"
HELM_APP = "argocd/argocd-application-helm-child-live.yaml"
APP = "velero-test"  # the GKE application: manual sync, history ids 14..23
AUTO_APP = "argo-workflows"  # the Helm child: automated sync
BASE = "http://argocd.test"
HANG = 0.3  # the client's timeout in tests where the simulator does not answer

# --- the spec as JSON Schema -----------------------------------------------------------------

# Kubernetes types whose protobuf form (what the swagger shows) is not their JSON form.
WIRE_TYPES: dict[str, dict[str, Any]] = {
    "runtimeRawExtension": {},  # MarshalJSON writes the raw JSON value itself
    "v1JSON": {},  # any JSON value
    "v1FieldsV1": {"type": "object"},  # the managed-fields trie, inline
    "intstrIntOrString": {"type": ["integer", "string"]},
    "v1MicroTime": {"type": "string", "format": "date-time"},  # RFC 3339, like v1Time
}
# Go structs embedded with json:",inline" that protobuf nests as a field: on the wire their
# fields sit in the parent. The nested form stays allowed too (the checker is a superset).
INLINED = {
    "v1alpha1SyncStrategyHook": "syncStrategyApply",
    "v1alpha1KustomizeSelector": "resId",
    "v1alpha1KustomizeResId": "gvk",
}
_DIGITS = {"type": "string", "pattern": r"^-?[0-9]+$"}


def wire_definitions(spec: dict[str, Any]) -> dict[str, Any]:
    raw = spec["definitions"]

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {
            k: ({p: convert(s) for p, s in v.items()} if k == "properties" else convert(v))
            for k, v in node.items()
            if k not in ("title", "description") and not k.startswith("x-")
        }
        for part in out.pop("allOf", ()):  # ResourceNode: allOf ResourceRef -> one object
            ref = part["$ref"].rsplit("/", 1)[-1]
            out.setdefault("properties", {}).update(convert(raw[ref]["properties"]))
        if out.get("type") == "integer" and out.get("format") == "int64":
            # Argo CD writes int64 as JSON numbers; grpc-gateway's protojson as strings
            return {"anyOf": [{"type": "integer"}, _DIGITS]}
        if (
            out.get("type") == "object"
            and "properties" in out
            and "additionalProperties" not in out
        ):
            out["additionalProperties"] = False
        return out

    def definition(name: str) -> dict[str, Any]:
        if name in WIRE_TYPES:
            return WIRE_TYPES[name]
        converted = convert(raw[name])
        if name in INLINED:  # recursively: KustomizeSelector inlines ResId, which inlines Gvk
            nested = raw[name]["properties"][INLINED[name]]["$ref"].rsplit("/", 1)[-1]
            converted["properties"].update(definition(nested)["properties"])
        return converted

    return {name: definition(name) for name in raw}


_formats = FormatChecker(formats=())  # unknown formats (byte, int32, ...) are not checked


@_formats.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if isinstance(value, str):
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


class SpecChecker:
    """Validates requests and answers against the operations of Argo CD's OpenAPI document."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.definitions = wire_definitions(spec)
        self.routes: list[tuple[str, re.Pattern[str], int, dict[str, Any]]] = []
        for template, item in spec["paths"].items():
            pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$")
            literal = len(re.sub(r"\{[^}]+\}", "", template))
            for method, op in item.items():
                self.routes.append((method.upper(), pattern, literal, op))
        self.seen: list[tuple[str, int]] = []  # (operationId, HTTP status) of checked answers
        self.bodies: list[tuple[str, Any]] = []  # (operationId, request body)
        self.failures: list[str] = []

    def errors(self, schema: dict[str, Any], instance: Any) -> list[str]:
        validator = Draft4Validator(
            {**schema, "definitions": self.definitions}, format_checker=_formats
        )
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:200]}"
            for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        ]

    def definition_errors(self, name: str, instance: Any) -> list[str]:
        assert name in self.definitions, f"no definition {name} in the spec"
        return self.errors({"$ref": f"#/definitions/{name}"}, instance)

    def operation(self, method: str, path: str) -> dict[str, Any]:
        found = [
            (literal, op)
            for m, pattern, literal, op in self.routes
            if m == method and pattern.match(path)
        ]
        self._require(found, f"{method} {path} is not an operation of Argo CD's API")
        return max(found, key=lambda f: f[0])[1]

    def check_request(self, request: httpx.Request) -> dict[str, Any]:
        op = self.operation(request.method, request.url.path)
        where = f"{request.method} {request.url.path} ({op['operationId']})"
        declared = {p["name"]: p for p in op.get("parameters", ()) if p["in"] == "query"}
        for key, value in request.url.params.multi_items():
            self._require(key in declared, f"{where}: query parameter {key!r} is not in the spec")
            if declared.get(key, {}).get("type") == "boolean":
                self._require(value in ("true", "false"), f"{where}: {key}={value!r} not boolean")
        body_param = next((p for p in op.get("parameters", ()) if p["in"] == "body"), None)
        if body_param is None:
            self._require(not request.content, f"{where}: a body the spec does not take")
        else:
            body = json.loads(request.content) if request.content else None
            self._require(body is not None, f"{where}: the spec requires a body")
            self.bodies.append((op["operationId"], body))
            self._require_valid(body_param["schema"], body, f"{where} request body")
        return op

    def check_response(self, op: dict[str, Any], status: int, content: bytes) -> None:
        where = f"{op['operationId']} answer HTTP {status}"
        response = op["responses"].get(str(status)) or op["responses"].get("default")
        self._require(response is not None, f"{where}: no such response in the spec")
        try:
            body = json.loads(content)
        except ValueError:
            self._require(False, f"{where}: not JSON: {content[:100]!r}")
            return
        self._require_valid(response["schema"], body, where)
        self.seen.append((op["operationId"], status))

    def _require_valid(self, schema: dict[str, Any], instance: Any, where: str) -> None:
        errors = self.errors(schema, instance)
        self._require(not errors, f"{where} breaks the spec: {errors[:5]}")

    def _require(self, ok: object, message: str) -> None:
        if not ok:
            self.failures.append(message)
            raise AssertionError(message)


class CheckingTransport(httpx.AsyncBaseTransport):
    """Forwards to ``inner`` and checks both directions against the spec.

    ``before`` may answer or fail a request instead (a scripted network), or return None.
    """

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        checker: SpecChecker,
        before: Callable[[httpx.Request], Awaitable[httpx.Response | None]] | None = None,
    ) -> None:
        self.inner, self.checker, self.before = inner, checker, before
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        op = self.checker.check_request(request)
        self.sent.append(request)
        response = await self.before(request) if self.before else None
        if response is None:
            response = await self.inner.handle_async_request(request)
        content = await response.aread()
        self.checker.check_response(op, response.status_code, content)
        return httpx.Response(response.status_code, headers=response.headers, content=content)


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spec(realdata: Path) -> dict[str, Any]:
    return json.loads((realdata / SPEC_FILE).read_text(encoding="utf-8"))


@pytest.fixture
def checker(spec: dict[str, Any]) -> Iterator[SpecChecker]:
    chk = SpecChecker(spec)
    yield chk
    assert not chk.failures, chk.failures


class FakeSleep:
    """Back-off without waiting: records each delay."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


@pytest.fixture
def sim(realdata: Path) -> ArgoCDSimulator:
    return ArgoCDSimulator.from_yaml(realdata / GKE_APP, realdata / HELM_APP)


@pytest.fixture
def sleep() -> FakeSleep:
    return FakeSleep()


Factory = Callable[..., ArgoCDClient]


@pytest.fixture
async def make_client(sim: ArgoCDSimulator, checker: SpecChecker, sleep: FakeSleep) -> Any:
    clients: list[ArgoCDClient] = []

    def make(
        *,
        before: Callable[[httpx.Request], Awaitable[httpx.Response | None]] | None = None,
        **options: Any,
    ) -> ArgoCDClient:
        if "username" not in options and "token" not in options:
            options["token"] = sim.issue_token()
        transport = CheckingTransport(httpx.ASGITransport(app=sim), checker, before)
        options = {"timeout": 5.0, "retries": 3, "sleep": sleep, "rng": random.Random(7)} | options
        client = ArgoCDClient(BASE, transport=transport, **options)
        client.transport = transport  # type: ignore[attr-defined]  # for assertions
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
def client(make_client: Factory) -> ArgoCDClient:
    return make_client()


def sync_bodies(checker: SpecChecker) -> list[Any]:
    return [b for op, b in checker.bodies if op == "ApplicationService_Sync"]


# --- the validator itself, on real objects ---------------------------------------------------

APP_FILES = [
    p.name
    for p in sorted((REALDATA / "argocd").glob("argocd-application-*.yaml"))
    if "applicationset" not in p.name
]


@pytest.mark.parametrize("filename", APP_FILES)
def test_real_applications_validate_against_v1alpha1application(checker, realdata, filename):
    """Real Application manifests pass the converted spec (TypeMeta aside: the swagger's
    v1alpha1Application has no apiVersion/kind, argocd-server's answers carry none)."""
    apps = load_applications(realdata / "argocd" / filename)
    assert apps
    for app in apps:
        body = {k: v for k, v in app.items() if k not in ("apiVersion", "kind")}
        assert checker.definition_errors("v1alpha1Application", body) == []


def test_real_operation_state_parses(realdata):
    """The GKE application's operationState reads as a finished, successful sync."""
    (app,) = load_applications(realdata / GKE_APP)
    state = OperationState.from_application(app)
    assert state is not None
    assert state.phase == OperationPhase.SUCCEEDED and state.completed and state.succeeded
    assert state.revision == "ea8759964626a583667a2bfd08f334ec2070040a"
    assert state.initiated_by == "foo@example.com"
    assert state.started_at == datetime(2024, 3, 5, 7, 33, 3, tzinfo=UTC)


def _broken(app: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    bad = copy.deepcopy({k: v for k, v in app.items() if k not in ("apiVersion", "kind")})
    *parents, leaf = path.split(".")
    node = bad
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[leaf] = value
    return bad


@pytest.mark.parametrize(
    ("path", "value", "complaint"),
    [
        ("spec.syncPolicy.syncOptions", "CreateNamespace=true", "is not of type 'array'"),
        ("spec.destination.cluster", "gke", "Additional properties are not allowed"),
        ("status.history", {"id": 1}, "is not of type 'array'"),
        ("status.operationState.startedAt", "yesterday", "is not a 'date-time'"),
        ("status.operationState.retryCount", "two", "is not valid under any of the given"),
        ("status.health.status", 1, "is not of type 'string'"),
    ],
)
def test_validator_rejects_what_the_spec_does_not_allow(checker, realdata, path, value, complaint):
    """A validator that accepts anything proves nothing: each of these breaks the spec."""
    (app,) = load_applications(realdata / GKE_APP)
    errors = checker.definition_errors("v1alpha1Application", _broken(app, path, value))
    assert any(complaint in e for e in errors), errors


def test_validator_reads_int64_as_number_or_decimal_string(checker):
    """Argo CD writes int64 as numbers, grpc-gateway's protojson as strings: both pass."""
    for value in (14, "14"):
        assert (
            checker.definition_errors("applicationApplicationRollbackRequest", {"id": value}) == []
        )
    assert checker.definition_errors("applicationApplicationRollbackRequest", {"id": "x1"})


# --- reads -----------------------------------------------------------------------------------


async def test_get_application_hard_refresh_sends_refresh_param(client, sim, checker):
    """refresh="hard" is the spec's ``refresh`` query parameter; the answer is an Application."""
    app = await client.get_application(APP, refresh="hard")
    assert app["metadata"]["name"] == APP
    assert sim.refreshes == [(APP, "hard")]
    assert client.transport.sent[-1].url.params["refresh"] == "hard"
    assert ("ApplicationService_Get", 200) in checker.seen
    assert client.calls[-1].path == f"/api/v1/applications/{APP}?refresh=hard"


async def test_get_application_normal_refresh_and_project(client, sim):
    await client.get_application(APP, refresh="normal", project="sre")
    assert sim.refreshes == [(APP, "normal")]
    assert client.transport.sent[-1].url.params["project"] == "sre"


async def test_unknown_refresh_value_is_refused_before_any_request(client):
    with pytest.raises(ValueError, match="refresh"):
        await client.get_application(APP, refresh="soft")
    assert client.transport.sent == []


async def test_get_application_in_another_project_is_forbidden(client):
    with pytest.raises(ArgoForbidden) as err:
        await client.get_application(APP, project="default")
    assert err.value.status == 403 and not err.value.retryable


async def test_unknown_application_is_not_found_and_recorded(client):
    with pytest.raises(ArgoNotFound, match="not found") as err:
        await client.get_application("nope")
    assert err.value.grpc_code == 5
    assert client.calls[-1].status == 404 and client.calls[-1].attempts == 1
    assert "ArgoNotFound" in (client.calls[-1].error or "")


async def test_list_applications_filters_by_project(client, checker):
    assert {a["metadata"]["name"] for a in await client.list_applications()} == {APP, AUTO_APP}
    assert [a["metadata"]["name"] for a in await client.list_applications(project="sre")] == [APP]
    assert ("ApplicationService_List", 200) in checker.seen


async def test_managed_resources_are_resource_diffs(client, checker):
    items = await client.managed_resources(APP)
    assert {(i["kind"], i["name"]) for i in items} == {
        ("Service", "test-lla"),
        ("Deployment", "test-lla"),
    }
    assert json.loads(items[0]["targetState"])["metadata"]["name"] == "test-lla"
    assert ("ApplicationService_ManagedResources", 200) in checker.seen


async def test_resource_tree_links_pods_to_their_deployment(client, checker):
    tree = await client.resource_tree(APP)
    by_kind = {n["kind"]: n for n in tree["nodes"]}
    assert by_kind["Pod"]["parentRefs"][0]["uid"] == by_kind["ReplicaSet"]["uid"]
    assert by_kind["ReplicaSet"]["parentRefs"][0]["uid"] == by_kind["Deployment"]["uid"]
    assert by_kind["Pod"]["images"] == ["nginx:latest"]
    assert ("ApplicationService_ResourceTree", 200) in checker.seen


async def test_list_clusters_names_each_destination(client, checker):
    clusters = await client.list_clusters()
    assert {c["name"] for c in clusters} >= {"in-cluster", "gke-alpha-01-europe-west1"}
    assert all(c["connectionState"]["status"] == "Successful" for c in clusters)
    assert ("ClusterService_List", 200) in checker.seen


async def test_manifests_at_a_revision(client, checker):
    rendered = await client.manifests(APP, revision="v1.2.3")
    assert client.transport.sent[-1].url.params["revision"] == "v1.2.3"
    assert {json.loads(m)["kind"] for m in rendered["manifests"]} == {"Service", "Deployment"}
    assert rendered["namespace"] == "test-lla" and len(rendered["revision"]) == 40
    assert ("ApplicationService_GetManifests", 200) in checker.seen


# --- sync, rollback, terminate ---------------------------------------------------------------


async def test_sync_sends_every_option_in_the_spec_shape(client, sim, checker):
    """revision, prune, dryRun, a subset of resources, syncOptions and a strategy all travel as
    applicationApplicationSyncRequest fields and reach the operation."""
    result = await client.sync(
        APP,
        revision="test-lla",
        prune=True,
        dry_run=True,
        resources=[SyncResource("Deployment", "test-lla", group="apps", namespace="test-lla")],
        sync_options=["ServerSideApply=true", "Validate=false"],
        strategy="apply",
        force=True,
    )
    (body,) = sync_bodies(checker)
    assert body == {
        "name": APP,
        "prune": True,
        "dryRun": True,
        "revision": "test-lla",
        "resources": [
            {"group": "apps", "kind": "Deployment", "name": "test-lla", "namespace": "test-lla"}
        ],
        "syncOptions": {"items": ["ServerSideApply=true", "Validate=false"]},
        "strategy": {"apply": {"force": True}},
    }
    assert result.application == APP and result.attempts == 1 and not result.verified
    assert result.state is None  # queued: the controller has not started it yet
    operation = result.app["operation"]["sync"]
    assert operation["revision"] == "test-lla" and operation["prune"] and operation["dryRun"]
    assert ("ApplicationService_Sync", 200) in checker.seen


async def test_sync_hook_strategy_is_spec_valid(client, checker):
    await client.sync(APP, strategy="hook")
    assert sync_bodies(checker)[0]["strategy"] == {"hook": {}}


async def test_sync_completes_and_reads_back_as_succeeded(client, sim):
    """After the simulated controller runs, the operation state is this sync's, succeeded."""
    await client.sync(APP, revision="test-lla")
    app = await client.get_application(APP)
    state = OperationState.from_application(app)
    assert state is not None and state.succeeded and state.requested_revision == "test-lla"
    assert app["status"]["history"][-1]["id"] == 24
    assert "operation" not in app


async def test_rollback_to_a_history_id(client, sim, checker):
    result = await client.rollback(APP, 20, prune=True)
    assert [b for op, b in checker.bodies if op == "ApplicationService_Rollback"] == [
        {"name": APP, "id": 20, "prune": True, "dryRun": False}
    ]
    sync = result.app["operation"]["sync"]
    assert sync["revision"] == "ea8759964626a583667a2bfd08f334ec2070040a"
    assert sync["prune"] is True and "source" in sync
    assert ("ApplicationService_Rollback", 200) in checker.seen


async def test_rollback_with_auto_sync_on_is_refused(client):
    """Argo CD refuses (400 FailedPrecondition): a plain ArgoError, not a conflict."""
    with pytest.raises(ArgoError, match="auto-sync is enabled") as err:
        await client.rollback(AUTO_APP, 0)
    assert type(err.value) is ArgoError and err.value.status == 400 and err.value.grpc_code == 9


async def test_rollback_to_an_unknown_history_id_is_not_found(client):
    with pytest.raises(ArgoNotFound, match="id 99"):
        await client.rollback(APP, 99)


async def test_rollback_id_must_be_an_int(client):
    with pytest.raises(ValueError):
        await client.rollback(APP, "20")  # type: ignore[arg-type]


async def test_terminate_running_operation(make_client, sim, checker):
    sim.operation_duration = None  # runs until terminated
    client = make_client()
    await client.sync(APP)
    assert await client.terminate_operation(APP) is True
    state = OperationState.from_application(await client.get_application(APP))
    assert state is not None and state.phase == OperationPhase.FAILED
    assert state.message == "Operation terminated"
    assert await client.terminate_operation(APP) is False  # nothing runs any more
    assert ("ApplicationService_TerminateOperation", 200) in checker.seen
    assert ("ApplicationService_TerminateOperation", 400) in checker.seen


# --- conflicts -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 409])
async def test_sync_while_an_operation_runs_is_a_conflict_and_recorded(make_client, sim, status):
    """Argo CD answers 400 FailedPrecondition "another operation is already in progress" (some
    proxies/versions 409): both are ArgoConflict, not retried, recorded in ``calls``."""
    sim.operation_duration, sim.conflict_status = None, status
    client = make_client()
    await client.sync(APP)
    with pytest.raises(ArgoConflict, match="another operation is already in progress") as err:
        await client.sync(APP, revision="test-lla")
    assert err.value.status == status and err.value.retryable
    assert sim.count("POST", "/sync") == 2
    record = client.calls[-1]
    assert record.method == "POST" and record.path.endswith("/sync")
    assert record.status == status and record.attempts == 1
    assert record.error and record.error.startswith("ArgoConflict")


async def test_rollback_while_an_operation_runs_is_a_conflict(make_client, sim):
    sim.operation_duration = None
    client = make_client()
    await client.sync(APP)
    with pytest.raises(ArgoConflict):
        await client.rollback(APP, 20)


# --- retries of idempotent calls -------------------------------------------------------------


async def test_get_retries_500s_with_backoff_then_succeeds(client, sim, sleep):
    sim.fail_next(2, status=500, method="GET")
    app = await client.get_application(APP)
    assert app["metadata"]["name"] == APP
    assert sim.count("GET", f"/applications/{APP}") == 3
    assert len(sleep.delays) == 2
    record = client.calls[-1]
    assert record.attempts == 3 and record.status == 200 and record.error is None
    assert record.outcomes == ("HTTP 500", "HTTP 500", "HTTP 200")


async def test_get_gives_up_after_retries_with_argo_unavailable(client, sim, sleep):
    sim.fail_next(10, status=503, method="GET")
    with pytest.raises(ArgoUnavailable, match="after 4 attempts") as err:
        await client.get_application(APP)
    assert err.value.status == 503 and err.value.retryable
    assert sim.count("GET", f"/applications/{APP}") == 4  # retries=3
    assert client.calls[-1].outcomes == ("HTTP 503",) * 4
    assert client.calls[-1].error and client.calls[-1].error.startswith("ArgoUnavailable")


async def test_get_timeouts_are_retried(make_client, sim):
    client = make_client(timeout=HANG)
    sim.hang_next(1, method="GET")
    await client.get_application(APP)
    assert client.calls[-1].outcomes == ("timeout", "HTTP 200")


async def test_backoff_is_full_jitter_exponential_and_capped(make_client, sim, sleep):
    client = make_client(retries=6, backoff=1.0, backoff_cap=5.0)
    sim.fail_next(10, status=502, method="GET")
    with pytest.raises(ArgoUnavailable):
        await client.get_application(APP)
    bounds = [min(5.0, 1.0 * 2**n) for n in range(6)]
    assert len(sleep.delays) == 6
    assert all(0 <= d <= b for d, b in zip(sleep.delays, bounds, strict=True))
    assert len(set(sleep.delays)) == 6  # jittered, not a fixed ladder


async def test_retry_after_header_is_honoured(make_client, sleep):
    async def busy_once(request: httpx.Request) -> httpx.Response | None:
        if len(sleep.delays) == 0 and request.method == "GET":
            body = {"code": 14, "error": "busy", "message": "busy", "details": []}
            return httpx.Response(503, json=body, headers={"Retry-After": "3"})
        return None

    client = make_client(before=busy_once)
    await client.list_clusters()
    assert sleep.delays == [3.0]


async def test_argo_cds_retry_after_of_superscript_digits_is_the_usual_backoff(make_client, sleep):
    async def busy_once(request: httpx.Request) -> httpx.Response | None:
        if not sleep.delays and request.method == "GET":
            body = {"code": 14, "error": "busy", "message": "busy", "details": []}
            return httpx.Response(503, json=body, headers={"Retry-After": "²".encode("latin-1")})
        return None

    client = make_client(before=busy_once, backoff=0.5, backoff_cap=1.0)
    await client.list_clusters()
    assert len(sleep.delays) == 1 and 0 <= sleep.delays[0] <= 0.5


async def test_4xx_is_not_retried(client, sim):
    with pytest.raises(ArgoNotFound):
        await client.managed_resources("nope")
    assert sim.count("GET", "/nope/managed-resources") == 1


async def test_connection_failures_become_argo_unavailable(make_client):
    async def refuse(request: httpx.Request) -> httpx.Response | None:
        raise httpx.ConnectError("connection refused", request=request)

    client = make_client(before=refuse, retries=2)
    with pytest.raises(ArgoUnavailable, match="connection failed after 3 attempts"):
        await client.list_clusters()


async def test_a_non_json_answer_is_an_argo_error(make_client, checker):
    async def html(request: httpx.Request) -> httpx.Response | None:
        return httpx.Response(200, text="<html>Argo CD</html>")

    client = make_client(before=html)
    with pytest.raises(AssertionError):  # the spec checker objects first ...
        await client.list_clusters()
    checker.failures.clear()
    client.transport.checker = _Lenient(checker)  # ... and without it the client does too
    with pytest.raises(ArgoError, match="not JSON"):
        await client.list_clusters()


class _Lenient:
    """A checker that lets a deliberately invalid answer through (one test needs it)."""

    def __init__(self, checker: SpecChecker) -> None:
        self.checker = checker

    def check_request(self, request: httpx.Request) -> dict[str, Any]:
        return self.checker.check_request(request)

    def check_response(self, op: dict[str, Any], status: int, content: bytes) -> None:
        return None


async def test_terminate_is_retried_on_5xx(make_client, sim):
    sim.operation_duration = None
    client = make_client()
    await client.sync(APP)
    sim.fail_next(1, status=500, method="DELETE")
    assert await client.terminate_operation(APP) is True
    assert sim.count("DELETE", "/operation") == 2


# --- sync/rollback whose answer was lost -----------------------------------------------------


async def test_sync_timeout_after_it_was_applied_is_not_sent_again(make_client, sim):
    """The sync reached Argo CD, the answer did not: the client reads the app, finds its
    operation, and returns it instead of starting a second sync."""
    client = make_client(timeout=HANG)
    sim.hang_next(1, method="POST", path="/sync", after_apply=True)
    result = await client.sync(APP, revision="test-lla", prune=True)
    assert sim.count("POST", "/sync") == 1
    assert result.verified and result.attempts == 1
    assert result.state is not None and result.state.requested_revision == "test-lla"
    history = sim.application(APP)["status"]["history"]
    assert [h["id"] for h in history].count(24) == 1 and history[-1]["id"] == 24
    record = next(c for c in client.calls if c.method == "POST")
    assert record.outcomes == ("timeout", "applied")
    assert record.note == "sync applied; its answer was lost"
    assert any(c.note == "verify sync" for c in client.calls)


async def test_sync_timeout_before_it_was_applied_is_sent_once_more(make_client, sim):
    client = make_client(timeout=HANG)
    sim.hang_next(1, method="POST", path="/sync")
    result = await client.sync(APP, revision="test-lla")
    assert sim.count("POST", "/sync") == 2
    assert not result.verified and result.attempts == 2
    assert [c.note for c in client.calls if c.method == "GET"] == ["verify sync"]
    assert next(c for c in client.calls if c.method == "POST").outcomes == (
        "timeout",
        "not applied",
        "HTTP 200",
    )
    ids = [h["id"] for h in sim.application(APP)["status"]["history"]]
    assert ids[-1] == 24 and ids.count(24) == 1  # exactly one new deployment


async def test_sync_500_after_it_was_applied_is_not_sent_again(client, sim):
    sim.fail_next(1, status=500, method="POST", path="/sync", after_apply=True)
    result = await client.sync(APP)
    assert sim.count("POST", "/sync") == 1 and result.verified


async def test_sync_500_before_it_was_applied_is_retried(client, sim):
    sim.fail_next(1, status=500, method="POST", path="/sync")
    result = await client.sync(APP)
    assert sim.count("POST", "/sync") == 2 and not result.verified


async def test_rollback_timeout_after_it_was_applied_is_not_sent_again(make_client, sim):
    client = make_client(timeout=HANG)
    sim.hang_next(1, method="POST", path="/rollback", after_apply=True)
    result = await client.rollback(APP, 20)
    assert sim.count("POST", "/rollback") == 1 and result.verified
    assert result.state is not None
    assert result.state.revision == "ea8759964626a583667a2bfd08f334ec2070040a"


async def test_sync_gives_up_when_never_applied(client, sim, sleep):
    sim.fail_next(10, status=500, method="POST", path="/sync")
    with pytest.raises(ArgoUnavailable, match="not applied") as err:
        await client.sync(APP)
    assert not isinstance(err.value, ArgoOutcomeUnknown)
    assert sim.count("POST", "/sync") == 4
    assert sim.count("GET", f"/applications/{APP}") == 4  # one check per lost answer


async def test_sync_outcome_unknown_when_the_app_cannot_be_read(make_client, sim):
    """No answer to the sync and none to the check: say so, do not guess, do not resend."""
    client = make_client(timeout=HANG)
    sim.hang_next(1, method="POST", path="/sync", after_apply=True)
    sim.fail_next(10, status=503, method="GET")
    with pytest.raises(ArgoOutcomeUnknown, match="read it before retrying"):
        await client.sync(APP)
    assert sim.count("POST", "/sync") == 1


async def test_a_dropped_connection_on_sync_is_checked_like_a_timeout(make_client, sim):
    async def drop_after_forwarding(request: httpx.Request) -> httpx.Response | None:
        if request.method == "POST" and sim.count("POST", "/sync") == 0:
            inner = httpx.ASGITransport(app=sim)
            await inner.handle_async_request(request)  # applied ...
            raise httpx.RemoteProtocolError("peer closed connection", request=request)
        return None

    client = make_client(before=drop_after_forwarding)
    result = await client.sync(APP)
    assert result.verified and sim.count("POST", "/sync") == 1


async def test_a_refused_connection_on_sync_is_retried_without_a_check(make_client, sim):
    """Nothing was sent: no need to read the app first."""
    refused: list[int] = []

    async def refuse_once(request: httpx.Request) -> httpx.Response | None:
        if request.method == "POST" and not refused:
            refused.append(1)
            raise httpx.ConnectError("connection refused", request=request)
        return None

    client = make_client(before=refuse_once)
    result = await client.sync(APP)
    assert not result.verified and result.attempts == 2
    assert not any(c.note for c in client.calls)


async def test_conflict_on_retry_from_our_own_late_first_request_is_success(make_client, sim):
    """The first sync times out and the check finds nothing; the request then lands late, so
    the retry meets "another operation is already in progress": that operation is ours."""
    sim.operation_duration = None
    lost: list[httpx.Request] = []

    async def late(request: httpx.Request) -> httpx.Response | None:
        if request.method == "POST" and not lost:
            lost.append(request)
            raise httpx.ReadTimeout("timed out", request=request)
        if request.method == "POST" and len(lost) == 1:  # the lost request lands now
            lost.append(request)
            await httpx.ASGITransport(app=sim).handle_async_request(lost[0])
        return None

    client = make_client(before=late)
    result = await client.sync(APP, revision="test-lla")
    assert result.verified and sim.count("POST", "/sync") == 2
    assert sim.application(APP)["operation"]["sync"]["revision"] == "test-lla"


async def test_a_conflict_with_someone_elses_operation_still_raises(make_client, sim):
    sim.operation_duration = None
    other = make_client()
    await other.sync(APP, revision="other-branch")
    sim.hang_next(1, method="POST", path="/sync")
    client = make_client(timeout=HANG)
    with pytest.raises(ArgoConflict):
        await client.sync(APP, revision="test-lla")


# --- authentication and secrets --------------------------------------------------------------


async def test_session_login_then_relogin_once_on_401(make_client, sim, checker):
    client = make_client(username="admin", password="password")
    await client.get_application(APP)
    sim.expire_tokens()  # the session token expires
    await client.get_application(APP)
    assert sim.count("POST", "/api/v1/session") == 2
    assert [b for op, b in checker.bodies if op == "SessionService_Create"] == [
        {"username": "admin", "password": "password"}
    ] * 2
    assert ("SessionService_Create", 200) in checker.seen
    assert [c.path for c in client.calls] == [
        "/api/v1/session",
        f"/api/v1/applications/{APP}",
        "/api/v1/session",
        f"/api/v1/applications/{APP}",
    ]
    assert client.calls[-1].outcomes == ("HTTP 401", "HTTP 200")


async def test_sync_after_an_expired_session_logs_in_again(make_client, sim):
    client = make_client(username="admin", password="password")
    await client.login()
    sim.expire_tokens()
    result = await client.sync(APP)
    assert result.attempts == 1 and sim.count("POST", "/sync") == 2  # 401, then the sync


async def test_wrong_password_is_unauthorized_and_not_retried(make_client, sim):
    client = make_client(username="admin", password="wrong-password")
    with pytest.raises(ArgoUnauthorized, match="Invalid username or password"):
        await client.list_clusters()
    assert sim.count("POST", "/api/v1/session") == 1


async def test_a_rejected_token_is_unauthorized(make_client, sim):
    client = make_client(token="not-a-valid-token")
    with pytest.raises(ArgoUnauthorized) as err:
        await client.list_clusters()
    assert err.value.status == 401 and err.value.grpc_code == 16


async def test_no_credentials_is_a_setup_error():
    with pytest.raises(ValueError, match="token"):
        ArgoCDClient(BASE)


async def test_secrets_never_appear_in_calls_repr_or_errors(make_client, sim):
    """Neither the API token, nor the password, nor a session token: not in repr, not in the
    audit records, not in an error even when the server echoes the token back."""
    token = sim.issue_token()
    sim.users["admin"] = "s3cret-pass"
    echo: list[bool] = []
    seen: list[CallRecord] = []

    async def echo_token(request: httpx.Request) -> httpx.Response | None:
        if echo and request.method == "GET":  # a server that quotes the credential back
            message = f"invalid session: {request.headers['authorization']}"
            body = {"code": 16, "error": message, "message": message, "details": []}
            return httpx.Response(401, json=body)
        return None

    errors: list[str] = []
    client = make_client(token=token, before=echo_token, on_call=seen.append)
    session = make_client(username="admin", password="s3cret-pass", before=echo_token)
    await client.get_application(APP)
    await session.get_application(APP)
    sim.fail_next(10, status=500)
    for call in (client.get_application(APP), client.sync(APP)):
        with pytest.raises(ArgoError) as err:
            await call
        errors.append(f"{err.value!s} {err.value!r}")
    sim.faults.clear()
    echo.append(True)
    for c in (client, session):
        with pytest.raises(ArgoUnauthorized) as err:
            await c.list_clusters()
        errors.append(f"{err.value!s} {err.value!r}")
    assert "***" in errors[-1] and "***" in errors[-2]  # redacted, not dropped
    secrets = [token, "s3cret-pass", session._token]
    assert sim.count("POST", "/api/v1/session") == 2  # the second token is in play as well
    text = " ".join(
        [repr(client), repr(session), *errors, *map(repr, client.calls), *map(repr, session.calls)]
    )
    assert seen == list(client.calls)
    for secret in secrets:
        assert secret and secret not in text


# --- coverage of the spec --------------------------------------------------------------------


async def test_every_operation_the_client_uses_is_checked_against_the_spec(
    make_client, sim, checker
):
    sim.operation_duration = None
    client = make_client(username="admin", password="password")
    await client.get_application(APP, refresh="hard")
    await client.list_applications()
    await client.sync(APP, revision="test-lla", sync_options=["Validate=false"])
    await client.terminate_operation(APP)
    sim.finish_operation(APP, phase="Failed")
    await client.rollback(APP, 20)
    await client.managed_resources(APP)
    await client.resource_tree(APP)
    await client.list_clusters()
    await client.manifests(APP)
    used = {op for op, _ in checker.seen}
    assert used == {
        "SessionService_Create",
        "ApplicationService_Get",
        "ApplicationService_List",
        "ApplicationService_Sync",
        "ApplicationService_TerminateOperation",
        "ApplicationService_Rollback",
        "ApplicationService_ManagedResources",
        "ApplicationService_ResourceTree",
        "ClusterService_List",
        "ApplicationService_GetManifests",
    }


async def test_simulator_error_answers_are_runtime_errors(sim, checker):
    """401, 404, 400 and injected 5xx answers all match the spec's ``default`` response."""
    transport = CheckingTransport(httpx.ASGITransport(app=sim), checker)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        assert (await http.get("/api/v1/clusters")).status_code == 401
        headers = {"Authorization": f"Bearer {sim.issue_token()}"}
        assert (await http.get("/api/v1/applications/nope", headers=headers)).status_code == 404
        bad = await http.post(f"/api/v1/applications/{APP}/rollback", json={}, headers=headers)
        assert bad.status_code == 400
        sim.fail_next(1, status=502)
        assert (await http.get("/api/v1/clusters", headers=headers)).status_code == 502
    assert {status for _, status in checker.seen} == {401, 404, 400, 502}


# --- the decision, alone ---------------------------------------------------------------------

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def _app_with(*, pending: dict[str, Any] | None = None, state: dict[str, Any] | None = None):
    app: dict[str, Any] = {
        "metadata": {"name": APP},
        "status": {"history": [{"id": 3, "revision": "abc123"}]},
    }
    if pending is not None:
        app["operation"] = pending
    if state is not None:
        app["status"]["operationState"] = state
    return app


def _state(started: datetime, sync: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "phase": "Running",
        "startedAt": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "operation": {"sync": sync, "initiatedBy": {"username": "admin"}},
        **extra,
    }


@pytest.mark.parametrize(
    ("app", "requested", "applied"),
    [
        pytest.param(
            _app_with(pending={"sync": {"revision": "main"}}),
            Requested("sync", revision="main"),
            True,
            id="pending-matching",
        ),
        pytest.param(
            _app_with(pending={"sync": {"revision": "main"}, "initiatedBy": {"automated": True}}),
            Requested("sync", revision="main"),
            False,
            id="pending-auto-sync-is-not-ours",
        ),
        pytest.param(
            _app_with(state=_state(NOW, {"revision": "main", "prune": True})),
            Requested("sync", revision="main", prune=True),
            True,
            id="started-now",
        ),
        pytest.param(
            _app_with(state=_state(NOW - timedelta(seconds=4), {"revision": "main"})),
            Requested("sync", revision="main"),
            True,
            id="within-clock-skew",
        ),
        pytest.param(
            _app_with(state=_state(NOW - timedelta(minutes=5), {"revision": "main"})),
            Requested("sync", revision="main"),
            False,
            id="an-older-operation",
        ),
        pytest.param(
            _app_with(
                state=_state(NOW, {"revision": "main"}, syncResult={"revision": "f00d"}),
            ),
            Requested("sync", revision="f00d"),
            True,
            id="resolved-revision",
        ),
        pytest.param(
            _app_with(state=_state(NOW, {"revision": "main"})),
            Requested("sync", revision="release"),
            False,
            id="other-revision",
        ),
        pytest.param(
            _app_with(state=_state(NOW, {"revision": "main", "dryRun": True})),
            Requested("sync", revision="main"),
            False,
            id="dry-run-differs",
        ),
        pytest.param(
            _app_with(state=_state(NOW, {"syncOptions": ["Validate=false"]})),
            Requested("sync", sync_options=frozenset({"Validate=false"})),
            True,
            id="sync-options",
        ),
        pytest.param(
            _app_with(
                state=_state(
                    NOW, {"resources": [{"kind": "Service", "name": "a", "namespace": "n"}]}
                )
            ),
            Requested("sync", resources=frozenset({("", "Deployment", "n", "a")})),
            False,
            id="other-resources",
        ),
        pytest.param(
            _app_with(state=_state(NOW, {"revision": "abc123", "source": {}})),
            Requested("rollback", history_id=3),
            True,
            id="rollback-by-history-revision",
        ),
        pytest.param(
            _app_with(state=_state(NOW, {"revision": "abc123"})),
            Requested("rollback", history_id=4),
            False,
            id="rollback-unknown-id",
        ),
        pytest.param(_app_with(), Requested("sync"), False, id="nothing"),
    ],
)
def test_was_applied_recognises_only_the_requested_operation(app, requested, applied):
    assert was_applied(app, requested, since=NOW, skew=5.0) is applied


def test_error_classes_say_whether_to_retry():
    assert ArgoConflict("x").retryable and ArgoUnavailable("x").retryable
    assert ArgoOutcomeUnknown("x").retryable and isinstance(
        ArgoOutcomeUnknown("x"), ArgoUnavailable
    )
    for cls in (ArgoError, ArgoUnauthorized, ArgoNotFound, ArgoForbidden):
        assert not cls("x").retryable and issubclass(cls, ArgoError)


def test_load_applications_keeps_yaml_timestamps_as_strings(tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Application",
                "metadata": {"name": "a", "creationTimestamp": datetime(2024, 1, 2, 3, 4, 5)},
            }
        )
    )
    (app,) = load_applications(path)
    assert app["metadata"]["creationTimestamp"] == "2024-01-02T03:04:05Z"


async def test_rendered_manifests_become_the_desired_workloads(client, checker, sim, realdata):
    """The live desired source: real manifests as repo-server would render them, through the
    spec-checked API, into redacted desired objects in the destination namespace."""
    docs = [
        d
        for name in ("podinfo-kustomize-deployment.yaml", "podinfo-kustomize-hpa.yaml")
        for d in yaml.safe_load_all((realdata / "manifests" / name).read_text())
        if d
    ]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "podinfo-token"},
        "stringData": {"token": "rendered-not-a-real-secret"},
    }
    sim.set_manifests(APP, [*docs, secret])
    got = await app_from_argocd("podinfo", client, [parse_argo_ref(APP)])
    assert ("ApplicationService_GetManifests", 200) in checker.seen
    keys = sorted(o.key for o in got.objects[None])
    assert keys == [
        ("Deployment", "test-lla", "podinfo"),
        ("HorizontalPodAutoscaler", "test-lla", "podinfo"),
        ("Secret", "test-lla", "podinfo-token"),
    ]
    assert "rendered-not-a-real-secret" not in repr([o.body for o in got.objects[None]])
    assert got.sources == (f"argocd:{APP}",)
    # an overlay for one cluster, and a clear error for an application Argo CD does not know
    overlay = await app_from_argocd("podinfo", client, [parse_argo_ref(f"prod-eu-1={APP}")])
    assert set(overlay.objects) == {"prod-eu-1"}
    # there the app runs as that Argo CD application: its objects are the app's
    assert overlay.aliases == {"prod-eu-1": (APP,)} and got.aliases == {}
    with pytest.raises(FormatError, match="argocd:nope: cannot fetch the rendered manifests"):
        await app_from_argocd("podinfo", client, [parse_argo_ref("nope")])


@pytest.mark.parametrize("text", ["", "=app", "cluster="])
def test_argo_refs_are_checked(text):
    with pytest.raises(FormatError, match=r"\[CLUSTER=\]APPLICATION"):
        parse_argo_ref(text)
