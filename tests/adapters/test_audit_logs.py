"""Audit log files as the API server writes them: a line read once its newline is there,
rotation (rename + new file, lumberjack's way) and truncation followed, rotated backups
(gzipped too) read oldest first, a torn last line counted apart from bad lines."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from fleetwarden.adapters.audit_logs import (
    AuditLogTail,
    audit_log_paths,
    backups_of,
    read_audit_logs,
)


def event(i: int) -> str:
    return json.dumps(
        {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "auditID": f"id-{i}",
            "stage": "ResponseComplete",
            "verb": "patch",
            "user": {"username": "alice"},
            "objectRef": {"resource": "nodes", "name": "n-1"},
            "stageTimestamp": f"2026-12-01T04:40:{i:02d}.000001Z",
        }
    )


def append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def ids(tail: AuditLogTail) -> list[str]:
    return [e.id for e in tail.about("nodes", "n-1", None)]


def test_a_line_is_read_once_its_newline_is_written(tmp_path):
    log = tmp_path / "audit.log"
    tail = AuditLogTail(log, "c")
    assert tail.poll() == 0  # not there yet
    append(log, event(1) + "\n" + event(2)[:20])
    assert tail.poll() == 1 and ids(tail) == ["id-1"]
    append(log, event(2)[20:] + "\n")
    assert tail.poll() == 1 and ids(tail) == ["id-1", "id-2"]
    assert tail.poll() == 0 and tail.bad == 0


def test_rotation_reads_the_old_files_rest_then_the_new_file(tmp_path):
    log = tmp_path / "audit.log"
    append(log, event(1) + "\n")
    tail = AuditLogTail(log, "c")
    tail.poll()
    append(log, event(2) + "\n")  # written just before the rotation
    os.rename(log, tmp_path / "audit-2026-12-01T04-41-00.000.log")
    append(log, event(3) + "\n")
    tail.poll()
    assert ids(tail) == ["id-1", "id-2", "id-3"]


def test_truncation_starts_over_and_bad_lines_are_counted(tmp_path):
    log = tmp_path / "audit.log"
    append(log, event(1) + "\n" + event(2) + "\n")
    tail = AuditLogTail(log, "c")
    tail.poll()
    log.write_text("not json\n")
    told: list[str] = []
    tail.on_bad = told.append
    tail.poll()
    assert tail.bad == 1 and tail.read.errors[0].line == 1
    assert told == ["1 lines were not audit events, first: " + str(tail.read.errors[0])]
    append(log, event(3) + "\n")
    tail.poll()
    assert ids(tail) == ["id-1", "id-2", "id-3"]


def test_a_one_shot_read_takes_backups_oldest_first_gz_too_and_a_torn_tail_apart(tmp_path):
    log = tmp_path / "audit.log"
    (tmp_path / "audit-2026-12-01T04-30-00.000.log.gz").write_bytes(
        gzip.compress((event(1) + "\n").encode())
    )
    (tmp_path / "audit-2026-12-01T04-35-00.000.log").write_text(event(2) + "\nbad\n")
    (tmp_path / "other.log").write_text(event(9) + "\n")
    log.write_text(event(3) + "\n" + event(4)[:30])
    assert [p.name for p in backups_of(log)] == [
        "audit-2026-12-01T04-30-00.000.log.gz",
        "audit-2026-12-01T04-35-00.000.log",
    ]
    read = read_audit_logs(log, "c")
    assert [e.id for e in read.events] == ["id-1", "id-2", "id-3"]
    assert (read.bad, read.partial, len(read.files)) == (1, 1, 3)


def test_an_unreadable_current_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(OSError, match=r"audit\.log"):
        read_audit_logs(tmp_path / "audit.log", "c")


def test_audit_log_options_name_clusters_and_refuse_what_cannot_be_meant(tmp_path):
    log = tmp_path / "a.log"
    assert audit_log_paths([str(log)], {}, ["one"]) == {"one": log}
    assert audit_log_paths([f"two={log}"], {"one": str(log)}, ["one", "two"]) == {
        "one": log,
        "two": log,
    }
    with pytest.raises(ValueError, match="name the cluster"):
        audit_log_paths([str(log)], {}, ["one", "two"])
    with pytest.raises(ValueError, match="no such cluster"):
        audit_log_paths([f"three={log}"], {}, ["one"])
    with pytest.raises(ValueError, match="not a file"):
        audit_log_paths([f"one={tmp_path}"], {}, ["one"])


def test_the_tail_keeps_the_newest_events_per_object_and_forgets_the_least_recent_object(tmp_path):
    log = tmp_path / "audit.log"
    lines = []
    for i in range(6):
        raw = json.loads(event(i))
        raw["objectRef"]["name"] = f"n-{i % 3}"
        lines.append(json.dumps(raw))
    log.write_text("\n".join(lines) + "\n")
    tail = AuditLogTail(log, "c", objects=2, per_object=1)
    assert tail.poll() == 6
    assert tail.about("nodes", "n-0", None) == ()  # written least recently: forgotten
    assert [e.id for e in tail.about("nodes", "n-2", None)] == ["id-5"]
    assert tail.latest() == tail.about("nodes", "n-2", None)[0].at
