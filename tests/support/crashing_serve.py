"""``fleetwarden serve`` with a fault at one step of its workers, for the crash-point tests.

    python -m tests.support.crashing_serve serve -c CONFIG

``FW_TEST_CRASH_AT=STEP`` (``after-log``, ``after-audit``, ``before-ack``: the worker's steps in
``app/recording.py`` and ``app/inspecting.py``; ``after-send``: the event relay's, between the
receiver's answer and the mark) and ``FW_TEST_CRASH_AFTER=N`` (default 1): the N-th time a
worker reaches STEP the process sends itself SIGKILL -- a ``kill -9`` at exactly that point
(in a supervised ``serve``, the worker process kills its supervisor first: the whole service).
``FW_TEST_ACK_WAIT=SECONDS``: the NATS consumer's ack wait when this process creates it, so a
dead worker's deliveries come back within a test's time (30 s by default).

Only this file reads these variables: the service has no fault switch of its own, just the
``Service.checkpoint`` hook, which does nothing unless something like this sets it.
"""

from __future__ import annotations

import os
import signal

from fleetwarden.adapters.queue.nats import NatsQueue
from fleetwarden.app.service_config import ServiceConfig
from fleetwarden.cli.main import main as cli_main
from fleetwarden.entrypoints import serve_cmd


def main() -> None:
    step = os.environ.get("FW_TEST_CRASH_AT")
    after = int(os.environ.get("FW_TEST_CRASH_AFTER", "1"))
    ack_wait = os.environ.get("FW_TEST_ACK_WAIT")
    build = serve_cmd.build_service
    hits = 0

    def checkpoint(at: str) -> None:
        nonlocal hits
        if at == step:
            hits += 1
            if hits >= after:
                if os.environ.get("FW_SERVE_PROCESS"):
                    # the worker of a supervised serve: the service dies at this point, as a
                    # whole (its gateway follows the supervisor: PR_SET_PDEATHSIG)
                    os.kill(os.getppid(), signal.SIGKILL)
                os.kill(os.getpid(), signal.SIGKILL)

    def build_with_fault(config: ServiceConfig) -> serve_cmd.Service:
        service = build(config)
        if ack_wait and isinstance(service.queue, NatsQueue):
            service.queue.ack_wait = float(ack_wait)  # used when the consumer is created
        service.checkpoint = checkpoint
        return service

    serve_cmd.build_service = build_with_fault  # type: ignore[assignment]
    cli_main()


if __name__ == "__main__":
    main()
