"""Who owns a drifted field, and where its fix must go (seed 001: Flux + Argo CD together).

Flux (or the IaC behind it) owns the *infrastructure* layer of a pool: instance type, disk, OS
image, node counts, versions — and so the node allocatable (L3) that follows from the instance
type. Argo CD owns the *cluster* layer: node labels, taints, quotas, workloads. A finding is
routed to its owner, with the object to act on: a Flux object (Kustomization, HelmRelease,
GitRepository) for the infrastructure layer, an Argo CD Application for the cluster layer.

The map is a list of glob rules (cluster, pool, layer, field), user rules first and
``DEFAULT_RULES`` last. A rule may name an owner, a target, or both:

* the **owner** of a finding comes from the first matching rule that names one;
* its **target** from the first matching rule that carries a target for that owner — so a
  per-cluster rule can give targets without restating which fields belong to whom;
* **direct restore** (may fleetwarden patch nodes itself, or must it ask Argo CD to sync?) from
  the first matching rule that sets it; allowed when none does.

Target names may hold ``{cluster}`` and ``{pool}``: one pool definition, written once, reused
across clusters. Pure: no I/O; ``parse_rules`` reads the config's plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from fleetwarden.core.describing import describe_type
from fleetwarden.core.findings import Finding

__all__ = [
    "DEFAULT_RULES",
    "ArgoApp",
    "FluxKind",
    "FluxRef",
    "Owner",
    "OwnershipMap",
    "OwnershipRule",
    "Route",
    "Target",
    "parse_rules",
]


class Owner(StrEnum):
    INFRASTRUCTURE = "infrastructure"  # Flux / IaC
    CLUSTER = "cluster"  # Argo CD
    NONE = "none"  # nobody can fix it by syncing: alert a human


class FluxKind(StrEnum):
    KUSTOMIZATION = "Kustomization"
    HELM_RELEASE = "HelmRelease"
    GIT_REPOSITORY = "GitRepository"


@dataclass(frozen=True, slots=True)
class FluxRef:
    """A Flux object. ``cluster`` is the kube context it lives in (a management cluster may
    hold the pool templates of many workload clusters); ``None``: the finding's cluster."""

    kind: FluxKind
    namespace: str
    name: str
    cluster: str | None = None

    def describe(self) -> str:
        where = f" in cluster {self.cluster}" if self.cluster else ""
        return f"Flux {self.kind.value} {self.namespace}/{self.name}{where}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "namespace": self.namespace,
            "name": self.name,
            "cluster": self.cluster,
        }


@dataclass(frozen=True, slots=True)
class ArgoApp:
    """An Argo CD Application, by name."""

    name: str

    def describe(self) -> str:
        return f"Argo CD application {self.name}"

    def to_json(self) -> dict[str, Any]:
        return {"application": self.name}


Target = FluxRef | ArgoApp


@dataclass(frozen=True, slots=True)
class OwnershipRule:
    """Globs over a finding's place; ``owner``, ``flux``, ``argocd`` and ``direct_restore``
    are each optional (``None``: this rule says nothing about it)."""

    cluster: str = "*"
    pool: str = "*"
    layer: str = "*"
    field: str = "*"
    owner: Owner | None = None
    flux: FluxRef | None = None
    argocd: ArgoApp | None = None
    direct_restore: bool | None = None

    def matches(self, finding: Finding) -> bool:
        return (
            fnmatchcase(finding.layer.value, self.layer)
            and fnmatchcase(finding.field, self.field)
            and fnmatchcase(finding.cluster, self.cluster)
            and fnmatchcase(finding.pool or "", self.pool)
        )

    def describe(self) -> str:
        parts = [
            f"{name}={value}"
            for name, value in (
                ("cluster", self.cluster),
                ("pool", self.pool),
                ("layer", self.layer),
                ("field", self.field),
            )
            if value != "*"
        ]
        return " ".join(parts) or "*"

    def target_for(self, owner: Owner) -> Target | None:
        if owner is Owner.INFRASTRUCTURE:
            return self.flux
        if owner is Owner.CLUSTER:
            return self.argocd
        return None


def _infra(layer: str, field: str) -> OwnershipRule:
    return OwnershipRule(layer=layer, field=field, owner=Owner.INFRASTRUCTURE)


# Seed 001's split. Order matters only where globs overlap (SPEC/pool before SPEC/*).
DEFAULT_RULES: tuple[OwnershipRule, ...] = (
    OwnershipRule(layer="SPEC", field="pool", owner=Owner.NONE),  # a node no pool claims
    _infra("SPEC", "instanceType"),
    _infra("SPEC", "diskSize"),
    _infra("SPEC", "osImage"),
    _infra("SPEC", "requirements.*"),  # node template requirements live with the template
    _infra("COUNT", "nodeCount"),
    _infra("L4", "kubeletVersion*"),  # kubeletVersion and kubeletVersion.mixed
    _infra("L3", "*"),  # allocatable follows from the instance type
    OwnershipRule(layer="L1", field="labels.*", owner=Owner.CLUSTER),
    OwnershipRule(layer="L2", field="taints.*", owner=Owner.CLUSTER),
    OwnershipRule(layer="WORKLOAD", owner=Owner.CLUSTER),  # seed 002: apps are Argo CD's
    OwnershipRule(owner=Owner.NONE),  # anything else: a human decides
)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a finding goes: its owner, the object to act on (None when no rule names one)
    and why. ``direct_restore``: fleetwarden may patch nodes itself for this finding."""

    owner: Owner
    target: Target | None
    reason: str
    direct_restore: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.owner.value,
            "target": self.target.to_json() if self.target else None,
            "reason": self.reason,
            "directRestore": self.direct_restore,
        }


class OwnershipMap:
    """User rules, then ``DEFAULT_RULES`` (unless ``defaults=False``)."""

    __slots__ = ("_defaults", "_rules")

    def __init__(self, rules: Iterable[OwnershipRule] = (), *, defaults: bool = True) -> None:
        self._rules = tuple(rules)
        self._defaults = defaults

    @property
    def rules(self) -> tuple[OwnershipRule, ...]:
        return self._rules + (DEFAULT_RULES if self._defaults else ())

    def route(self, finding: Finding) -> Route:
        rules = self.rules
        n_user = len(self._rules)
        matching = [(i, r) for i, r in enumerate(rules) if r.matches(finding)]

        def label(i: int, rule: OwnershipRule) -> str:
            kind = f"rule #{i + 1}" if i < n_user else "default rule"
            return f"{kind} ({rule.describe()})"

        owner, why = Owner.NONE, "no rule names an owner"
        for i, rule in matching:
            if rule.owner is not None:
                owner, why = rule.owner, f"{label(i, rule)} gives it to {rule.owner.value}"
                break
        reasons = [f"{finding.layer.value}/{finding.field}: {why}"]

        target: Target | None = None
        for i, rule in matching:
            if rule.owner not in (None, owner):
                continue
            candidate = rule.target_for(owner)
            if candidate is not None:
                target = _expand(candidate, finding)
                reasons.append(f"target {target.describe()} from {label(i, rule)}")
                break
        else:
            if owner is not Owner.NONE:
                tool = "Flux object" if owner is Owner.INFRASTRUCTURE else "Argo CD application"
                reasons.append(f"no {tool} named for this pool")

        direct = True
        for i, rule in matching:
            if rule.direct_restore is not None:
                direct = rule.direct_restore
                if not direct:
                    reasons.append(f"direct restore disallowed by {label(i, rule)}")
                break
        return Route(owner, target, "; ".join(reasons), direct)


def _expand(target: Target, finding: Finding) -> Target:
    """Fill ``{cluster}``/``{pool}`` (plain replacement: no format-string surprises)."""

    def sub(text: str) -> str:
        return text.replace("{cluster}", finding.cluster).replace("{pool}", finding.pool or "")

    if isinstance(target, ArgoApp):
        return ArgoApp(sub(target.name))
    return FluxRef(
        target.kind,
        sub(target.namespace),
        sub(target.name),
        sub(target.cluster) if target.cluster else finding.cluster,
    )


# --- config --------------------------------------------------------------------------------

_RULE_KEYS = {"cluster", "pool", "layer", "field", "owner", "flux", "argocd", "directRestore"}


def parse_rules(
    data: Sequence[Mapping[str, Any]], *, where: str = "ownership"
) -> list[OwnershipRule]:
    """Rules from plain config data (YAML already loaded), e.g.::

        - {cluster: "prod-*", field: "labels.*", owner: cluster,
           argocd: "{cluster}-node-config", directRestore: false}
        - {cluster: "prod-*", flux: {kind: HelmRelease, namespace: flux-system,
                                     name: "{cluster}-{pool}", cluster: mgmt}}

    Raises ``ValueError`` naming the rule and key that is wrong.
    """
    if not isinstance(data, Sequence) or isinstance(data, str | bytes):
        raise ValueError(f"{where}: expected a list of rules")
    out = []
    for i, raw in enumerate(data):
        at = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise ValueError(f"{at}: expected a mapping, got {describe_type(raw)}")
        unknown = set(raw) - _RULE_KEYS
        if unknown:
            raise ValueError(
                f"{at}: unknown key(s) {', '.join(sorted(map(str, unknown)))}"
                f" (expected: {', '.join(sorted(_RULE_KEYS))})"
            )
        globs = {}
        for key in ("cluster", "pool", "layer", "field"):
            value = raw.get(key, "*")
            if not isinstance(value, str) or not value:
                raise ValueError(f"{at}.{key}: expected a non-empty glob string")
            globs[key] = value
        owner = None
        if raw.get("owner") is not None:
            try:
                owner = Owner(str(raw["owner"]).strip().lower())
            except ValueError:
                names = ", ".join(o.value for o in Owner)
                raise ValueError(f"{at}.owner: {raw['owner']!r} is not one of {names}") from None
        direct = raw.get("directRestore")
        if direct is not None and not isinstance(direct, bool):
            raise ValueError(f"{at}.directRestore: expected true or false")
        out.append(
            OwnershipRule(
                owner=owner,
                flux=_parse_flux(raw.get("flux"), f"{at}.flux"),
                argocd=_parse_argo(raw.get("argocd"), f"{at}.argocd"),
                direct_restore=direct,
                **globs,
            )
        )
    return out


def _parse_flux(raw: Any, at: str) -> FluxRef | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"{at}: expected {{kind, namespace, name[, cluster]}}")
    try:
        kind = FluxKind(str(raw.get("kind")))
    except ValueError:
        kinds = ", ".join(k.value for k in FluxKind)
        raise ValueError(f"{at}.kind: {raw.get('kind')!r} is not one of {kinds}") from None
    values = {}
    for key in ("namespace", "name"):
        value = raw.get(key, "flux-system" if key == "namespace" else None)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{at}.{key}: expected a non-empty string")
        values[key] = value
    cluster = raw.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or not cluster):
        raise ValueError(f"{at}.cluster: expected a kube context name")
    return FluxRef(kind, values["namespace"], values["name"], cluster)


def _parse_argo(raw: Any, at: str) -> ArgoApp | None:
    if raw is None:
        return None
    name = raw.get("application") if isinstance(raw, Mapping) else raw
    if not isinstance(name, str) or not name:
        raise ValueError(f"{at}: expected an application name (or {{application: NAME}})")
    return ArgoApp(name)
