"""Argo CD Applications, ApplicationSets and AppProjects (``argoproj.io/v1alpha1``) -> core values.

Read as the API server serves them (the CRDs in argoproj/argo-cd ``manifests/crds/``):

* Application: ``spec.project`` (required by the CRD, ``default`` when empty as Argo CD does),
  ``spec.destination.server`` / ``.name`` / ``.namespace``, ``status.sync.status``,
  ``status.health.status``, and the owner reference of kind ``ApplicationSet`` in group
  ``argoproj.io`` (the one the ApplicationSet controller sets, ``controller: true``).
* ApplicationSet: ``spec.generators``; a ``list`` generator's ``elements`` rendered into
  ``spec.template.spec.destination`` (fasttemplate ``{{key}}`` and Go-template ``{{.key}}``
  placeholders, dotted paths into the element; an element using anything else -- pipes,
  functions -- is not guessed at), a ``clusters`` generator's ``selector.matchLabels`` (a
  ``matchExpressions`` selector is not evaluated). Other generators (git, scm, pull request,
  matrix, merge, plugin, duck type) are named in ``unreadable``: their clusters are known only by
  running them, and their Applications are still found through their owner references.
* AppProject: ``spec.destinations`` entries, globs kept as written.

Tolerant of everything the controllers add (status, managed fields, unknown keys); every
refusal is a ``FormatError`` naming the object and the field.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.applications import (
    Application,
    ApplicationSet,
    AppProject,
    AppSetRef,
    Destination,
    GeneratorTarget,
)
from fleetwarden.core.describing import describe_type
from fleetwarden.formats.errors import FormatError

__all__ = [
    "GENERATORS",
    "GROUP",
    "app_project_from_object",
    "application_from_object",
    "application_set_from_object",
]

GROUP = "argoproj.io"
# ApplicationSetGenerator's fields (applicationset_types.go); other keys are not generators
GENERATORS = (
    "list",
    "clusters",
    "git",
    "scmProvider",
    "clusterDecisionResource",
    "pullRequest",
    "matrix",
    "merge",
    "plugin",
)
_PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_PATH = re.compile(r"\.?([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)")


def _mapping(where: str, value: Any, field: str, *, required: bool = False) -> Mapping[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        got = "nothing" if value is None else describe_type(value)
        raise FormatError(where, f"expected a mapping, got {got}", field=field)
    return value


def _text(where: str, value: Any, field: str, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise FormatError(where, "missing", field=field)
        return None
    if not isinstance(value, str):
        raise FormatError(where, f"expected a string, got {describe_type(value)}", field=field)
    return value


def _identity(obj: Mapping[str, Any], kind: str) -> tuple[str, Mapping[str, Any], str, str]:
    if not isinstance(obj, Mapping):
        raise FormatError(kind, f"expected an object, got {describe_type(obj)}")
    meta = obj.get("metadata")
    where = kind
    if isinstance(meta, Mapping):
        where = f"{kind} {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    meta = _mapping(where, meta, "metadata", required=True)
    name = _text(where, meta.get("name"), "metadata.name", required=True)
    namespace = _text(where, meta.get("namespace"), "metadata.namespace") or ""
    assert name is not None
    return where, meta, namespace, name


def _destination(where: str, raw: Any, field: str) -> Destination:
    dest = _mapping(where, raw, field)
    return Destination(
        server=_text(where, dest.get("server"), f"{field}.server"),
        name=_text(where, dest.get("name"), f"{field}.name"),
        namespace=_text(where, dest.get("namespace"), f"{field}.namespace"),
    )


def application_from_object(obj: Mapping[str, Any]) -> Application:
    where, meta, namespace, name = _identity(obj, "Application")
    spec = _mapping(where, obj.get("spec"), "spec", required=True)
    status = _mapping(where, obj.get("status"), "status")
    sync = _mapping(where, status.get("sync"), "status.sync")
    health = _mapping(where, status.get("health"), "status.health")
    return Application(
        namespace=namespace,
        name=name,
        project=_text(where, spec.get("project"), "spec.project") or "default",
        destination=_destination(where, spec.get("destination"), "spec.destination"),
        sync=_text(where, sync.get("status"), "status.sync.status"),
        health=_text(where, health.get("status"), "status.health.status"),
        app_set=_owner(where, meta, namespace),
        uid=str(meta.get("uid") or ""),
    )


def _owner(where: str, meta: Mapping[str, Any], namespace: str) -> AppSetRef | None:
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        raise FormatError(where, "expected a list", field="metadata.ownerReferences")
    found: list[AppSetRef] = []
    for i, ref in enumerate(refs):
        at = f"metadata.ownerReferences[{i}]"
        ref = _mapping(where, ref, at, required=True)
        api_version = _text(where, ref.get("apiVersion"), f"{at}.apiVersion") or ""
        if ref.get("kind") != "ApplicationSet" or api_version.split("/")[0] != GROUP:
            continue
        owner = _text(where, ref.get("name"), f"{at}.name", required=True)
        assert owner is not None
        appset = AppSetRef(namespace, owner, str(ref.get("uid") or ""))
        if ref.get("controller") is True:
            return appset
        found.append(appset)
    return found[0] if found else None


def application_set_from_object(obj: Mapping[str, Any]) -> ApplicationSet:
    where, meta, namespace, name = _identity(obj, "ApplicationSet")
    spec = _mapping(where, obj.get("spec"), "spec", required=True)
    generators = spec.get("generators") or []
    if not isinstance(generators, list):
        raise FormatError(where, "expected a list", field="spec.generators")
    template = _mapping(where, spec.get("template"), "spec.template")
    template_dest = _mapping(
        where,
        _mapping(where, template.get("spec"), "spec.template.spec").get("destination"),
        "spec.template.spec.destination",
    )
    targets: list[GeneratorTarget] = []
    unreadable: list[str] = []
    for i, generator in enumerate(generators):
        at = f"spec.generators[{i}]"
        generator = _mapping(where, generator, at, required=True)
        for kind in (k for k in GENERATORS if k in generator):
            if kind not in ("list", "clusters"):
                unreadable.append(f"{at}.{kind}")
                continue
            body = _mapping(where, generator[kind], f"{at}.{kind}")
            post = _selector(where, generator.get("selector"), f"{at}.selector")
            if kind == "list":
                dest = _override(where, body, template_dest, f"{at}.list")
                found = _list_targets(where, body, dest, f"{at}.list")
                targets.extend(t for t in found if _element_selected(t, post))
                if body.get("elementsYaml"):
                    unreadable.append(f"{at}.list.elementsYaml")
            else:
                target = _clusters_target(where, body, f"{at}.clusters")
                targets.append(dataclasses.replace(target, post=post))
    return ApplicationSet(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        targets=tuple(dict.fromkeys(targets)),
        unreadable=tuple(unreadable),
    )


def _override(
    where: str, body: Mapping[str, Any], template_dest: Mapping[str, Any], at: str
) -> Mapping[str, Any]:
    """A generator's own ``template`` is merged over the ApplicationSet's."""
    own = _mapping(where, body.get("template"), f"{at}.template")
    own_spec = _mapping(where, own.get("spec"), f"{at}.template.spec")
    dest = _mapping(where, own_spec.get("destination"), f"{at}.template.spec.destination")
    return {**template_dest, **{k: v for k, v in dest.items() if v}}


Requirement = tuple[str, str, tuple[str, ...]]


def _selector(where: str, raw: Any, at: str) -> tuple[Requirement, ...]:
    """A generator's post-selector (a label selector over its parameters) as requirements."""
    selector = _mapping(where, raw, at)
    out: list[Requirement] = [
        (str(k), "In", (str(v),))
        for k, v in _mapping(where, selector.get("matchLabels"), f"{at}.matchLabels").items()
    ]
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise FormatError(where, "expected a list", field=f"{at}.matchExpressions")
    for i, expr in enumerate(expressions):
        expr = _mapping(where, expr, f"{at}.matchExpressions[{i}]", required=True)
        values = expr.get("values") or []
        if not isinstance(values, list):
            raise FormatError(where, "expected a list", field=f"{at}.matchExpressions[{i}].values")
        out.append((str(expr.get("key")), str(expr.get("operator")), tuple(map(str, values))))
    return tuple(out)


def _element_selected(target: GeneratorTarget, post: tuple[Requirement, ...]) -> bool:
    """A list element passes the post-selector when every requirement on ``server`` or
    ``name`` holds for what it renders to; requirements on other keys are not judged here."""
    params = {k: v for k, v in (("server", target.server), ("name", target.name)) if v}
    for key, op, values in post:
        if key not in ("server", "name"):
            continue
        if op == "In" and params.get(key) not in values:
            return False
        if op == "NotIn" and params.get(key) in values:
            return False
    return True


def _list_targets(
    where: str, body: Mapping[str, Any], template_dest: Mapping[str, Any], at: str
) -> list[GeneratorTarget]:
    elements = body.get("elements") or []
    if not isinstance(elements, list):
        raise FormatError(where, "expected a list", field=f"{at}.elements")
    out = []
    for element in elements:
        if not isinstance(element, Mapping):
            continue  # Argo CD accepts any JSON here; a scalar names no cluster
        server = _render(template_dest.get("server"), element)
        name = _render(template_dest.get("name"), element)
        if server or name:
            out.append(GeneratorTarget("list", server=server, name=name))
    return out


def _render(template: Any, element: Mapping[str, Any]) -> str | None:
    """``{{key}}`` / ``{{.a.b}}`` filled from the element; None if anything is not plain."""
    if not isinstance(template, str) or not template:
        return None
    failed = False

    def fill(match: re.Match[str]) -> str:
        nonlocal failed
        path = _PATH.fullmatch(match.group(1))
        value: Any = None
        if path is not None:
            value = _lookup(element, path.group(1))
        if not isinstance(value, str | int) or isinstance(value, bool):
            failed = True
            return ""
        return str(value)

    rendered = _PLACEHOLDER.sub(fill, template)
    return None if failed or not rendered else rendered


def _lookup(element: Mapping[str, Any], path: str) -> Any:
    if path in element:  # fasttemplate flattens nested keys: "values.project" is one key
        return element[path]
    value: Any = element
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _clusters_target(where: str, body: Mapping[str, Any], at: str) -> GeneratorTarget:
    selector = _mapping(where, body.get("selector"), f"{at}.selector")
    match = _mapping(where, selector.get("matchLabels"), f"{at}.selector.matchLabels")
    if selector.get("matchExpressions"):
        # not evaluated: say nothing rather than guess (owner references still find its apps)
        return GeneratorTarget("clusters", match_labels=(), all_clusters=False)
    return GeneratorTarget(
        "clusters",
        match_labels=tuple(sorted((str(k), str(v)) for k, v in match.items())),
        all_clusters=not match,
    )


def app_project_from_object(obj: Mapping[str, Any]) -> AppProject:
    where, _meta, namespace, name = _identity(obj, "AppProject")
    spec = _mapping(where, obj.get("spec"), "spec")
    raw = spec.get("destinations") or []
    if not isinstance(raw, list):
        raise FormatError(where, "expected a list", field="spec.destinations")
    destinations = tuple(
        _destination(where, entry, f"spec.destinations[{i}]") for i, entry in enumerate(raw)
    )
    return AppProject(namespace=namespace, name=name, destinations=destinations)
