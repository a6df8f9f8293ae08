"""``fleetwarden deprecations``: manifests using APIs deprecated or removed at a target version.

Like Pluto's ``detect-files``, on the table converted from Pluto's ``versions.yaml``. Exit 0
clean, 1 when an API is removed at the target (or only deprecated, with ``--fail-on
deprecated``), 2 on bad arguments or input.

Unreadable input, as Pluto decides it: a directory is walked and a file in it that cannot be
read or parsed (a YAML syntax error, an unrendered Helm template, binary or non-UTF-8 data) is
listed under ``skipped`` with the reason while the rest is still reported, as Pluto's
``detect-files`` goes on past such files (it only logs them); a path named on the command line
that is missing or unreadable, and a file named directly that does not parse, exit 2, as
Pluto's ``detect FILE`` fails. ``--helm-chart DIR`` renders a chart with ``helm template`` and
scans what it renders, each object under its template's path (``DIR/templates/x.yaml``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from fleetwarden.adapters import files, helm
from fleetwarden.cli.common import WideOpt, fail
from fleetwarden.cli.rendering import (
    Col,
    Grid,
    dumps,
    line,
    literal,
    make_console,
    print_skipped,
)
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import DeprecationFinding, DeprecationTable, Status
from fleetwarden.core.fleet import Skip
from fleetwarden.formats import manifests
from fleetwarden.formats.desired import YAML_SUFFIXES
from fleetwarden.formats.documents import Document
from fleetwarden.formats.errors import FormatError

__all__ = [
    "DEFAULT_COMPONENTS",
    "ManifestFinding",
    "Scan",
    "register",
    "render_charts",
    "scan_manifests",
]

# istio and cert-manager rows are versioned by their own releases, not Kubernetes': checking
# them against a Kubernetes target would be wrong, so they are opt-in (--component).
DEFAULT_COMPONENTS = ("k8s",)


class _Format(StrEnum):
    table = "table"
    json = "json"


class _FailOn(StrEnum):
    deprecated = "deprecated"
    removed = "removed"


_STATUS_STYLE = {Status.REMOVED: "bold red", Status.DEPRECATED: "yellow"}


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


def _minor(version: deprecations.MinorVersion | None) -> str | None:
    return None if version is None else deprecations.format_minor(version)


def scan_manifests(
    paths: Sequence[Path],
    target: deprecations.MinorVersion,
    table: DeprecationTable,
    *,
    limit: int = files.DEFAULT_DESIRED_LIMIT,
    rendered: Sequence[tuple[str, str]] = (),
) -> Scan:
    """Every API object of the files (directories searched recursively) and of ``rendered``
    ``(path, text)`` pairs (a chart's templates), checked at target.

    A file found in a directory, or a rendered template, that cannot be read or parsed is
    skipped with the reason; a path in ``paths`` that is missing or unreadable, or a file
    in ``paths`` that does not parse, is a ``FormatError``.
    """
    found: list[ManifestFinding] = []
    skipped: list[Skip] = []
    n_files = n_objects = 0

    def add(docs: Sequence[Document]) -> None:
        nonlocal n_files, n_objects
        n_files += 1
        for obj in manifests.api_objects(docs):
            n_objects += 1
            hit = deprecations.check(obj.api_version, obj.kind, target, table)
            if hit is not None:
                found.append(ManifestFinding(obj, hit))

    for root in paths:
        # the size-limited reader every command shares
        for f, data in files.read_tree(root, YAML_SUFFIXES, limit=limit, skipped=skipped):
            try:
                docs = manifests.parse_manifests(str(f.path), data)
            except FormatError as exc:
                if f.named:
                    raise
                skipped.append(files.skip_of(exc))
                continue
            add(docs)
    for path, text in rendered:
        try:
            docs = manifests.parse_manifests(path, text.encode())
        except FormatError as exc:
            skipped.append(files.skip_of(exc))
            continue
        add(docs)
    return Scan(target, found, n_files, n_objects, skipped)


def render_charts(
    charts: Sequence[Path], target: deprecations.MinorVersion, *, helm_bin: str
) -> list[tuple[str, str]]:
    """Each chart rendered by ``helm template`` for the target version, as ``(path, text)``
    per template: ``DIR/templates/x.yaml`` for the ``# Source: NAME/templates/x.yaml`` that
    helm prints (NAME is the chart's name, DIR the directory given)."""
    out: list[tuple[str, str]] = []
    for chart in charts:
        text = helm.render_chart(
            chart, helm=helm_bin, kube_version=deprecations.format_minor(target)
        )
        for source, chunk in manifests.split_helm_output(text):
            _name, _, inside = source.partition("/")
            out.append((str(chart / inside) if inside else str(chart), chunk))
    return out


def _table(components: Sequence[str]) -> DeprecationTable:
    try:
        table = DeprecationTable(manifests.bundled_table())
    except FormatError as exc:  # a broken install, not the user's input
        fail(f"the bundled deprecations table is invalid: {exc}")
    known = table.components()
    unknown = sorted(set(components) - known)
    if unknown:
        fail(
            f"--component: unknown {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(sorted(known))})"
        )
    return table.only(components)


def _print(scan: Scan, *, wide: bool = False) -> None:
    console = make_console(wide=wide)
    target = deprecations.format_minor(scan.target)
    if scan.findings:
        table = Grid(
            Col("status", 10),
            Col("file", 6),
            Col("kind", 7),
            Col("name", 8),
            Col("apiVersion", 9),
            Col("deprecated", 2),
            Col("removed", 3),
            Col("replacement", 5),
            title=f"APIs deprecated or removed at {target}",
            wide=wide,
        )
        for f in scan.findings:
            api, status = f.finding.api, f.finding.status
            name = f.object.name or "—"
            table.add_row(
                Text(status.value, style=_STATUS_STYLE[status]),
                literal(f.object.path),
                literal(f.object.kind),
                literal(f"{f.object.namespace}/{name}" if f.object.namespace else name),
                literal(f.object.api_version),
                literal(_minor(api.deprecated_in) or "—"),
                literal(_minor(api.removed_in) or "—"),
                literal(api.replacement or "—"),
            )
        console.print(table)
    removed, deprecated = scan.count(Status.REMOVED), scan.count(Status.DEPRECATED)
    console.print(
        line(
            f"{scan.objects} objects in {scan.files} files at Kubernetes {target}: "
            f"{removed} removed, {deprecated} deprecated"
        ),
        highlight=False,
    )
    print_skipped(console, scan.skipped)


def deprecations_command(
    target_version: Annotated[
        str,
        typer.Option(
            "--target-version",
            "-t",
            metavar="MAJOR.MINOR",
            help="The version to check against, such as 1.25 (a patch level is ignored).",
        ),
    ],
    output: Annotated[
        _Format, typer.Option("--format", "-o", help="table for people, json for machines.")
    ] = _Format.table,
    fail_on: Annotated[
        _FailOn,
        typer.Option(
            "--fail-on",
            help="Exit 1 when an API is removed at the target, or with 'deprecated' also "
            "when one is only deprecated there.",
        ),
    ] = _FailOn.removed,
    component: Annotated[
        list[str] | None,
        typer.Option(
            "--component",
            metavar="NAME",
            help="Table rows to use: k8s (default), istio, cert-manager. Repeat. The target "
            "version applies to every component given.",
        ),
    ] = None,
    manifest_paths: Annotated[
        list[Path] | None,
        typer.Option(
            "--manifests",
            "-m",
            metavar="PATH",
            help="Manifests: a YAML/JSON file (multi-document, List, helm template output) "
            "or a directory searched recursively for .yaml/.yml/.json; files in it that do "
            "not parse are listed as skipped. Repeat.",
        ),
    ] = None,
    helm_charts: Annotated[
        list[Path] | None,
        typer.Option(
            "--helm-chart",
            metavar="DIR",
            help="A Helm chart directory, rendered with `helm template` (default values, "
            "CRDs included, as for the target version) and scanned; needs helm on PATH. "
            "Repeat.",
        ),
    ] = None,
    wide: WideOpt = False,
) -> None:
    """Find manifests using Kubernetes APIs that are deprecated or removed at a target version
    (table from Pluto's versions.yaml).

    Example: fleetwarden deprecations -m rendered/ --target-version 1.25 --format json
    """
    target = deprecations.parse_minor(target_version)
    if target is None:
        fail(f"--target-version: expected MAJOR.MINOR such as 1.25, got {target_version!r}")
    if not manifest_paths and not helm_charts:
        fail("nothing to scan: give --manifests PATH or --helm-chart DIR")
    table = _table(component or DEFAULT_COMPONENTS)
    helm_bin = helm.find_helm() if helm_charts else None
    if helm_charts and helm_bin is None:
        fail(
            "--helm-chart needs helm, and none was found on PATH or in "
            f"{helm.HELM_CACHE}: install helm (https://helm.sh/docs/intro/install/), "
            "or run scripts/helm-ensure from a fleetwarden checkout"
        )
    try:
        rendered = (
            render_charts(helm_charts, target, helm_bin=helm_bin)
            if helm_charts and helm_bin
            else []
        )
        scan = scan_manifests(manifest_paths or [], target, table, rendered=rendered)
    except FormatError as exc:
        fail(str(exc))
    if output is _Format.json:
        sys.stdout.write(dumps(scan.to_json()) + "\n")
    else:
        _print(scan, wide=wide)
    threshold = Status.DEPRECATED if fail_on is _FailOn.deprecated else Status.REMOVED
    failing = any(f.finding.status.rank >= threshold.rank for f in scan.findings)
    raise typer.Exit(1 if failing else 0)


def register(app: typer.Typer) -> None:
    """Add ``deprecations`` to the ``fleetwarden`` command line."""
    app.command("deprecations")(deprecations_command)
