"""``serve`` with ``role: all`` and the SQLite queue: a supervisor and two processes (the
process work is ``adapters/processes.py``, the decisions ``app/supervising.py``)."""

from __future__ import annotations

import os
from collections.abc import Callable

from fleetwarden.adapters import processes
from fleetwarden.app import supervising
from fleetwarden.app.service_config import ServiceConfig

__all__ = ["run", "wanted"]


def wanted(config: ServiceConfig) -> bool:
    """Supervise: ``role: all`` with the SQLite queue, not already a child, not opted out."""
    return (
        config.role == "all"
        and not config.queue.startswith("nats://")
        and not processes.in_child()
        and os.environ.get("FLEETWARDEN_ONE_PROCESS") != "1"
    )


def run(
    config: ServiceConfig,
    *,
    warn: Callable[[str], None],
    policy: supervising.RestartPolicy | None = None,
) -> int:
    """Supervise the gateway and the worker until SIGTERM/SIGINT (0) or a child's
    configuration error (its code); ``warn`` prints a line for the operator. Raises
    FormatError when the queue file is taken or the listen address cannot be bound."""
    policy = policy or supervising.RestartPolicy()

    def decide(name: str, code: int, started: float, ended: float, failures: int) -> processes.Step:
        exit = supervising.ChildExit(name, code, started, ended, failures_in_a_row=failures)
        decision = supervising.decide(exit, policy=policy)
        if isinstance(decision, supervising.GiveUp):
            return processes.Step(decision.reason, give_up=decision.code)
        return processes.Step(decision.reason, None, decision.delay, decision.failures_in_a_row)

    return processes.supervise(
        config.host,
        config.port,
        config.queue_path,
        decide=decide,
        stop_order=supervising.STOP_ORDER,
        warn=warn,
    )
