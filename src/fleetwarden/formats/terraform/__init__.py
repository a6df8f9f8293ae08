"""Terraform HCL: desired node pools of EKS, AKS and GKE, read without running Terraform.

What is read (each pool becomes one ``NodePoolSpec``):

- ``resource "aws_eks_node_group"``;
- ``resource "azurerm_kubernetes_cluster_node_pool"`` and the ``default_node_pool`` block of
  ``resource "azurerm_kubernetes_cluster"``;
- ``resource "google_container_node_pool"``, and the ``node_pool`` blocks (or else the implicit
  ``default-pool``) of ``resource "google_container_cluster"``;
- the terraform-aws-eks module (``eks_managed_node_groups`` / ``self_managed_node_groups``, with
  their ``*_defaults`` merged under each group) and its two node-group sub-modules;
- the terraform-google-modules kubernetes-engine module (``node_pools``, ``windows_node_pools``).

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

Limits: no ``.tf.json``, tfvars or module defaults (a default is not stated, so it is not
checked); ``dynamic`` blocks are not expanded (their facts are listed as unresolved); launch
templates and user data are not followed (user data that sets taints makes taints unresolved).
GKE counts are per zone and are multiplied by the number of zones only when that is stated.
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
from fleetwarden.formats.terraform import aks, eks, gke
from fleetwarden.formats.terraform.hcl import blocks, body_of
from fleetwarden.formats.terraform.scope import Scope, scope_of
from fleetwarden.formats.terraform.sources import eks_module_kind, is_gke_module

__all__ = ["TfFile", "read_pools"]


@dataclass(frozen=True, slots=True)
class TfFile:
    path: str
    text: str


def read_pools(files: Sequence[TfFile]) -> PoolsRead:
    """Every node pool the ``.tf`` files define; a file with none gets a note saying so.

    Raises ``FormatError`` (naming the file and line) when a file is not valid HCL.
    """
    parsed = [(f.path, body_of(f.path, f.text)) for f in files if f.path.endswith(".tf")]
    by_directory: dict[str, list[tuple[str, dict[Any, Any]]]] = defaultdict(list)
    for path, body in parsed:
        by_directory[os.path.dirname(path)].append((path, body))
    out = PoolsRead()
    for group in by_directory.values():
        scope = scope_of(group)
        for path, body in group:
            out.claimed.add((path, 0))
            try:
                pools, remarks = _pools_of(path, body, scope)
            except RecursionError:  # values nested (or locals chained) thousands deep
                raise FormatError(path, "nested too deeply to read") from None
            out.pools.extend(pools)
            if not pools:
                out.notes[path] = _note_of(body, remarks)
    return out


def _pools_of(
    path: str, body: Mapping[Any, Any], scope: Scope
) -> tuple[list[NodePoolSpec], list[str]]:
    """The pools one file defines, and remarks on definitions that yield none."""
    pools: list[NodePoolSpec] = []
    remarks: list[str] = []
    for kind, label, block in blocks(body, "resource", 2):
        if kind == "aws_eks_node_group":
            pools.extend(eks.node_group_pools(path, label, block, scope))
        elif kind == "azurerm_kubernetes_cluster_node_pool":
            pools.extend(aks.node_pool_pools(path, label, block, scope))
        elif kind == "azurerm_kubernetes_cluster":
            pools.extend(aks.default_pool_pools(path, label, block, scope))
        elif kind == "google_container_node_pool":
            pools.extend(gke.node_pool_pools(path, label, block, scope))
        elif kind == "google_container_cluster":
            pools.extend(gke.cluster_pools(path, label, block, scope))
    for label, block in blocks(body, "module", 1):
        if eks_module_kind(block) is not None:
            pools.extend(eks.module_pools(path, label, block, scope, remarks))
        elif is_gke_module(block):
            pools.extend(gke.module_pools(path, label, block, scope, remarks))
    return pools, remarks


def _note_of(body: Mapping[Any, Any], remarks: Sequence[str]) -> str:
    """Why a file has no pool: what it defines instead."""
    kinds = [kind for kind, _label, _body in blocks(body, "resource", 2)]
    kinds += [f"module {label}" for label, _body in blocks(body, "module", 1)]
    had = f"only {', '.join(dict.fromkeys(kinds))}" if kinds else "no resources or modules"
    return f"no node-pool definition (Terraform: {'; '.join([had, *remarks])})"
