"""Carrying out decisions: dry-run sends nothing, enforce calls the right port with the right
arguments, and every failure (error, conflict, timeout, missing port) comes back as an
``Outcome`` — never as an exception. Fakes stand in for the ports; one test drives the real
Argo CD client against the in-memory Argo CD server."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.app.remediating import Remediator, plan_calls, previous_history_id
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef, Owner, Route
from fleetwarden.core.policy import (
    Action,
    Decision,
    Mode,
    NodeRestore,
    Policy,
    PolicyRule,
    PolicyState,
    Status,
    decide,
)
from fleetwarden.core.pools import Taint
from fleetwarden.ports.argocd import ArgoConflict
from fleetwarden.ports.kube import Conflict, Forbidden
from fleetwarden.ports.remediation import OutcomeStatus
from fleetwarden.ports.sources import FixedClock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
APP = ArgoApp("prod-node-config")
HR = FluxRef(FluxKind.HELM_RELEASE, "flux-system", "prod-general", "mgmt")
RESTORE = NodeRestore(
    "prod",
    "general",
    ("n-1", "n-2"),
    labels=(("team", "platform"),),
    taints=(Taint("dedicated", "general", "NoSchedule"),),
    replace=(("dedicated", "NoSchedule"),),
)


class FakeArgo:
    def __init__(self, *, fail: Exception | None = None, hang: bool = False) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.fail, self.hang = fail, hang
        self.history = [{"id": 3}, {"id": 4}, {"id": 7}]

    async def _enter(self, name: str, *args: Any, **kw: Any) -> None:
        self.calls.append((name, args, kw))
        if self.hang:
            await asyncio.Event().wait()  # never answers: the remediator's timeout must fire
        if self.fail is not None:
            raise self.fail

    async def sync(self, app, /, *, revision, resources, dry_run):
        await self._enter("sync", app, revision=revision, resources=resources, dry_run=dry_run)
        return {"application": app, "phase": "Running", "app": {"big": "object"}}

    async def rollback(self, app, history_id, /):
        await self._enter("rollback", app, history_id)
        return {"application": app}

    async def get_application(self, app, /):
        await self._enter("get_application", app)
        return {"metadata": {"name": app}, "status": {"history": self.history}}


class FakeFlux:
    def __init__(self, cluster: str, log: list[tuple[str, str, FluxRef]]) -> None:
        self.cluster, self.log = cluster, log

    async def reconcile(self, ref):
        self.log.append((self.cluster, "reconcile", ref))
        return {"requestedAt": "2026-03-01T12:00:00Z"}

    async def suspend(self, ref):  # pragma: no cover - not used by policy decisions
        raise AssertionError("not called")

    async def resume(self, ref):  # pragma: no cover
        raise AssertionError("not called")


class FakeNodes:
    def __init__(self, cluster: str, log: list[Any], fail: dict[str, Exception]) -> None:
        self.cluster, self.log, self.fail = cluster, log, fail

    async def patch_labels(self, node, labels):
        self.log.append((self.cluster, "labels", node, dict(labels)))
        if node in self.fail:
            raise self.fail[node]
        return {"node": node}

    async def patch_taints(self, node, taints, *, replace=None):
        self.log.append((self.cluster, "taints", node, list(taints), sorted(replace or ())))
        return {"node": node, "changed": True}


def decision(
    action: Action,
    target: Any,
    status: Status = Status.EXECUTE,
    *,
    expires_at: datetime | None = T0 + timedelta(minutes=5),
) -> Decision:
    mode = {Status.DRY_RUN: Mode.DRY_RUN}.get(status, Mode.ENFORCE)
    return Decision(
        "d-1",
        "f-1",
        "prod",
        "general",
        action,
        mode,
        status,
        ("test",),
        target,
        T0,
        expires_at=expires_at,
    )


@pytest.fixture()
def ports():
    log: list[Any] = []
    fail: dict[str, Exception] = {}
    argo = FakeArgo()
    remediator = Remediator(
        argocd=argo,
        flux=lambda cluster: FakeFlux(cluster, log),
        nodes=lambda cluster: FakeNodes(cluster, log, fail),
        clock=FixedClock(T0),
        timeout=0.2,
    )
    return remediator, argo, log, fail


# --- dry-run, skipping, expiry ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "target", "calls"),
    [
        (Action.SYNC, APP, 1),
        (Action.ROLLBACK, APP, 1),
        (Action.RECONCILE, HR, 1),
        (Action.RESTORE, RESTORE, 4),  # labels and taints, on two nodes
    ],
)
async def test_dry_run_records_the_intended_calls_and_sends_nothing(ports, action, target, calls):
    remediator, argo, log, _ = ports
    out = await remediator.carry_out(decision(action, target, Status.DRY_RUN))
    assert out.status is OutcomeStatus.DRY_RUN
    assert len(out.calls) == calls and all(c.status is OutcomeStatus.DRY_RUN for c in out.calls)
    assert argo.calls == [] and log == []
    json.dumps(out.to_json())


def test_planned_calls_spell_out_method_target_and_body():
    (sync,) = plan_calls(decision(Action.SYNC, APP))
    assert (sync.port, sync.method, sync.cluster) == ("argocd", "sync", None)
    assert sync.args == {
        "app": "prod-node-config",
        "revision": None,
        "resources": None,
        "dry_run": False,
    }
    (rec,) = plan_calls(decision(Action.RECONCILE, HR))
    assert (rec.port, rec.method, rec.cluster) == ("flux", "reconcile", "mgmt")
    assert rec.args == {
        "kind": "HelmRelease",
        "namespace": "flux-system",
        "name": "prod-general",
        "cluster": "mgmt",
    }
    calls = plan_calls(decision(Action.RESTORE, RESTORE))
    assert [(c.method, c.args["node"]) for c in calls] == [
        ("patch_labels", "n-1"),
        ("patch_taints", "n-1"),
        ("patch_labels", "n-2"),
        ("patch_taints", "n-2"),
    ]
    assert calls[1].args == {
        "node": "n-1",
        "taints": [{"key": "dedicated", "value": "general", "effect": "NoSchedule"}],
        "replace": [["dedicated", "NoSchedule"]],
    }


@pytest.mark.parametrize("status", [Status.PLANNED, Status.BLOCKED, Status.PENDING_APPROVAL])
async def test_decisions_that_are_not_executable_are_skipped(ports, status):
    remediator, argo, _, _ = ports
    out = await remediator.carry_out(decision(Action.SYNC, APP, status))
    assert (out.status, out.calls) == (OutcomeStatus.SKIPPED, ())
    assert status.value in out.detail
    assert argo.calls == []


async def test_an_expired_decision_is_not_sent(ports):
    remediator, argo, _, _ = ports
    stale = decision(Action.SYNC, APP, expires_at=T0 - timedelta(seconds=1))
    out = await remediator.carry_out(stale)
    assert out.status is OutcomeStatus.EXPIRED and argo.calls == []
    assert [c.status for c in out.calls] == [OutcomeStatus.EXPIRED]


# --- enforce: the right port, the right arguments ---------------------------------------------


async def test_sync_goes_to_argo_cd_with_its_arguments(ports):
    remediator, argo, _, _ = ports
    out = await remediator.carry_out(decision(Action.SYNC, APP))
    assert out.status is OutcomeStatus.OK
    assert argo.calls == [
        (
            "sync",
            ("prod-node-config",),
            {"revision": None, "resources": None, "dry_run": False},
        )
    ]
    assert out.calls[0].result == {"application": "prod-node-config", "phase": "Running"}


async def test_rollback_without_an_id_goes_back_one_deployment(ports):
    remediator, argo, _, _ = ports
    out = await remediator.carry_out(decision(Action.ROLLBACK, APP))
    assert out.status is OutcomeStatus.OK
    assert [c[0] for c in argo.calls] == ["get_application", "rollback"]
    assert argo.calls[1][1] == ("prod-node-config", 4)
    assert out.calls[0].result["historyId"] == 4


async def test_rollback_with_no_earlier_deployment_is_an_error_outcome(ports):
    remediator, argo, _, _ = ports
    argo.history = [{"id": 1}]
    out = await remediator.carry_out(decision(Action.ROLLBACK, APP))
    assert out.status is OutcomeStatus.ERROR
    assert out.calls[0].error_class == "LookupError"
    assert "no earlier deployment" in out.calls[0].error_message


async def test_reconcile_goes_to_the_flux_client_of_the_objects_cluster(ports):
    remediator, _, log, _ = ports
    out = await remediator.carry_out(decision(Action.RECONCILE, HR))
    assert out.status is OutcomeStatus.OK
    assert log == [("mgmt", "reconcile", HR)]


async def test_restore_patches_every_node_of_the_decision(ports):
    remediator, _, log, _ = ports
    out = await remediator.carry_out(decision(Action.RESTORE, RESTORE))
    assert out.status is OutcomeStatus.OK and len(out.calls) == 4
    assert sorted(log, key=repr) == sorted(
        [
            ("prod", "labels", "n-1", {"team": "platform"}),
            ("prod", "labels", "n-2", {"team": "platform"}),
            (
                "prod",
                "taints",
                "n-1",
                [Taint("dedicated", "general", "NoSchedule")],
                [("dedicated", "NoSchedule")],
            ),
            (
                "prod",
                "taints",
                "n-2",
                [Taint("dedicated", "general", "NoSchedule")],
                [("dedicated", "NoSchedule")],
            ),
        ],
        key=repr,
    )
    assert out.detail == "4 of 4 call(s) succeeded"


async def test_decide_then_carry_out_end_to_end(ports):
    """The policy's decision is what the remediator executes: a label finding, enforce."""
    remediator, _, log, _ = ports
    finding = Finding(
        "prod", "general", Layer.L1, "labels.team", "platform", "x", Severity.CRITICAL, ("n-9",)
    )
    d = decide(
        finding, Route(Owner.CLUSTER, None, "t"), PolicyState({"prod": 10}), T0, Mode.ENFORCE
    )
    out = await remediator.carry_out(d)
    assert out.status is OutcomeStatus.OK
    assert log == [("prod", "labels", "n-9", {"team": "platform"})]


# --- failures become outcomes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "status", "cls"),
    [
        (
            ArgoConflict("another operation is already in progress", status=400),
            "conflict",
            "ArgoConflict",
        ),
        (Conflict("prod", "PATCH: HTTP 409", status=409), "conflict", "Conflict"),
        (Forbidden("prod", "PATCH: HTTP 403", status=403), "error", "Forbidden"),
        (RuntimeError("boom"), "error", "RuntimeError"),
    ],
)
async def test_errors_become_outcomes_with_class_and_message(ports, exc, status, cls):
    remediator, argo, _, _ = ports
    argo.fail = exc
    out = await remediator.carry_out(decision(Action.SYNC, APP))
    assert out.status.value == status
    (call,) = out.errors
    assert (call.error_class, call.error_message) == (cls, str(exc))


async def test_a_call_that_never_answers_times_out_into_an_outcome(ports):
    remediator, argo, _, _ = ports
    argo.hang = True
    out = await remediator.carry_out(decision(Action.SYNC, APP))
    assert out.status is OutcomeStatus.ERROR
    assert out.calls[0].error_class == "TimeoutError"
    assert "0.2s" in out.calls[0].error_message


async def test_one_failing_node_does_not_stop_the_others(ports):
    remediator, _, log, fail = ports
    fail["n-1"] = Conflict("prod", "PATCH /api/v1/nodes/n-1: HTTP 409", status=409)
    out = await remediator.carry_out(decision(Action.RESTORE, RESTORE))
    assert out.status is OutcomeStatus.CONFLICT
    assert len(log) == 4 and len(out.errors) == 1
    assert out.detail == "3 of 4 call(s) succeeded"


async def test_missing_ports_and_unknown_clusters_are_error_outcomes():
    def unknown(cluster: str):
        raise KeyError(f"no Flux client for cluster {cluster}")

    remediator = Remediator(flux=unknown, clock=FixedClock(T0))
    for d, cls in [
        (decision(Action.SYNC, APP), "LookupError"),
        (decision(Action.RECONCILE, HR), "KeyError"),
        (decision(Action.RESTORE, RESTORE), "LookupError"),
    ]:
        out = await remediator.carry_out(d)
        assert out.status is OutcomeStatus.ERROR
        assert {c.error_class for c in out.calls} == {cls}


async def test_carry_out_all_keeps_the_order(ports):
    remediator, _, _, _ = ports
    ds = [
        decision(Action.SYNC, APP),
        decision(Action.SYNC, APP, Status.BLOCKED),
        decision(Action.RECONCILE, HR, Status.DRY_RUN),
    ]
    outs = await remediator.carry_out_all(ds)
    assert [o.status for o in outs] == [
        OutcomeStatus.OK,
        OutcomeStatus.SKIPPED,
        OutcomeStatus.DRY_RUN,
    ]


def test_previous_history_id():
    assert previous_history_id({"status": {"history": [{"id": 1}, {"id": 5}]}}) == 1
    assert previous_history_id({"status": {"history": [{"id": 1}]}}) is None
    assert previous_history_id({}) is None


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="timeout"):
        Remediator(timeout=0)


# --- the real Argo CD client against the in-memory Argo CD server ------------------------------


async def test_real_argo_cd_client_satisfies_the_port_sync_conflict_and_rollback():
    app = {
        "metadata": {"name": "prod-node-config"},
        "spec": {"source": {"repoURL": "https://git.example/infra", "targetRevision": "main"}},
        "status": {
            "history": [
                {"id": 1, "revision": "a" * 40, "deployedAt": "2026-02-01T00:00:00Z"},
                {"id": 2, "revision": "b" * 40, "deployedAt": "2026-02-02T00:00:00Z"},
            ]
        },
    }
    sim = ArgoCDSimulator([app], tokens=["t0k"], operation_duration=None)
    async with ArgoCDClient(
        "http://argocd.test", token="t0k", transport=httpx.ASGITransport(app=sim), retries=0
    ) as client:
        remediator = Remediator(argocd=client, clock=FixedClock(T0))
        policy = Policy(rules=(PolicyRule(Action.SYNC, Severity.HIGH),))
        finding = Finding("prod", "general", Layer.L1, "labels.a", "1", "2", Severity.HIGH)
        d = decide(
            finding, Route(Owner.CLUSTER, APP, "t"), PolicyState(), T0, Mode.ENFORCE, policy=policy
        )
        first = await remediator.carry_out(d)
        assert first.status is OutcomeStatus.OK, first.to_json()
        assert sim.count("POST", "/prod-node-config/sync") == 1
        assert first.calls[0].result["application"] == "prod-node-config"
        # the sync is still running: a second one is Argo CD's "operation in progress"
        second = await remediator.carry_out(d)
        assert second.status is OutcomeStatus.CONFLICT
        assert second.calls[0].error_class == "ArgoConflict"
        sim.finish_operation("prod-node-config")
        back = await remediator.carry_out(decision(Action.ROLLBACK, APP))
        assert back.status is OutcomeStatus.OK, back.to_json()
        assert sim.count("POST", "/prod-node-config/rollback") == 1
