"""The typed models the workload diff compares (``Workload``, ``ConfigObject``,
``Autoscaler``) and their builders from raw or normalised objects (step 4). Builders read
only what they compare, with ``normalise``'s own helpers. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from fleetwarden.core.pools import Requirement, Taint
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.core.workloads.normalising import (
    _CANONICAL_JSON,
    _norm_env,
    _norm_env_from,
    _prune,
    canonical_quantity,
)
from fleetwarden.core.workloads.objects import (
    _EMPTY,
    AUTOSCALER_KIND,
    CONFIG_KINDS,
    WORKLOAD_KINDS,
    ObjectKey,
    _is_map,
    _list,
    _mapping,
    key_of,
)
from fleetwarden.core.workloads.redaction import (
    _DIGEST_PREFIX,
    _redact_secret,
    _secret_value_digest,
)

__all__ = [
    "MESH_KEYS",
    "Autoscaler",
    "ConfigObject",
    "Container",
    "EnvVar",
    "Toleration",
    "Workload",
    "autoscaler_from",
    "config_from",
    "model_from",
    "workload_from",
]

# Pod-template annotations and labels that switch service-mesh sidecar injection.
MESH_KEYS: tuple[str, ...] = (
    "sidecar.istio.io/inject",
    "istio.io/rev",
    "istio.io/dataplane-mode",
    "linkerd.io/inject",
    "kuma.io/sidecar-injection",
    "consul.hashicorp.com/connect-inject",
    "appmesh.k8s.aws/sidecarInjectorWebhook",
    "openservicemesh.io/sidecar-injection",
)


class EnvVar(NamedTuple):
    name: str
    value: str | None
    value_from: str | None  # canonical JSON of valueFrom

    def display(self) -> str:
        if self.value_from is not None:
            return f"valueFrom {self.value_from}"
        return self.value or ""


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str
    env: tuple[EnvVar, ...] = ()
    env_from: tuple[str, ...] = ()
    requests: tuple[tuple[str, str], ...] = ()
    limits: tuple[tuple[str, str], ...] = ()
    sidecar: bool = False  # an init container with restartPolicy: Always (native sidecar)

    def request_values(self) -> dict[str, float]:
        out = {}
        limits = dict(self.limits)
        # the API server defaults a Pod's requests to its limits; templates keep them unset
        for res, raw in {**limits, **dict(self.requests)}.items():
            try:
                out[res] = parse_quantity(raw)
            except ValueError:
                continue
        return out


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None
    operator: str  # Equal | Exists
    value: str | None
    effect: str | None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return (self.value or "") == (taint.value or "")

    def display(self) -> str:
        value = f"={self.value}" if self.value else ""
        op = "" if self.operator == "Equal" else f" {self.operator}"
        return f"{self.key or '*'}{value}{op}:{self.effect or '*'}"


@dataclass(frozen=True, slots=True)
class Workload:
    """A Deployment, StatefulSet or DaemonSet as far as the diff and scheduling care."""

    kind: str
    namespace: str | None
    name: str
    replicas: int | None = None
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    mesh: tuple[tuple[str, str], ...] = ()
    volumes: tuple[tuple[str, str], ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    node_affinity: tuple[tuple[Requirement, ...], ...] = ()  # required terms, ORed
    tolerations: tuple[Toleration, ...] = ()
    app: str | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.kind, self.namespace, self.name)

    def all_containers(self) -> Iterator[Container]:
        yield from self.init_containers
        yield from self.containers

    def pod_requests(self) -> dict[str, float]:
        """What the scheduler reserves for one pod: the containers plus native sidecars, or
        the largest init container (with the sidecars started before it), whichever is more.
        """
        total: dict[str, float] = {}
        for c in self.containers:
            for res, v in c.request_values().items():
                total[res] = total.get(res, 0.0) + v
        running: dict[str, float] = {}
        peak: dict[str, float] = {}
        for c in self.init_containers:
            values = c.request_values()
            if c.sidecar:
                for res, v in values.items():
                    running[res] = running.get(res, 0.0) + v
                continue
            for res, v in values.items():
                peak[res] = max(peak.get(res, 0.0), v + running.get(res, 0.0))
        for res, v in running.items():
            total[res] = total.get(res, 0.0) + v
        for res, v in peak.items():
            total[res] = max(total.get(res, 0.0), v)
        return total


@dataclass(frozen=True, slots=True)
class ConfigObject:
    """A ConfigMap or Secret, reduced to a SHA-256 digest per key: content never kept."""

    kind: str
    namespace: str | None
    name: str
    digests: tuple[tuple[str, str], ...] = ()
    app: str | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)

    @property
    def digest(self) -> str:
        joined = json.dumps(self.digests, separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(joined).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Autoscaler:
    namespace: str | None
    name: str
    target_kind: str
    target_name: str
    min_replicas: int = 1
    max_replicas: int | None = None
    app: str | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)


Model = Workload | ConfigObject | Autoscaler


def _str_pairs(value: Any) -> tuple[tuple[str, str], ...]:
    if not value:
        return ()
    return tuple(sorted([(str(k), str(v)) for k, v in _mapping(value).items()]))


def _env_var(raw: Any) -> EnvVar | None:
    """The model of one ``env`` entry, normalised by ``_norm_env`` (None: not a named entry)."""
    e = _norm_env(raw)
    if not _is_map(e) or not isinstance(e.get("name"), str):
        return None
    vf = e.get("valueFrom")
    value = e.get("value")
    return EnvVar(
        e["name"],
        None if value is None else str(value),
        None if vf is None else _CANONICAL_JSON.encode(_prune(vf)),
    )


def _frozen(value: Any) -> Any:
    """A string, or a map of string keys down to strings, as a hashable key that ``_thawed``
    turns back into an equal value (key order included); None for anything else."""
    if type(value) is str:
        return value
    if type(value) is not dict:
        return None
    items = []
    for k, v in value.items():
        if type(k) is not str:
            return None
        if type(v) is not str:
            v = _frozen(v)
            if v is None:
                return None
        items.append((k, v))
    return tuple(items)


def _thawed(key: Any) -> Any:
    if type(key) is str:
        return key
    return {k: _thawed(v) for k, v in key}


# The entries of a fleet repeat from workload to workload and from cluster to cluster:
# one model each, built once (bounded: a cache miss only costs the normalisation).
@lru_cache(maxsize=8192)
def _cached_env_var(key: Any) -> EnvVar | None:
    return _env_var(_thawed(key))


@lru_cache(maxsize=8192)
def _literal_env_var(name: str, value: str | None) -> EnvVar:
    return EnvVar(name, value, None)


def _container_from(c: Mapping[str, Any], *, init: bool) -> Container:
    # the same normalisers as ``normalise``, applied to the fields a model reads only
    get = c.get
    env: dict[str, EnvVar] = {}
    for raw in _list(get("env")):
        if type(raw) is dict:
            if "valueFrom" not in raw and len(raw) <= 2:
                # the common case, {name, value}: what _norm_env would leave as it is
                name, value = raw.get("name"), raw.get("value")
                if isinstance(name, str):
                    env[name] = _literal_env_var(name, None if value in (None, "") else str(value))
                continue
            key = _frozen(raw)
            var = _env_var(raw) if key is None else _cached_env_var(key)
        else:
            var = _env_var(raw)
        if var is not None:
            env[var.name] = var
    env_from = []
    for raw in _list(get("envFrom")):
        e = _norm_env_from(raw)
        if not _is_map(e):
            continue
        for ref in ("configMapRef", "secretRef"):
            target = e.get(ref)
            if _is_map(target):
                item = f"{ref}:{target.get('name', '')}"
                if e.get("prefix"):
                    item += f" prefix={e['prefix']}"
                env_from.append(item)
    resources = get("resources")
    if resources and _is_map(resources):
        requests = _quantity_pairs(resources.get("requests"))
        limits = _quantity_pairs(resources.get("limits"))
    else:
        requests = limits = ()
    image = get("image")
    return _container(
        str(get("name", "")),
        image if isinstance(image, str) else "",
        tuple(sorted(env.values())) if env else (),  # by name: the names differ
        tuple(sorted(env_from)) if env_from else (),
        requests,
        limits,
        init and get("restartPolicy") == "Always",
    )


# A fleet runs the same containers in every cluster: one model each, shared (and built once).
_container = lru_cache(maxsize=8192)(Container)


def _quantity_pairs(values: Any) -> tuple[tuple[str, str], ...]:
    if not values or not _is_map(values):
        return ()
    items = tuple(values.items())
    for k, v in items:
        if type(k) is not str or type(v) is not str:  # not the cache's: 1 == 1.0 == True
            return _canonical_pairs(items)
    return _cached_canonical_pairs(items)


def _canonical_pairs(items: Iterable[tuple[Any, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted([(str(k), str(canonical_quantity(v, str(k)))) for k, v in items]))


_cached_canonical_pairs = lru_cache(maxsize=8192)(_canonical_pairs)


def _affinity_terms(spec: Mapping[str, Any]) -> tuple[tuple[Requirement, ...], ...]:
    if "affinity" not in spec:
        return ()
    required = _mapping(
        _mapping(_mapping(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    terms = []
    for term in _list(required.get("nodeSelectorTerms")):
        reqs = []
        for part, prefix in (("matchExpressions", ""), ("matchFields", "field:")):
            for expr in _list(_mapping(term).get(part)):
                if _is_map(expr) and isinstance(expr.get("key"), str):
                    values = tuple(str(v) for v in _list(expr.get("values")))
                    reqs.append(
                        Requirement(prefix + expr["key"], str(expr.get("operator", "")), values)
                    )
        terms.append(tuple(reqs))
    return tuple(terms)


def _volume_ref(v: Mapping[str, Any]) -> str | None:
    if _is_map(v.get("configMap")):
        return f"configMap:{v['configMap'].get('name', '')}"
    if _is_map(v.get("secret")):
        return f"secret:{v['secret'].get('secretName', '')}"
    if _is_map(v.get("projected")):
        refs = []
        for src in _list(v["projected"].get("sources")):
            for kind in ("configMap", "secret"):
                if isinstance(_mapping(src).get(kind), Mapping):
                    refs.append(f"{kind}:{src[kind].get('name', '')}")
        return "projected:" + ",".join(sorted(refs)) if refs else None
    return None


def workload_from(
    obj: Mapping[str, Any], *, app: str | None = None, source: str | None = None
) -> Workload:
    """The model of a Deployment, StatefulSet or DaemonSet, raw or normalised (the same
    model either way: ``workload_from(normalise(x)) == workload_from(x)``)."""
    key = key_of(obj)
    if key is None or key.kind not in WORKLOAD_KINDS:
        raise ValueError(f"not a workload: {obj.get('kind')!r}")
    return _workload(obj, key, app, source)


_MESH_KEYS = frozenset(MESH_KEYS)


def _submap(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = parent.get(key)
    return value if type(value) is dict or isinstance(value, Mapping) else _EMPTY


def _by_container_name(container: Container) -> str:
    return container.name


def _workload(
    obj: Mapping[str, Any], key: ObjectKey, app: str | None, source: str | None
) -> Workload:
    spec = _submap(obj, "spec")
    template = _submap(spec, "template")
    tmeta = _submap(template, "metadata")
    pod = _submap(template, "spec")
    mesh_keys = _MESH_KEYS
    mesh: dict[str, str] = {}
    for switches in (_submap(tmeta, "labels"), _submap(tmeta, "annotations")):
        if switches and not mesh_keys.isdisjoint(switches):  # annotations win
            mesh.update({k: str(v) for k, v in switches.items() if k in mesh_keys})
    replicas = spec.get("replicas")
    volumes = []
    for v in _list(pod.get("volumes")):
        if _is_map(v):
            ref = _volume_ref(v)
            if ref is not None:
                volumes.append((str(v.get("name", "")), ref))
    tolerations = []
    for t in _list(pod.get("tolerations")):
        if _is_map(t):
            tolerations.append(
                Toleration(
                    key=t.get("key") or None,
                    operator=str(t.get("operator") or "Equal"),
                    value=None if t.get("value") in (None, "") else str(t.get("value")),
                    effect=t.get("effect") or None,
                )
            )
    # sorted by name like ``_by_name`` sorts the raw list (a stable sort, on the same key)
    containers = []
    for c in _list(pod.get("containers")):
        if _is_map(c):
            containers.append(_container_from(c, init=False))
    if len(containers) > 1:
        containers.sort(key=_by_container_name)
    init_containers = _list(pod.get("initContainers"))
    return Workload(
        key.kind,
        key.namespace,
        key.name,
        replicas if isinstance(replicas, int) and key.kind != "DaemonSet" else None,
        tuple(containers),
        tuple([_container_from(c, init=True) for c in init_containers if _is_map(c)])
        if init_containers
        else (),
        tuple(sorted(mesh.items())) if mesh else (),
        tuple(sorted(volumes)) if volumes else (),
        _str_pairs(pod.get("nodeSelector")),
        _affinity_terms(pod),
        tuple(tolerations),
        app,
        source,
    )


def config_from(
    obj: Mapping[str, Any], *, app: str | None = None, source: str | None = None
) -> ConfigObject:
    """The digest model of a ConfigMap or Secret, raw or normalised."""
    key = key_of(obj)
    if key is None or key.kind not in CONFIG_KINDS:
        raise ValueError(f"not a ConfigMap or Secret: {obj.get('kind')!r}")
    return _config(obj, key, app, source)


def _config(
    obj: Mapping[str, Any], key: ObjectKey, app: str | None, source: str | None
) -> ConfigObject:
    sha256 = hashlib.sha256
    digests: dict[str, str] = {}
    if key.kind == "Secret":
        obj = _redact_secret(obj)  # merges stringData; values already digested stay so
        skip = len(_DIGEST_PREFIX)
        for k, v in _submap(obj, "data").items():
            digests[str(k)] = _secret_value_digest(v)[skip:]
    else:
        for k, v in _submap(obj, "data").items():
            digests[str(k)] = sha256(str(v).encode()).hexdigest()
        binary = obj.get("binaryData")
        if binary and _is_map(binary):
            for k, v in binary.items():
                digests[str(k)] = sha256(("binary:" + str(v)).encode()).hexdigest()
    return ConfigObject(
        key.kind, key.namespace, key.name, tuple(sorted(digests.items())), app, source
    )


def autoscaler_from(
    obj: Mapping[str, Any], *, app: str | None = None, source: str | None = None
) -> Autoscaler:
    """The model of a HorizontalPodAutoscaler, raw or normalised."""
    key = key_of(obj)
    if key is None or key.kind != AUTOSCALER_KIND:
        raise ValueError(f"not an HPA: {obj.get('kind')!r}")
    return _autoscaler(obj, key, app, source)


def _autoscaler(
    obj: Mapping[str, Any], key: ObjectKey, app: str | None, source: str | None
) -> Autoscaler:
    spec = _submap(obj, "spec")
    ref = _submap(spec, "scaleTargetRef")
    lo, hi = spec.get("minReplicas", 1), spec.get("maxReplicas")
    return Autoscaler(
        key.namespace,
        key.name,
        str(ref.get("kind", "")),
        str(ref.get("name", "")),
        lo if isinstance(lo, int) else 1,
        hi if isinstance(hi, int) else None,
        app,
        source,
    )


def model_from(
    obj: Mapping[str, Any], *, app: str | None = None, source: str | None = None
) -> Model:
    """The model of a (redacted) object. Models read only what they compare and normalise
    that with ``normalise``'s own helpers, so the model of an object and of its normal form
    are the same (a property test pins it); skipping the rest is 3x faster."""
    kind = obj.get("kind")
    if kind in WORKLOAD_KINDS:
        return workload_from(obj, app=app, source=source)
    if kind in CONFIG_KINDS:
        return config_from(obj, app=app, source=source)
    return autoscaler_from(obj, app=app, source=source)
