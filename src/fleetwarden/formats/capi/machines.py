"""Core Cluster API objects: ``MachineDeployment``, ``MachinePool`` and the workers of a
ClusterClass topology, and the objects they reference.

Defaults (read in CAPI's source, v1.0 to v1.14):

- ``replicas`` unset is 1 (the CRD default before CAPI 1.4, the webhook since). With both
  cluster-autoscaler annotations (``cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size``
  / ``-max-size``) on the object (for a topology worker: on it or on its ClusterClass worker
  class) the count belongs to the autoscaler: ``min..max`` is compared, whatever ``replicas``
  says. (CAPI >= 1.4 starts an unset MachineDeployment at the min size, MachinePools from 1.8;
  older releases at 1, and the autoscaler does not raise a group to its min by itself: such a
  pool is then reported below min.)
- Labels: of a Machine template's labels CAPI (>= 1.4) syncs to the Node only the
  ``node-role.kubernetes.io``, ``node-restriction.kubernetes.io`` and ``node.cluster.x-k8s.io``
  domains (the last two with sub-domains); the others stay on the Machine and are listed as
  ignored. MachinePool template labels reach Nodes the same way, through the MachinePool
  Machines CAPI (>= 1.5) makes -- for an infrastructure pool whose provider supports them:
  CAPZ ``AzureMachinePool`` (>= 1.12), CAPG ``GCPManagedMachinePool`` (>= 1.11), CAPD
  ``DockerMachinePool`` / ``DevMachinePool``; CAPA's ``AWSMachinePool`` only behind its
  ``MachinePoolMachines`` feature gate (off by default). On other pools they are ignored with
  that reason.
- Taints: v1beta2 ``spec.template.spec.taints`` (feature gate ``MachineTaintPropagation``: the
  webhook refuses them when it is off) with ``propagation: Always`` stay on the node;
  ``OnInitialization`` ones are startup taints. During a rollout CAPI (>= 1.7) taints the
  nodes of old MachineSets ``node.cluster.x-k8s.io/outdated-revision:PreferNoSchedule``: a
  startup taint of every MachineDeployment pool.

The source of a pool, accounted attribute by attribute: the whole MachineDeployment /
MachinePool (or the topology worker entry and its ClusterClass worker class), the ``spec`` of
the infrastructure object and of the bootstrap object it references. Other objects (the
Cluster, an AWSCluster) are noted only where a fact is read from them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from fleetwarden.core.pools import NodePoolSpec, Taint
from fleetwarden.formats.accounting import Path, dotted
from fleetwarden.formats.capi import aws, azure, bootstraps, gcp
from fleetwarden.formats.capi.objects import (
    Context,
    Patched,
    Pool,
    Reader,
    Source,
    Tree,
    placeholder,
    required_name,
)
from fleetwarden.formats.documents import Document, expect_list, expect_mapping
from fleetwarden.formats.errors import FormatError

__all__ = ["machine_deployment", "machine_pool", "machine_set", "semantic_version", "topology"]

AUTOSCALER_MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
AUTOSCALER_MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
OUTDATED = Taint("node.cluster.x-k8s.io/outdated-revision", None, "PreferNoSchedule")

_NOT_SYNCED = (
    "Machine template label not synced to Nodes (CAPI syncs only node-role.kubernetes.io, "
    "node-restriction.kubernetes.io, node.cluster.x-k8s.io)"
)
# Infrastructure pools whose provider sets status.infrastructureMachineKind: CAPI then makes a
# Machine per instance with the MachinePool template's labels, and syncs them to its Node like
# any Machine's (cluster-api core/reconcilers/machinepool/machinepool_controller_phases.go
# reconcileMachines / computeDesiredMachine, core/reconcilers/machine/
# machine_controller_noderef.go; CAPZ azure/scope/machinepool.go, CAPG cloud/scope/
# managedmachinepool.go, CAPA exp/controllers/awsmachinepool_controller.go)
_POOL_MACHINES = frozenset(
    {"AzureMachinePool", "GCPManagedMachinePool", "DockerMachinePool", "DevMachinePool"}
)
_POOL_NO_MACHINES = (
    "MachinePool template label: {kind} makes no MachinePool Machines, so CAPI puts the label "
    "on no Machine and syncs it to no Node"
)
_POOL_GATED = (
    "MachinePool template label: CAPA makes MachinePool Machines for an AWSMachinePool only "
    "with its MachinePoolMachines feature gate (alpha, off by default), so CAPI syncs it to no "
    "Node"
)
_POOL_UNKNOWN = (
    "MachinePool template label: reaches Nodes only through MachinePool Machines, and the "
    "infrastructure pool that would make them is not known"
)
_REPLACED = "the topology worker's label of the same key replaces it (CAPI merges them)"
_LIFECYCLE = "Machine lifecycle setting: not visible on a Node"
_ROLLOUT = "rollout / remediation behaviour: not visible on a Node"
_BOOKKEEPING = "object bookkeeping: not a desired fact"
_DOCKER = (
    "Docker / in-memory provider (CAPD): machines are containers on one host; nothing in it "
    "shows on a Node"
)

_OBJECT: dict[str, str] = {
    "apiVersion": "API version of the object (where a default changed between releases, the "
    "provenance says which release it assumes)",
    "kind": "the object's kind",
    "status": "observed state: not desired",
    "metadata.namespace": "namespace: used to find the objects it references",
    "metadata.labels": "labels of the object itself: not propagated to Machines or Nodes",
    **{
        f"metadata.{key}": _BOOKKEEPING
        for key in (
            "generateName",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "ownerReferences",
            "finalizers",
            "managedFields",
            "selfLink",
        )
    },
}
_MACHINE_SPEC: dict[str, str] = {
    "providerID": "set by the provider for each Machine: not a desired fact",
    "failureDomain": "failure domain: CAPI places the Machines in it; zones are not compared",
    "readinessGates": _LIFECYCLE,
    "minReadySeconds": _LIFECYCLE,
    "nodeDrainTimeout": _LIFECYCLE,
    "nodeVolumeDetachTimeout": _LIFECYCLE,
    "nodeDeletionTimeout": _LIFECYCLE,
    "deletion": _LIFECYCLE,
    "bootstrap.dataSecretName": "bootstrap data from a Secret: not read (no labels or taints "
    "are taken from it)",
}
_MD: dict[str, str] = {
    **_OBJECT,
    "spec.selector": "selects the MachineDeployment's MachineSets and Machines: not on Nodes",
    **{
        f"spec.{key}": _ROLLOUT
        for key in (
            "strategy",
            "rollout",
            "rolloutAfter",
            "remediation",
            "minReadySeconds",
            "revisionHistoryLimit",
            "progressDeadlineSeconds",
            "paused",
            "deletion",
        )
    },
    "spec.machineNamingStrategy": "Machine names: nodes are grouped by pool labels, not names",
    "spec.machineNaming": "Machine names: nodes are grouped by pool labels, not names",
    "spec.template.metadata.annotations": "Machine annotations: node annotations are not compared",
    **{f"spec.template.spec.{key}": why for key, why in _MACHINE_SPEC.items()},
}
_MP: dict[str, str] = {
    **_OBJECT,
    "spec.minReadySeconds": _LIFECYCLE,
    "spec.providerIDList": "set by the provider: not a desired fact",
    "spec.failureDomains": "failure domains: the provider spreads machines over them; zones "
    "are not compared",
    "spec.template.metadata.annotations": "MachinePool machine annotations: not compared",
    **{f"spec.template.spec.{key}": why for key, why in _MACHINE_SPEC.items()},
}
_WORKER: dict[str, str] = {
    "class": "the worker class it instantiates (read from the ClusterClass)",
    "failureDomain": _MACHINE_SPEC["failureDomain"],
    "failureDomains": _MP["spec.failureDomains"],
    "machineHealthCheck": "Machine health checks: not visible on a Node",
    "healthCheck": "Machine health checks: not visible on a Node",
    "variables": "variable overrides for ClusterClass patches: the fields patches may rewrite "
    "are listed as unresolved",
    "namingStrategy": _MD["spec.machineNaming"],
    "naming": _MD["spec.machineNaming"],
    "strategy": _ROLLOUT,
    "rollout": _ROLLOUT,
    **{
        key: _LIFECYCLE
        for key in (
            "readinessGates",
            "minReadySeconds",
            "nodeDrainTimeout",
            "nodeVolumeDetachTimeout",
            "nodeDeletionTimeout",
            "deletion",
        )
    },
}

_MS: dict[str, str] = {
    **_OBJECT,
    "spec.selector": _MD["spec.selector"],
    "spec.minReadySeconds": _LIFECYCLE,
    "spec.deletePolicy": _ROLLOUT,
    "spec.deletion": _ROLLOUT,
    "spec.machineNaming": _MD["spec.machineNaming"],
    "spec.template.metadata.annotations": _MD["spec.template.metadata.annotations"],
    **{f"spec.template.spec.{key}": why for key, why in _MACHINE_SPEC.items()},
}

_INFRA: dict[str, tuple[Reader, Path]] = {**aws.READERS, **azure.READERS, **gcp.READERS}


def _docker(src: Source, base: Path, ctx: Context) -> None:
    src.ignored(("spec",), _DOCKER)


for _kind in (
    "DockerMachineTemplate",
    "DockerMachinePool",
    "DockerMachinePoolTemplate",
    "DevMachineTemplate",
    "DevMachinePool",
    "DevMachinePoolTemplate",
    "InMemoryMachineTemplate",
):
    _INFRA[_kind] = (_docker, ("spec",))


# ---------------------------------------------------------------------------------------------
# MachineDeployment and MachinePool


def machine_deployment(doc: Document, tree: Tree) -> NodePoolSpec:
    src = _pool_source(doc)
    template: Path = ("spec", "template", "spec")
    cluster = _cluster(src, tree)
    _version(src, (*template, "version"))
    _replicas(src, ("spec", "replicas"), [(src, ("metadata", "annotations"))], doc)
    src.labels(("spec", "template", "metadata", "labels"), keep=_synced)
    _machine_taints(src, (*template, "taints"))
    _outdated_revision(src, template)
    _follow(src, template, tree, "MachineDeployment", cluster)
    src.close((), _MD)
    return src.pool.spec()


def machine_pool(doc: Document, tree: Tree) -> NodePoolSpec:
    src = _pool_source(doc)
    template: Path = ("spec", "template", "spec")
    cluster = _cluster(src, tree)
    _version(src, (*template, "version"))
    _replicas(src, ("spec", "replicas"), [(src, ("metadata", "annotations"))], doc)
    infra = src.ref((*template, "infrastructureRef"))
    src.labels(
        ("spec", "template", "metadata", "labels"), keep=_pool_synced(infra[0] if infra else None)
    )
    _machine_taints(src, (*template, "taints"))
    _follow(src, template, tree, "MachinePool", cluster)
    src.close((), _MP)
    return src.pool.spec()


def machine_set(doc: Document, tree: Tree) -> NodePoolSpec | None:
    """A MachineSet of its own: a pool like a MachineDeployment (CAPI's MachineSet webhook
    defaults its replicas the same way), without rollouts. One a MachineDeployment owns is
    that MachineDeployment's (None)."""
    meta = expect_mapping(doc, doc.body.get("metadata"), "metadata")
    owners = expect_list(doc, meta.get("ownerReferences"), "metadata.ownerReferences")
    if any(isinstance(o, Mapping) and o.get("kind") == "MachineDeployment" for o in owners):
        return None
    src = _pool_source(doc)
    template: Path = ("spec", "template", "spec")
    cluster = _cluster(src, tree)
    _version(src, (*template, "version"))
    _replicas(src, ("spec", "replicas"), [(src, ("metadata", "annotations"))], doc)
    src.labels(("spec", "template", "metadata", "labels"), keep=_synced)
    _machine_taints(src, (*template, "taints"))
    _follow(src, template, tree, "MachineSet", cluster)
    src.close((), _MS)
    return src.pool.spec()


def _pool_source(doc: Document) -> Source:
    name = required_name(doc)
    pool = Pool(name=name, source=doc.path)
    src = Source(doc, pool)
    if placeholder(name):
        src.unresolved(("metadata", "name"), "name", name)
    else:
        src.compared(("metadata", "name"), "name", name)
    return src


def _cluster(src: Source, tree: Tree) -> Document | None:
    """The pool's cluster name (``spec.clusterName``, else the template's), and the Cluster
    object when it is in the tree."""
    own: Path = ("spec", "clusterName")
    inner: Path = ("spec", "template", "spec", "clusterName")
    path, other = (own, inner) if src.get(own) is not None else (inner, own)
    raw = src.string(src.get(path), path)
    name = src.text(path, "cluster")
    if name is not None:
        src.pool.cluster = name
        src.compared(path, "cluster", name)
    if src.get(other) is not None:
        again = src.string(src.get(other), other)
        if raw is not None and again is not None and again != raw and not placeholder(raw + again):
            # CAPI's webhooks refuse it (core/webhooks/admission/machinedeployment.go, ...)
            raise src.error(
                other,
                f"names cluster {again!r}, spec.clusterName {raw!r}: CAPI refuses a "
                f"{src.doc.kind} whose two cluster names differ (which cluster its nodes join "
                "is not known)",
            )
        src.ignored(other, "the cluster name again (CAPI requires both to be equal)")
    if raw is None:
        return None
    cluster = tree.find("Cluster", raw, src.doc.namespace, src.doc.path)
    if cluster is not None and placeholder(raw) and cluster.path != src.doc.path:
        return None  # another template's ${CLUSTER_NAME}: its provider says nothing of ours
    return cluster


# blang/semver v4 Parse, which CAPI's webhooks apply after prepending a missing "v"
_NUMBER = r"(?:0|[1-9][0-9]*)"
_PRE = rf"(?:{_NUMBER}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = re.compile(
    rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-{_PRE}(?:\.{_PRE})*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?\Z"
)


def semantic_version(text: str) -> str | None:
    """``vMAJOR.MINOR.PATCH[-pre][+build]`` as CAPI stores a version it accepts (a missing
    "v" prepended, as its defaulting webhooks do); None for a version it refuses."""
    bare = text[1:] if text.startswith("v") else text
    return f"v{bare}" if _SEMVER.match(bare) else None


def _version(src: Source, path: Path) -> None:
    version = src.text(path, "kubernetesVersion")
    if version is not None:
        stored = semantic_version(version)
        if stored is None:
            # core/webhooks/admission: "must be a valid semantic version"
            raise src.error(
                path,
                f"{version!r} is not a semantic version (vMAJOR.MINOR.PATCH): CAPI refuses it",
            )
        src.pool.kubernetes_version = stored
        src.compared(path, "kubernetesVersion", version)
    elif src.get(path) is None:
        src.unstated(path, "kubernetesVersion", "not stated: not compared")


def _replicas(
    src: Source,
    replicas: Path,
    annotation_sources: Sequence[tuple[Source, Path]],
    doc: Document,
    *,
    topology: bool = False,
) -> None:
    """Replicas, or the cluster-autoscaler's range (see the module docstring)."""
    pool = src.pool
    found: dict[str, int | None] = {}  # fact -> value (None: unresolved)
    for key, fact in ((AUTOSCALER_MIN, "minSize"), (AUTOSCALER_MAX, "maxSize")):
        for owner, notes in annotation_sources:
            if owner.at(notes).get(key) is None:
                continue
            value = owner.count((*notes, key), fact, annotation=True)
            found[fact] = value
            if value is not None:
                owner.compared((*notes, key), fact, value)
                setattr(pool, "min_size" if fact == "minSize" else "max_size", value)
            break
    for owner, notes in annotation_sources:
        for key in owner.at(notes):
            if key not in (AUTOSCALER_MIN, AUTOSCALER_MAX):
                owner.ignored((*notes, str(key)), "annotation: not propagated to Nodes")
    if src.get(replicas) is not None:
        count = src.count(replicas, "desiredSize")
        if count is not None:
            pool.desired_size = count
            src.compared(replicas, "desiredSize", count)
        return
    lo, hi = found.get("minSize"), found.get("maxSize")
    if lo is not None and hi is not None:
        src.unstated(
            replicas,
            "desiredSize",
            f"not stated: the cluster-autoscaler owns the count within {lo}..{hi} (compared); "
            + _autoscaler_start(doc),
        )
        return
    if None in found.values():
        src.unstated(
            replicas,
            "desiredSize",
            "not stated: CAPI derives it from the autoscaler annotations, which are unresolved",
        )
        return
    why = "CAPI: replicas 1 when unset (the CRD default before 1.4, the webhook since)"
    if found:
        why += "; only one of the two autoscaler annotations is set"
    if topology:
        why += "; a topology worker without replicas gives a MachineDeployment without them"
    if src.default(replicas, "desiredSize", 1, why):
        pool.desired_size = 1


def _autoscaler_start(doc: Document) -> str:
    """Where CAPI starts an unset count with both annotations, as far as the apiVersion says."""
    v1beta2 = doc.api_version.endswith("/v1beta2")
    if doc.kind == "MachinePool":
        if v1beta2:
            return "CAPI (>= 1.11 for v1beta2) starts it at the min size"
        return "CAPI >= 1.8 starts it at the min size, older releases at 1"
    if doc.kind == "MachineSet" and not v1beta2:
        return "CAPI >= 1.7 starts it at the min size, older releases at 1"
    if v1beta2:
        return "CAPI (>= 1.11 for v1beta2) starts it at the min size"
    return "CAPI >= 1.4 starts it at the min size, older releases at 1"


def _synced(key: str) -> str | None:
    """None when CAPI's Machine -> Node label sync carries ``key`` (CAPI >= 1.4), else why
    not."""
    domain = key.split("/", 1)[0]
    synced = (
        domain == "node-role.kubernetes.io"
        or domain == "node-restriction.kubernetes.io"
        or domain.endswith(".node-restriction.kubernetes.io")
        or domain == "node.cluster.x-k8s.io"
        or domain.endswith(".node.cluster.x-k8s.io")
    )
    return None if synced else _NOT_SYNCED


def _pool_synced(kind: str | None) -> Callable[[str], str | None]:
    """``_synced`` for a MachinePool whose infrastructure pool is ``kind`` (a ClusterClass
    template's ``...Template`` kind names the pool it makes): its labels reach Nodes only
    through MachinePool Machines."""
    pool = kind.removesuffix("Template") if kind else None
    if pool in _POOL_MACHINES:
        return _synced
    if pool == "AWSMachinePool":
        return lambda key: _POOL_GATED
    if pool is None:
        return lambda key: _POOL_UNKNOWN
    why = _POOL_NO_MACHINES.format(kind=pool)
    return lambda key: why


def _machine_taints(src: Source, path: Path) -> None:
    """v1beta2 Machine taints: ``Always`` ones stay on the node, ``OnInitialization`` may go."""
    for taint, propagation, where in src.taint_objects(path):
        shown = f"{taint.key}={taint.value or ''}:{taint.effect}"
        if propagation == "OnInitialization":
            src.pool.startup_taints.append(taint)
            src.compared(where, f"startupTaints.{taint.key}", f"{shown} (on initialization)")
        else:
            src.pool.taints.append(taint)
            src.compared(where, taint.field_name, shown)


def _outdated_revision(src: Source, template: Path) -> None:
    src.pool.startup_taints.append(OUTDATED)  # transient, whatever a patch does
    src.default(
        (*template, "taints"),
        f"startupTaints.{OUTDATED.key}",
        f"{OUTDATED.key}:{OUTDATED.effect}",
        "CAPI >= 1.7: on the nodes of old MachineSets while a rollout is under way",
    )


def _follow(
    src: Source,
    template: Path,
    tree: Tree,
    owner: str,
    cluster: Document | None,
) -> None:
    """Read the infrastructure and bootstrap objects the Machine template references."""
    bootstrap_ref: Path = (*template, "bootstrap", "configRef")
    infra_ref: Path = (*template, "infrastructureRef")
    config = src.ref(bootstrap_ref)
    ctx = Context(
        tree=tree,
        owner=owner,
        cluster=cluster,
        bootstrap=config[0] if config else None,
    )
    infra = src.ref(infra_ref)
    if infra is not None:
        _read_infra(src, infra_ref, infra, ctx, ())
    if config is not None:
        _read_bootstrap(src, bootstrap_ref, config, ctx, ())


def _read_infra(
    src: Source, path: Path, ref: tuple[str, str, str | None], ctx: Context, patched: Patched
) -> None:
    kind, name, namespace = ref
    entry = _INFRA.get(kind)
    if entry is None:
        src.ignored(
            path,
            f"{kind}: a provider fleetwarden does not read (instance type, disk and OS are not "
            "compared)",
        )
        return
    target = ctx.tree.find(kind, name, namespace, src.doc.path)
    if target is None:
        src.unresolved(path, "infrastructureRef", f"{kind}/{name} is not in the desired-state tree")
        return
    src.ignored(path, f"reference: {kind}/{name} is read (its attributes are listed under it)")
    reader, base = entry
    reader(Source(target, src.pool, patched=patched), base, ctx)


def _read_bootstrap(
    src: Source, path: Path, ref: tuple[str, str, str | None], ctx: Context, patched: Patched
) -> None:
    kind, name, namespace = ref
    reader = bootstraps.READERS.get(kind)
    if reader is None:
        src.ignored(
            path,
            f"{kind}: a bootstrap provider fleetwarden does not read (its labels and "
            "taints are not compared)",
        )
        return
    target = ctx.tree.find(kind, name, namespace, src.doc.path)
    if target is None:
        if kind.startswith("Kubeadm"):
            src.pool.startup_taints.append(bootstraps.UNINITIALIZED)
        src.unresolved(path, "bootstrapRef", f"{kind}/{name} is not in the desired-state tree")
        return
    src.ignored(path, f"reference: {kind}/{name} is read (its attributes are listed under it)")
    reader(Source(target, src.pool, patched=patched), ("spec",), ctx)


# ---------------------------------------------------------------------------------------------
# ClusterClass topology


@dataclass(frozen=True, slots=True)
class _Patches:
    """What a ClusterClass's patches may rewrite in one worker class's templates."""

    by_kind: Mapping[str, Patched]
    anything: Patched = ()  # external patches: any field

    def of(self, kind: str) -> Patched:
        return (*self.anything, *self.by_kind.get(kind, ()))


def topology(doc: Document, tree: Tree) -> list[NodePoolSpec]:
    """One pool per worker of ``spec.topology.workers``."""
    reader = Source(doc, Pool(name="", source=doc.path))
    spec_topology = reader.at(("spec", "topology"))
    if not spec_topology:
        return []
    cluster_name = required_name(doc)
    class_doc = _cluster_class(reader, tree)
    workers = reader.at(("spec", "topology", "workers"))
    out = []
    for group, label in (("machineDeployments", "deployment-name"), ("machinePools", "pool-name")):
        base: Path = ("spec", "topology", "workers", group)
        for i, item in enumerate(reader.items(workers.get(group), base)):
            where: Path = (*base, i)
            reader.mapping(item, where)
            out.append(_worker(doc, tree, class_doc, cluster_name, group, label, where))
    return out


def _worker(
    doc: Document,
    tree: Tree,
    class_doc: Document | None,
    cluster_name: str,
    group: str,
    label: str,
    where: Path,
) -> NodePoolSpec:
    probe = Source(doc, Pool(name="", source=doc.path))
    name = probe.string(probe.get((*where, "name")), (*where, "name"), allow_none=False)
    if not name:
        raise FormatError(doc.path, "a name is required", field=doc.where(f"{dotted(where)}.name"))
    pool = Pool(name=name, source=doc.path)
    src = Source(doc, pool)
    src.unresolved(
        (*where, "name"),
        "name",
        f"generated by ClusterClass topology; its Machines (not Nodes) carry "
        f"topology.cluster.x-k8s.io/{label}={name}",
    )
    if placeholder(cluster_name):
        src.unresolved(("metadata", "name"), "cluster", cluster_name)
    else:
        pool.cluster = cluster_name
        src.compared(("metadata", "name"), "cluster", cluster_name)
    _version(src, ("spec", "topology", "version"))
    owner = "MachineDeployment" if group == "machineDeployments" else "MachinePool"
    worker_class = src.string(src.get((*where, "class")), (*where, "class"))
    entry = _class_entry(class_doc, group, worker_class, pool)
    annotations = [(src, (*where, "metadata", "annotations"))]
    if entry is not None:
        cc, entry_path, holder = entry
        annotations.append((cc, (*holder, "metadata", "annotations")))
    _replicas(src, (*where, "replicas"), annotations, doc, topology=True)
    keep = _synced if owner == "MachineDeployment" else _pool_synced(_class_infra(entry))
    src.labels((*where, "metadata", "labels"), keep=keep)
    worker_taints = src.get((*where, "taints"))
    _machine_taints(src, (*where, "taints"))
    if owner == "MachineDeployment":
        _outdated_revision(src, where)
    if entry is None:
        if class_doc is None:
            src.unresolved(
                ("spec", "topology"), "infrastructureRef", "the ClusterClass is not in the tree"
            )
        else:
            src.unresolved(
                (*where, "class"),
                "infrastructureRef",
                f"worker class {worker_class!r} is not in ClusterClass {class_doc.name}",
            )
    else:
        cc, entry_path, holder = entry
        # CAPI merges the worker's labels over its class's (desired_state.go: util.MergeMap,
        # the first map wins): a key the worker sets is the worker's value
        own = {str(k) for k in src.at((*where, "metadata", "labels"))}
        cc.labels(
            (*holder, "metadata", "labels"),
            keep=lambda key: _REPLACED if key in own else keep(key),
        )
        if worker_taints is None:
            _machine_taints(cc, (*entry_path, "taints"))
        elif cc.get((*entry_path, "taints")) is not None:
            cc.ignored((*entry_path, "taints"), "the topology worker's taints replace them")
        ctx = Context(tree=tree, owner=owner, topology=True, cluster=doc)
        _class_templates(cc, entry_path, holder, group, worker_class or "", ctx)
        cc.close(entry_path, _class_table())
    src.close(where, _WORKER)
    return pool.spec()


def _class_infra(entry: tuple[Source, Path, Path] | None) -> str | None:
    """The kind of infrastructure template a ClusterClass worker class references."""
    if entry is None:
        return None
    cc, _, holder = entry
    infra_path = _template_refs(cc, holder)[0]
    ref = cc.ref(infra_path) if infra_path else None
    return ref[0] if ref else None


def _cluster_class(reader: Source, tree: Tree) -> Document | None:
    """v1beta2 ``classRef: {name, namespace}``, v1beta1 ``class`` + ``classNamespace``."""
    topology: Path = ("spec", "topology")
    spec = reader.at(topology)
    if "classRef" in spec:
        ref = reader.at((*topology, "classRef"))
        name = reader.string(ref.get("name"), (*topology, "classRef", "name"))
        namespace = reader.string(ref.get("namespace"), (*topology, "classRef", "namespace"))
    else:
        name = reader.string(spec.get("class"), (*topology, "class"))
        namespace = reader.string(spec.get("classNamespace"), (*topology, "classNamespace"))
    if not name:
        return None
    doc = reader.doc
    return tree.find("ClusterClass", name, namespace or doc.namespace, doc.path)


def _class_entry(
    class_doc: Document | None, group: str, worker_class: str | None, pool: Pool
) -> tuple[Source, Path, Path] | None:
    """The ClusterClass worker class: (its source, the entry's path, where it keeps metadata
    and template references — v1beta2 at the top, v1beta1 under ``template``)."""
    if class_doc is None or not worker_class:
        return None
    cc = Source(class_doc, pool)
    base: Path = ("spec", "workers", group)
    for i, item in enumerate(cc.items(cc.get(base), base)):
        entry_path: Path = (*base, i)
        entry = cc.mapping(item, entry_path)
        if cc.string(entry.get("class"), (*entry_path, "class")) != worker_class:
            continue
        template = cc.at((*entry_path, "template"))
        holder = (*entry_path, "template") if template else entry_path
        return cc, entry_path, holder
    return None


def _class_table() -> dict[str, str]:
    table = {key: why for key, why in _WORKER.items() if key != "variables"}
    table["class"] = "the worker class name"
    return table


def _class_templates(
    cc: Source, entry_path: Path, holder: Path, group: str, worker_class: str, ctx: Context
) -> None:
    patches = _class_patches(cc, group, worker_class)
    infra_path, boot_path = _template_refs(cc, holder)
    config = cc.ref(boot_path) if boot_path else None
    ctx = Context(
        tree=ctx.tree,
        owner=ctx.owner,
        topology=True,
        cluster=ctx.cluster,
        bootstrap=config[0] if config else None,
    )
    infra = cc.ref(infra_path) if infra_path else None
    if infra is not None and infra_path is not None:
        _read_infra(cc, infra_path, infra, ctx, patches.of(infra[0]))
    if config is not None and boot_path is not None:
        _read_bootstrap(cc, boot_path, config, ctx, patches.of(config[0]))


def _template_refs(cc: Source, holder: Path) -> tuple[Path | None, Path | None]:
    """v1beta2 ``infrastructure.templateRef``, v1beta1 ``infrastructure.ref`` (same for
    bootstrap)."""
    out: list[Path | None] = []
    for part in ("infrastructure", "bootstrap"):
        section = cc.at((*holder, part))
        key = "templateRef" if "templateRef" in section else "ref"
        out.append((*holder, part, key) if section.get(key) is not None else None)
    return out[0], out[1]


def _class_patches(cc: Source, group: str, worker_class: str) -> _Patches:
    """For each template kind, the (path, why) a ClusterClass patch may rewrite for this worker
    class. ``enabledIf`` is not evaluated: a patch that may apply counts."""
    select_key = "machineDeploymentClass" if group == "machineDeployments" else "machinePoolClass"
    by_kind: dict[str, list[tuple[Path, str]]] = {}
    anything: list[tuple[Path, str]] = []
    patches: Path = ("spec", "patches")
    for i, item in enumerate(cc.items(cc.get(patches), patches)):
        where: Path = (*patches, i)
        patch = cc.mapping(item, where)
        patch_name = cc.string(patch.get("name"), (*where, "name")) or f"#{i}"
        why = f"ClusterClass {cc.doc.name} patch {patch_name!r}"
        if patch.get("external") is not None:
            anything.append(((), why))
        definitions: Path = (*where, "definitions")
        for j, definition in enumerate(cc.items(patch.get("definitions"), definitions)):
            dwhere: Path = (*definitions, j)
            definition_map = cc.mapping(definition, dwhere)
            selector = cc.mapping(definition_map.get("selector"), (*dwhere, "selector"))
            kind = cc.string(selector.get("kind"), (*dwhere, "selector", "kind")) or ""
            match_path: Path = (*dwhere, "selector", "matchResources")
            match = cc.mapping(selector.get("matchResources"), match_path)
            chosen = cc.mapping(match.get(select_key), (*match_path, select_key))
            names = [
                cc.string(n, (*match_path, select_key, "names", k)) or ""
                for k, n in enumerate(
                    cc.items(chosen.get("names"), (*match_path, select_key, "names"))
                )
            ]
            if not any(fnmatchcase(worker_class, n) for n in names):
                continue
            ops: Path = (*dwhere, "jsonPatches")
            for k, op in enumerate(cc.items(definition_map.get("jsonPatches"), ops)):
                op_map = cc.mapping(op, (*ops, k))
                pointer = cc.string(op_map.get("path"), (*ops, k, "path"))
                if pointer:
                    by_kind.setdefault(kind, []).append((_pointer(pointer), why))
    return _Patches({k: tuple(v) for k, v in by_kind.items()}, tuple(anything))


def _pointer(pointer: str) -> Path:
    """A JSON pointer as a path (``-``, "append", stops at the list itself)."""
    out: list[str | int] = []
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if part == "-":
            break
        out.append(int(part) if part.isascii() and part.isdigit() else part)
    return tuple(out)
