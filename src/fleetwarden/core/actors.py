"""Who made a change, and when: the actor of a finding, from the best evidence at hand. Pure.

Three kinds of evidence, weakest first:

* **managedFields** of the changed object (``via: managedFields``). Every write through the
  Kubernetes API records its field manager, operation and time in ``metadata.managedFields``;
  ``fieldsV1`` says which fields each manager owns. The manager is the writer's *tool*
  (``kubectl-edit``, ``argocd-controller``, ``karpenter``), chosen by the client (``kubectl
  --field-manager`` can say anything), so it names a tool, never a person.
* a **cloud event** (``via: cloudEvent``): the IAM principal / Azure caller / GCP principal
  of a provider API call (``events.ChangeEvent.actor``). It explains changes made through the
  provider (a node-group update, an auto-repair), which reach the Kubernetes API through the
  provider's own agents (kubelet, the cloud controller manager), never through a person's tool.
* an **API-server audit event** (``via: audit``): the authenticated ``user``, its
  ``userAgent`` and ``sourceIPs``. It is the strongest: the API server, not the client, says
  who it was.

``resolve`` picks one: an audit event of the same object within ``window`` of the change wins;
else a cloud event of the same cluster (and pool, when both name one) within the window wins
over a manager that is the provider's own agent or unknown (``kubelet`` rewriting labels during
a node-group update is the provider acting for the principal), but never over a human tool or a
GitOps controller: no provider API call runs ``kubectl-edit``. Else the manager. ``refine``
answers whether late evidence (CloudTrail delivers 1-15 minutes after the watch saw the change)
replaces the actor a finding already carries.

fieldsV1 (https://kubernetes.io/docs/reference/kubernetes-api/definitions/fields-v1-v1-meta/;
the exact format is sigs.k8s.io/structured-merge-diff's ``PathElement`` serialisation): a trie
in JSON. Each key is ``.`` (the field itself: it maps to ``{}``) or one path element:
``f:<name>`` a struct field or map key, ``k:<json object>`` a list item by its key fields
(``k:{"type":"Ready"}``, ``k:{"containerPort":80,"protocol":"TCP"}``), ``v:<json value>`` a
set item by value (``v:"10.244.0.0/24"``), ``i:<n>`` a list item by position. A key mapping to
``{}`` is in the set. Node ``spec.taints`` is an atomic list: its owner shows ``f:taints: {}``
and owns every taint (real node dumps in ../shared/realdata/nodes: kube-controller-manager).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, TypedDict

from fleetwarden.core.events import ChangeEvent, parse_time
from fleetwarden.core.integers import ascii_int

__all__ = [
    "Actor",
    "ActorDecision",
    "ActorKind",
    "AuditEvent",
    "ChangedObject",
    "ElementKind",
    "FieldPath",
    "ManagedFieldsEntry",
    "PathElement",
    "RawManagedFieldsEntry",
    "Via",
    "actor_from_managed_fields",
    "covers",
    "decode_fields",
    "encode_fields",
    "finding_field_path",
    "kind_of_audit_user",
    "kind_of_manager",
    "kind_of_principal",
    "match_audit",
    "parse_managed_fields",
    "refine",
    "resolve",
]


class ActorKind(StrEnum):
    HUMAN = "human"
    GITOPS = "gitops"
    AUTOSCALER = "autoscaler"
    PROVIDER = "provider"
    UNKNOWN = "unknown"


class Via(StrEnum):
    MANAGED_FIELDS = "managedFields"
    AUDIT = "audit"
    CLOUD_EVENT = "cloudEvent"


# how much each kind of evidence is worth when two explain the same change (higher wins)
_STRENGTH = {Via.MANAGED_FIELDS: 1, Via.CLOUD_EVENT: 2, Via.AUDIT: 3}


@dataclass(frozen=True, slots=True)
class Actor:
    """Who changed it. JSON (the contract): ``{"name", "kind", "via"}``; an actor named by an
    audit event adds what the API server saw — ``manager`` (the field manager managedFields
    named), ``userAgent`` and ``sourceIPs`` — each only when known. Those details are evidence,
    not identity: two actors with the same name, kind and via are equal."""

    name: str
    kind: ActorKind
    via: Via
    manager: str = field(default="", compare=False)
    user_agent: str = field(default="", compare=False)
    source_ips: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind.value, "via": self.via.value}
        if self.manager and self.manager != self.name:
            out["manager"] = self.manager
        if self.user_agent:
            out["userAgent"] = self.user_agent
        if self.source_ips:
            out["sourceIPs"] = list(self.source_ips)
        return out


# --- field managers ------------------------------------------------------------------------

# Exact field-manager names. Verified in ../shared/realdata: ``kubectl-label`` (minikube node
# dump), ``kubectl-client-side-apply`` and ``argocd-controller`` (gitops-engine live manifests),
# ``kubelet``, ``kube-controller-manager``, ``cilium-agent``, ``machine-config-daemon``,
# ``nodelink-controller`` (node dumps). kubectl names its managers ``kubectl-<command>``
# (``kubectl-edit``, ``kubectl-patch``...; ``kubectl`` for server-side apply). From public
# sources, not the corpus: ``kustomize-controller`` (Flux's server-side-apply owner),
# ``cluster-autoscaler`` (an Argo CD ignoreDifferences recipe by manager). Not verified: the
# exact manager of Karpenter's node writes (``karpenter`` assumed), ``helm``/``helm-controller``
# and ``eks-node-monitoring-agent``; a manager neither here nor in a family below is unknown.
_MANAGERS: dict[str, ActorKind] = {
    "kubectl": ActorKind.HUMAN,  # server-side apply's default manager
    "kubectl-edit": ActorKind.HUMAN,
    "kubectl-client-side-apply": ActorKind.HUMAN,
    "kubectl-patch": ActorKind.HUMAN,
    "kubectl-label": ActorKind.HUMAN,
    "kubectl-taint": ActorKind.HUMAN,
    "kubectl-annotate": ActorKind.HUMAN,
    "kubectl-replace": ActorKind.HUMAN,
    "kubectl-create": ActorKind.HUMAN,
    "argocd-controller": ActorKind.GITOPS,
    "argocd-application-controller": ActorKind.GITOPS,
    "kustomize-controller": ActorKind.GITOPS,
    "helm-controller": ActorKind.GITOPS,
    "helm": ActorKind.GITOPS,
    "flux": ActorKind.GITOPS,
    "karpenter": ActorKind.AUTOSCALER,
    "cluster-autoscaler": ActorKind.AUTOSCALER,
    # the provider's and the platform's own agents (kubelet, kube-controller-manager,
    # cilium-agent, machine-config-daemon, nodelink-controller: all in the realdata node dumps)
    "kubelet": ActorKind.PROVIDER,
    "kube-controller-manager": ActorKind.PROVIDER,
    "cloud-controller-manager": ActorKind.PROVIDER,
    "eks-node-monitoring-agent": ActorKind.PROVIDER,  # EKS node health conditions
    "cilium-agent": ActorKind.PROVIDER,
    "machine-config-daemon": ActorKind.PROVIDER,
    "nodelink-controller": ActorKind.PROVIDER,
}
# Families by prefix/suffix: any ``kubectl-<command>``; any ``<cloud>-cloud-controller-manager``
# (``digitalocean-cloud-controller-manager`` is in the realdata DOKS dump). GKE and AKS node
# agents are matched by prefix only: their exact manager names are not in the corpus.
_PREFIXES: tuple[tuple[str, ActorKind], ...] = (
    ("kubectl-", ActorKind.HUMAN),
    ("gke-", ActorKind.PROVIDER),
    ("aks-", ActorKind.PROVIDER),
    ("eks-", ActorKind.PROVIDER),
)
_SUFFIXES: tuple[tuple[str, ActorKind], ...] = (("-cloud-controller-manager", ActorKind.PROVIDER),)


def kind_of_manager(manager: str) -> ActorKind:
    """The kind of a field manager. A client that sets no manager is recorded under its user
    agent's program name (``Go-http-client`` in the realdata minikube dump): unknown."""
    name = manager.strip()
    kind = _MANAGERS.get(name)
    if kind is not None:
        return kind
    for prefix, k in _PREFIXES:
        if name.startswith(prefix):
            return k
    for suffix, k in _SUFFIXES:
        if name.endswith(suffix):
            return k
    return ActorKind.UNKNOWN


# --- fieldsV1 ------------------------------------------------------------------------------


class ElementKind(StrEnum):
    FIELD = "f"
    KEY = "k"
    VALUE = "v"
    INDEX = "i"


@dataclass(frozen=True, slots=True, order=True)
class PathElement:
    """One step of a field path. ``text`` is canonical: the field name; for KEY the key fields
    as compact JSON with sorted names; for VALUE the compact JSON value; for INDEX the number."""

    kind: ElementKind
    text: str

    @classmethod
    def field(cls, name: str) -> PathElement:
        return cls(ElementKind.FIELD, name)

    @classmethod
    def key(cls, **fields: Any) -> PathElement:
        return cls(ElementKind.KEY, _compact(fields))

    def encode(self) -> str:
        return f"{self.kind.value}:{self.text}"

    @classmethod
    def decode(cls, raw: str) -> PathElement:
        prefix, sep, rest = raw.partition(":")
        if not sep or prefix not in ("f", "k", "v", "i"):
            raise ValueError(f"fieldsV1 key {raw!r}: expected f:, k:, v: or i:")
        kind = ElementKind(prefix)
        if kind is ElementKind.FIELD:
            return cls(kind, rest)
        if kind is ElementKind.INDEX:
            index = ascii_int(rest)
            if index is None:
                raise ValueError(f"fieldsV1 key {raw!r}: i: takes a list index")
            return cls(kind, str(index))
        try:
            value = json.loads(rest)
        except ValueError:
            raise ValueError(f"fieldsV1 key {raw!r}: {prefix}: takes JSON") from None
        if kind is ElementKind.KEY and not isinstance(value, dict):
            raise ValueError(f"fieldsV1 key {raw!r}: k: takes a JSON object")
        return cls(kind, _compact(value))


FieldPath = tuple[PathElement, ...]


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decode_fields(fields_v1: Mapping[str, Any]) -> frozenset[FieldPath]:
    """The set of field paths a fieldsV1 trie holds. Raises ``ValueError`` on a malformed key."""
    out: set[FieldPath] = set()

    def walk(node: Mapping[str, Any], prefix: FieldPath) -> None:
        if not isinstance(node, Mapping):
            raise ValueError(f"fieldsV1 at {_show(prefix)}: expected an object")
        if not node and prefix:
            out.add(prefix)
            return
        for raw, child in node.items():
            if raw == ".":
                if prefix:
                    out.add(prefix)
                continue
            walk(child, (*prefix, PathElement.decode(raw)))

    walk(fields_v1, ())
    return frozenset(out)


def encode_fields(paths: Iterable[FieldPath]) -> dict[str, Any]:
    """The fieldsV1 trie of a set of paths (the inverse of ``decode_fields``): a path that is in
    the set and has members below it is marked with ``.``."""
    root: dict[str, Any] = {}
    members = {p for p in paths if p}
    for path in sorted(members):
        node = root
        for element in path:
            node = node.setdefault(element.encode(), {})
    for path in members:
        node = root
        for element in path:
            node = node[element.encode()]
        if node:
            node["."] = {}
    return root


def covers(owned: frozenset[FieldPath], path: FieldPath) -> bool:
    """Whether owning ``owned`` means owning ``path``: the path itself is in the set, or a
    prefix of it is a member with nothing of the set below it (an atomic value such as Node
    ``spec.taints``, whose owner owns every item). Limit: a map owned as ``{".": {}}`` with no
    key below also reads as owning the whole map (fieldsV1 alone cannot tell it from atomic)."""
    if path in owned:
        return True
    for n in range(len(path) - 1, 0, -1):
        head = path[:n]
        if head in owned:
            return not any(len(p) > n and p[:n] == head for p in owned)
    return False


_METADATA, _SPEC = PathElement.field("metadata"), PathElement.field("spec")


def finding_field_path(finding_field: str) -> FieldPath | None:
    """The object path a node finding's ``field`` is about: ``labels.<key>`` →
    ``metadata.labels[<key>]``, ``annotations.<key>``, ``taints.<key>:<effect>`` →
    ``spec.taints[{key, effect}]``, ``unschedulable``. None for facts no single write sets
    (allocatable, kubelet version, counts)."""
    head, _, rest = finding_field.partition(".")
    if head in ("labels", "annotations") and rest:
        return (_METADATA, PathElement.field(head), PathElement.field(rest))
    if head == "taints" and rest:
        key, _, effect = rest.rpartition(":")
        if not key:
            key, effect = rest, ""
        item = PathElement.key(effect=effect, key=key) if effect else PathElement.key(key=key)
        return (_SPEC, PathElement.field("taints"), item)
    if finding_field == "unschedulable":
        return (_SPEC, PathElement.field("unschedulable"))
    return None


def _show(path: FieldPath) -> str:
    return ".".join(e.encode() for e in path) or "(root)"


# --- managedFields -------------------------------------------------------------------------


class RawManagedFieldsEntry(TypedDict, total=False):
    """One ``metadata.managedFields`` item as the API server returns it."""

    manager: str
    operation: str
    apiVersion: str
    time: str
    fieldsType: str
    fieldsV1: dict[str, Any]
    subresource: str


@dataclass(frozen=True, slots=True)
class ManagedFieldsEntry:
    manager: str
    operation: str  # Apply | Update
    time: datetime | None
    fields: frozenset[FieldPath]
    subresource: str = ""
    api_version: str = ""


def parse_managed_fields(raw: Sequence[Mapping[str, Any]] | None) -> tuple[ManagedFieldsEntry, ...]:
    """Typed entries. An entry with no manager or a malformed ``fieldsV1`` raises
    ``ValueError`` naming its position; other field types than FieldsV1 are skipped."""
    out: list[ManagedFieldsEntry] = []
    for n, item in enumerate(raw or ()):
        if not isinstance(item, Mapping):
            raise ValueError(f"managedFields[{n}]: expected an object")
        if item.get("fieldsType", "FieldsV1") != "FieldsV1":
            continue
        manager = item.get("manager")
        if not isinstance(manager, str) or not manager:
            raise ValueError(f"managedFields[{n}].manager: missing")
        try:
            fields = decode_fields(item.get("fieldsV1") or {})
        except ValueError as exc:
            raise ValueError(f"managedFields[{n}].fieldsV1: {exc}") from None
        out.append(
            ManagedFieldsEntry(
                manager=manager,
                operation=str(item.get("operation") or ""),
                time=parse_time(item.get("time")),
                fields=fields,
                subresource=str(item.get("subresource") or ""),
                api_version=str(item.get("apiVersion") or ""),
            )
        )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ActorDecision:
    """The actor of one change and when it started, with every reason. ``actor`` None: no
    evidence names one (the shell then shows ``unknown``)."""

    actor: Actor | None
    started_at: datetime | None
    reasons: tuple[str, ...]
    manager: str | None = None  # the field manager, kept when stronger evidence names the actor
    evidence: tuple[str, ...] = ()  # ids of the audit/cloud events used

    @property
    def strength(self) -> int:
        return 0 if self.actor is None else _STRENGTH[self.actor.via]

    def to_json(self) -> dict[str, Any]:
        """The keys a live finding gains (the contract): ``actor`` and ``startedAt``, each only
        when known."""
        out: dict[str, Any] = {}
        if self.actor is not None:
            out["actor"] = self.actor.to_json()
        if self.started_at is not None:
            out["startedAt"] = self.started_at.isoformat().replace("+00:00", "Z")
        return out


def _newest(entries: Iterable[ManagedFieldsEntry]) -> ManagedFieldsEntry | None:
    best: ManagedFieldsEntry | None = None
    for e in entries:
        if best is None or (e.time is not None and (best.time is None or e.time > best.time)):
            best = e
    return best


def actor_from_managed_fields(
    after: Sequence[ManagedFieldsEntry],
    path: FieldPath,
    *,
    before: Sequence[ManagedFieldsEntry] | None = None,
) -> ActorDecision:
    """The writer of ``path`` from the object's managedFields after the change (and, when the
    watch has it, before). With both, the writer is an entry that is new, newer or gained
    fields — the one covering the path; else, for a removed field (nobody owns it now), the
    newest writer, and no actor when none wrote (a client that removes a field it never owned
    leaves no entry: only the audit log names it). With ``after`` only, or when no writer owns
    the path: the newest entry covering it."""
    reasons: list[str] = []
    shown = _show(path)
    owners = [e for e in after if covers(e.fields, path)]
    chosen: ManagedFieldsEntry | None = None
    if before is not None:
        old = {(e.manager, e.operation, e.subresource): e for e in before}
        # a writer is an entry that is new, has a newer time or gained fields; an entry that
        # only lost fields is a victim (another manager took them or removed them)
        writers = [
            e
            for e in after
            if (prev := old.get((e.manager, e.operation, e.subresource))) is None
            or prev.time != e.time
            or e.fields - prev.fields
        ]
        chosen = _newest(e for e in writers if e in owners)
        if chosen is not None:
            reasons.append(f"{chosen.manager} ({chosen.operation}) wrote and owns {shown}")
        elif not owners:
            chosen = _newest(writers)
            if chosen is None:
                return ActorDecision(
                    None,
                    None,
                    (
                        f"{shown} was removed by a writer that owns nothing now: managedFields "
                        "cannot name it (an audit event can)",
                    ),
                )
            reasons.append(
                f"nobody owns {shown} after the change (removed); "
                f"{chosen.manager} ({chosen.operation}) is the entry written then"
            )
    if chosen is None:
        chosen = _newest(owners)
        if chosen is not None:
            reasons.append(f"{chosen.manager} ({chosen.operation}) is the newest owner of {shown}")
    if chosen is None:
        return ActorDecision(None, None, (f"no managedFields entry owns {shown}",))
    if chosen.time is None:
        reasons.append("the entry has no time (an Apply entry may omit it): start unknown")
    kind = kind_of_manager(chosen.manager)
    reasons.append(f"field manager {chosen.manager!r} is {kind.value}")
    return ActorDecision(
        Actor(chosen.manager, kind, Via.MANAGED_FIELDS),
        chosen.time,
        tuple(reasons),
        manager=chosen.manager,
    )


# --- audit and cloud evidence --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One API-server audit event (``audit.k8s.io/v1`` Event), reduced to what names the actor
    and the object: ``user.username``, ``userAgent``, ``sourceIPs``, ``verb``,
    ``objectRef``, ``stageTimestamp`` (``at``) and ``requestReceivedTimestamp``
    (``received_at``), the stage, the response code and the annotations (``k8s.io/deprecated``,
    ``k8s.io/removed-release``...). ``formats.audit_log`` reads them."""

    id: str  # auditID
    cluster: str
    user: str
    verb: str
    resource: str  # objectRef.resource: "nodes", "deployments"...
    name: str
    at: datetime
    namespace: str | None = None
    user_agent: str = ""
    source_ips: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    received_at: datetime | None = None
    stage: str = "ResponseComplete"
    code: int | None = None  # responseStatus.code; None when the policy level omits it
    api_group: str = ""  # objectRef.apiGroup ("" is the core group)
    api_version: str = ""
    subresource: str = ""
    annotations: tuple[tuple[str, str], ...] = ()
    field_manager: str | None = None  # the request's ?fieldManager= (requestURI), if it named one

    def annotation(self, key: str) -> str | None:
        return next((v for k, v in self.annotations if k == key), None)


_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "apply"})


def kind_of_audit_user(event: AuditEvent) -> ActorKind:
    """``system:serviceaccount:<ns>:<name>`` by the account name (the manager table);
    ``system:node:*`` and other ``system:`` users are the platform; otherwise the user agent's
    program (``kubectl/v1.31.0 ...`` → human) and, failing that, a person's account: human."""
    user = event.user
    if user.startswith("system:serviceaccount:"):
        kind = kind_of_manager(user.rsplit(":", 1)[-1])
        if kind is not ActorKind.UNKNOWN:
            return kind
        return kind_of_manager(event.user_agent.split("/", 1)[0])
    if user.startswith("system:"):
        return ActorKind.PROVIDER
    agent = kind_of_manager(event.user_agent.split("/", 1)[0])
    return agent if agent is not ActorKind.UNKNOWN else ActorKind.HUMAN


# principals of the providers' own automation (service-linked roles, Google-managed agents)
_PROVIDER_PRINCIPALS = (
    "AWSServiceRoleForAmazonEKS",  # EKS, its node groups and auto mode
    "AWSServiceRoleForAutoScaling",
    "eks.amazonaws.com",
    "@container-engine-robot.iam.gserviceaccount.com",  # GKE's service agent
    "@cloudservices.gserviceaccount.com",
)
_AUTOSCALER_PRINCIPALS = ("autoscaling.amazonaws.com", "karpenter", "cluster-autoscaler")


def kind_of_principal(principal: str) -> ActorKind:
    """The kind of a cloud principal (CloudTrail ``userIdentity.arn``/``invokedBy``, Azure
    caller, GCP ``principalEmail``)."""
    lowered = principal.lower()
    if any(p.lower() in lowered for p in _AUTOSCALER_PRINCIPALS):
        return ActorKind.AUTOSCALER
    if any(p.lower() in lowered for p in _PROVIDER_PRINCIPALS):
        return ActorKind.PROVIDER
    if ":user/" in principal or ":assumed-role/" in principal or "@" in principal:
        return ActorKind.HUMAN
    return ActorKind.UNKNOWN


@dataclass(frozen=True, slots=True)
class ChangedObject:
    """What changed, for matching evidence: the object and the time of the change."""

    cluster: str
    resource: str  # "nodes"
    name: str
    at: datetime
    pool: str | None = None
    namespace: str | None = None


FIELD_MANAGER_MAX_LENGTH = 128  # k8s.io/apimachinery validation.FieldManagerMaxLength


def request_manager(e: AuditEvent) -> str | None:
    """The field manager the API server recorded for the request of ``e``: the
    ``?fieldManager=`` it named, else the part of its user agent before the first ``/``,
    printable characters only, at most 128 bytes (as the API server derives it; a client
    without a user agent gives ``None``: unknown)."""
    if e.field_manager:
        return e.field_manager
    if not e.user_agent:
        return None
    out: list[str] = []
    size = 0
    for ch in e.user_agent.split("/", 1)[0]:
        if not ch.isprintable():
            continue
        size += len(ch.encode())
        if size > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(ch)
    return "".join(out)


def _audit_gap(e: AuditEvent, at: datetime) -> timedelta:
    """How far ``at`` (a managedFields time: whole seconds, set while the request ran) lies
    from the request's span, ``requestReceivedTimestamp`` (floored to the second) to
    ``stageTimestamp``."""
    start = (e.received_at or e.at).replace(microsecond=0)
    if start <= at <= e.at:
        return timedelta(0)
    return min(abs(at - start), abs(at - e.at))


def match_audit(
    obj: ChangedObject,
    events: Iterable[AuditEvent],
    *,
    manager: str | None = None,
    window: timedelta = timedelta(seconds=10),
) -> AuditEvent | None:
    """The audit event that wrote ``obj`` at ``obj.at``: same cluster, resource, name and
    namespace, a write verb not to the ``status`` subresource, a finished stage and no error
    code, its request span within ``window`` of the time.

    Given the ``manager`` (from managedFields), a request is a candidate only if the API server
    would have recorded that manager for it (``request_manager``): the ``?fieldManager=`` it
    named, else its user agent's prefix — so another client's write in the same second (a
    create by a controller, say) is never taken for it, even while the right event is not yet
    in the log. Of several, the nearest in time wins, then the latest. managedFields times are
    whole seconds, so two writers within a second are told apart by the manager, not by the
    time."""
    best: tuple[bool, timedelta, datetime, AuditEvent] | None = None
    for e in events:
        if (
            e.cluster != obj.cluster
            or e.resource != obj.resource
            or e.name != obj.name
            or e.namespace != obj.namespace
            or e.verb not in _WRITE_VERBS
            or e.subresource == "status"  # labels, taints, spec: never written through status
            or e.stage not in ("ResponseComplete", "Panic", "")
            or (e.code is not None and e.code >= 400)
        ):
            continue
        recorded = request_manager(e)
        if manager and recorded is not None and recorded != manager:
            continue  # the API server recorded another manager for this request
        gap = _audit_gap(e, obj.at)
        if gap > window:
            continue
        key = (manager is not None and recorded is None, gap, e.at, e)
        if best is None or key[:2] < best[:2] or (key[:2] == best[:2] and e.at > best[2]):
            best = key
    return None if best is None else best[3]


def _cloud_match(
    obj: ChangedObject, events: Iterable[ChangeEvent], window: timedelta
) -> ChangeEvent | None:
    best: tuple[timedelta, ChangeEvent] | None = None
    for e in events:
        when = e.time or e.received_at
        if (
            not e.actor
            or e.cluster != obj.cluster
            or (e.pool is not None and obj.pool is not None and e.pool != obj.pool)
            or when is None
        ):
            continue
        gap = abs(when - obj.at)
        if gap <= window and (best is None or gap < best[0]):
            best = (gap, e)
    return None if best is None else best[1]


def resolve(
    obj: ChangedObject,
    managed: ActorDecision,
    *,
    audit: Iterable[AuditEvent] = (),
    cloud: Iterable[ChangeEvent] = (),
    window: timedelta = timedelta(minutes=15),
    audit_window: timedelta = timedelta(seconds=10),
) -> ActorDecision:
    """The actor of the change from all evidence (see the module docstring for which wins).
    Audit events match within ``audit_window`` (``match_audit``); cloud events, which arrive
    with the provider's delay and time, within ``window``."""
    reasons = list(managed.reasons)
    started = managed.started_at or obj.at
    hit = match_audit(obj, audit, manager=managed.manager, window=audit_window)
    if hit is not None:
        kind = kind_of_audit_user(hit)
        reasons.append(
            f"audit event {hit.id}: {hit.user} {hit.verb} {hit.resource}/{hit.name} "
            f"via {hit.user_agent or 'no user agent'} from {', '.join(hit.source_ips) or '?'}"
            f" ({kind.value}): the API server's word beats the client-chosen manager"
        )
        return ActorDecision(
            Actor(
                hit.user,
                kind,
                Via.AUDIT,
                manager=managed.manager or "",
                user_agent=hit.user_agent,
                source_ips=hit.source_ips,
            ),
            managed.started_at or hit.at,
            tuple(reasons),
            manager=managed.manager,
            evidence=(hit.id,),
        )
    current = managed.actor
    event = _cloud_match(obj, cloud, window)
    if event is not None and event.actor is not None:
        if current is not None and current.kind in (ActorKind.HUMAN, ActorKind.GITOPS):
            reasons.append(
                f"cloud event {event.id} by {event.actor} is in the window, but "
                f"{current.name} is a {current.kind.value} tool no provider call runs: kept"
            )
            return ActorDecision(current, started, tuple(reasons), managed.manager)
        kind = kind_of_principal(event.actor)
        reasons.append(
            f"cloud event {event.id} ({event.type}) by {event.actor} ({kind.value}) explains "
            f"the change in {obj.cluster}/{obj.pool or '-'}"
            + (f"; {current.name} is the provider's agent" if current else "")
        )
        return ActorDecision(
            Actor(event.actor, kind, Via.CLOUD_EVENT),
            managed.started_at or event.time or obj.at,
            tuple(reasons),
            manager=managed.manager,
            evidence=(event.id,),
        )
    return ActorDecision(current, started, tuple(reasons), managed.manager, managed.evidence)


def refine(
    current: ActorDecision,
    obj: ChangedObject,
    *,
    audit: Iterable[AuditEvent] = (),
    cloud: Iterable[ChangeEvent] = (),
    window: timedelta = timedelta(minutes=15),
) -> ActorDecision | None:
    """A late event for a finding already open: the new decision when the event names a
    different actor by stronger evidence, else None (nothing to update, nothing to audit)."""
    base = current
    if current.actor is not None and current.actor.via is not Via.MANAGED_FIELDS:
        # re-decide from the managed-fields evidence the current decision was built on
        kind = kind_of_manager(current.manager) if current.manager else None
        base = ActorDecision(
            Actor(current.manager, kind, Via.MANAGED_FIELDS) if current.manager and kind else None,
            current.started_at,
            (),
            current.manager,
        )
    new = resolve(obj, base, audit=audit, cloud=cloud, window=window)
    if new.actor == current.actor or new.strength <= current.strength:
        return None
    return new
