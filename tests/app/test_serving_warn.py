"""A warned finding in the service: the healer alerts instead of reconciling, and
``/api/findings`` shows ``mode: warn`` beside the finding, kept when a re-diff rebuilds it; a
finding of the same pool that no rule covers is reconciled (dry-run here: the real Flux object
is reconciled in enforce by tests/e2e/test_warn_live.py) and shows no mode."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetwarden.app.serving import Serving, ServingSettings
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.policy import Action, Mode, Status, parse_warn
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.ports.sources import FixedClock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POOL = "eks.amazonaws.com/nodegroup"
SPEC = NodePoolSpec("general", "c1", instance_types=("m5.large",), labels={"team": "platform"})


class Queue:
    async def close(self) -> None: ...


def node(name: str, itype: str, team: str) -> ObservedNode:
    labels = {"node.kubernetes.io/instance-type": itype, POOL: "general", "team": team}
    return ObservedNode(name, labels=labels, kubelet_version="v1.30.4")


async def test_a_warned_finding_shows_mode_warn_and_is_not_reconciled():
    settings = ServingSettings(
        mode=Mode.DRY_RUN,
        ownership=[
            {"owner": "infrastructure", "flux": {"kind": "Kustomization", "name": "apps-{cluster}"}}
        ],
        warn=parse_warn(
            [
                {
                    "owner": {"kind": "Kustomization", "name": "apps-*"},
                    "fields": ["metadata.labels.*"],
                }
            ]
        ),
    )
    serving = Serving(
        settings,
        [SPEC],
        Queue(),  # type: ignore[arg-type]
        client_factory=lambda _e: None,  # type: ignore[arg-type,return-value]
        snapshot={"c1": [node("a", "t3.medium", "oncall")]},
        clock=FixedClock(T0),
    )
    assert await serving.rediff("c1", "general") == 2
    events = [serving.healer.queue.get_nowait() for _ in range(serving.healer.queue.qsize())]
    decisions = {d.finding_id: d for d in await serving.healer.process(events)}
    by_field = {f.field: f for f in serving.findings()}
    team, itype = by_field["labels.team"], by_field["instanceType"]
    assert (decisions[team.id].action, decisions[team.id].status) == (Action.ALERT, Status.PLANNED)
    assert (decisions[itype.id].action, decisions[itype.id].status) == (
        Action.RECONCILE,
        Status.DRY_RUN,
    )
    assert (
        team.to_json()["mode"] == "warn" and team.to_json()["warn"]["field"] == "metadata.labels.*"
    )
    assert "mode" not in itype.to_json()
    # a second node with the same drift: the finding is rebuilt and keeps its mode
    serving.snapshot["c1"] = [node("a", "t3.medium", "oncall"), node("b", "t3.medium", "oncall")]
    await serving.rediff("c1", "general")
    rebuilt = {f.field: f for f in serving.findings()}["labels.team"]
    assert rebuilt.nodes == ("a", "b") and rebuilt.extra["mode"] == "warn"
