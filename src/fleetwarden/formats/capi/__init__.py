"""Desired node pools from Cluster API objects (core CAPI, CAPA, CAPZ, CAPG; CAPD/Dev state
nothing).

One pool per ``MachineDeployment``, per ``MachinePool``, per ``MachineSet`` no MachineDeployment
owns and per worker of a ClusterClass topology (``Cluster.spec.topology.workers``). Facts come
from the pool object and from the infrastructure and bootstrap objects it references, matched by
kind + name + namespace anywhere in the tree (the referrer's own file first):

- ``machines``: MachineDeployment / MachinePool / topology workers and ClusterClasses: replicas
  (1 when unset; the cluster-autoscaler's min..max when both of its annotations are set),
  version, Machine template labels CAPI syncs to Nodes, Machine taints;
- ``aws``: CAPA's AWSMachineTemplate, AWSMachinePool, AWSManagedMachinePool (EKS), ROSA;
- ``azure``: CAPZ's AzureMachineTemplate, AzureMachinePool, AzureManagedMachinePool and
  AzureASOManagedMachinePool (AKS);
- ``gcp``: CAPG's GCPMachineTemplate, GCPMachinePool and GCPManagedMachinePool(Template) (GKE);
- ``bootstraps``: KubeadmConfig(Template), CAPA's EKSConfig(Template) and NodeadmConfig(Template).

Every default a provisioner applies is a desired value with its provenance (``default: CAPA
...``, naming the releases it holds for); where a default changed between releases the files do
not name, every value those releases give is accepted. Where no default is certain (CAPA's root
volume is the AMI's size; CAPZ's OS disk is the image's) nothing is asserted and the account says
so. Every attribute of the pool's source objects is compared, unresolved (``${VAR}``
placeholders and ClusterClass patches are never guessed) or ignored with a reason
(``fleetwarden explain``).

Names, and grouping nodes into pools. A pool is named by ``metadata.name``; AKS-backed pools by
their agent-pool name (nodes carry ``kubernetes.azure.com/agentpool``), EKS managed node groups
by ``eksNodegroupName`` or the name CAPA generates from the namespace and name, GKE node pools by
``nodePoolName`` or the object's name (nodes carry ``cloud.google.com/gke-nodepool``). CAPI puts
``cluster.x-k8s.io/deployment-name`` / ``pool-name`` on Machines, *not* on Nodes, so grouping
CAPI nodes by those labels needs a synced label added by the user (a ``node.cluster.x-k8s.io/...``
label in the template) or a grouping label configured. A topology worker is named by its
topology name (``md-0``); the MachineDeployment CAPI generates for it is
``<cluster>-md-0-<random>``, so the name is recorded as unresolved -- unless the provider's
template names the pool its nodes carry: every cluster's clone copies an AKS template's
``spec.name`` (which CAPZ defaults to the template's name) and a GKE template's ``nodePoolName``.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats.capi import machines
from fleetwarden.formats.capi.objects import Tree
from fleetwarden.formats.documents import Document, PoolsRead

__all__ = ["read_pools"]

_CAPI_GROUPS = frozenset(
    {
        "cluster.x-k8s.io",
        "infrastructure.cluster.x-k8s.io",
        "bootstrap.cluster.x-k8s.io",
        "controlplane.cluster.x-k8s.io",
    }
)
_NOTE = "no node-pool definition (Cluster API: only {kinds})"


def read_pools(docs: Sequence[Document]) -> PoolsRead:
    """Pools of every MachineDeployment, MachinePool and topology worker in ``docs``."""
    out = PoolsRead()
    tree = Tree(docs)
    kinds_by_path: dict[str, set[str]] = {}
    pooled: set[str] = set()
    for doc in docs:
        if doc.group not in _CAPI_GROUPS:
            continue
        out.claimed.add((doc.path, doc.index))
        kinds_by_path.setdefault(doc.path, set()).add(doc.kind or "?")
        specs: list[NodePoolSpec] = []
        if doc.group == "cluster.x-k8s.io":
            if doc.kind == "MachineDeployment":
                specs = [machines.machine_deployment(doc, tree)]
            elif doc.kind == "MachinePool":
                specs = [machines.machine_pool(doc, tree)]
            elif doc.kind == "MachineSet":
                specs = [s for s in (machines.machine_set(doc, tree),) if s is not None]
            elif doc.kind == "Cluster":
                specs = machines.topology(doc, tree)
        if specs:
            out.pools.extend(specs)
            pooled.add(doc.path)
    for path, kinds in kinds_by_path.items():
        if path not in pooled:
            out.notes[path] = _NOTE.format(kinds=", ".join(sorted(kinds)))
    return out
