"""Terraform HCL: desired node pools of EKS, AKS and GKE, read without running Terraform.

What is read (each pool becomes one ``NodePoolSpec``; the modules of this package say how):

- ``resource "aws_eks_node_group"`` (``eks``);
- EKS Auto Mode's built-in NodePools that ``aws_eks_cluster``'s ``compute_config`` or the
  terraform-aws-eks module's ``compute_config`` / ``cluster_compute_config`` enables
  (``eks_auto``);
- the terraform-aws-eks module: v18-v21 ``eks_managed_node_groups`` /
  ``self_managed_node_groups`` with their ``*_defaults``, its two node-group sub-modules, and
  v17 ``node_groups`` / ``worker_groups*`` (``eks_module``, ``eks_v17``; the major version per
  ``eks_majors``);
- ``resource "google_container_node_pool"``, the ``node_pool`` blocks of
  ``resource "google_container_cluster"`` (``dynamic`` ones too: one pool read from the
  ``content``, its count unresolved unless ``for_each`` is a literal) or else its implicit
  ``default-pool``, and the terraform-google-modules kubernetes-engine module (``gke``);
- ``resource "azurerm_kubernetes_cluster_node_pool"`` and the ``default_node_pool`` block (or
  ``dynamic "default_node_pool"``) of ``resource "azurerm_kubernetes_cluster"`` (``aks``), and
  the Azure/aks/azurerm module's default pool (``agents_*``) and ``node_pools`` (``aks_module``).

Defaults the provisioner applies (the module's, the provider's, the cloud API's) are desired
values, each with its provenance (``default: terraform-aws-eks v21 (version "~> 21.0"): ...``);
stated values carry ``file:line``. Where a default is not certain (a module major that is not
pinned, a value that depends on when the pool was created) every possible value is accepted or
the fact is not compared, and the account says why. Every attribute of a pool's source object
is accounted for: compared, unresolved (with the expression) or ignored (with the reason).

How values are known. Terraform is not run, so only what the text pins down is read: literals
as written; ``local.X`` when that local is itself known; ``T.N.name`` of a cluster resource
(and ``.id`` where a cluster is expected) and ``module.M.cluster_name`` / ``cluster_version``
of a terraform-aws-eks module, followed to what that block states; templates made only of
those. ``var.X`` is never resolved (tfvars and ``-var`` override defaults), nor is anything
else (functions, conditionals, data sources, ``each`` / ``count``). An unknown fact is ``None``
(or empty) on the spec and listed in ``spec.unresolved`` with the expression as written.

One directory is one Terraform module: references resolve only among the files of the same
directory (``os.path.dirname`` of the path; no file is opened). A local, resource or module
defined more than once in a directory is ambiguous and treated as unknown, never guessed.

Limits: no ``.tf.json`` or tfvars; ``dynamic`` blocks are not expanded (their facts are listed as
unresolved; a dynamic node pool block is read once, from its ``content``); launch templates are
not followed; shell user data is read but what it sets is not asserted (taints there make the
taints unresolved).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats.documents import PoolsRead
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed
from fleetwarden.formats.terraform import (
    aks,
    aks_module,
    eks,
    eks_auto,
    eks_module,
    gke,
    gke_module,
)
from fleetwarden.formats.terraform.hcl import blocks, body_of
from fleetwarden.formats.terraform.lines import line_index
from fleetwarden.formats.terraform.reading import Aside, Context
from fleetwarden.formats.terraform.scope import scope_of
from fleetwarden.formats.terraform.sources import (
    eks_module_kind,
    is_aks_module,
    is_gke_module,
    local_module_dir,
)

__all__ = ["TfFile", "read_pools"]


@dataclass(frozen=True, slots=True)
class TfFile:
    path: str
    text: str


def read_pools(files: Sequence[TfFile], *, assume: Assumed | None = None) -> PoolsRead:
    """Every node pool the ``.tf`` files define; a file with none gets a note saying so.

    ``assume`` names the terraform-aws-eks major for module blocks that do not pin one.
    Raises ``FormatError`` (naming the file and line) when a file is not valid HCL.
    """
    assume = assume or Assumed()
    parsed = [(f, body_of(f.path, f.text)) for f in files if f.path.endswith(".tf")]
    by_directory: dict[str, list[tuple[TfFile, dict[Any, Any]]]] = defaultdict(list)
    for file, body in parsed:
        by_directory[os.path.dirname(file.path)].append((file, body))
    variables = {
        os.path.normpath(directory): frozenset(
            str(label) for _file, body in group for label, _ in blocks(body, "variable", 1)
        )
        for directory, group in by_directory.items()
    }
    out = PoolsRead()
    for group in by_directory.values():
        scope = scope_of([(file.path, body) for file, body in group])
        for file, body in group:
            out.claimed.add((file.path, 0))
            ctx = Context(file.path, scope, line_index(file.text), assume, variables)
            try:
                pools, remarks = _pools_of(ctx, body)
            except RecursionError:  # values nested (or locals chained) thousands deep
                raise FormatError(file.path, "nested too deeply to read") from None
            out.pools.extend(pools)
            if not pools:
                out.notes[file.path] = _note_of(body, remarks)
            elif unread := [r for r in remarks if not isinstance(r, Aside)]:
                out.unread[file.path] = unread
    return out


def _pools_of(ctx: Context, body: Mapping[Any, Any]) -> tuple[list[NodePoolSpec], list[str]]:
    """The pools one file defines, and remarks on definitions that yield none."""
    pools: list[NodePoolSpec] = []
    remarks: list[str] = []
    for kind, label, block in blocks(body, "resource", 2):
        if kind == "aws_eks_node_group":
            pools.extend(eks.node_group_pools(ctx, label, block))
        elif kind == "aws_eks_cluster":
            pools.extend(eks_auto.cluster_pools(ctx, label, block, remarks))
        elif kind == "azurerm_kubernetes_cluster_node_pool":
            pools.extend(aks.node_pool_pools(ctx, label, block))
        elif kind == "azurerm_kubernetes_cluster":
            pools.extend(aks.default_pool_pools(ctx, label, block, remarks))
        elif kind == "google_container_node_pool":
            pools.extend(gke.node_pool_pools(ctx, label, block))
        elif kind == "google_container_cluster":
            pools.extend(gke.cluster_pools(ctx, label, block))
    for label, block in blocks(body, "module", 1):
        if eks_module_kind(block) is not None:
            pools.extend(eks_module.module_pools(ctx, label, block, remarks))
            if eks_module_kind(block) == "cluster":
                pools.extend(eks_auto.module_pools(ctx, label, block, remarks))
        elif is_gke_module(block):
            pools.extend(gke_module.module_pools(ctx, label, block, remarks))
        elif is_aks_module(block, called=_called(ctx, block)):
            pools.extend(aks_module.module_pools(ctx, label, block, remarks))
    return pools, remarks


def _called(ctx: Context, module: Mapping[Any, Any]) -> frozenset[str] | None:
    """The variables the directory a local module source names declares, when its files are
    among those read (None otherwise: a registry module, or a directory not read)."""
    directory = local_module_dir(ctx.path, module)
    return ctx.variables.get(directory) if directory is not None else None


def _note_of(body: Mapping[Any, Any], remarks: Sequence[str]) -> str:
    """Why a file has no pool: what it defines instead."""
    kinds = [kind for kind, _label, _body in blocks(body, "resource", 2)]
    kinds += [f"module {label}" for label, _body in blocks(body, "module", 1)]
    had = f"only {', '.join(dict.fromkeys(kinds))}" if kinds else "no resources or modules"
    return f"no node-pool definition (Terraform: {'; '.join([had, *remarks])})"
