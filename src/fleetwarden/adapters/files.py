"""Reading desired-state trees and node dumps from disk, with size limits and progress.

A path named on the command line must be readable: a missing or unreadable one is a
``FormatError`` (exit 2). Inside a directory, ``read_tree`` lists a file or subdirectory it
cannot read (or that is not a regular file) in ``skipped`` with the reason and goes on; callers
that parse what it yields do the same for files that do not parse (``skip_of``), and stay strict
for a file named directly (``TreeFile.named``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fleetwarden.core.skips import Skip
from fleetwarden.formats.documents import YAML_SUFFIXES, SourceFile
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed
from fleetwarden.formats.settings import DEFAULT_DESIRED_LIMIT, DEFAULT_NODES_LIMIT

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleetwarden.core.nodes import ObservedNode
    from fleetwarden.formats.desired import DesiredRead

__all__ = [
    "DEFAULT_DESIRED_LIMIT",
    "DEFAULT_NODES_LIMIT",
    "PathArg",
    "TreeFile",
    "file_size",
    "iter_tree",
    "list_manifests",
    "load_desired",
    "load_nodes",
    "locate_checkouts",
    "node_sources",
    "parse_path_arg",
    "read_limited",
    "read_manifest",
    "read_node_files",
    "read_tree",
    "refuse_shared_nodes",
    "skip_of",
    "start_reading",
    "summarise_node_files",
    "walk_tree",
]

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


@dataclass(frozen=True, slots=True)
class TreeFile:
    """A file to read: ``named`` when it was given on the command line (errors are fatal),
    not found by walking a directory (errors skip it)."""

    path: Path
    named: bool


def skip_of(exc: FormatError) -> Skip:
    """A reader's error as a skip: the file, and the reason with its line and field."""
    where = f"line {exc.line}: " if exc.line is not None else ""
    field = f"{exc.field}: " if exc.field else ""
    return Skip(exc.path, f"{where}{field}{exc.reason}")


def walk_tree(
    root: Path,
    suffixes: tuple[str, ...] = _TREE_SUFFIXES,
    *,
    skipped: list[Skip] | None = None,
) -> Iterator[TreeFile]:
    """A file as given, or a directory's candidate files, recursively, in a stable order.

    ``root`` itself must exist and (for a directory) be listable, else ``FormatError``. Below
    it, a subdirectory that cannot be listed or a candidate that is not a regular file (a FIFO
    would block the read) goes to ``skipped`` -- or, when ``skipped`` is None, raises.
    """

    def skip(path: str, reason: str) -> None:
        if skipped is None:
            raise FormatError(path, reason)
        skipped.append(Skip(path, reason))

    if root.is_file():
        yield TreeFile(root, named=True)
        return
    if not root.exists():
        raise FormatError(str(root), "no such file or directory")
    if not root.is_dir():
        raise FormatError(str(root), "not a regular file or directory")
    try:
        os.scandir(root).close()
    except OSError as exc:
        raise FormatError(str(root), f"cannot list: {exc.strerror or exc}") from None

    def on_error(exc: OSError) -> None:
        skip(str(exc.filename), f"cannot list: {exc.strerror or exc}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(suffixes):
                continue
            path = Path(dirpath) / name
            try:
                mode = path.stat().st_mode
            except OSError as exc:  # a dangling symlink, a file removed meanwhile
                skip(str(path), f"cannot read: {exc.strerror or exc}")
                continue
            if not stat.S_ISREG(mode):
                skip(str(path), "not a regular file")
                continue
            yield TreeFile(path, named=False)


def iter_tree(root: Path, suffixes: tuple[str, ...] = _TREE_SUFFIXES) -> Iterator[Path]:
    """``walk_tree``'s paths; anything below ``root`` that cannot be read raises."""
    for f in walk_tree(root, suffixes):
        yield f.path


def read_tree(
    root: Path,
    suffixes: tuple[str, ...] = _TREE_SUFFIXES,
    *,
    limit: int,
    skipped: list[Skip],
) -> Iterator[tuple[TreeFile, bytes]]:
    """Each file of ``walk_tree`` with its bytes (at most ``limit``). A file found in a
    directory that cannot be read (or is too large) is added to ``skipped``; ``root`` named as
    a file must be readable, else ``FormatError``."""
    for f in walk_tree(root, suffixes, skipped=skipped):
        try:
            data = read_limited(f.path, limit)
        except FormatError as exc:
            if f.named:
                raise
            skipped.append(skip_of(exc))
            continue
        yield f, data


def _work_tree_top(directory: Path) -> Path | None:
    """The top of the Git work tree ``directory`` is in: the nearest directory at or above it
    holding a ``.git`` entry (a directory, or the file of a linked work tree or submodule)."""
    try:
        here = directory.resolve()
    except OSError:
        return None
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def locate_checkouts(root: Path, paths: Iterable[str]) -> dict[str, str]:
    """Where a tree read from ``root`` sits in Git: each directory that tops the tree's part of
    a work tree -- ``root`` itself (or a file's directory), and any work tree nested below it
    (a submodule, a second checkout) -- spelled as the tree's ``paths`` spell it, with its path
    inside that work tree (``""`` at the work tree's top). Files under none of them have a
    repository root that is not known: the readers say so rather than guess one."""
    top = root if root.is_dir() else root.parent
    spelled = str(root) if root.is_dir() else (os.path.dirname(str(root)) or ".")
    out: dict[str, str] = {}
    found = _work_tree_top(top)
    if found is not None:
        inside = os.path.relpath(top.resolve(), found)
        out[spelled] = "" if inside == "." else inside.replace(os.sep, "/")
    seen: set[str] = set()
    for path in paths:
        directory = os.path.dirname(path) or "."
        while directory not in seen and directory != spelled and directory not in ("", "."):
            seen.add(directory)
            if os.path.lexists(os.path.join(directory, ".git")):
                out[directory] = ""
            directory = os.path.dirname(directory)
    return out


def read_limited(path: Path, limit: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise FormatError(
                str(path), f"file too large: {size / 2**20:.1f} MiB (limit {limit / 2**20:.0f} MiB)"
            )
        with path.open("rb") as fh:
            # read(n) allocates n bytes first: ask for the size stat gave (+1 to see growth),
            # not the limit, or every small file costs a 16 MiB allocation
            data = fh.read(size + 1)
            if len(data) > size:  # it grew since stat: read on, up to the limit
                data += fh.read(limit + 1 - len(data))
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
    # every desired-state reader (Terraform, CAPI, JSON Schema...) loads only when used: the
    # commands that only walk and read files (deprecations) start without them
    from fleetwarden.formats.desired import DesiredRead, read_desired

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


def start_reading(
    args: Sequence[PathArg], *, workers: int | None, limit: int = DEFAULT_NODES_LIMIT
) -> None:
    """Let worker processes start on one cluster's one big dump now, while the caller does
    other work (``nodedumps.start_split``); ``summarise_node_files`` then collects what they
    read. ``workers`` None: all cores (what ``scan`` uses for a dump that big). For a command
    line run, which ends after the scan: the nodes read are not freed before the exit."""
    sources = node_sources(args)
    if len(sources) == 1:
        (paths,) = sources.values()
        if len(paths) == 1:
            from fleetwarden.adapters import nodedumps  # scans only

            cores = workers if workers is not None else (os.cpu_count() or 1)
            nodedumps.start_split(paths[0], limit=limit, workers=cores, ending=True)


def file_size(path: str) -> int:
    """A dump's size in bytes (what ``scan`` sizes its workers and progress bar by)."""
    return os.path.getsize(path)


def read_node_files(
    paths: Sequence[str], *, limit: int = DEFAULT_NODES_LIMIT, workers: int = 1
) -> list[ObservedNode]:
    """All nodes of the given dumps (one cluster's), each streamed, a big one spread over
    ``workers`` processes. Module-level: picklable for workers."""
    from fleetwarden.adapters import nodedumps  # msgspec and the stream reader: scans only

    parts = [nodedumps.read_node_file(path, limit=limit, workers=workers) for path in paths]
    refuse_shared_nodes(paths, [[n.name for n in part] for part in parts])
    return [node for part in parts for node in part]


def refuse_shared_nodes(paths: Sequence[str], names: Sequence[Iterable[str]]) -> None:
    """A ``FormatError`` naming both files and the node when a node name is in two of one
    cluster's dumps (``names[i]``: the nodes of ``paths[i]``). Each dump already refuses a
    name twice in itself; across dumps the node would be counted twice (two snapshots of one
    cluster, or one file given twice), so no count, median or finding could be trusted."""
    if len(paths) < 2:
        return
    seen: dict[str, int] = {}
    for i, (path, found) in enumerate(zip(paths, names, strict=True)):
        for name in found:
            first = seen.setdefault(name, i)
            if first == i:
                continue
            if os.path.realpath(paths[first]) == os.path.realpath(path):
                why = f"the same dump is given twice for one cluster (node {name!r} and the rest)"
            else:
                why = f"node {name!r} is also in {paths[first]}"
            raise FormatError(
                path,
                f"{why}: one cluster's node dumps must not list a node twice; give each "
                "snapshot as its own cluster (CLUSTER=PATH) or drop one",
            )


S = TypeVar("S")


def summarise_node_files(
    paths: Sequence[str],
    /,
    *,
    summarise: Callable[[list[ObservedNode]], S],
    merge: Callable[..., S],
    limit: int = DEFAULT_NODES_LIMIT,
    workers: int = 1,
) -> S:
    """``summarise`` of all nodes of the given dumps (one cluster's), each streamed, a big one
    spread over ``workers`` processes that each summarise the part they read; the parts
    merged in order (``nodedumps.summarise_node_file``), once no node is in two of the dumps
    (``refuse_shared_nodes``). Module-level: picklable for workers."""
    from fleetwarden.adapters import nodedumps  # msgspec and the stream reader: scans only

    several = len(paths) > 1  # one dump refuses a name twice itself
    names: list[set[str]] = [set() for _ in paths]
    parts = [
        nodedumps.summarise_node_file(
            path, summarise, merge, limit=limit, workers=workers, names=seen if several else None
        )
        for path, seen in zip(paths, names, strict=True)
    ]
    if not parts:
        return summarise([])
    refuse_shared_nodes(paths, names)
    return merge(*parts)


def load_nodes(
    args: Sequence[PathArg], *, limit: int = DEFAULT_NODES_LIMIT
) -> dict[str, list[ObservedNode]]:
    """Nodes per cluster, read in this process."""
    return {
        cluster: read_node_files(paths, limit=limit)
        for cluster, paths in node_sources(args).items()
    }


def list_manifests(root: Path, skipped: list[Skip]) -> Iterator[tuple[Path, bool]]:
    """The YAML/JSON files under ``root`` (``root`` itself when it is a file), each with
    whether it was named directly; what cannot be listed goes to ``skipped``."""
    for f in walk_tree(root, YAML_SUFFIXES, skipped=skipped):
        yield f.path, f.named


def read_manifest(path: Path) -> bytes:
    """A manifest file's bytes, size-limited (a module function: picklable for workers)."""
    return read_limited(path, DEFAULT_DESIRED_LIMIT)
