"""Disk full on the SQLite store: ``serve`` keeps its queue and its audit store on a small
filesystem of their own; the filesystem is filled while events are posted. The gateway answers
a clean 503 (JSON reason, Retry-After; never a 500, never a dropped connection) and /healthz
stays up; once space returns, deliveries are accepted again and every accepted event is
processed once (real ``serve`` process).

The small filesystem is a 32 MiB tmpfs, filled with a ballast file and freed by deleting it,
when the test may mount one (root); otherwise the process's file-size limit (RLIMIT_FSIZE,
through ``prlimit``) is dropped to one byte and raised again — every write past the first
byte of any file then fails as a full disk would (EFBIG instead of ENOSPC).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.core.audit import AuditKind
from tests.support.chaos_serve import Load, ServeProcess, wait_for


class SmallDisk:
    """Where the store lives, and how it is filled and freed."""

    def __init__(self, root: Path) -> None:
        self.path = root / "disk"
        self.path.mkdir()
        self.ballast = self.path / "ballast"
        self.pid: int | None = None
        self.kind = "rlimit"
        if os.environ.get("FW_CHAOS_DISK", "tmpfs") == "tmpfs" and os.geteuid() == 0:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(self.path)],
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                self.kind = "tmpfs"

    def fill(self) -> None:
        if self.kind == "rlimit":
            for pid in self._service_pids():
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
            return
        with self.ballast.open("wb", buffering=0) as out:  # unbuffered: nothing left to flush
            for size in (1 << 20, 1 << 12):  # MiB blocks, then pages, up to the last one
                try:
                    while True:
                        out.write(b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc

    def free(self) -> None:
        if self.kind == "rlimit":
            unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            for pid in self._service_pids():
                resource.prlimit(pid, resource.RLIMIT_FSIZE, unlimited)
            return
        self.ballast.unlink()

    def _service_pids(self) -> list[int]:
        """serve's process and its children (the default serve's gateway and worker): a
        limit set on a process is not passed on to the children it already has."""
        assert self.pid is not None
        kids = [
            int(x)
            for task in Path(f"/proc/{self.pid}/task").glob("*")
            for x in (task / "children").read_text().split()
        ]
        return [self.pid, *kids]

    def close(self) -> None:
        if self.kind == "tmpfs":
            subprocess.run(["umount", "-l", str(self.path)], check=False)


def _event_ids(db: Path) -> list[str]:
    async def read() -> list[str]:
        store = await open_audit_store(f"sqlite:///{db}")
        try:
            return [
                r.payload["event"]["id"] async for r in store.iterate() if r.kind == AuditKind.EVENT
            ]
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_full_disk_is_a_clean_503_and_space_returning_is_recovery(tmp_path, figures):
    disk = SmallDisk(tmp_path)
    audit_db = disk.path / "audit.db"
    svc = ServeProcess(
        tmp_path, {"queuePath": str(disk.path / "queue.db"), "store": f"sqlite:///{audit_db}"}
    )
    try:
        svc.start()
        disk.pid = svc.proc.pid if svc.proc else None
        with Load(svc) as load:
            wait_for(lambda: load.count() >= 300, "300 events accepted before the disk fills")
            disk.fill()
            full = time.monotonic()
            wait_for(lambda: load.answers["503"] >= 50, "50 deliveries refused with 503")
            healthy = httpx.get(f"{svc.base}/healthz", timeout=5).status_code
            disk.free()
            freed = time.monotonic()
            first = wait_for(lambda: load.first_after(freed), "a 202 once space returned")
            more = load.count() + 300
            wait_for(lambda: load.count() >= more, "300 more accepted")
        wait_for(
            lambda: svc.depth() == 0 and set(load.accepted) <= set(_event_ids(audit_db)),
            "every accepted event in the audit store",
            timeout=90,
        )
        drained = time.monotonic()
        stored = Counter(_event_ids(audit_db))
        lost = [i for i in load.accepted if i not in stored]
        twice = [i for i, n in stored.items() if n > 1]
        refusal = load.bodies.get(503, {})
        figures(
            faults=f"the store's filesystem full ({disk.kind}) for {freed - full:.1f}s",
            acknowledged=len(load.accepted),
            lost=len(lost),
            twice=len(twice),
            recover_s=first - freed,
            notes=f"answers {dict(load.answers)}; 503 said {refusal.get('json')!r} with "
            f"Retry-After {refusal.get('retry-after')}; /healthz {healthy} while full; every "
            f"accepted event stored {drained - freed:.1f}s after space returned",
        )
        assert set(load.answers) == {"202", "503"}, load.answers
        assert refusal["retry-after"] and "cannot store events" in refusal["json"]["error"]
        assert healthy == 200
        assert not lost, f"{len(lost)} acknowledged events lost, e.g. {lost[:5]}"
        assert not twice, f"{len(twice)} events stored twice, e.g. {twice[:5]}"
    finally:
        svc.stop()
        with contextlib.suppress(OSError):
            disk.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="not root: the test above ran this variant")
def test_the_rlimit_variant_fills_and_frees_as_well(tmp_path, monkeypatch):
    """The fallback for runs that may not mount: the same fault through RLIMIT_FSIZE."""
    monkeypatch.setenv("FW_CHAOS_DISK", "rlimit")
    disk = SmallDisk(tmp_path)
    assert disk.kind == "rlimit"
    svc = ServeProcess(tmp_path, {"queuePath": str(disk.path / "queue.db"),
                                  "store": f"sqlite:///{disk.path / 'audit.db'}"})  # fmt: skip
    try:
        svc.start()
        disk.pid = svc.proc.pid if svc.proc else None
        with Load(svc, threads=1) as load:
            wait_for(lambda: load.count() >= 50, "50 accepted")
            disk.fill()
            wait_for(lambda: load.answers["503"] >= 10, "10 refused")
            disk.free()
            freed = time.monotonic()
            wait_for(lambda: load.first_after(freed), "a 202 once the limit is raised")
        assert set(load.answers) == {"202", "503"}, load.answers
    finally:
        svc.stop()
