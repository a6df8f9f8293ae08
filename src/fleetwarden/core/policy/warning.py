"""Warn mode per field: fields the policy reports and never heals, per owner. Pure.

The policy's ``warn`` list (the serve config's ``policy.warn``)::

    warn:
      - owner: {kind: Kustomization, name: "apps-*"}      # namespace: "*" unless given
        fields: ["spec.replicas", "metadata.labels.*"]
      - owner: {kind: Application, name: "payments-*"}    # an Argo CD application
        fields: ["labels.team"]

``owner.kind`` is a kind the ownership code routes to (``core.ownership``: the Flux kinds
``Kustomization``, ``HelmRelease``, ``GitRepository``, and Argo CD's ``Application``);
``name`` and ``namespace`` are globs over the object ownership routes the finding to (after
``{cluster}``/``{pool}`` are filled); an Argo CD application has no namespace here.
``fields`` are globs over the finding's field, matched both as fleetwarden writes it
(``labels.team``, ``taints.gpu:NoSchedule``, ``replicas``, ``image.web``) and as the object
path it stands for (``metadata.labels.team``, ``spec.taints.gpu:NoSchedule``,
``spec.replicas``, ``spec.template.spec.containers.web.image``) — so a field glob copied from a
manifest works.

A finding whose route and field match a rule is **warned**: ``decide`` alerts (reported, with
the reason ``warn mode for FIELD (owner ...)``) and never remediates, whatever the mode —
enforce included. The first matching rule (and, in it, the first matching glob) is the one
named. Parsing is strict: every error names the rule, the key and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from fleetwarden.core.findings import Finding
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef, Route

__all__ = ["APPLICATION", "OWNER_KINDS", "OwnerMatch", "Warn", "WarnRule", "parse_warn", "warned"]

APPLICATION = "Application"  # an Argo CD Application (``ownership.ArgoApp``)
OWNER_KINDS = (*(k.value for k in FluxKind), APPLICATION)
_RULE_KEYS = frozenset({"owner", "fields"})
_OWNER_KEYS = frozenset({"kind", "name", "namespace"})

# a finding field's head -> the object path it stands for (the rest of the field follows)
_PATHS = {
    "labels": "metadata.labels",
    "annotations": "metadata.annotations",
    "taints": "spec.taints",
    "unschedulable": "spec.unschedulable",
    "replicas": "spec.replicas",
}


def object_paths(field: str) -> tuple[str, ...]:
    """The names a finding field is matched under: itself, and its object path if it has one
    (``image.web`` -> ``spec.template.spec.containers.web.image``)."""
    head, dot, rest = field.partition(".")
    if head == "image" and rest:
        return field, f"spec.template.spec.containers.{rest}.image"
    path = _PATHS.get(head)
    return (field,) if path is None else (field, path + dot + rest)


@dataclass(frozen=True, slots=True)
class OwnerMatch:
    kind: str
    name: str = "*"
    namespace: str = "*"

    def matches(self, route: Route) -> bool:
        target = route.target
        if isinstance(target, FluxRef):
            return (
                target.kind.value == self.kind
                and fnmatchcase(target.name, self.name)
                and fnmatchcase(target.namespace, self.namespace)
            )
        if isinstance(target, ArgoApp):
            return self.kind == APPLICATION and fnmatchcase(target.name, self.name)
        return False

    def describe(self) -> str:
        if self.kind == APPLICATION:
            return f"Argo CD Application {self.name}"
        return f"Flux {self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class WarnRule:
    owner: OwnerMatch
    fields: tuple[str, ...]

    def field_glob(self, finding: Finding) -> str | None:
        """The first of ``fields`` that matches the finding's field (or its object path)."""
        names = object_paths(finding.field)
        return next((g for g in self.fields if any(fnmatchcase(n, g) for n in names)), None)


@dataclass(frozen=True, slots=True)
class Warn:
    """Why a finding is only reported: the rule, the glob that matched, the routed owner."""

    rule: WarnRule
    glob: str
    owner: str  # the routed object, described

    def reason(self, field: str) -> str:
        return (
            f"warn mode for {field} (owner {self.owner}; policy.warn "
            f"{self.rule.owner.describe()} fields {self.glob!r}): reported, never healed"
        )

    def to_json(self) -> dict[str, Any]:
        return {"field": self.glob, "owner": self.owner}


def warned(finding: Finding, route: Route, rules: Sequence[WarnRule]) -> Warn | None:
    """The warn rule that covers ``finding`` routed by ``route``, if any (the first)."""
    if route.target is None:
        return None
    for rule in rules:
        if rule.owner.matches(route):
            glob = rule.field_glob(finding)
            if glob is not None:
                return Warn(rule, glob, route.target.describe())
    return None


def _glob(raw: Any, at: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"{at}: expected a non-empty glob string, got {raw!r}")
    return raw


def _owner(raw: Any, at: str) -> OwnerMatch:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{at}: expected a mapping {{kind, name[, namespace]}}, got {raw!r}")
    unknown = set(raw) - _OWNER_KEYS
    if unknown:
        raise ValueError(
            f"{at}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
            f"(expected: kind, name, namespace)"
        )
    kind = raw.get("kind")
    if kind not in OWNER_KINDS:
        raise ValueError(f"{at}.kind: {kind!r} is not one of {', '.join(OWNER_KINDS)}")
    if kind == APPLICATION and "namespace" in raw:
        raise ValueError(f"{at}.namespace: an Argo CD Application is matched by name only")
    name = _glob(raw.get("name", "*"), f"{at}.name")
    namespace = _glob(raw.get("namespace", "*"), f"{at}.namespace")
    return OwnerMatch(str(kind), name, namespace)


def parse_warn(data: Any, *, where: str = "policy.warn") -> tuple[WarnRule, ...]:
    """The rules of a ``warn`` list (YAML already loaded); ValueError names the bad one."""
    if data is None:
        return ()
    if not isinstance(data, Sequence) or isinstance(data, str | bytes):
        raise ValueError(f"{where}: expected a list of {{owner, fields}} rules")
    rules = []
    for i, raw in enumerate(data):
        at = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise ValueError(f"{at}: expected a mapping {{owner, fields}}, got {raw!r}")
        unknown = set(raw) - _RULE_KEYS
        missing = _RULE_KEYS - set(raw)
        if unknown or missing:
            what = f"unknown key(s) {', '.join(sorted(map(str, unknown)))}" if unknown else ""
            what = what or f"missing key(s) {', '.join(sorted(missing))}"
            raise ValueError(f"{at}: {what} (expected: owner, fields)")
        fields = raw["fields"]
        if not isinstance(fields, Sequence) or isinstance(fields, str | bytes) or not fields:
            raise ValueError(f"{at}.fields: expected a non-empty list of field globs")
        globs = tuple(_glob(g, f"{at}.fields[{j}]") for j, g in enumerate(fields))
        rules.append(WarnRule(_owner(raw["owner"], f"{at}.owner"), globs))
    return tuple(rules)
