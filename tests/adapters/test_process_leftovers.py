"""What a ``kill -9``'d supervisor leaves behind is removed by the next one to take the
queue's lock (``adapters/processes.py``): the worker socket's directory named in the lock
file -- and nothing else, however the note was made or edited."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest

from fleetwarden.adapters import processes


@pytest.fixture
def tmpdir_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _left_by_a_supervisor(root: Path, name: str = "fleetwarden-serve-abc") -> Path:
    d = root / name
    d.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(d / "worker.sock"))
    return d


def _take_lock(queue: Path) -> None:
    processes._lock_queue(queue).close()


def test_the_directory_a_killed_supervisor_noted_is_removed_and_the_note_replaced(
    tmpdir_: Path, tmp_path: Path
):
    queue = tmp_path / "queue.db"
    stale = _left_by_a_supervisor(tmpdir_)
    lock = processes._lock_queue(queue)
    processes._note_api_dir(lock, str(stale))
    lock.close()  # kill -9: the lock is dropped, the directory stays
    assert stale.is_dir()
    res = processes._open_resources("127.0.0.1", 0, str(queue))
    try:
        assert not stale.exists()
        assert (queue.parent / "queue.db.lock").read_text().strip() == res.api_dir
        assert Path(res.api_dir).is_dir()
    finally:
        res.close()
    assert not Path(res.api_dir).exists()


@pytest.mark.parametrize(
    "case",
    ["other file inside", "not our prefix", "outside the temporary directory", "a symlink"],
)
def test_nothing_but_a_supervisor_s_socket_directory_is_ever_removed(
    tmpdir_: Path, tmp_path: Path, case: str
):
    queue = tmp_path / "queue.db"
    if case == "other file inside":
        target = _left_by_a_supervisor(tmpdir_)
        (target / "precious.txt").write_text("keep me")
    elif case == "not our prefix":
        target = _left_by_a_supervisor(tmpdir_, "somebody-else")
    elif case == "outside the temporary directory":
        target = _left_by_a_supervisor(tmp_path, "fleetwarden-serve-elsewhere")
    else:
        real = _left_by_a_supervisor(tmp_path, "real")
        target = tmpdir_ / "fleetwarden-serve-link"
        target.symlink_to(real, target_is_directory=True)
    (tmp_path / "queue.db.lock").write_text(f"{target}\n")
    _take_lock(queue)
    assert target.exists() and any(target.iterdir())


def test_an_empty_or_garbled_note_is_ignored(tmpdir_: Path, tmp_path: Path):
    queue = tmp_path / "queue.db"
    nul = f"{tmpdir_}/fleetwarden-serve-\0"
    for note in ("", "\0\0\0", nul, "relative/fleetwarden-serve-x", "x" * 10_000):
        (tmp_path / "queue.db.lock").write_text(note)
        _take_lock(queue)  # no error, nothing removed
    assert list(tmpdir_.iterdir()) == []
