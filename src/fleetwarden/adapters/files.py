"""Reading desired-state trees and node dumps from disk, with size limits and progress."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetwarden.core.fleet import Skip
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats.desired import YAML_SUFFIXES, DesiredRead, SourceFile, read_desired
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import parse_nodes
from fleetwarden.formats.provisioners import Assumed

__all__ = [
    "DEFAULT_DESIRED_LIMIT",
    "DEFAULT_NODES_LIMIT",
    "PathArg",
    "iter_tree",
    "load_desired",
    "load_nodes",
    "node_sources",
    "parse_path_arg",
    "read_limited",
    "read_node_files",
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


def read_limited(path: Path, limit: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise FormatError(
                str(path), f"file too large: {size / 2**20:.1f} MiB (limit {limit / 2**20:.0f} MiB)"
            )
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise FormatError(str(path), f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise FormatError(str(path), f"file too large (limit {limit / 2**20:.0f} MiB)")
    return data


def load_desired(
    args: Sequence[PathArg],
    *,
    limit: int = DEFAULT_DESIRED_LIMIT,
    assume: Assumed | None = None,
) -> DesiredRead:
    """Every pool under the paths. A file named directly must be readable (else
    ``FormatError``); a file found in a directory that cannot be read is a skipped problem."""
    out = DesiredRead()
    for arg in args:
        direct = arg.path.is_file()
        sources = []
        for p in iter_tree(arg.path):
            try:
                sources.append(SourceFile(str(p), read_limited(p, limit), direct=direct))
            except FormatError as exc:
                if direct:
                    raise
                out.skipped.append(Skip(str(p), exc.reason, problem=True))
                out.files += 1
        out.extend(read_desired(sources, cluster=arg.cluster, assume=assume))
    return out


def node_sources(args: Sequence[PathArg]) -> dict[str, list[str]]:
    """Node dump files per cluster; the cluster is ``CLUSTER=`` or the file's stem."""
    out: dict[str, list[str]] = {}
    for arg in args:
        for path in iter_tree(arg.path, YAML_SUFFIXES):
            out.setdefault(arg.cluster or path.stem, []).append(str(path))
    return out


def read_node_files(
    paths: Sequence[str], *, limit: int = DEFAULT_NODES_LIMIT
) -> list[ObservedNode]:
    """All nodes of the given dumps (one cluster's). Module-level: picklable for workers."""
    nodes: list[ObservedNode] = []
    for path in paths:
        nodes.extend(parse_nodes(path, read_limited(Path(path), limit)))
    return nodes


def load_nodes(
    args: Sequence[PathArg], *, limit: int = DEFAULT_NODES_LIMIT
) -> dict[str, list[ObservedNode]]:
    """Nodes per cluster, read in this process."""
    return {
        cluster: read_node_files(paths, limit=limit)
        for cluster, paths in node_sources(args).items()
    }
