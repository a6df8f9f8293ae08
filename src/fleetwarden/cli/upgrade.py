"""``fleetwarden upgrade plan|run CLUSTER/POOL --to VERSION``: the ordered pool upgrade.

Parses the arguments, calls ``wiring.upgrading`` (``app.upgrading``'s ``plan_live``, then
``UpgradeRunner`` for ``run``, over their clients) and renders the plan or the run. ``run`` is
a dry-run unless ``--execute`` (as healing is): it records what each step would do in the
audit store and sends nothing. Exit codes (the
contract's): 0 the plan passes / the run is done or dry; 1 the pre-flight blocks / a step
failed or the window went over its budget (a high finding); 2 bad arguments or unreadable input.
Registered by the CLI with ``register(app)``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.adapters.argocd.client import ARGOCD_TOKEN_ENV
from fleetwarden.adapters.typer_cli import with_options
from fleetwarden.adapters.upgrade_inputs import UpgradeInputs, read_upgrade_inputs
from fleetwarden.cli.common import (
    FormatOpt,
    OutputFormat,
    argocd_server_option,
    failing,
)
from fleetwarden.core.upgrades import RunPhase
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.argocd import ArgoError
from fleetwarden.ports.audit import AuditStoreError
from fleetwarden.ports.kube import KubeError
from fleetwarden.presenting.upgrading import emit_plan, emit_run_report, run_printers
from fleetwarden.wiring import upgrading

__all__ = ["register", "upgrade_app"]

# what planning or running may fail with: exit 2 with the message, never a traceback
_ERRORS = (KubeError, FormatError, ArgoError, AuditStoreError, ValueError, OSError)


upgrade_app = typer.Typer(
    help="Plan and run an ordered node-pool upgrade: infrastructure, roll, cluster layer, verify.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(upgrade_app, name="upgrade")


# --- the arguments both commands share (``inputs``) ------------------------------------------

Target = Annotated[str, typer.Argument(metavar="CLUSTER/POOL", help="The pool to upgrade.")]
To = Annotated[str, typer.Option("--to", metavar="VERSION", help="Target version, e.g. 1.30.")]
Desired = Annotated[
    list[str] | None,
    typer.Option("--desired", "-d", metavar="[CLUSTER=]PATH", help="Desired node pools."),
]
Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig", "-k", metavar="FILE", help="Default: $KUBECONFIG, ~/.kube/config."
    ),
]
Context = Annotated[
    str | None,
    typer.Option("--context", metavar="NAME", help="The cluster's context (default: CLUSTER)."),
]
Manifests = Annotated[
    list[str] | None,
    typer.Option(
        "--manifests",
        "-m",
        metavar="APP=PATH",
        help="Rendered manifests of an application that targets the cluster (repeat): its APIs "
        "are checked at the target version, its workloads placed on the rolling pool.",
    ),
]
Flux = Annotated[
    str | None,
    typer.Option(
        "--flux",
        metavar="KIND/NAMESPACE/NAME[@CONTEXT]",
        help="The Kustomization or HelmRelease that owns the pool template.",
    ),
]
ArgoAppOpt = Annotated[
    str | None,
    typer.Option("--argocd-app", metavar="NAME", help="The app that owns the pool's labels."),
]
Ownership = Annotated[
    Path | None,
    typer.Option("--ownership", metavar="FILE", help="Ownership rules (YAML list, as in serve)."),
]
Surge = Annotated[int, typer.Option("--surge", min=0, help="New nodes added while rolling.")]
Unavailable = Annotated[
    int, typer.Option("--unavailable", min=0, help="Old nodes drained at once while rolling.")
]
Budget = Annotated[
    float, typer.Option("--budget", min=0.1, metavar="MINUTES", help="The window's budget.")
]


def parse_inputs(
    target: Target,
    to: To,
    desired: Desired = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    manifests: Manifests = None,
    flux: Flux = None,
    argocd_app: ArgoAppOpt = None,
    ownership: Ownership = None,
    surge: Surge = 1,
    unavailable: Unavailable = 1,
    budget: Budget = 30.0,
) -> UpgradeInputs:
    """Every argument read and checked; exit 2 naming the one that is wrong."""
    with failing(ValueError):  # FormatError too
        return read_upgrade_inputs(
            target, to, desired=desired or (), kubeconfig=kubeconfig, context=context,
            manifests=manifests or (), flux=flux, argocd_app=argocd_app, ownership=ownership,
            surge=surge, unavailable=unavailable, budget=budget,
        )  # fmt: skip


@upgrade_app.command("plan")
@with_options(parse_inputs, "inputs")
def plan_command(inputs: UpgradeInputs, output: FormatOpt = OutputFormat.table) -> None:
    """The pre-flight checks and the ordered steps; exit 1 when the pre-flight blocks."""
    with failing(*_ERRORS):
        plan = asyncio.run(upgrading.plan(inputs))
    emit_plan(plan, as_json=output is OutputFormat.json)
    raise typer.Exit(1 if plan.blocked else 0)


@upgrade_app.command("run")
@with_options(parse_inputs, "inputs")
def run_command(
    inputs: UpgradeInputs,
    output: FormatOpt = OutputFormat.table,
    execute: Annotated[
        bool, typer.Option("--execute", help="Act (default: dry-run, nothing is sent).")
    ] = False,
    store: Annotated[
        str | None, typer.Option("--store", metavar="URL", help="Audit store (default: serve's).")
    ] = None,
    argocd_server: Annotated[
        str | None,
        argocd_server_option(f"Argo CD for the cluster step (token in ${ARGOCD_TOKEN_ENV})."),
    ] = None,
    poll: Annotated[float, typer.Option("--poll", min=0.01, metavar="SECONDS")] = 5.0,
) -> None:
    """Carry the plan out, step by step, every step audited; a run stopped half-way resumes
    when started again. Exit 1 when a step failed or the window went over its budget."""
    # JSON: only the report, on stdout
    on_progress, on_record = run_printers(quiet=output is not OutputFormat.table)
    run = upgrading.run(
        inputs,
        store=store,
        argocd_server=argocd_server,
        execute=execute,
        poll=poll,
        on_progress=on_progress,
        on_record=on_record,
    )
    with failing(*_ERRORS):
        report = asyncio.run(run)
    emit_run_report(report, as_json=output is OutputFormat.json)
    raise typer.Exit(1 if report.state.phase is RunPhase.FAILED else 0)
