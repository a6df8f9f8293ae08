"""EKS Auto Mode in Terraform: the built-in NodePools a cluster enables.

- ``resource "aws_eks_cluster"`` with a ``compute_config { enabled, node_pools }`` block (AWS
  provider): ``node_pools`` lists the built-in NodePools to create; absent, none is created
  (the EKS API's ``computeConfig.nodePools`` has no default);
- the terraform-aws-eks module's ``compute_config`` (v21) / ``cluster_compute_config`` (v20.31+)
  input: ``{ enabled = optional(bool, false), node_pools = optional(list(string)) }``, passed to
  that block as is, so the same rule holds.

Each enabled built-in NodePool is a pool (``formats.eks_auto_mode``). What the reader cannot
evaluate (``enabled = var.auto``) leaves the pools unknown: said in the file's remarks, never
guessed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats import eks_auto_mode
from fleetwarden.formats.terraform.hcl import first_unknown, source_text
from fleetwarden.formats.terraform.reading import FORMAT, Aside, Context, Reader, module_enabled

__all__ = ["cluster_pools", "module_pools"]


def cluster_pools(
    ctx: Context, label: str, body: Mapping[Any, Any], remarks: list[str]
) -> list[NodePoolSpec]:
    """The built-in NodePools of one ``aws_eks_cluster`` (none without Auto Mode)."""
    where = f"aws_eks_cluster.{label}"
    block = body.get("compute_config")
    if isinstance(block, list):
        block = block[0] if block else None
    return _pools(
        ctx,
        where,
        body,
        ("resource", "aws_eks_cluster", label),
        block,
        "compute_config",
        ("compute_config", 0) if isinstance(body.get("compute_config"), list) else None,
        cluster_attr="name",
        version_attr="version",
        remarks=remarks,
    )


def module_pools(
    ctx: Context, label: str, module: Mapping[Any, Any], remarks: list[str]
) -> list[NodePoolSpec]:
    """The built-in NodePools a terraform-aws-eks module block enables."""
    where = f"module.{label}"
    attr = next((a for a in ("compute_config", "cluster_compute_config") if a in module), None)
    if attr is None or not module_enabled(where, module, ctx.scope, []):
        return []
    value = ctx.scope.resolved(module[attr])
    if first_unknown(value) is not None and not isinstance(value, Mapping):
        remarks.append(f"{where}.{attr} = {source_text(module[attr])}: Auto Mode pools unknown")
        return []
    v21 = "name" in module or "kubernetes_version" in module
    return _pools(
        ctx,
        where,
        module,
        ("module", label),
        value,
        attr,
        (attr,),
        cluster_attr="name" if v21 else "cluster_name",
        version_attr="kubernetes_version" if v21 else "cluster_version",
        remarks=remarks,
    )


def _pools(
    ctx: Context,
    where: str,
    body: Mapping[Any, Any],
    base: tuple[str, ...],
    config: Any,
    attr: str,
    at: tuple[str | int, ...] | None,
    *,
    cluster_attr: str,
    version_attr: str,
    remarks: list[str],
) -> list[NodePoolSpec]:
    if not isinstance(config, Mapping) or at is None:
        return []
    probe = Reader(ctx, where)
    obj = probe.obj(body, base, {}, close=False)
    if not probe.exists(obj):
        return []
    enabled = probe.flag(obj, (*at, "enabled"), "autoMode", note=False)
    if enabled is None and obj.has((*at, "enabled")):
        expr = source_text(obj.raw((*at, "enabled")))
        remarks.append(f"{where}.{attr}.enabled = {expr}: whether Auto Mode is on is unknown")
        return []
    if not enabled:
        return []
    if not obj.has((*at, "node_pools")):
        why = "Auto Mode without node_pools creates no built-in pool"
        remarks.append(Aside(f"{where}.{attr}: {why}"))
        return []
    names = probe.texts(obj, (*at, "node_pools"), "name", note=False)
    if names is None:
        expr = source_text(obj.raw((*at, "node_pools")))
        remarks.append(f"{where}.{attr}.node_pools = {expr}: Auto Mode pools unknown")
        return []
    problem = eks_auto_mode.check_names(names)
    if problem:
        raise probe.error(obj, (*at, "node_pools"), problem)
    pools = []
    for i, name in enumerate(names):
        r = Reader(ctx, where)
        o = r.obj(body, base, {}, close=False)
        r.compared(o, (*at, "node_pools", i), "name", name)
        o.view.ignored((*at, "enabled"), "switches EKS Auto Mode on: these are its pools")
        r.ignore(o, (*at, "node_role_arn"), "IAM of Auto Mode nodes: not on a node")
        cluster = r.cluster(o, cluster_attr)
        version = r.text(o, version_attr, "kubernetesVersion")
        if not o.has(version_attr):
            r.unstated(
                "kubernetesVersion",
                version_attr,
                "not stated: Auto Mode nodes follow the control plane's version (not compared)",
            )
        spec = eks_auto_mode.builtin_pool(
            name,
            cluster=cluster,
            source=ctx.path,
            source_format=FORMAT,
            attr=f"{attr}.node_pools[{i}]",
            ledger=r.ledger,
            kubernetes_version=version,
        )
        pools.append(dataclasses.replace(spec, unresolved=tuple(r.unresolved)))
    return pools
