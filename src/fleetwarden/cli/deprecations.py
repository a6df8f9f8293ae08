"""``fleetwarden deprecations``: manifests using APIs deprecated or removed at a target version.

Like Pluto's ``detect-files``, on the table converted from Pluto's ``versions.yaml``. Exit 0
clean, 1 when an API is removed at the target (or only deprecated, with ``--fail-on
deprecated``), 2 on bad arguments or input. The use case, and what is skipped rather than
fatal, is ``app.deprecating``; this module parses the arguments, wires the file reader and
helm into one ``find_deprecations`` call, and renders the result.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from fleetwarden.adapters import files, helm
from fleetwarden.app import deprecating
from fleetwarden.app.deprecating import DEFAULT_COMPONENTS, ManifestFinding, Scan
from fleetwarden.cli.common import WideOpt, fail
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import DeprecationTable, Status
from fleetwarden.core.fleet import Skip
from fleetwarden.formats import manifests
from fleetwarden.formats.documents import YAML_SUFFIXES
from fleetwarden.formats.errors import FormatError
from fleetwarden.presenting.rendering import (
    Col,
    Grid,
    dumps,
    line,
    literal,
    make_console,
    print_skipped,
)

__all__ = [
    "DEFAULT_COMPONENTS",
    "ManifestFinding",
    "Scan",
    "register",
    "scan_manifests",
]


class _Format(StrEnum):
    table = "table"
    json = "json"


class _FailOn(StrEnum):
    deprecated = "deprecated"
    removed = "removed"


_STATUS_STYLE = {Status.REMOVED: "bold red", Status.DEPRECATED: "yellow"}


def _list_files(root: Path, skipped: list[Skip]) -> Iterator[tuple[Path, bool]]:
    # the walker every command shares
    for f in files.walk_tree(root, YAML_SUFFIXES, skipped=skipped):
        yield f.path, f.named


# the size-limited reader every command shares (a partial of a module function: picklable)
_read = partial(files.read_limited, limit=files.DEFAULT_DESIRED_LIMIT)


def scan_manifests(
    paths: Sequence[Path],
    target: deprecations.MinorVersion,
    table: DeprecationTable,
    *,
    workers: int = 1,
) -> Scan:
    """``find_deprecations`` over files on disk (``watch``'s upgrade hook calls this)."""
    return deprecating.find_deprecations(
        paths, target, table, list_files=_list_files, read=_read, workers=workers
    )


def _render(helm_bin: str, chart: Path, target: deprecations.MinorVersion) -> str:
    return helm.render_chart(chart, helm=helm_bin, kube_version=deprecations.format_minor(target))


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


def _minor(version: deprecations.MinorVersion | None) -> str | None:
    return None if version is None else deprecations.format_minor(version)


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
        scan = deprecating.find_deprecations(
            manifest_paths or [],
            target,
            table,
            list_files=_list_files,
            read=_read,
            charts=helm_charts or [],
            render=partial(_render, helm_bin) if helm_bin else None,
            workers=deprecating.default_workers(),
        )
    except FormatError as exc:
        fail(str(exc))
    if output is _Format.json:
        sys.stdout.write(dumps(scan.to_json()) + "\n")
    else:
        _print(scan, wide=wide)
    threshold = Status.DEPRECATED if fail_on is _FailOn.deprecated else Status.REMOVED
    raise typer.Exit(1 if scan.failing(threshold) else 0)


def register(app: typer.Typer) -> None:
    """Add ``deprecations`` to the ``fleetwarden`` command line."""
    app.command("deprecations")(deprecations_command)
