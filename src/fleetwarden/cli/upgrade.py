"""``fleetwarden upgrade plan|run CLUSTER/POOL --to VERSION``: the ordered pool upgrade.

Parses the arguments, calls ``app.upgrading`` (``plan_live``, then ``UpgradeRunner`` for
``run``) and renders the plan or the run. ``run`` is a dry-run unless ``--execute`` (as healing
is): it records what each step would do in the audit store and sends nothing. Exit codes (the
contract's): 0 the plan passes / the run is done or dry; 1 the pre-flight blocks / a step
failed or the window went over its budget (a high finding); 2 bad arguments or unreadable input.
Registered by the CLI with ``register(app)``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from fleetwarden.adapters.argocd.client import ARGOCD_TOKEN_ENV, client_from_env
from fleetwarden.adapters.flux import FluxClient
from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.adapters.upgrade_inputs import UpgradeInputs, read_upgrade_inputs
from fleetwarden.app.service_config import default_store
from fleetwarden.app.upgrading import Progress, RunReport, UpgradeRunner, plan_live
from fleetwarden.cli.common import FormatOpt, OutputFormat, fail
from fleetwarden.core.deprecations import DeprecationTable
from fleetwarden.core.upgrades import RunPhase, StepRecord, UpgradePlan
from fleetwarden.formats import manifests as manifests_format
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.argocd import ArgoError
from fleetwarden.ports.audit import AuditStoreError
from fleetwarden.ports.kube import KubeError
from fleetwarden.presenting.rendering import findings_table, literal, make_console
from fleetwarden.presenting.upgrading import print_plan

__all__ = ["register", "upgrade_app"]


upgrade_app = typer.Typer(
    help="Plan and run an ordered node-pool upgrade: infrastructure, roll, cluster layer, verify.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(upgrade_app, name="upgrade")


# --- the arguments both commands share -----------------------------------------------------

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


def parse_inputs(target: str, to: str, **options: Any) -> UpgradeInputs:
    """Every argument read and checked; exit 2 naming the one that is wrong."""
    try:
        return read_upgrade_inputs(target, to, **options)
    except (FormatError, ValueError) as exc:
        fail(str(exc))


async def _plan(inputs: UpgradeInputs) -> UpgradePlan:
    endpoints = load_kubeconfig(inputs.kubeconfig, contexts=[inputs.context])
    async with KubeClient(endpoints[0]) as kube:
        return await plan_live(
            kube, inputs.cluster, inputs.pool, inputs.to, specs=inputs.specs, apps=inputs.apps,
            table=_table(), ownership=inputs.ownership, surge=inputs.surge,
            unavailable=inputs.unavailable, budget=inputs.budget,
        )  # fmt: skip


def _table() -> DeprecationTable:
    return DeprecationTable(manifests_format.bundled_table())


# --- plan ----------------------------------------------------------------------------------


@upgrade_app.command("plan")
def plan_command(
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
    output: FormatOpt = OutputFormat.table,
) -> None:
    """The pre-flight checks and the ordered steps; exit 1 when the pre-flight blocks."""
    inputs = parse_inputs(
        target, to, desired=desired or (), kubeconfig=kubeconfig, context=context,
        manifests=manifests or (), flux=flux, argocd_app=argocd_app, ownership=ownership,
        surge=surge, unavailable=unavailable, budget=budget,
    )  # fmt: skip
    plan = _run_or_fail(_plan(inputs))
    if output is OutputFormat.json:
        typer.echo(json.dumps(plan.to_json(), indent=2))
    else:
        print_plan(make_console(), plan)
    raise typer.Exit(1 if plan.blocked else 0)


def _run_or_fail(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except (KubeError, FormatError, ArgoError, AuditStoreError, ValueError, OSError) as exc:
        fail(str(exc) or type(exc).__name__)


# --- run -----------------------------------------------------------------------------------


@upgrade_app.command("run")
def run_command(
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
    output: FormatOpt = OutputFormat.table,
    execute: Annotated[
        bool, typer.Option("--execute", help="Act (default: dry-run, nothing is sent).")
    ] = False,
    store: Annotated[
        str | None, typer.Option("--store", metavar="URL", help="Audit store (default: serve's).")
    ] = None,
    argocd_server: Annotated[
        str | None,
        typer.Option(
            "--argocd-server",
            metavar="URL",
            envvar="ARGOCD_SERVER",
            help=f"Argo CD for the cluster step (token in ${ARGOCD_TOKEN_ENV}).",
        ),
    ] = None,
    poll: Annotated[float, typer.Option("--poll", min=0.01, metavar="SECONDS")] = 5.0,
) -> None:
    """Carry the plan out, step by step, every step audited; a run stopped half-way resumes
    when started again. Exit 1 when a step failed or the window went over its budget."""
    inputs = parse_inputs(
        target, to, desired=desired or (), kubeconfig=kubeconfig, context=context,
        manifests=manifests or (), flux=flux, argocd_app=argocd_app, ownership=ownership,
        surge=surge, unavailable=unavailable, budget=budget,
    )  # fmt: skip
    try:
        argocd = client_from_env(argocd_server, option="--argocd-server") if argocd_server else None
    except ValueError as exc:
        fail(str(exc))
    console = make_console(stderr=True)

    def said(rec: StepRecord) -> None:
        if output is OutputFormat.table:
            console.print(literal(f"{rec.step.value}: {rec.status.value}: {rec.detail}"))

    def looked(p: Progress) -> None:
        if output is OutputFormat.table:
            note = f"upgrade in progress: {p.roll.describe()}"
            console.print(literal(f"{note}; {len(p.drift.findings)} finding(s)", "dim"))

    async def go() -> RunReport:
        plan = await _plan(inputs)
        audit = await open_audit_store(store or default_store())
        endpoints = load_kubeconfig(inputs.kubeconfig)
        by_name = {e.name: e for e in endpoints}
        clients: dict[str, KubeClient] = {}

        def flux_for(cluster: str) -> FluxClient:
            # the pool's own cluster is reached through --context; any other (a management
            # cluster holding the template: --flux ...@CONTEXT) is a context of the kubeconfig
            name = inputs.context if cluster == inputs.cluster else cluster
            if name not in by_name:
                raise LookupError(f"no context {name!r} in {inputs.kubeconfig} for the Flux object")
            if name not in clients:
                clients[name] = KubeClient(by_name[name])
            return FluxClient(clients[name])

        try:
            async with KubeClient(by_name[inputs.context]) as kube:
                runner = UpgradeRunner(
                    plan, kube=kube, store=audit, flux=flux_for, argocd=argocd, execute=execute,
                    poll=poll, on_progress=looked, on_record=said,
                )  # fmt: skip
                return await runner.run()
        finally:
            for c in clients.values():
                await c.aclose()
            if argocd is not None:
                await argocd.aclose()
            await audit.close()

    report: RunReport = _run_or_fail(go())
    if output is OutputFormat.json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    elif report.findings:
        make_console().print(findings_table(report.findings, title="upgrade findings"))
    raise typer.Exit(1 if report.state.phase is RunPhase.FAILED else 0)
