"""What ``serve``'s supervisor decides for its two processes (``role: all`` with the SQLite
queue): the gateway (authenticate, validate, append to the queue, answer) and the worker
(consume: inspections, healing, the audit store, the read API).

Purely computational: the exit of a child and the time go in, a decision comes out --
restart after a delay, or give up with an exit code. The process handling that carries the
decisions out is ``adapters/processes.py``; nothing here starts, signals or waits.

Decisions
    * A child that exits with code 2 (a usage or configuration error: the audit store cannot
      be opened, a credential is missing) within ``fatal_within`` seconds of its start would
      fail the same way again: the supervisor gives up and exits 2, as a one-process ``serve``
      does.
    * Any other exit (a crash, ``kill -9``, an out-of-memory kill) is restarted: at once the
      first time, then after a delay that doubles with each failure in a row, capped at
      ``max_delay``; a child that ran ``stable_after`` seconds starts the count again.
    * Stopping: the gateway first (no new 202 once it is gone; the requests it holds are
      answered), then the worker (its deliveries are acked or come back on the next start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHILDREN",
    "STOP_ORDER",
    "ChildExit",
    "GiveUp",
    "Restart",
    "RestartPolicy",
    "combined_health",
    "decide",
]

CHILDREN = ("gateway", "worker")
STOP_ORDER = ("gateway", "worker")  # why: see "Stopping" above


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    first_delay: float = 0.0
    second_delay: float = 0.2
    max_delay: float = 5.0
    stable_after: float = 30.0
    fatal_within: float = 60.0  # a slow start on a busy machine still counts as the start
    fatal_codes: tuple[int, ...] = (2,)


@dataclass(frozen=True, slots=True)
class ChildExit:
    name: str
    returncode: int  # negative: killed by that signal (subprocess's convention)
    started_at: float
    ended_at: float
    failures_in_a_row: int = 0  # before this exit

    @property
    def ran_for(self) -> float:
        return max(self.ended_at - self.started_at, 0.0)

    def describe(self) -> str:
        how = (
            f"killed by signal {-self.returncode}"
            if self.returncode < 0
            else f"exited with code {self.returncode}"
        )
        return f"the {self.name} process {how} after {self.ran_for:.1f}s"


@dataclass(frozen=True, slots=True)
class Restart:
    delay: float
    failures_in_a_row: int  # including this exit
    reason: str


@dataclass(frozen=True, slots=True)
class GiveUp:
    code: int
    reason: str


def decide(exit: ChildExit, *, policy: RestartPolicy = RestartPolicy()) -> Restart | GiveUp:
    """Restart the child that exited, or give up (see the module docstring)."""
    if exit.returncode in policy.fatal_codes and exit.ran_for < policy.fatal_within:
        return GiveUp(exit.returncode, f"{exit.describe()}: a configuration error, not restarted")
    failures = 1 if exit.ran_for >= policy.stable_after else exit.failures_in_a_row + 1
    if failures == 1:
        delay = policy.first_delay
    else:
        delay = min(policy.second_delay * 2 ** (failures - 2), policy.max_delay)
    return Restart(delay, failures, f"{exit.describe()}: restarting in {delay:.1f}s")


def combined_health(
    gateway: Mapping[str, Any], worker: Mapping[str, Any] | None, *, worker_error: str = ""
) -> tuple[int, dict[str, Any]]:
    """``/healthz`` of the two processes together: 200 and ``status: ok`` only when both
    answer ok; otherwise 503 naming the one that does not (the worker is restarting, say)."""
    parts: dict[str, Any] = {"gateway": dict(gateway)}
    if worker is None:
        parts["worker"] = {"status": "down", "error": worker_error or "no answer"}
    else:
        parts["worker"] = dict(worker)
    ok = all(p.get("status") == "ok" for p in parts.values())
    body: dict[str, Any] = {"status": "ok" if ok else "degraded", "processes": parts}
    if worker is not None and "leader" in worker:  # the worker is the one that elects
        body["leader"] = worker["leader"]
    return (200 if ok else 503), body
