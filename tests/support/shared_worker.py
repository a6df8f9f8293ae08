"""A worker replica in its own OS process, for tests/app/test_healing_shared.py.

``python shared_worker.py URL OUT GO MODE``: opens the audit store at URL, starts a healer in
enforce mode with the shared guard state, restores it, writes ``OUT.ready`` and waits for the
file GO; then feeds it ``storm()`` (the same fleet-wide storm every worker gets) and writes to
OUT a JSON report: the decisions it made executable and the nodes it patched.

MODE ``die-in-transaction``: the worker stops inside its first guarded transaction, after its
records are written and before the commit (``OUT.inside`` says so), and waits there to be
killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetwarden.adapters.storage import audit_sql, guarding
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Mode, Status
from fleetwarden.core.tracking import FindingEvent, FindingEventType

__all__ = ["CLUSTERS", "FLEET", "PER_CLUSTER", "POOLS", "FakeNodes", "drift", "storm"]

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CLUSTERS = [f"c{i}" for i in range(5)]
POOLS = dict.fromkeys(CLUSTERS, 20)  # 10 %: 2 actions per cluster, 10 fleet-wide, per 10 min
PER_CLUSTER, FLEET = 2, 10


class FakeNodes:
    """The node port: keeps the patches it was asked for."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def patch_labels(self, node: str, labels: Any) -> dict[str, Any]:
        await asyncio.sleep(0)  # let other replicas (tasks) run meanwhile
        self.log.append(node)
        return {"node": node}

    async def patch_taints(self, node: str, taints: Any, *, replace: Any = None) -> dict[str, Any]:
        self.log.append(node)
        return {"node": node}


def drift(cluster: str, k: int) -> FindingEvent:
    """A critical label drift on one node of its own pool: restored directly by the default
    policy (each one a separate remediation)."""
    pool = f"p{k}"
    finding = Finding(
        cluster,
        pool,
        Layer.L1,
        "labels.team",
        "platform",
        "intruder",
        Severity.CRITICAL,
        nodes=(f"{cluster}-{pool}-n0",),
    )
    return FindingEvent(FindingEventType.APPEARED, finding, T0)


def storm() -> list[list[FindingEvent]]:
    """Ten drifting pools in each of the five clusters, in batches of five (interleaved)."""
    events = [drift(c, k) for k in range(10) for c in CLUSTERS]
    return [events[i : i + 5] for i in range(0, len(events), 5)]


def _publish(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` so that ``path`` appears whole: the test waits for the file to exist and
    reads it at once (a plain write could be seen empty)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(doc))
    os.replace(part, path)


def _stop_inside_the_transaction(out: Path) -> None:
    original = guarding.SqlGuardedWrite.append

    async def append(self: guarding.SqlGuardedWrite, drafts: Any) -> list[bool]:
        fresh = await original(self, drafts)
        if not drafts:
            return fresh
        _publish(out.with_name(out.name + ".inside"), {"appended": sum(fresh)})
        while True:  # killed here, before the commit
            time.sleep(1)

    guarding.SqlGuardedWrite.append = append  # type: ignore[method-assign]


async def main(url: str, out: Path, go: Path, mode: str) -> None:
    patched: list[str] = []
    store = await audit_sql.open_audit_store(url)
    healer = Healer(
        ownership=OwnershipMap(),
        remediator=Remediator(nodes=lambda _: FakeNodes(patched)),
        audit=store,
        mode=Mode.ENFORCE,
        config="cfg-1",
        shared=store,
    )
    healer.set_pool_counts(POOLS)
    await healer.restore()
    if mode == "die-in-transaction":
        _stop_inside_the_transaction(out)
    out.with_name(out.name + ".ready").touch()
    while not go.exists():
        await asyncio.sleep(0.01)
    made = []
    for batch in storm():
        made.extend(await healer.process(batch))
    await store.close()
    executed = [
        {"id": d.id, "cluster": d.cluster, "findingId": d.finding_id}
        for d in made
        if d.status is Status.EXECUTE
    ]
    _publish(out, {"executed": executed, "patched": patched})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]))
