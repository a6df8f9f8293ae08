"""Manifests using APIs deprecated or removed at a target version: the use case behind
``fleetwarden deprecations`` and ``watch``'s upgrade hook.

``find_deprecations`` reads every manifest under the paths given and the templates of the
charts given, and checks each object's apiVersion and kind at the target against the table
(``core.deprecations``). Its I/O arrives as callables: ``list_files`` walks a path, ``read``
reads one file (module-level, so worker processes can run it), ``render`` renders a chart.

Unreadable input, as Pluto decides it: a file found in a directory, or a rendered template,
that cannot be read or parsed is a ``Skip`` with the reason while the rest is still reported
(Pluto's ``detect-files`` goes on past such files); a path given that is missing or unreadable,
and a file given directly that does not parse, raise ``FormatError`` (Pluto's ``detect FILE``
fails).

Large trees are spread over worker processes (``workers``): files are read and skimmed
(``formats.manifests.read_api_objects``) where they are, and only the few values per object
that the check needs come back. Findings keep the order of the files, whatever the workers.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import DeprecationFinding, DeprecationTable, Status
from fleetwarden.core.skips import Skip
from fleetwarden.formats import manifests
from fleetwarden.formats.errors import FormatError

if TYPE_CHECKING:
    from concurrent.futures import Future

    from fleetwarden.core.lifecycle import LifecycleEvent

__all__ = [
    "DEFAULT_COMPONENTS",
    "PARALLEL_BYTES",
    "ListFiles",
    "ManifestFinding",
    "ReadFile",
    "RenderChart",
    "Scan",
    "default_workers",
    "find_deprecations",
    "table_for",
    "upgrade_hook",
]

# istio and cert-manager rows are versioned by their own releases, not Kubernetes': checking
# them against a Kubernetes target would be wrong, so they are opt-in (--component).
DEFAULT_COMPONENTS = ("k8s",)

# Below this many bytes of manifests one process is faster than starting another (measured
# on 2 cores: a worker costs ~30 ms to start and hand back its results; skimming runs at
# ~50 MB/s).
PARALLEL_BYTES = 4 * 2**20

ListFiles = Callable[[Path, list[Skip]], Iterable[tuple[Path, bool]]]
"""A path's manifest files as ``(path, named)``, ``named`` when it is the path itself (its
errors are fatal); what below it cannot be listed goes to the list of skips."""
ReadFile = Callable[[Path], bytes]
"""One file's bytes; ``FormatError`` when it cannot be read. Picklable, for workers."""
RenderChart = Callable[[Path, deprecations.MinorVersion], str]
"""A chart's ``helm template`` output for the target version."""


@dataclass(frozen=True, slots=True)
class ManifestFinding:
    object: manifests.ApiObject
    finding: DeprecationFinding

    def to_json(self) -> dict[str, Any]:
        api = self.finding.api
        return {
            "file": self.object.path,
            "kind": self.object.kind,
            "apiVersion": self.object.api_version,
            "name": self.object.name,
            "namespace": self.object.namespace,
            "deprecatedIn": _minor(api.deprecated_in),
            "removedIn": _minor(api.removed_in),
            "replacement": api.replacement,
            "replacementAvailableIn": _minor(api.replacement_available_in),
            "component": api.component,
            "status": self.finding.status.value,
            "removed": self.finding.removed,
            "origin": _origin_json(api),
        }


@dataclass(frozen=True, slots=True)
class Scan:
    target: deprecations.MinorVersion
    findings: list[ManifestFinding]
    files: int
    objects: int
    skipped: list[Skip] = field(default_factory=list)  # files not scanned, with the reason

    def count(self, status: Status) -> int:
        return sum(1 for f in self.findings if f.finding.status is status)

    def failing(self, threshold: Status) -> bool:
        """Whether a finding is at least as bad as ``threshold``."""
        return any(f.finding.status.rank >= threshold.rank for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": deprecations.format_minor(self.target),
            "findings": [f.to_json() for f in self.findings],
            "summary": {
                "files": self.files,
                "objects": self.objects,
                "removed": self.count(Status.REMOVED),
                "deprecated": self.count(Status.DEPRECATED),
                "skipped": len(self.skipped),
            },
            "skipped": [s.to_json() for s in self.skipped],
        }


def _origin_json(api: deprecations.DeprecatedApi) -> dict[str, Any] | None:
    origin = deprecations.row_origin(api)
    return None if origin is None else origin.to_json()


def _minor(version: deprecations.MinorVersion | None) -> str | None:
    return None if version is None else deprecations.format_minor(version)


def table_for(components: Sequence[str]) -> DeprecationTable:
    """The bundled table cut to ``components``. ValueError names an unknown component (or a
    broken install, when the bundled table does not parse)."""
    try:
        table = DeprecationTable(manifests.bundled_table())
    except FormatError as exc:  # a broken install, not the user's input
        raise ValueError(f"the bundled deprecations table is invalid: {exc}") from None
    known = table.components()
    unknown = sorted(set(components) - known)
    if unknown:
        raise ValueError(
            f"--component: unknown {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(sorted(known))})"
        )
    return table.only(components)


def upgrade_hook(
    trees: Sequence[tuple[str | None, Path]],
    emit: Callable[[LifecycleEvent], None],
    *,
    list_files: ListFiles,
    read: ReadFile,
) -> Callable[[str, str], Awaitable[None]] | None:
    """On a cluster upgrade, scan that cluster's desired manifest ``trees`` (``(cluster, or
    None for every cluster, path)``) at the new version and emit one ``cluster.deprecations`` event
    with what is deprecated or removed there (``watch``'s hook)."""
    import asyncio
    from datetime import UTC, datetime

    from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType

    if not trees:
        return None

    async def on_upgrade(cluster: str, version: str) -> None:
        target = deprecations.parse_minor(version)
        paths = [path for only, path in trees if only in (None, cluster)]
        if target is None or not paths:
            return
        table = DeprecationTable(manifests.bundled_table()).only({"k8s"})
        try:
            scan = await asyncio.to_thread(
                find_deprecations, paths, target, table, list_files=list_files, read=read
            )
            details: dict[str, Any] = scan.to_json()
        except FormatError as exc:
            details = {"target": deprecations.format_minor(target), "error": str(exc)}
        emit(LifecycleEvent(LifecycleType.DEPRECATIONS, cluster, datetime.now(UTC), details))

    return on_upgrade


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def find_deprecations(
    paths: Sequence[Path],
    target: deprecations.MinorVersion,
    table: DeprecationTable,
    *,
    list_files: ListFiles,
    read: ReadFile,
    charts: Sequence[Path] = (),
    render: RenderChart | None = None,
    workers: int = 1,
) -> Scan:
    """Every API object of the files under ``paths`` and of the ``charts`` rendered, checked
    at ``target``. ``FormatError`` for a path given that cannot be read, a file given directly
    that does not parse, or a chart that does not render."""
    skipped: list[Skip] = []
    found: list[tuple[Path, bool]] = []
    for root in paths:
        found.extend(list_files(root, skipped))
    rendered = _render(charts, target, render) if charts else []
    results = _read_all(found, read, workers)
    for path, text in rendered:
        results.append(_objects(path, text.encode, named=False))
    scan_findings: list[ManifestFinding] = []
    n_files = n_objects = 0
    for result in results:
        if isinstance(result, Skip):
            skipped.append(result)
            continue
        n_files += 1
        for obj in result:
            n_objects += 1
            hit = deprecations.check(obj.api_version, obj.kind, target, table)
            if hit is not None:
                scan_findings.append(ManifestFinding(obj, hit))
    return Scan(target, scan_findings, n_files, n_objects, skipped)


def _render(
    charts: Sequence[Path], target: deprecations.MinorVersion, render: RenderChart | None
) -> list[tuple[str, str]]:
    """Each chart's templates as ``(path, text)``: ``DIR/templates/x.yaml`` for the
    ``# Source: NAME/templates/x.yaml`` that helm prints (NAME the chart's name, DIR the
    directory given)."""
    if render is None:
        raise ValueError("charts given without a renderer")
    out: list[tuple[str, str]] = []
    for chart in charts:
        for source, chunk in manifests.split_helm_output(render(chart, target)):
            _name, _, inside = source.partition("/")
            out.append((str(chart / inside) if inside else str(chart), chunk))
    return out


_Result = list[manifests.ApiObject] | Skip


def _objects(path: str, data: Callable[[], bytes], *, named: bool) -> _Result:
    """One file's objects, or its skip; a file named directly raises instead."""
    try:
        return manifests.read_api_objects(path, data())
    except FormatError as exc:
        if named:
            raise
        where = f"line {exc.line}: " if exc.line is not None else ""
        field_ = f"{exc.field}: " if exc.field else ""
        return Skip(exc.path, f"{where}{field_}{exc.reason}")  # as adapters.files.skip_of


def _read_files(batch: Sequence[tuple[Path, bool]], read: ReadFile) -> list[_Result]:
    """A batch of files, read and skimmed; module-level, so a worker process can run it."""
    return [_objects(str(p), partial(read, p), named=named) for p, named in batch]


def _read_all(found: list[tuple[Path, bool]], read: ReadFile, workers: int) -> list[_Result]:
    if workers <= 1 or len(found) < 2:
        return _read_files(found, read)
    sizes = [_size(p) for p, _named in found]
    total = sum(sizes)
    if total < PARALLEL_BYTES:
        return _read_files(found, read)
    # contiguous batches of about equal bytes: the order of the files is kept
    batches: list[list[tuple[Path, bool]]] = [[] for _ in range(workers)]
    acc, share = 0, total / workers
    for f, size in zip(found, sizes, strict=True):
        batches[min(int(acc / share), workers - 1)].append(f)
        acc += size
    # loaded only here: a small tree (most runs) never pays for importing multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers - 1) as pool:
        # this process reads the first batch while the workers read the others
        futures: list[Future[list[_Result]]] = [
            pool.submit(_read_files, batch, read) for batch in batches[1:] if batch
        ]
        try:
            out = _read_files(batches[0], read)
            for fut in futures:
                out.extend(fut.result())  # a FormatError re-raises here
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read() says why
