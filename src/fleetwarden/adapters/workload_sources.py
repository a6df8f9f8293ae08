"""Where workloads come from: desired (files, Argo CD's rendered manifests) and observed (a
live API server, listed once).

- ``app_from_files``: an application's rendered manifests (plain YAML, ``kustomize build`` or
  ``helm template`` output, a saved ``/manifests`` response), for every cluster or, with
  ``CLUSTER=``, as one cluster's overlay.
- ``app_from_argocd``: the same, fetched from Argo CD (``GET /api/v1/applications/{name}/
  manifests``): the manifests Argo CD renders for the application's target revision -- what
  the next sync will apply. An object that states no namespace takes the application's
  destination namespace, as Argo CD does when it applies it.
- ``list_workloads`` / ``list_nodes``: one cluster's objects now (``kubectl get -A -o json``
  without kubectl), redacted as they arrive.

Errors are ``FormatError`` naming the source (file, ``argocd:APP``, ``CLUSTER:/path``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetwarden.adapters import files
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import AppDesired, merge_apps
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.skips import Skip
from fleetwarden.formats.desired import YAML_SUFFIXES, SourceFile
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import node_from_object
from fleetwarden.formats.workloads import (
    objects_from_documents,
    parse_argocd_manifests,
    read_desired_workloads,
)
from fleetwarden.ports.argocd import ArgoCD, ArgoError
from fleetwarden.ports.kube import RESOURCES, KubeApi, KubeError, Resource

__all__ = [
    "ArgoRef",
    "app_from_argocd",
    "app_from_files",
    "list_nodes",
    "list_workloads",
    "load_app",
    "parse_argo_ref",
]


@dataclass(frozen=True, slots=True)
class ArgoRef:
    """``[CLUSTER=]APPLICATION``: an Argo CD application whose rendered manifests are the
    desired state for every cluster, or (``CLUSTER=``) that cluster's own."""

    cluster: str | None
    application: str

    @property
    def label(self) -> str:
        return f"{self.cluster}={self.application}" if self.cluster else self.application


def parse_argo_ref(text: str) -> ArgoRef:
    cluster, sep, name = text.partition("=")
    if not sep:
        cluster, name = "", text
    if not name or (sep and not cluster):
        raise FormatError(text, "expected [CLUSTER=]APPLICATION", field="--argocd-app")
    return ArgoRef(cluster or None, name)


def app_from_files(
    app: str,
    args: Sequence[files.PathArg],
    *,
    app_label: str | None = None,
    limit: int = files.DEFAULT_DESIRED_LIMIT,
) -> tuple[AppDesired, list[Skip]]:
    objects: dict[str | None, list[wl.ManifestObject]] = {}
    skipped: list[Skip] = []
    for arg in args:
        sources = [
            SourceFile(str(p), files.read_limited(p, limit))
            for p in files.iter_tree(arg.path, YAML_SUFFIXES)
        ]
        checkouts = files.locate_checkouts(arg.path, [s.path for s in sources])
        got = read_desired_workloads(sources, app_label=app_label, checkouts=checkouts)
        if got.unparsed:  # compared without it, the app would drift in silence
            first = got.unparsed[0]
            raise FormatError(first.path, first.reason)
        objects.setdefault(arg.cluster, []).extend(got.objects)
        skipped.extend(got.skipped)
    return AppDesired(app, objects, sources=tuple(a.label for a in args)), skipped


async def load_app(
    name: str,
    desired: Sequence[str],
    argocd_apps: Sequence[str],
    argocd: ArgoCD | None,
    *,
    app_label: str | None,
    limit: int,
) -> AppDesired:
    """One followed application's desired state from its files (``[CLUSTER=]PATH``, read off
    the event loop) and Argo CD applications (``[CLUSTER=]APPLICATION``), merged."""
    parts = []
    if desired:
        args = [files.parse_path_arg(a) for a in desired]
        app, _skipped = await asyncio.to_thread(  # file reads stay off the event loop
            app_from_files, name, args, app_label=app_label, limit=limit
        )
        parts.append(app)
    if argocd_apps:
        if argocd is None:
            raise FormatError(f"argocd:{name}", "no Argo CD client (argocd: url)")
        refs = [parse_argo_ref(r) for r in argocd_apps]
        parts.append(await app_from_argocd(name, argocd, refs, app_label=app_label))
    return merge_apps(name, parts)


async def app_from_argocd(
    app: str,
    client: ArgoCD,
    refs: Sequence[ArgoRef],
    *,
    app_label: str | None = None,
    revision: str | None = None,
) -> AppDesired:
    """The rendered manifests of each referenced Argo CD application (at ``revision``, else
    its target revision). ``FormatError`` names the application and what went wrong."""
    objects: dict[str | None, list[wl.ManifestObject]] = {}
    for ref in refs:
        source = f"argocd:{ref.application}"
        try:
            response: Any = await client.manifests(ref.application, revision=revision)
        except ArgoError as exc:
            raise FormatError(source, f"cannot fetch the rendered manifests: {exc}") from None
        docs = parse_argocd_manifests(source, dict(response))
        namespace = response.get("namespace") if isinstance(response.get("namespace"), str) else ""
        found = objects_from_documents(docs, app_label=app_label)
        if namespace:
            found = [_in_namespace(o, namespace) for o in found]
        objects.setdefault(ref.cluster, []).extend(found)
    aliases: dict[str, tuple[str, ...]] = {}
    for ref in refs:
        if ref.cluster and ref.application != app:
            aliases[ref.cluster] = (*aliases.get(ref.cluster, ()), ref.application)
    return AppDesired(
        app, objects, sources=tuple(f"argocd:{r.label}" for r in refs), aliases=aliases
    )


def _in_namespace(obj: wl.ManifestObject, namespace: str) -> wl.ManifestObject:
    if obj.key.namespace is not None:
        return obj
    body = dict(obj.body)
    body["metadata"] = {**body.get("metadata", {}), "namespace": namespace}
    return wl.ManifestObject(obj.key._replace(namespace=namespace), body, obj.source, obj.app)


async def list_workloads(
    client: KubeApi,
    *,
    namespaces: Sequence[str] = (),
    secrets: bool = True,
    kinds: frozenset[str] = wl.KINDS,
    app_label: str | None = None,
) -> wl.ObjectIndex:
    """One cluster's Deployments, StatefulSets, DaemonSets, ConfigMaps, Secrets (values
    hashed on arrival) and HPAs (or only ``kinds``), all namespaces or ``namespaces``."""
    index = wl.ObjectIndex(app_label=app_label)
    resources: Sequence[Resource] = [
        r for r in RESOURCES if r.kind in kinds and (secrets or r.kind != "Secret")
    ]
    for resource in resources:
        for namespace in namespaces or (None,):
            path = resource.path(namespace)
            try:
                listed = await client.list(path)
            except KubeError as exc:
                raise FormatError(f"{client.cluster}:{path}", str(exc)) from None
            for item in listed.items:
                typed = {**item, "kind": resource.kind, "apiVersion": resource.api_version}
                index.add(typed, source=f"{client.cluster}:live")
    return index


async def list_nodes(client: KubeApi) -> list[ObservedNode]:
    try:
        listed = await client.list("/api/v1/nodes")
    except KubeError as exc:
        raise FormatError(f"{client.cluster}:/api/v1/nodes", str(exc)) from None
    return [
        node_from_object(item, path=f"{client.cluster}:/api/v1/nodes[{i}]")
        for i, item in enumerate(listed.items)
    ]
