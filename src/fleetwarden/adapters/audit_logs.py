"""API-server audit log files: the current file followed as it grows, and its rotated backups.

The log backend (k8s.io/apiserver's ``--audit-log-path`` with lumberjack rotation:
``--audit-log-maxsize``/``--audit-log-maxbackup``/``--audit-log-compress``) renames the full
file to ``<name>-<timestamp><ext>`` (gzipped when compressing) and starts a new one. So:

* ``AuditLogTail.poll`` reads what was appended since the last call. A line is read only once
  its newline is there (the API server may be mid-write); a file whose inode changed was
  rotated: the rest of the old one is read from the handle still open, then the new file from
  its start; a file shorter than the position was truncated: read from the start.
* ``read_audit_logs`` reads once, backups (oldest first, ``.gz`` too) then the current file; a
  last line without its newline that does not parse is counted as ``partial``, not bad.

Bad lines are counted (``formats.audit_log.read_lines``); I/O errors become ``OSError``
messages for the caller. The parsing is ``formats.audit_log``.
"""

from __future__ import annotations

import gzip
import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO

from fleetwarden.core.actors import AuditEvent
from fleetwarden.formats.audit_log import AuditLogs, AuditRead, read_lines

__all__ = ["AuditLogTail", "AuditLogs", "audit_log_paths", "backups_of", "read_audit_logs"]


def audit_log_paths(
    args: Sequence[str], configured: Mapping[str, str], clusters: Sequence[str]
) -> dict[str, Path]:
    """``--audit-log [CLUSTER=]PATH`` (repeat) over the config's ``auditLogs:``: cluster ->
    file. A bare PATH needs exactly one cluster. ValueError names the option and the reason."""
    out = {name: Path(p).expanduser() for name, p in configured.items()}
    for arg in args:
        name, sep, rest = arg.partition("=")
        if sep and name and rest and "/" not in name and not Path(arg).exists():
            out[name] = Path(rest).expanduser()
        elif len(clusters) == 1:
            out[clusters[0]] = Path(arg).expanduser()
        else:
            raise ValueError(
                f"--audit-log {arg}: name the cluster (CLUSTER=PATH): {len(clusters)} are watched"
            )
    for name, path in out.items():
        if name not in clusters:
            known = ", ".join(clusters) or "none"
            raise ValueError(f"--audit-log {name}={path}: no such cluster (contexts: {known})")
        if path.is_dir() or not path.parent.is_dir():
            raise ValueError(f"--audit-log {name}={path}: not a file in an existing directory")
    return out


class AuditLogTail:
    """One cluster's audit log file, followed (``ports.audit_logs.AuditLogSource``)."""

    def __init__(
        self,
        path: Path,
        cluster: str,
        *,
        objects: int = 50_000,
        per_object: int = 64,
        on_bad: Callable[[str], None] | None = None,
    ) -> None:
        """``on_bad``: told (one line per read that met any) of lines that are not events."""
        self.path, self.cluster, self.where = path, cluster, str(path)
        self.on_bad = on_bad
        self.objects, self.per_object = objects, per_object
        # per object, its newest events; objects in the order they were last written to
        self._by_object: dict[tuple[str, str, str | None], deque[AuditEvent]] = {}
        self._latest: AuditEvent | None = None
        self._fh: IO[bytes] | None = None
        self._inode: int | None = None
        self._tail = b""  # a line still being written
        self._line = 0
        self.read = AuditRead()

    @property
    def bad(self) -> int:
        return self.read.bad

    def about(self, resource: str, name: str, namespace: str | None) -> Sequence[AuditEvent]:
        return tuple(self._by_object.get((resource, name, namespace), ()))

    def latest(self) -> datetime | None:
        return None if self._latest is None else self._latest.at

    def _keep(self, events: Sequence[AuditEvent]) -> None:
        for e in events:
            key = (e.resource, e.name, e.namespace)
            kept = self._by_object.pop(key, None)
            if kept is None:
                kept = deque(maxlen=self.per_object)
            kept.append(e)
            self._by_object[key] = kept  # now the most recently written
            if len(self._by_object) > self.objects:
                del self._by_object[next(iter(self._by_object))]
            self._latest = e

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _open(self) -> bool:
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return False  # not written yet (or between rotation and the new file)
        self._fh, self._inode, self._tail = fh, os.fstat(fh.fileno()).st_ino, b""
        return True

    def _drain(self) -> int:
        assert self._fh is not None
        data = self._tail + self._fh.read()
        complete, _, self._tail = data.rpartition(b"\n")
        if not complete:
            return 0
        lines = complete.decode("utf-8", errors="replace").split("\n")
        got = read_lines(lines, cluster=self.cluster, path=self.where, first_line=self._line + 1)
        self._line += len(lines)
        self._keep(got.events)
        self.read.add(AuditRead(bad=got.bad, errors=got.errors))
        if got.bad and self.on_bad is not None:
            self.on_bad(f"{got.bad} lines were not audit events, first: {got.errors[0]}")
        return len(got.events)

    def poll(self) -> int:
        if self._fh is None and not self._open():
            return 0
        new = self._drain()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return new  # rotated and not yet recreated: the old handle was read to its end
        assert self._fh is not None
        if st.st_ino != self._inode:  # rotated: the old file is read to its end, now the new one
            new += self._drain()
            if self._tail.strip():  # the old file's last line will get no newline now
                self._tail += b"\n"
                new += self._drain()
            self._fh.close()
            self._fh, self._line = None, 0
            if self._open():
                new += self._drain()
        elif st.st_size < self._fh.tell():  # truncated in place
            self._fh.seek(0)
            self._tail, self._line = b"", 0
            new += self._drain()
        return new


def backups_of(path: Path) -> list[Path]:
    """lumberjack's rotated files of ``path`` (``audit-2026-12-01T04-30-00.123.log[.gz]``),
    oldest first (the timestamp sorts by name)."""
    stem, ext = path.stem, path.suffix
    if not path.parent.is_dir():
        return []
    out = [
        p
        for p in path.parent.iterdir()
        if p.name.startswith(f"{stem}-")
        and (p.name.endswith(ext) or p.name.endswith(f"{ext}.gz"))
        and p != path
    ]
    return sorted(out, key=lambda p: p.name)


def _read_one(p: Path, cluster: str, out: AuditLogs) -> None:
    """One file, line by line (a log is up to --audit-log-maxsize MB: never held whole)."""
    torn: list[tuple[int, str]] = []

    def complete(fh: IO[str]) -> Iterator[str]:
        for n, line in enumerate(fh, start=1):
            if line.endswith("\n"):
                yield line
            elif line.strip():  # the last line, without its newline: maybe still being written
                torn.append((n, line))

    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8", errors="replace") as fh:
        got = read_lines(complete(fh), cluster=cluster, path=str(p))
    for n, line in torn:
        last = read_lines([line], cluster=cluster, path=str(p), first_line=n)
        got.events.extend(last.events)
        out.partial += last.bad
    out.events.extend(got.events)
    out.bad += got.bad
    out.errors.extend(str(e) for e in got.errors[:5])


def read_audit_logs(path: Path, cluster: str) -> AuditLogs:
    """Every event of ``path`` and its backups. Raises OSError (with the file) when the
    current file cannot be read; unreadable backups are reported in ``errors``."""
    out = AuditLogs()
    for p in [*backups_of(path), path]:
        try:
            _read_one(p, cluster, out)
        except (OSError, EOFError) as exc:  # EOFError: a truncated .gz
            if p == path:
                raise OSError(f"{p}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
            out.errors.append(f"{p}: {exc}")
            continue
        out.files.append(str(p))
    return out
