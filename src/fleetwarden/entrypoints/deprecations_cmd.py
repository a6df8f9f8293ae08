"""``fleetwarden deprecations``: manifests using APIs deprecated or removed at a target version.

Like Pluto's ``detect-files``, on the table converted from Pluto's ``versions.yaml``. Exit 0
clean, 1 when an API is removed at the target (or only deprecated, with ``--fail-on
deprecated``), 2 on bad arguments or input.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetwarden.adapters import files
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import DeprecationFinding, DeprecationTable, Status
from fleetwarden.entrypoints.rendering import dumps, make_console
from fleetwarden.formats import manifests
from fleetwarden.formats.desired import YAML_SUFFIXES
from fleetwarden.formats.errors import FormatError

__all__ = ["DEFAULT_COMPONENTS", "ManifestFinding", "Scan", "register", "scan_manifests"]

# istio and cert-manager rows are versioned by their own releases, not Kubernetes': checking
# them against a Kubernetes target would be wrong, so they are opt-in (--component).
DEFAULT_COMPONENTS = ("k8s",)

_err = Console(stderr=True)


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
            },
        }


def _minor(version: deprecations.MinorVersion | None) -> str | None:
    return None if version is None else deprecations.format_minor(version)


def scan_manifests(
    paths: Sequence[Path],
    target: deprecations.MinorVersion,
    table: DeprecationTable,
    *,
    limit: int = files.DEFAULT_DESIRED_LIMIT,
) -> Scan:
    """Every API object of the files (directories searched recursively), checked at target."""
    found: list[ManifestFinding] = []
    n_files = n_objects = 0
    for root in paths:
        for path in files.iter_tree(root, YAML_SUFFIXES):
            # the size-limited reader every command shares
            docs = manifests.parse_manifests(str(path), files.read_limited(path, limit))
            n_files += 1
            for obj in manifests.api_objects(docs):
                n_objects += 1
                hit = deprecations.check(obj.api_version, obj.kind, target, table)
                if hit is not None:
                    found.append(ManifestFinding(obj, hit))
    return Scan(target, found, n_files, n_objects)


def _fail(message: str) -> NoReturn:
    _err.print(f"[bold red]fleetwarden: error:[/] {message}", highlight=False)
    raise typer.Exit(2)


def _table(components: Sequence[str]) -> DeprecationTable:
    try:
        table = DeprecationTable(manifests.bundled_table())
    except FormatError as exc:  # a broken install, not the user's input
        _fail(f"the bundled deprecations table is invalid: {exc}")
    known = table.components()
    unknown = sorted(set(components) - known)
    if unknown:
        _fail(
            f"--component: unknown {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(sorted(known))})"
        )
    return table.only(components)


def _print(scan: Scan) -> None:
    console = make_console()
    target = deprecations.format_minor(scan.target)
    if scan.findings:
        table = Table(
            title=f"APIs deprecated or removed at {target}", header_style="bold", expand=False
        )
        for name in ("status", "file", "kind", "name", "apiVersion", "deprecated", "removed"):
            table.add_column(name, overflow="fold")
        table.add_column("replacement", overflow="fold")
        for f in scan.findings:
            api, status = f.finding.api, f.finding.status
            name = f.object.name or "—"
            table.add_row(
                Text(status.value, style=_STATUS_STYLE[status]),
                f.object.path,
                f.object.kind,
                f"{f.object.namespace}/{name}" if f.object.namespace else name,
                f.object.api_version,
                _minor(api.deprecated_in) or "—",
                _minor(api.removed_in) or "—",
                api.replacement or "—",
            )
        console.print(table)
    removed, deprecated = scan.count(Status.REMOVED), scan.count(Status.DEPRECATED)
    console.print(
        f"{scan.objects} objects in {scan.files} files at Kubernetes {target}: "
        f"{removed} removed, {deprecated} deprecated",
        highlight=False,
    )


def deprecations_command(
    manifest_paths: Annotated[
        list[Path],
        typer.Option(
            "--manifests",
            "-m",
            metavar="PATH",
            help="Manifests: a YAML/JSON file (multi-document, List, helm template output) "
            "or a directory searched recursively for .yaml/.yml/.json. Repeat.",
        ),
    ],
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
) -> None:
    """Find manifests using Kubernetes APIs that are deprecated or removed at a target version
    (table from Pluto's versions.yaml).

    Example: fleetwarden deprecations -m rendered/ --target-version 1.25 --format json
    """
    target = deprecations.parse_minor(target_version)
    if target is None:
        _fail(f"--target-version: expected MAJOR.MINOR such as 1.25, got {target_version!r}")
    table = _table(component or DEFAULT_COMPONENTS)
    try:
        scan = scan_manifests(manifest_paths, target, table)
    except FormatError as exc:
        _fail(str(exc))
    if output is _Format.json:
        sys.stdout.write(dumps(scan.to_json()) + "\n")
    else:
        _print(scan)
    threshold = Status.DEPRECATED if fail_on is _FailOn.deprecated else Status.REMOVED
    failing = any(f.finding.status.rank >= threshold.rank for f in scan.findings)
    raise typer.Exit(1 if failing else 0)


def register(app: typer.Typer) -> None:
    """Add ``deprecations`` to the ``fleetwarden`` command line."""
    app.command("deprecations")(deprecations_command)
