"""Reading desired-state trees and node dumps from disk, with size limits and progress."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats.desired import YAML_SUFFIXES, DesiredRead, SourceFile, read_desired
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import parse_nodes

__all__ = [
    "DEFAULT_DESIRED_LIMIT",
    "DEFAULT_NODES_LIMIT",
    "PathArg",
    "iter_tree",
    "load_desired",
    "load_nodes",
    "parse_path_arg",
]

DEFAULT_DESIRED_LIMIT = 16 * 2**20  # desired-state files are written by people
DEFAULT_NODES_LIMIT = 2 * 2**30  # a dump of a very large cluster
_TREE_SUFFIXES = (*YAML_SUFFIXES, ".tf")
_SKIP_DIRS = {".git", ".terraform", "node_modules", "__pycache__", ".venv"}


@dataclass(frozen=True, slots=True)
class PathArg:
    cluster: str | None
    path: Path

    @property
    def label(self) -> str:
        return f"{self.cluster}={self.path}" if self.cluster else str(self.path)


def parse_path_arg(text: str) -> PathArg:
    """``[CLUSTER=]PATH``. An ``=`` inside an existing path is taken as part of the path."""
    cluster, sep, rest = text.partition("=")
    if sep and cluster and rest and not Path(text).exists() and "/" not in cluster:
        return PathArg(cluster, Path(rest))
    return PathArg(None, Path(text))


def iter_tree(root: Path, suffixes: tuple[str, ...] = _TREE_SUFFIXES) -> Iterator[Path]:
    """A file as given, or a directory's candidate files, recursively, in a stable order."""
    if root.is_file():
        yield root
        return
    if not root.exists():
        raise FormatError(str(root), "no such file or directory")
    if not root.is_dir():
        raise FormatError(str(root), "not a regular file or directory")
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(suffixes):
                yield Path(dirpath) / name


def _read(path: Path, limit: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise FormatError(str(path), f"file too large: {size / 2**20:.1f} MiB "
                                         f"(limit {limit / 2**20:.0f} MiB)")
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise FormatError(str(path), f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise FormatError(str(path), f"file too large (limit {limit / 2**20:.0f} MiB)")
    return data


def load_desired(args: Sequence[PathArg], *, limit: int = DEFAULT_DESIRED_LIMIT) -> DesiredRead:
    out = DesiredRead()
    for arg in args:
        files = [SourceFile(str(p), _read(p, limit)) for p in iter_tree(arg.path)]
        got = read_desired(files, cluster=arg.cluster)
        out.pools.extend(got.pools)
        out.skipped.extend(got.skipped)
        out.files += got.files
    return out


def load_nodes(
    args: Sequence[PathArg],
    *,
    limit: int = DEFAULT_NODES_LIMIT,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, list[ObservedNode]]:
    """Nodes per cluster; the cluster is ``CLUSTER=`` or the file's stem.

    ``on_progress(done_bytes, total_bytes)`` is called after each file.
    """
    files: list[tuple[str, Path]] = []
    for arg in args:
        for path in iter_tree(arg.path, YAML_SUFFIXES):
            files.append((arg.cluster or path.stem, path))
    total = sum(p.stat().st_size for _, p in files)
    done = 0
    out: dict[str, list[ObservedNode]] = {}
    for cluster, path in files:
        data = _read(path, limit)
        out.setdefault(cluster, []).extend(parse_nodes(str(path), data))
        done += len(data)
        if on_progress is not None:
            on_progress(done, total)
    return out
