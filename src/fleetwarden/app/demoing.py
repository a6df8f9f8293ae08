"""The demo's live mode: one simulated change at a time, then what it made appear, change or
clear; and the heal a ``serve`` in enforce mode would make.

The simulated fleet and its changes are ``adapters.simulated``'s; here they are only called
(the fleet is whatever the changes and ``scan`` act on). The clock and the sleep are passed in.
``play_cloud`` is the service demo's cloud: a change, then the events its provider would send
(how they are sent is the caller's).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import random
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from fleetwarden.app.remediating import Remediator
from fleetwarden.core import policy
from fleetwarden.core.findings import Finding
from fleetwarden.core.fleet import FleetReport
from fleetwarden.core.nodes import POOL_LABELS
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.ports.remediation import NodeRestorer, OutcomeStatus
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = [
    "Change",
    "CloudChange",
    "actor_of",
    "changed_pools",
    "changes_between",
    "heal",
    "heal_async",
    "play_cloud",
    "simulate",
]

Change = Callable[[Any, random.Random], str]  # acts on the fleet, says what it did

_OWNERS = OwnershipMap()
_ENFORCE = policy.Mode.ENFORCE


def changes_between(
    before: Mapping[str, Finding], after: Mapping[str, Finding]
) -> list[tuple[str, Finding]]:
    """``finding.appeared``, ``finding.cleared`` and ``finding.changed`` (other nodes), by id."""
    events = [("finding.appeared", after[i]) for i in after if i not in before]
    events += [("finding.cleared", before[i]) for i in before if i not in after]
    events += [
        ("finding.changed", after[i])
        for i in after
        if i in before and after[i].nodes != before[i].nodes
    ]
    return events


def heal(
    findings: Sequence[Finding],
    rng: random.Random,
    *,
    nodes: Callable[[str], NodeRestorer],
    now: datetime,
) -> str | None:
    """A restore as ``serve`` in enforce mode makes it: the default policy picks ``restore``
    for a label or taint drift, and the remediator patches those labels and taints back on
    the nodes (through ``nodes``). Nothing else is put back: an instance type or a kubelet
    version is the infrastructure's to fix. The demo shows the action, not the guards (each
    restore is decided on a fresh history). None when no finding calls for a restore."""
    return asyncio.run(heal_async(findings, rng, nodes=nodes, now=now))


async def heal_async(
    findings: Sequence[Finding],
    rng: random.Random,
    *,
    nodes: Callable[[str], NodeRestorer],
    now: datetime,
) -> str | None:
    """``heal`` inside a running event loop (the demo's service)."""
    restores = [
        d
        for f in findings
        if (d := policy.decide(f, _OWNERS.route(f), policy.PolicyState(), now, _ENFORCE)).action
        is policy.Action.RESTORE
    ]
    if not restores:
        return None
    decision = rng.choice(restores)
    outcome = await Remediator(nodes=nodes).carry_out(decision)
    assert decision.target is not None
    failed = outcome.status is not OutcomeStatus.OK
    done = f" ({outcome.status.value}: {outcome.detail})" if failed else ""
    return f"fleetwarden (policy restore): {decision.target.describe()}{done}"


def simulate(
    fleet: Any,
    report: FleetReport,
    scan: Callable[[], FleetReport],
    changes: Sequence[Change],
    rng: random.Random,
    *,
    steps: int,
    interval: float,
    sleep: Callable[[float], None],
    clock: Clock = SYSTEM_CLOCK,
) -> Iterator[tuple[str, str, list[tuple[str, Finding]]]]:
    """After each ``interval``, one change picked by ``rng``: (when, what, its effect on the
    findings since ``report``). ``steps`` 0: for ever."""
    current = {f.id: f for f in report.findings}
    step = 0
    while steps == 0 or step < steps:
        step += 1
        sleep(interval)
        what = rng.choice(changes)(fleet, rng)
        after = {f.id: f for f in scan().findings}
        events = changes_between(current, after)
        current = after
        yield clock.now().isoformat(timespec="seconds").replace("+00:00", "Z"), what, events


def changed_pools(
    before: Mapping[str, Sequence[Mapping[str, Any]]],
    after: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[tuple[str, str]]:
    """(cluster, pool) of every Node object that differs between two states of the fleet
    (by name; a node added or removed counts), in order: what a change touched, so that the
    demo's cloud can send the event its provider would."""
    touched: list[tuple[str, str]] = []
    for cluster in sorted({*before, *after}):
        old = {n["metadata"]["name"]: n for n in before.get(cluster, ())}
        new = {n["metadata"]["name"]: n for n in after.get(cluster, ())}
        for name in sorted({*old, *new}):
            if old.get(name) == new.get(name):
                continue
            labels = (new.get(name) or old[name])["metadata"].get("labels", {})
            pool = next((labels[k] for k in POOL_LABELS if labels.get(k)), None)
            if pool is not None and (cluster, pool) not in touched:
                touched.append((cluster, pool))
    return touched


CloudChange = Callable[[Any, random.Random], "str | Awaitable[str]"]


def actor_of(what: str) -> str:
    """Who made a scripted change: the text before its first ': ' (an ARN keeps its colons)."""
    return what.split(": ", 1)[0] if ": " in what else "console"


async def play_cloud(
    fleet: Any,
    nodes: Callable[[Any], Mapping[str, Sequence[Mapping[str, Any]]]],
    changes: Sequence[CloudChange],
    rng: random.Random,
    *,
    interval: float,
    steps: int,
    refresh: Callable[[str], object],
    deliver: Callable[[str, str, str], Awaitable[object]],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """The demo's cloud: every ``interval``, one change picked by ``rng`` acts on ``fleet``;
    each cluster it touched is ``refresh``ed (the service's view of its nodes, or the nodes
    patched on the cluster's API server: awaited when it is a coroutine), then each
    touched pool's provider event is ``deliver``ed (cluster, pool, actor). ``steps`` 0: for
    ever."""
    step = 0
    while steps == 0 or step < steps:
        step += 1
        await sleep(interval)
        before = copy.deepcopy(nodes(fleet))
        made = rng.choice(changes)(fleet, rng)
        what = await made if inspect.isawaitable(made) else made
        touched = changed_pools(before, nodes(fleet))
        for cluster in dict.fromkeys(c for c, _ in touched):
            done = refresh(cluster)  # a dump refresh, or patches to a real API server
            if inspect.isawaitable(done):
                await done
        for cluster, pool in touched:
            await deliver(cluster, pool, actor_of(what))
