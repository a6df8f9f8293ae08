"""``fleetwarden deprecations``: manifests using APIs deprecated or removed at a target version.

Like Pluto's ``detect-files``, on the table made by ``scripts/convert-deprecations`` from
Kubernetes' own sources, Pluto's and kubent's (docs/deprecation-table.md). ``--live`` asks the
clusters instead (``app.live_deprecating``). Exit 0
clean, 1 when an API is removed at the target (or only deprecated, with ``--fail-on
deprecated``), 2 on bad arguments or input. The use case, and what is skipped rather than
fatal, is ``app.deprecating``; this module parses the arguments, wires the file reader and
helm into one ``find_deprecations`` call, and renders the result.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.adapters import files, helm
from fleetwarden.app import deprecating
from fleetwarden.app.deprecating import DEFAULT_COMPONENTS, Scan
from fleetwarden.app.live_deprecating import find_live_deprecations
from fleetwarden.cli.common import AuditLogOpt, OutputFormat, WideOpt, fail
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import DeprecationTable, Status
from fleetwarden.formats.errors import FormatError
from fleetwarden.presenting.json_text import dumps

__all__ = ["DEFAULT_COMPONENTS", "register", "scan_manifests"]


class _FailOn(StrEnum):
    deprecated = "deprecated"
    removed = "removed"


def scan_manifests(
    paths: Sequence[Path],
    target: deprecations.MinorVersion,
    table: DeprecationTable,
    *,
    workers: int = 1,
) -> Scan:
    """``find_deprecations`` over files on disk."""
    return deprecating.find_deprecations(
        paths,
        target,
        table,
        list_files=files.list_manifests,
        read=files.read_manifest,
        workers=workers,
    )


def _render(helm_bin: str, chart: Path, target: deprecations.MinorVersion) -> str:
    return helm.render_chart(chart, helm=helm_bin, kube_version=deprecations.format_minor(target))


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
        OutputFormat,
        typer.Option("--format", "-o", help="table for people, json for machines."),
    ] = OutputFormat.table,
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
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Instead of manifests: the deprecated APIs live clusters still serve "
            "(apiserver_requested_deprecated_apis in /metrics) and, with --audit-log, who calls "
            "them (user, user agent).",
        ),
    ] = False,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", "-k", metavar="FILE", help="--live: clusters.")
    ] = None,
    context: Annotated[
        list[str] | None,
        typer.Option("--context", metavar="NAME", help="--live: only these contexts (repeat)."),
    ] = None,
    audit_log: AuditLogOpt = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", metavar="FILE", help="--live: auditLogs:.")
    ] = None,
) -> None:
    """Find manifests (or, with --live, clients of live clusters) using Kubernetes APIs that
    are deprecated or removed at a target version (table from k8s.io/api's lifecycle tags,
    with Pluto's and kubent's rows for what those lack).

    Example: fleetwarden deprecations -m rendered/ --target-version 1.25 --format json
    """
    target = deprecations.parse_minor(target_version)
    if target is None:
        fail(f"--target-version: expected MAJOR.MINOR such as 1.25, got {target_version!r}")
    if live:
        from fleetwarden.adapters.live_apis import read_live_clusters  # httpx: --live only

        try:
            sources = read_live_clusters(kubeconfig, context or (), audit_log or (), config)
        except (FormatError, ValueError) as exc:
            fail(str(exc))
        report = asyncio.run(find_live_deprecations(sources, target))
        _emit(
            output, report.to_json(), "live_deprecations", "print_live_deprecations", report, wide
        )
        threshold = Status.DEPRECATED if fail_on is _FailOn.deprecated else Status.REMOVED
        raise typer.Exit(2 if report.nothing_read else int(report.failing(threshold)))
    if not manifest_paths and not helm_charts:
        fail("nothing to scan: give --manifests PATH or --helm-chart DIR")
    try:
        table = deprecating.table_for(component or DEFAULT_COMPONENTS)
    except ValueError as exc:
        fail(str(exc))
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
            list_files=files.list_manifests,
            read=files.read_manifest,
            charts=helm_charts or [],
            render=partial(_render, helm_bin) if helm_bin else None,
            workers=deprecating.default_workers(),
        )
    except FormatError as exc:
        fail(str(exc))
    _emit(output, scan.to_json(), "deprecations", "print_deprecations", scan, wide)
    threshold = Status.DEPRECATED if fail_on is _FailOn.deprecated else Status.REMOVED
    raise typer.Exit(1 if scan.failing(threshold) else 0)


def _emit(
    output: OutputFormat, data: object, module: str, show: str, value: object, wide: bool
) -> None:
    """JSON, or the table ``presenting.<module>.<show>`` prints: rich is loaded for people
    only, never for JSON output."""
    if output is OutputFormat.json:
        sys.stdout.write(dumps(data) + "\n")
        return
    from importlib import import_module

    from fleetwarden.presenting.rendering import make_console

    printer = getattr(import_module(f"fleetwarden.presenting.{module}"), show)
    printer(make_console(wide=wide), value, wide=wide)


def register(app: typer.Typer) -> None:
    """Add ``deprecations`` to the ``fleetwarden`` command line."""
    app.command("deprecations")(deprecations_command)
