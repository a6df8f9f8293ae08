"""The supervisor's decisions (``app/supervising.py``): restart with a growing delay, give up
on a configuration error at start, and one /healthz for both processes."""

from __future__ import annotations

import pytest

from fleetwarden.app.supervising import (
    ChildExit,
    GiveUp,
    Restart,
    RestartPolicy,
    combined_health,
    decide,
)

POLICY = RestartPolicy(first_delay=0.0, second_delay=0.2, max_delay=5.0, stable_after=30.0)


def test_a_killed_child_is_restarted_at_once_the_first_time():
    decision = decide(ChildExit("worker", -9, 0.0, 100.0), policy=POLICY)
    assert decision == Restart(0.0, 1, decision.reason)
    assert "killed by signal 9" in decision.reason


@pytest.mark.parametrize(
    ("failures_before", "delay"), [(1, 0.2), (2, 0.4), (3, 0.8), (5, 3.2), (6, 5.0), (40, 5.0)]
)
def test_failures_in_a_row_double_the_delay_up_to_the_cap(failures_before: int, delay: float):
    exit = ChildExit("gateway", 1, 10.0, 11.0, failures_in_a_row=failures_before)
    decision = decide(exit, policy=POLICY)
    assert isinstance(decision, Restart)
    assert decision.delay == pytest.approx(delay)
    assert decision.failures_in_a_row == failures_before + 1


def test_a_child_that_ran_long_enough_starts_the_count_again():
    exit = ChildExit("worker", -9, 0.0, 31.0, failures_in_a_row=7)
    assert decide(exit, policy=POLICY) == Restart(0.0, 1, decide(exit, policy=POLICY).reason)


def test_a_configuration_error_at_start_gives_up_with_its_code():
    decision = decide(ChildExit("worker", 2, 0.0, 1.5), policy=POLICY)
    assert isinstance(decision, GiveUp) and decision.code == 2
    assert "the worker process exited with code 2" in decision.reason


def test_exit_code_2_after_a_long_run_is_a_crash_and_is_restarted():
    assert isinstance(decide(ChildExit("worker", 2, 0.0, 600.0), policy=POLICY), Restart)


def test_healthz_is_ok_only_when_both_processes_answer_ok():
    code, body = combined_health({"status": "ok", "pid": 1}, {"status": "ok"})
    assert code == 200 and body["status"] == "ok"
    assert body["processes"] == {"gateway": {"status": "ok", "pid": 1}, "worker": {"status": "ok"}}
    code, body = combined_health({"status": "ok"}, None, worker_error="no answer (ConnectError)")
    assert code == 503 and body["status"] == "degraded"
    assert body["processes"]["worker"] == {"status": "down", "error": "no answer (ConnectError)"}
    code, _ = combined_health({"status": "ok"}, {"status": "starting"})
    assert code == 503


def test_healthz_of_the_pair_says_whether_the_worker_leads():
    """The worker is the process that elects: its ``leader`` is the pair's; no worker, no
    claim either way."""
    _, body = combined_health({"status": "ok"}, {"status": "ok", "leader": False})
    assert body["leader"] is False and body["processes"]["worker"]["leader"] is False
    _, body = combined_health({"status": "ok"}, {"status": "ok", "leader": True})
    assert body["leader"] is True
    _, body = combined_health({"status": "ok"}, None)
    assert "leader" not in body
