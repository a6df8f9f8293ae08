"""`make bench` (benchmarks/run_all.py) knows every benchmark script there is."""

from __future__ import annotations

from benchmarks import run_all


def test_every_benchmark_script_has_a_quick_mode_or_is_marked_heavy():
    scripts = set(run_all.runnable())
    assert "scan_fleet.py" in scripts and "fleetgen.py" not in scripts  # helpers are not run
    unclassified = scripts - set(run_all.QUICK) - run_all.FULL_ONLY
    assert not unclassified, f"add these to QUICK or FULL_ONLY in run_all.py: {unclassified}"
    stale = (set(run_all.QUICK) | run_all.FULL_ONLY) - scripts
    assert not stale, f"run_all.py names scripts that do not exist: {stale}"


def test_run_all_refuses_an_unknown_script(capsys):
    assert run_all.main(["no_such_benchmark"]) == 2
    assert "no such benchmark: no_such_benchmark.py" in capsys.readouterr().err
