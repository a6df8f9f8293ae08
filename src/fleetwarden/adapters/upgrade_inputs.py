"""The inputs of ``fleetwarden upgrade plan|run``: the target pool, its desired definitions,
the applications' rendered manifests, the ownership rules and the rollout settings, read and
checked. Every refusal is a ``FormatError`` (a file) or a ``ValueError`` naming the argument."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import yaml

from fleetwarden.adapters import files
from fleetwarden.adapters.kube.config import kubeconfig_paths
from fleetwarden.core import workloads as wl
from fleetwarden.core.ownership import (
    ArgoApp,
    FluxKind,
    FluxRef,
    OwnershipMap,
    OwnershipRule,
    parse_rules,
)
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.schedulability import PlannedWorkload
from fleetwarden.core.skips import Skip
from fleetwarden.core.upgrades import AppObjects
from fleetwarden.formats import manifests
from fleetwarden.formats.desired import YAML_SUFFIXES

__all__ = ["UpgradeInputs", "parse_flux_ref", "read_app_objects", "read_upgrade_inputs"]


@dataclass
class UpgradeInputs:
    """What ``upgrade plan`` and ``upgrade run`` were asked, read and checked."""

    cluster: str
    pool: str
    to: str
    kubeconfig: tuple[Path, ...]  # --kubeconfig, else every file $KUBECONFIG lists, merged
    context: str
    specs: list[NodePoolSpec] = field(default_factory=list)
    apps: list[AppObjects] = field(default_factory=list)
    ownership: OwnershipMap = field(default_factory=OwnershipMap)
    surge: int = 1
    unavailable: int = 1
    budget: timedelta = timedelta(minutes=30)


def read_upgrade_inputs(
    target: str,
    to: str,
    *,
    desired: Sequence[str] = (),
    kubeconfig: Path | None = None,
    context: str | None = None,
    manifests: Sequence[str] = (),
    flux: str | None = None,
    argocd_app: str | None = None,
    ownership: Path | None = None,
    surge: int = 1,
    unavailable: int = 1,
    budget: float = 30.0,
) -> UpgradeInputs:
    """Every argument read and checked: FormatError or ValueError naming the one that is
    wrong (the pool definitions, manifests and ownership rules are read here)."""
    cluster, sep, pool = target.partition("/")
    if not sep or not cluster or not pool or "/" in pool:
        raise ValueError(f"{target!r}: expected CLUSTER/POOL (e.g. prod-eu-1/general)")
    # kubectl's files: --kubeconfig, else $KUBECONFIG's list merged (first file wins), else
    # ~/.kube/config
    paths = (kubeconfig,) if kubeconfig is not None else tuple(kubeconfig_paths())
    inputs = UpgradeInputs(
        cluster, pool, to, paths, context or cluster, surge=surge, unavailable=unavailable,
        budget=timedelta(minutes=budget),
    )  # fmt: skip
    if desired:
        loaded = files.load_desired([files.parse_path_arg(d) for d in desired])
        inputs.specs = [s if s.cluster else s.with_cluster(cluster) for s in loaded.pools]
    inputs.apps = [read_app_objects(m) for m in manifests]
    rules: list[OwnershipRule] = []
    if ownership is not None:
        try:
            data = yaml.safe_load(ownership.read_text(encoding="utf-8"))
            rules.extend(parse_rules(data or [], where=str(ownership)))
        except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:
            raise ValueError(f"--ownership {ownership}: {exc}") from None
    if flux:
        rules.insert(0, OwnershipRule(cluster=cluster, pool=pool, flux=parse_flux_ref(flux)))
    if argocd_app:
        rules.insert(0, OwnershipRule(cluster=cluster, pool=pool, argocd=ArgoApp(argocd_app)))
    inputs.ownership = OwnershipMap(rules)
    return inputs


def parse_flux_ref(text: str) -> FluxRef:
    """``--flux KIND/NAMESPACE/NAME[@CONTEXT]``; ValueError names the option."""
    ref, _, context = text.partition("@")
    parts = ref.split("/")
    kinds = {k.value.lower(): k for k in FluxKind}
    if len(parts) != 3 or parts[0].lower() not in kinds or not all(parts):
        raise ValueError(
            f"--flux {text!r}: expected KIND/NAMESPACE/NAME[@CONTEXT] "
            "(KIND: Kustomization or HelmRelease)"
        )
    return FluxRef(kinds[parts[0].lower()], parts[1], parts[2], context or None)


def read_app_objects(arg: str) -> AppObjects:
    """``--manifests APP=PATH``: the API objects and workloads of an application's rendered
    manifests. FormatError for a file that does not parse, ValueError for a bad argument."""
    app, sep, path = arg.partition("=")
    if not sep or not app or not path:
        raise ValueError(f"--manifests {arg!r}: expected APP=PATH")
    objects: list[tuple[str, str, str | None]] = []
    workloads: list[PlannedWorkload] = []
    skipped: list[Skip] = []  # unreadable files found in a directory: not the app's
    limit = files.DEFAULT_DESIRED_LIMIT
    for f, data in files.read_tree(Path(path), YAML_SUFFIXES, limit=limit, skipped=skipped):
        docs = manifests.parse_manifests(str(f.path), data)
        objects.extend((o.api_version, o.kind, o.name) for o in manifests.api_objects(docs))
        for doc in docs:
            if doc.body.get("kind") not in wl.WORKLOAD_KINDS:
                continue
            model = wl.model_from(doc.body, app=app, source=str(f.path))
            if isinstance(model, wl.Workload):
                pods = model.replicas if model.replicas is not None else 1
                workloads.append(PlannedWorkload(model, model.key.ref, pods))
    return AppObjects(app, objects, workloads)
