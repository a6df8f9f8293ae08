"""``fleetwarden upgrade plan | run``: ``app/upgrading.py`` over its clients -- the pool's
cluster (``--context``), the Flux objects' clusters (contexts of the same kubeconfig), Argo CD,
the audit store -- each opened for the call and closed after it."""

from __future__ import annotations

import os
from collections.abc import Callable

from fleetwarden.adapters.argocd.client import client_from_env
from fleetwarden.adapters.flux import FluxClient
from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.adapters.upgrade_inputs import UpgradeInputs
from fleetwarden.app.service_config import default_store
from fleetwarden.app.upgrading import Progress, RunReport, UpgradeRunner, plan_live
from fleetwarden.core.deprecations import DeprecationTable
from fleetwarden.core.upgrades import StepRecord, UpgradePlan
from fleetwarden.formats import manifests as manifests_format

__all__ = ["plan", "run"]


async def plan(inputs: UpgradeInputs) -> UpgradePlan:
    """The pre-flight checks and the ordered steps, from the pool's live cluster."""
    endpoints = load_kubeconfig(inputs.kubeconfig, contexts=[inputs.context])
    async with KubeClient(endpoints[0]) as kube:
        return await plan_live(
            kube, inputs.cluster, inputs.pool, inputs.to, specs=inputs.specs, apps=inputs.apps,
            table=DeprecationTable(manifests_format.bundled_table()), ownership=inputs.ownership,
            surge=inputs.surge, unavailable=inputs.unavailable, budget=inputs.budget,
        )  # fmt: skip


async def run(
    inputs: UpgradeInputs,
    *,
    store: str | None,
    argocd_server: str | None,
    execute: bool,
    poll: float,
    on_progress: Callable[[Progress], None],
    on_record: Callable[[StepRecord], None],
) -> RunReport:
    """The plan carried out step by step, every step audited in ``store`` (default: serve's).
    Raises ``ValueError`` when ``--argocd-server`` has no token."""
    argocd = client_from_env(argocd_server, option="--argocd-server") if argocd_server else None
    the_plan = await plan(inputs)
    audit = await open_audit_store(store or default_store())
    endpoints = load_kubeconfig(inputs.kubeconfig)
    by_name = {e.name: e for e in endpoints}
    clients: dict[str, KubeClient] = {}

    def flux_for(cluster: str) -> FluxClient:
        # the pool's own cluster is reached through --context; any other (a management
        # cluster holding the template: --flux ...@CONTEXT) is a context of the kubeconfig
        name = inputs.context if cluster == inputs.cluster else cluster
        if name not in by_name:
            where = os.pathsep.join(map(str, inputs.kubeconfig))
            raise LookupError(f"no context {name!r} in {where} for the Flux object")
        if name not in clients:
            clients[name] = KubeClient(by_name[name])
        return FluxClient(clients[name])

    try:
        async with KubeClient(by_name[inputs.context]) as kube:
            runner = UpgradeRunner(
                the_plan, kube=kube, store=audit, flux=flux_for, argocd=argocd, execute=execute,
                poll=poll, on_progress=on_progress, on_record=on_record,
            )  # fmt: skip
            return await runner.run()
    finally:
        for c in clients.values():
            await c.aclose()
        if argocd is not None:
            await argocd.aclose()
        await audit.close()
