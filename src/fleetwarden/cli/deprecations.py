"""``fleetwarden deprecations``: manifests using APIs deprecated or removed at a target version.

Like Pluto's ``detect-files``, on the table made by ``scripts/convert-deprecations`` from
Kubernetes' own sources, Pluto's and kubent's (docs/deprecation-table.md). ``--live`` asks the
clusters instead (``app.live_deprecating``). Exit 0
clean, 1 when an API is removed at the target (or only deprecated, with ``--fail-on
deprecated``), 2 on bad arguments or input. The use case, and what is skipped rather than
fatal, is ``app.deprecating``; this module parses the arguments, calls
``wiring.deprecations`` (the file reader and helm, or the live clusters) and renders the
result.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.cli.common import AuditLogOpt, FormatOpt, OutputFormat, WideOpt, fail, failing
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import Status
from fleetwarden.presenting.json_text import emit_with
from fleetwarden.wiring.deprecations import scan_files, scan_live

__all__ = ["register"]


class _FailOn(StrEnum):
    deprecated = "deprecated"
    removed = "removed"


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
    output: FormatOpt = OutputFormat.table,
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
    as_json = output is OutputFormat.json
    threshold = Status.DEPRECATED if fail_on is _FailOn.deprecated else Status.REMOVED
    if live:
        with failing(ValueError):  # a bad kubeconfig, context or audit log (FormatError too)
            report = scan_live(target, kubeconfig, context or (), audit_log or (), config)
        printer = "live_deprecations.print_live_deprecations"
        emit_with(as_json, report.to_json, printer, report, wide=wide)
        raise typer.Exit(2 if report.nothing_read else int(report.failing(threshold)))
    with failing(ValueError):  # nothing to scan, an unknown --component, no helm, a bad file
        scan = scan_files(manifest_paths or [], helm_charts or [], target, component or ())
    emit_with(as_json, scan.to_json, "deprecations.print_deprecations", scan, wide=wide)
    raise typer.Exit(1 if scan.failing(threshold) else 0)


def register(app: typer.Typer) -> None:
    """Add ``deprecations`` to the ``fleetwarden`` command line."""
    app.command("deprecations")(deprecations_command)
