"""NATS restarted under load: ``serve`` with a JetStream queue and events posted throughout;
nats-server is killed (-9) and started again on the same store while the producers keep
posting. Deliveries the gateway could not store are answered 503 (not acknowledged); every
delivery answered 202 is processed, once (real ``serve`` process, real nats-server from
scripts/nats-test-env, the event log as the processed record)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.support import nats_env
from tests.support.chaos_serve import Load, ServeProcess, wait_for

pytestmark = pytest.mark.live


def test_nats_killed_and_restarted_under_load_loses_and_duplicates_nothing(tmp_path, figures):
    state = tmp_path / "nats"
    url = nats_env.start_server(state)
    svc = ServeProcess(
        tmp_path,
        {
            "queue": url,
            "store": f"sqlite:///{tmp_path / 'audit.db'}",
            "eventLog": str(tmp_path / "events.jsonl"),
        },
    )
    try:
        svc.start()
        with Load(svc) as load:
            wait_for(lambda: load.count() >= 300, "300 events accepted before the fault")
            nats_env.kill_server(state)
            killed = time.monotonic()
            # down long enough for the producers to be refused 100 times
            wait_for(lambda: load.answers["503"] >= 100, "100 deliveries refused with 503")
            before = load.count()
            nats_env.restart_server(state)
            back = time.monotonic()
            first = wait_for(lambda: load.first_after(back), "a 202 after the restart")
            wait_for(lambda: load.count() >= before + 300, "300 more accepted after it")
        wait_for(lambda: set(load.accepted) <= set(svc.journal_ids()), "all processed", 60)
        caught_up = time.monotonic()
        # deliveries whose ack was lost with the server come back after ack_wait (30 s):
        # wait for them too, so a second processing would be seen
        wait_for(lambda: svc.depth() == 0, "the queue drained", timeout=90)
        drained = time.monotonic()
        processed = Counter(svc.journal_ids())
        lost = [i for i in load.accepted if i not in processed]
        twice = [i for i, n in processed.items() if n > 1]
        refused = load.answers["503"]
        figures(
            faults=f"nats-server kill -9, restarted on the same store after {back - killed:.1f}s",
            acknowledged=len(load.accepted),
            lost=len(lost),
            twice=len(twice),
            recover_s=first - back,
            notes=f"{refused} deliveries answered 503 while it was down (not acknowledged); "
            f"every accepted event processed {caught_up - back:.1f}s after the restart; queue "
            f"empty after {drained - back:.1f}s (unacked deliveries come back after ack_wait "
            f"and are recognised); slowest answer {load.slowest:.2f}s; answers "
            f"{dict(load.answers)}",
        )
        assert not lost, f"{len(lost)} acknowledged events lost, e.g. {lost[:5]}"
        assert not twice, f"{len(twice)} events processed twice, e.g. {twice[:5]}"
        assert set(load.answers) <= {"202", "503"}, load.answers  # never a 500 or a reset
        assert (
            load.bodies[503]["retry-after"] and "cannot store" in load.bodies[503]["json"]["error"]
        )
    finally:
        svc.stop()
        nats_env.stop_server(state)
