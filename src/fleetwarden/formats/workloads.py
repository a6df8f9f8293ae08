"""Desired and observed workloads from files, and the ``fleet:`` settings. Parsing only.

Desired (Git): YAML/JSON manifests as kept in Git or rendered from it — plain multi-document
trees, ``kustomize build`` output, ``helm template`` output (``# Source:`` comments and all),
and Argo CD's rendered manifests: the response of ``GET /api/v1/applications/{name}/manifests``
(``{"manifests": ["<json>", ...], "revision": ...}``), saved as a file or handed over by an
Argo CD client through ``parse_argocd_manifests`` (the seam for the live source). A
``Kustomization`` or an unrendered Helm template is skipped with the reason: render it first
(a Flux ``Kustomization`` with ``flux build kustomization``, not ``kustomize build``).
A file that a kustomization in the same tree rewrites (``images``, ``namePrefix``, patches...)
or uses as a patch is not desired state as written: it is skipped as unreadable, with the
kustomization that rewrites it (``kustomize_rewrites``), never compared as it stands; so is a file
under the path an Argo CD Application or ApplicationSet or a Flux Kustomization of the tree
renders with changes (``gitops_rewrites``: kustomize images, Helm values, Flux images,
postBuild...; paths resolved from the repository root, ``formats.gitops_renders``).

Observed: ``kubectl get deploy,sts,ds,cm,secret,hpa -A -o json`` (a ``List``) or ``-o yaml``.
Objects are redacted here (``core.workloads.redact``): Secret values become digests before an
object leaves this module. Large JSON dumps go through simdjson's lazy parser, and with a
``want`` filter only the objects asked for are materialised.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import simdjson
import yaml

from fleetwarden.core.findings import Severity
from fleetwarden.core.ignoring import IgnoreDifference, rule_from_mapping
from fleetwarden.core.rules import IgnoreRule, SeverityRule
from fleetwarden.core.skips import Skip
from fleetwarden.core.workloads import (
    KINDS,
    ManifestObject,
    ObjectIndex,
    ObjectKey,
    WorkloadOptions,
    app_of,
    key_of,
)
from fleetwarden.formats.desired import YAML_SUFFIXES, SourceFile, decode_text
from fleetwarden.formats.documents import Document, load_data, parse_yaml_documents
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.gitops_renders import gitops_rewrites

__all__ = [
    "CUSTOMIZATION_PREFIX",
    "FLEET_SCHEMA",
    "DesiredWorkloads",
    "FleetSettings",
    "Want",
    "desired_rewrites",
    "fleet_settings",
    "gitops_rewrites",
    "kustomize_rewrites",
    "objects_from_documents",
    "parse_argocd_manifests",
    "parse_workload_dump",
    "read_desired_workloads",
]

CUSTOMIZATION_PREFIX = "resource.customizations.ignoreDifferences."
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# (key, app) -> keep? Lets a reader skip the objects a command does not need.
Want = Callable[[ObjectKey, str | None], bool]


# =========================================================================== desired


@dataclass(slots=True)
class DesiredWorkloads:
    objects: list[ManifestObject] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    files: int = 0
    # the skipped files whose content did not parse (unrendered Helm templates), as opposed
    # to files that parse but hold nothing to compare: commands always show these
    unparsed: list[Skip] = field(default_factory=list)


def _argocd_response(doc: Document) -> Sequence[Any] | None:
    body = doc.body
    manifests = body.get("manifests")
    if "kind" in body or not isinstance(manifests, list):
        return None
    if not all(isinstance(m, str | Mapping) for m in manifests):
        return None
    return manifests


def parse_argocd_manifests(path: str, payload: Mapping[str, Any] | bytes | str) -> list[Document]:
    """The objects of an Argo CD ``ManifestResponse`` (each manifest is a JSON or YAML string,
    or already an object). ``FormatError`` names the manifest that does not parse."""
    if isinstance(payload, bytes | str):
        text = payload.decode("utf-8-sig") if isinstance(payload, bytes) else payload
        docs = parse_yaml_documents(path, text)
        if len(docs) != 1:
            raise FormatError(path, "expected one Argo CD ManifestResponse object")
        payload = docs[0].body
    manifests = payload.get("manifests")
    if not isinstance(manifests, list):
        raise FormatError(path, "not an Argo CD ManifestResponse", field="manifests")
    out: list[Document] = []
    for i, m in enumerate(manifests):
        if isinstance(m, Mapping):
            out.append(Document(path, len(out), m))
            continue
        if not isinstance(m, str):
            raise FormatError(path, "expected a string", field=f"manifests[{i}]")
        try:
            parsed = parse_yaml_documents(path, m)
        except FormatError as exc:
            raise FormatError(path, exc.reason, field=f"manifests[{i}]") from None
        out.extend(Document(path, len(out) + j, d.body) for j, d in enumerate(parsed))
    return out


def objects_from_documents(
    docs: Sequence[Document], *, app_label: str | None = None
) -> list[ManifestObject]:
    """The supported objects among parsed documents, redacted, with their file as source.

    The live Argo CD source is this plus ``parse_argocd_manifests``: ``objects_from_documents(
    parse_argocd_manifests(f"argocd:{app}", await argocd.manifests(app)))`` with the client of
    ``ports.argocd``."""
    out = []
    for doc in docs:
        obj = ObjectIndex.wrap(doc.body, source=doc.path, app_label=app_label)
        if obj is not None:
            out.append(obj)
    return out


# kustomize's own names for its file (api/konfig/general.go, RecognizedKustomizationFileNames;
# a bare "Kustomization" is never read: the tree holds .yaml/.yml/.json files only)
KUSTOMIZATION_FILES = frozenset({"kustomization.yaml", "kustomization.yml"})
# the fields of kustomize's Kustomization (api/types/kustomization.go) that leave the objects
# it lists as they are written; every other field (images, namePrefix, nameSuffix, namespace,
# commonLabels, labels, commonAnnotations, patches*, replicas, replacements, components,
# configMapGenerator / secretGenerator, helmCharts, transformers, generators, buildMetadata,
# vars ...) changes them on the way to the cluster
_KUSTOMIZE_KEEPS = frozenset(
    {"apiVersion", "kind", "metadata", "resources", "bases", "crds", "openapi", "sortOptions"}
)
_KUSTOMIZE_PATCHES = ("patches", "patchesJson6902")


def _kustomization(doc: Document) -> bool:
    api_version = doc.body.get("apiVersion")
    return doc.body.get("kind") in (None, "Kustomization", "Component") and (
        api_version is None
        or (isinstance(api_version, str) and api_version.startswith("kustomize.config.k8s.io/"))
    )


def _flux_kustomization(doc: Document) -> bool:
    return doc.kind == "Kustomization" and doc.api_version.startswith(
        "kustomize.toolkit.fluxcd.io/"
    )


def _flux_render_hint(docs: Sequence[Document]) -> str:
    """Why a file of Flux Kustomizations is not desired state, and what renders it: Flux's
    own ``flux build kustomization NAME --path DIR`` (DIR: a local checkout of the object's
    ``spec.path`` in its source), not ``kustomize build``."""
    names: list[str] = []
    paths: list[str] = []
    for doc in docs:
        meta = doc.body.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        names.append(name if isinstance(name, str) and name else "NAME")
        spec = doc.body.get("spec")
        path = spec.get("path") if isinstance(spec, Mapping) else None
        paths.append(f"spec.path {path}" if isinstance(path, str) and path else "its source")
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    if len(docs) == 1:
        return (
            f"a Flux Kustomization (kustomize.toolkit.fluxcd.io) {shown}, which tells Flux "
            f"what to apply: give `flux build kustomization {names[0]} --path DIR` output "
            f"(DIR: a local checkout of {paths[0]})"
        )
    return (
        f"{len(docs)} Flux Kustomizations (kustomize.toolkit.fluxcd.io) {shown}, which tell "
        "Flux what to apply: give `flux build kustomization NAME --path DIR` output for each "
        "(DIR: a local checkout of its spec.path)"
    )


def _kustomize_refs(body: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(resources, patch files) a kustomization names by relative path."""
    resources: list[str] = []
    for key in ("resources", "bases", "components"):
        entries = body.get(key)
        if isinstance(entries, list):
            resources.extend(e for e in entries if isinstance(e, str))
    patches: list[str] = []
    entries = body.get("patchesStrategicMerge")
    if isinstance(entries, list):  # a path, or an inline patch (YAML text: never a file)
        patches.extend(e for e in entries if isinstance(e, str) and "\n" not in e)
    for key in _KUSTOMIZE_PATCHES:
        entries = body.get(key)
        if isinstance(entries, list):
            patches.extend(
                e["path"]
                for e in entries
                if isinstance(e, Mapping) and isinstance(e.get("path"), str)
            )
    return resources, patches


def kustomize_rewrites(files: Sequence[SourceFile]) -> dict[str, Skip]:
    """The files of a tree that are not desired state as written, each with why: those a
    kustomization of the tree lists while it changes them (a resource or base, a file under a
    listed directory), and the patches it applies. A kustomization that only lists its
    resources changes nothing. A kustomization that does not parse is left to the reader (it
    is skipped there with its error). Paths are resolved as kustomize does: relative to the
    kustomization's directory; remote resources match no file."""
    # a listed directory's own kustomization is kustomize's input, reported as such
    paths = [f.path for f in files if posixpath.basename(f.path) not in KUSTOMIZATION_FILES]
    out: dict[str, Skip] = {}

    def mark(base: str, entry: str, reason: str) -> None:
        target = posixpath.normpath(posixpath.join(base, entry))
        for path in paths:
            if path == target or path.startswith(target.rstrip("/") + "/"):
                out.setdefault(path, Skip(path, reason, problem=True))

    for f in files:
        if posixpath.basename(f.path) not in KUSTOMIZATION_FILES:
            continue
        try:
            docs = parse_yaml_documents(f.path, decode_text(f))
        except FormatError:
            continue
        base = posixpath.dirname(f.path)
        render = f"give `kustomize build {base or '.'}` output"
        for doc in docs:
            if not _kustomization(doc):
                continue
            resources, patches = _kustomize_refs(doc.body)
            for entry in patches:
                mark(base, entry, f"a patch that {f.path} applies, not a manifest: {render}")
            changes = sorted(str(k) for k in doc.body if k not in _KUSTOMIZE_KEEPS)
            if not changes:
                continue
            shown = ", ".join(changes[:4]) + (", ..." if len(changes) > 4 else "")
            for entry in resources:
                mark(base, entry, f"rewritten by {f.path} ({shown}): {render}")
    return out


def desired_rewrites(
    files: Sequence[SourceFile], *, checkouts: Mapping[str, str] | None = None
) -> dict[str, Skip]:
    """``kustomize_rewrites`` and ``gitops_rewrites`` of one tree (``checkouts``: where its
    directories are in their Git work trees, see ``gitops_rewrites``)."""
    return {**gitops_rewrites(files, checkouts=checkouts), **kustomize_rewrites(files)}


def read_desired_workloads(
    files: Sequence[SourceFile],
    *,
    app_label: str | None = None,
    rewritten: Mapping[str, Skip] | None = None,
    checkouts: Mapping[str, str] | None = None,
) -> DesiredWorkloads:
    """The workload objects of a desired-state tree (any other object is ignored; files that
    hold none are listed in ``skipped`` with what they hold). A file a kustomization of the
    tree rewrites is skipped as unparsed (``desired_rewrites`` of ``files``, or
    ``rewritten`` when the caller hands the tree over file by file)."""
    out = DesiredWorkloads(files=len(files))
    if rewritten is None:
        rewritten = desired_rewrites(files, checkouts=checkouts)
    for f in files:
        if f.path in rewritten:
            out.skipped.append(rewritten[f.path])
            out.unparsed.append(rewritten[f.path])
            continue
        if not f.path.endswith(YAML_SUFFIXES):
            out.skipped.append(Skip(f.path, "not a YAML or JSON file"))
            continue
        text = decode_text(f)
        try:
            docs = parse_yaml_documents(f.path, text)
        except FormatError:
            if "{{" in text:
                skip = Skip(f.path, "an unrendered Helm template: give `helm template` output")
                out.skipped.append(skip)
                out.unparsed.append(skip)
                continue
            raise
        expanded: list[Document] = []
        for doc in docs:
            manifests = _argocd_response(doc)
            if manifests is not None:
                expanded.extend(parse_argocd_manifests(f.path, doc.body))
            else:
                expanded.append(doc)
        found = objects_from_documents(expanded, app_label=app_label)
        if found:
            out.objects.extend(found)
            continue
        kinds = Counter(d.kind or "(no kind)" for d in expanded)
        flux = [d for d in expanded if _flux_kustomization(d)]
        if flux:
            reason = _flux_render_hint(flux)
        elif any(_kustomization(d) for d in expanded):
            reason = "a Kustomization: give `kustomize build` output"
        else:
            what = ", ".join(sorted(kinds)) if kinds else "empty"
            reason = f"no workload, ConfigMap, Secret or HPA ({what})"
        out.skipped.append(Skip(f.path, reason))
    return out


# =========================================================================== observed


def parse_workload_dump(
    path: str,
    data: bytes | str,
    *,
    app_label: str | None = None,
    want: Want | None = None,
) -> list[ManifestObject]:
    """The supported objects of a ``kubectl get ... -o json|yaml`` dump, redacted.

    ``want(key, app)`` (optional) keeps only the objects a command needs. ``FormatError``
    names the file (and item) for anything that is not a List of objects or an object.
    """
    raw = data.encode() if isinstance(data, str) else data
    if b"\x00" in raw[:8192]:
        raise FormatError(path, "binary data, not a JSON or YAML dump")
    if raw.lstrip()[:1] == b"{":
        fast = _parse_lazy(path, raw, app_label, want)
        if fast is not None:
            return fast
    body = load_data(path, raw, what="JSON or YAML dump")
    if isinstance(body, list):
        items: Sequence[Any] = body
        where = ""
    elif isinstance(body, Mapping) and isinstance(body.get("items"), list):
        items, where = body["items"], "items"
    elif isinstance(body, Mapping) and "kind" in body and not str(body["kind"]).endswith("List"):
        items, where = [body], ""
    else:
        raise FormatError(
            path,
            "expected a List of objects (kubectl get deploy,sts,ds,cm,secret,hpa -A -o json)",
            field="items",
        )
    out: list[ManifestObject] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise FormatError(path, "not an object", field=f"{where}[{i}]")
        key = key_of(item)
        if key is None:
            continue
        if want is not None and not want(key, app_of(item, app_label=app_label)):
            continue
        obj = ObjectIndex.wrap(item, source=path, app_label=app_label)
        if obj is not None:
            out.append(obj)
    return out


def _parse_lazy(
    path: str, raw: bytes, app_label: str | None, want: Want | None
) -> list[ManifestObject] | None:
    try:
        doc = simdjson.Parser().parse(raw)
    except ValueError:
        return None  # invalid JSON: the full path reports where
    if not isinstance(doc, simdjson.Object):
        return None
    items = doc.get("items")
    if not isinstance(items, simdjson.Array):
        return None
    out: list[ManifestObject] = []
    for i, item in enumerate(items):
        if not isinstance(item, simdjson.Object):
            raise FormatError(path, "not an object", field=f"items[{i}]")
        if item.get("kind") not in KINDS:
            continue
        meta = item.get("metadata")
        if not isinstance(meta, simdjson.Object):
            continue
        if want is not None:
            slim: dict[str, Any] = {"kind": item.get("kind"), "metadata": {}}
            for k in ("name", "namespace", "labels", "annotations"):
                v = meta.get(k)
                if v is not None:
                    slim["metadata"][k] = v.as_dict() if isinstance(v, simdjson.Object) else v
            key = key_of(slim)
            if key is None or not want(key, app_of(slim, app_label=app_label)):
                continue
        obj = ObjectIndex.wrap(item.as_dict(), source=path, app_label=app_label)
        if obj is not None:
            out.append(obj)
    return out


# =========================================================================== settings

_SEVERITIES = [s.value for s in Severity]
_STRINGS = {"type": "array", "items": {"type": "string"}}
FLEET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "appLabel": {"type": "string", "minLength": 1},
        "namespace": {"type": "string", "minLength": 1},
        "reportExtra": {"type": "boolean"},
        "ignoreDifferences": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "group": {"type": "string"},
                    "kind": {"type": "string", "minLength": 1},
                    "name": {"type": "string"},
                    "namespace": {"type": "string"},
                    "jsonPointers": _STRINGS,
                    "jqPathExpressions": _STRINGS,
                    "managedFieldsManagers": _STRINGS,
                },
            },
        },
        "resourceCustomizations": {
            "type": "object",
            "additionalProperties": {"type": "string"},
        },
        "severities": {"type": "object", "additionalProperties": {"enum": _SEVERITIES}},
        "ignore": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "minProperties": 1,
                "properties": {
                    "cluster": {"type": "string", "minLength": 1},
                    "workload": {"type": "string", "minLength": 1},
                    "field": {"type": "string", "minLength": 1},
                },
            },
        },
    },
}


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """The ``fleet:`` section of the config file::

    fleet:
      appLabel: example.com/app        # names the application, before Argo CD's tracking
      namespace: shop                  # for desired objects that state none (default)
      reportExtra: true                # live objects of the app that Git does not hold
      ignoreDifferences:               # Argo CD's Application.spec.ignoreDifferences
        - {group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}
      resourceCustomizations:          # argocd-cm keys and values, copied verbatim
        resource.customizations.ignoreDifferences.all: |
          managedFieldsManagers: [kube-controller-manager]
      severities: {"WORKLOAD/env.*": low}
      ignore: [{cluster: "dev-*", workload: "Deployment/*/debug", field: "image.*"}]
    """

    options: WorkloadOptions = field(default_factory=WorkloadOptions)
    app_label: str | None = None


def _customization_rules(raw: Mapping[str, str], source: str) -> list[IgnoreDifference]:
    rules = []
    for key, text in raw.items():
        where = f"fleet.resourceCustomizations.{key}"
        if not key.startswith(CUSTOMIZATION_PREFIX):
            raise FormatError(
                source, f"expected a key starting {CUSTOMIZATION_PREFIX}", field=where
            )
        group_kind = key[len(CUSTOMIZATION_PREFIX) :]
        if group_kind == "all":
            group, kind = "*", "*"
        else:
            group, _, kind = group_kind.rpartition("_")
        try:
            body = yaml.load(text, Loader=_Loader) or {}
        except yaml.YAMLError as exc:
            raise FormatError(source, f"YAML syntax error: {exc}", field=where) from None
        if not isinstance(body, Mapping):
            raise FormatError(source, "expected a mapping", field=where)
        try:
            rules.append(rule_from_mapping(body, group=group, kind=kind, source=where))
        except ValueError as exc:
            raise FormatError(source, str(exc), field=where) from None
    return rules


def fleet_settings(raw: Mapping[str, Any] | None, *, source: str = "<config>") -> FleetSettings:
    """``FleetSettings`` from the ``fleet:`` mapping; ``FormatError`` names the field."""
    if not raw:
        return FleetSettings()
    validator = jsonschema.Draft202012Validator(FLEET_SCHEMA)
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        where = ".".join(["fleet", *(str(p) for p in errors[0].absolute_path)])
        raise FormatError(source, errors[0].message, field=where)
    rules: list[IgnoreDifference] = []
    for i, item in enumerate(raw.get("ignoreDifferences", ())):
        where = f"fleet.ignoreDifferences[{i}]"
        try:
            rules.append(rule_from_mapping(item, source=where))
        except ValueError as exc:
            raise FormatError(source, str(exc), field=where) from None
    rules.extend(_customization_rules(raw.get("resourceCustomizations", {}), source))
    options = WorkloadOptions(
        ignore_differences=tuple(rules),
        severities=tuple(
            SeverityRule(k, Severity(v)) for k, v in raw.get("severities", {}).items()
        ),
        ignores=tuple(
            IgnoreRule(
                cluster=item.get("cluster", "*"),
                pool=item.get("workload", "*"),
                field=item.get("field", "*"),
                layer="WORKLOAD",
            )
            for item in raw.get("ignore", ())
        ),
        namespace=raw.get("namespace", "default"),
        report_extra=raw.get("reportExtra", True),
    )
    return FleetSettings(options=options, app_label=raw.get("appLabel"))
