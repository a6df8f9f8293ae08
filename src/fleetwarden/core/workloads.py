"""Workloads across clusters: models, normalisation and the seed-002 drift diff.

What is compared: Deployments, StatefulSets, DaemonSets, the ConfigMaps and Secrets of an
application, and its HorizontalPodAutoscalers, desired (Git: plain YAML, Kustomize or Helm
output, Argo CD's rendered manifests) against observed (``kubectl get -o json`` or a watch).

The pipeline, per object (gitops-engine's order: normalise first, then compare):

1. ``redact`` at the edge, right after parsing: ``status``, volatile metadata and the
   ``kubectl.kubernetes.io/last-applied-configuration`` annotation (it holds a Secret's data
   in clear) are dropped, and every Secret value becomes a SHA-256 digest. Nothing downstream
   ever holds Secret content, so nothing can log, store or print it.
2. ignore rules (``core.ignoring``, Argo CD's ``ignoreDifferences``) remove fields from both
   sides, in the objects' original list order.
3. normalisation: values equal to an API-server default are dropped from both sides, lists
   keyed by name are sorted, quantities take one canonical spelling (``2000m`` is ``2``,
   ``1024Mi`` is ``1Gi``), empty maps and lists are dropped, noise metadata goes
   (``managedFields``, ``resourceVersion``, ``uid``, the revision annotation...).
   ``normalise`` gives an object's whole normal form (idempotent); the models of step 4
   normalise only the fields they read, with the same helpers, so that
   ``workload_from(normalise(x)) == workload_from(x)`` (pinned by a property test) at a third
   of the cost.
4. ``model_from`` (``workload_from`` / ``config_from`` / ``autoscaler_from``): typed models.
5. ``diff_workload`` / ``diff_config`` / ``diff_autoscaler`` / ``diff_app`` return findings.

Drift kinds (``driftKind`` in a finding's JSON) and their fields:

- image: ``image.<container>`` (repository, tag or digest; a digest is compared only when
  Git states one, since admission controllers commonly pin tags to digests)
- configuration: ``config.<configmap>`` / ``secret.<secret>`` (content digests; a Secret's
  finding shows key names only), ``env.<container>.<NAME>``, ``envFrom.<container>``,
  ``volume.<volume>`` (which ConfigMap/Secret a volume mounts)
- resources: ``resources.<container>.requests.<res>`` / ``.limits.<res>``, ``replicas``
  (not compared when an HPA owns the replicas, or when Git does not state them),
  ``hpa.<name>.minReplicas`` / ``.maxReplicas``
- dependency: ``sidecar.<container>`` (a container or native sidecar added or removed),
  ``initContainer.<container>``, ``mesh.<annotation>`` (service-mesh injection switches)
- scheduling: ``nodeSelector.<key>``, ``tolerations``
- presence: ``workload`` / ``config.<name>`` / ``secret.<name>`` / ``hpa.<name>`` with a
  null ``actual`` (missing in the cluster) or null ``expected`` (in the cluster, labelled
  for the app, not in Git)

In these findings ``layer`` is ``WORKLOAD`` and ``pool`` names the object the finding is about
(``Deployment/boutique/frontend``): it keeps the finding's id unique when two workloads share
a container name. Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, TypeGuard

from fleetwarden.core.findings import Finding, JsonValue, Layer, Severity
from fleetwarden.core.ignoring import IgnoreDifference, apply_ignore_differences
from fleetwarden.core.pools import Requirement, Taint
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.core.rules import IgnoreRule, SeverityRule, apply_rules

__all__ = [
    "AUTOSCALER_KIND",
    "CONFIG_KINDS",
    "GROUPS",
    "INSTANCE_LABEL",
    "KINDS",
    "MESH_KEYS",
    "TRACKING_ANNOTATION",
    "WORKLOAD_KINDS",
    "AppDiff",
    "Autoscaler",
    "ConfigObject",
    "Container",
    "EnvVar",
    "ImageRef",
    "ManifestObject",
    "ObjectIndex",
    "ObjectKey",
    "Pair",
    "Toleration",
    "VersionRow",
    "Workload",
    "WorkloadOptions",
    "app_of",
    "autoscaler_from",
    "canonical_quantity",
    "config_from",
    "default_pull_policy",
    "diff_app",
    "diff_autoscaler",
    "diff_config",
    "diff_fleet_workloads",
    "diff_workload",
    "fleet_versions",
    "image_drift",
    "key_of",
    "model_from",
    "normalise",
    "pair_objects",
    "redact",
    "workload_from",
]

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})
CONFIG_KINDS = frozenset({"ConfigMap", "Secret"})
AUTOSCALER_KIND = "HorizontalPodAutoscaler"
KINDS = WORKLOAD_KINDS | CONFIG_KINDS | {AUTOSCALER_KIND}
GROUPS = {
    "Deployment": "apps",
    "StatefulSet": "apps",
    "DaemonSet": "apps",
    "ConfigMap": "",
    "Secret": "",
    AUTOSCALER_KIND: "autoscaling",
}

TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
INSTANCE_LABEL = "app.kubernetes.io/instance"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

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

_VOLATILE_META = frozenset(
    {
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)
# Annotations the API server, controllers or Argo CD write on the live object only.
_NOISE_ANNOTATIONS = frozenset(
    {
        LAST_APPLIED,
        TRACKING_ANNOTATION,
        "deployment.kubernetes.io/revision",
        "deprecated.daemonset.template.generation",
    }
)
_NOISE_TEMPLATE_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/restartedAt"})
_DIGEST_PREFIX = "sha256:"  # ':' is not in the base64 alphabet: a redacted value is unmistakable
_SECRETISH = re.compile(
    r"(?i)(passw(or)?d|passwd|secret|token|api[_-]?key|private[_-]?key|credential|auth)"
)
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1}


# =========================================================================== identity


_new_tuple = tuple.__new__


class ObjectKey(NamedTuple):
    """An object's identity. ``namespace`` None: not stated (desired manifests often omit it)."""

    kind: str
    namespace: str | None
    name: str

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.namespace or '-'}/{self.name}"


def key_of(obj: Mapping[str, Any]) -> ObjectKey | None:
    """The key of an object of a supported kind, else None."""
    kind = obj.get("kind")
    return _key_in(kind, obj.get("metadata")) if kind in KINDS else None


def _key_in(kind: str, meta: Any) -> ObjectKey | None:
    if type(meta) is not dict and not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    ns = meta.get("namespace")
    # ObjectKey(...) without the Python-level __new__ of a NamedTuple: one per object
    return _new_tuple(ObjectKey, (str(kind), ns if isinstance(ns, str) and ns else None, name))


def app_of(obj: Mapping[str, Any], *, app_label: str | None = None) -> str | None:
    """The Argo CD application an object belongs to, from (in order) the configured label,
    the ``argocd.argoproj.io/tracking-id`` annotation (``<app>:<group>/<kind>:<ns>/<name>``,
    ``<app>`` possibly ``<app-namespace>_<app>``) and the ``app.kubernetes.io/instance`` label.
    """
    meta = obj.get("metadata")
    return _app_in(meta, app_label) if _is_map(meta) else None


def _app_in(meta: Mapping[str, Any], app_label: str | None) -> str | None:
    labels = meta.get("labels")
    labels = labels if _is_map(labels) else _EMPTY
    if app_label:
        value = labels.get(app_label)
        if isinstance(value, str) and value:
            return value
    annotations = meta.get("annotations")
    if _is_map(annotations):
        tracking = annotations.get(TRACKING_ANNOTATION)
        if isinstance(tracking, str) and ":" in tracking:
            app = tracking.partition(":")[0]
            # apps outside the control-plane namespace are tracked as <namespace>_<name>;
            # '_' never occurs in a Kubernetes name, so the split is unambiguous
            return app.rpartition("_")[2] or None
    value = labels.get(INSTANCE_LABEL)
    return value if isinstance(value, str) and value else None


# =========================================================================== redaction


def _digest(data: bytes) -> str:
    return _DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def _secret_value_digest(value: Any) -> str:
    if isinstance(value, str):
        if value.startswith(_DIGEST_PREFIX):
            return value
        try:
            return _digest(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            return _digest(value.encode())  # not base64: the API server would refuse it
    return _digest(str(value).encode())


def _redact_secret(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "stringData"}
    data: dict[str, str] = {}
    raw = obj.get("data")
    if isinstance(raw, Mapping):
        data.update({str(k): _secret_value_digest(v) for k, v in raw.items()})
    string_data = obj.get("stringData")
    if isinstance(string_data, Mapping):  # merged into data by the API server; it wins
        data.update(
            {
                str(k): v
                if isinstance(v, str) and v.startswith(_DIGEST_PREFIX)
                # a digest string is itself a valid stringData value only in theory
                else _digest(str(v).encode())
                for k, v in string_data.items()
            }
        )
    if data or "data" in obj:
        out["data"] = data
    return out


_MANAGED_KEEP = ("manager", "operation", "subresource", "fieldsV1")


def redact(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without status, volatile metadata and secret content (see module doc).

    ``managedFields`` stay, reduced to manager and FieldsV1, for ``managedFieldsManagers``.
    Shallow: only the maps it changes are copied (the top level, ``metadata``, the
    annotations when they hold the last-applied configuration, managedFields entries);
    ``spec`` and the rest are shared with ``obj``, whose ``status`` is left out uncopied.
    """
    out = dict(obj)
    out.pop("status", None)
    meta = out.get("metadata")
    if type(meta) is dict or isinstance(meta, Mapping):
        m = dict(meta)
        for k in _VOLATILE_META:
            m.pop(k, None)
        annotations = m.get("annotations")
        if _is_map(annotations) and LAST_APPLIED in annotations:
            annotations = m["annotations"] = dict(annotations)
            del annotations[LAST_APPLIED]
        managed = m.get("managedFields")
        if isinstance(managed, list):
            reduced = []
            for e in managed:  # loops: comprehensions here cost twice as much
                if type(e) is dict or isinstance(e, Mapping):
                    entry = {}
                    for k in _MANAGED_KEEP:
                        if k in e:
                            entry[k] = e[k]
                    reduced.append(entry)
            m["managedFields"] = reduced
        out["metadata"] = m
    if out.get("kind") == "Secret":
        out = _redact_secret(out)
    return out


# =========================================================================== normalisation


def canonical_quantity(value: Any, resource: str) -> Any:
    """One spelling per quantity: CPU in cores or millicores, the rest in the largest binary
    (then decimal) unit that divides it exactly. Not a quantity: returned unchanged."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    return _canonical(value, resource)


@lru_cache(maxsize=8192)  # a fleet repeats the same few quantities on every workload
def _canonical(value: str | int | float, resource: str) -> Any:
    try:
        number = parse_quantity(value)
    except ValueError:
        return value
    if resource == "cpu" or not float(number).is_integer():
        milli = round(number * 1000)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    whole = int(number)
    if whole == 0:
        return "0"
    for unit, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    for unit, size in (("Mi", 2**20), ("Ki", 2**10)):
        if whole % size == 0 and resource != "pods":
            return f"{whole // size}{unit}"
    for unit, exp in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
        if whole % 10**exp == 0 and resource != "pods":
            return f"{whole // 10**exp}{unit}"
    return str(whole)


def _prune(value: Any) -> Any:
    """Drop None, empty maps and empty lists from maps, bottom-up (``emptyDir: {}`` stays:
    it is the volume's type, not an absent value)."""
    # plain dict/list checks first: objects come from JSON/YAML, and ABC checks are slow
    kind = type(value)
    if kind is list:
        return [_prune(v) if type(v) in _CONTAINERS else v for v in value]
    if kind is not dict and not isinstance(value, Mapping):
        return value
    out = {}
    for k, v in value.items():
        if v is None:
            continue
        kind = type(v)
        if kind in _CONTAINERS or (kind not in _SCALARS and isinstance(v, Mapping)):
            v = _prune(v)
            if not v and k != "emptyDir":
                continue
        out[k] = v
    return out


_CONTAINERS = (dict, list)
_SCALARS = (str, int, float, bool)


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def _drop(obj: dict[str, Any], key: str, default: Any) -> None:
    if key in obj and obj[key] == default and type(obj[key]) is type(default):
        del obj[key]


_EMPTY: Mapping[str, Any] = {}  # the missing map, shared: read only


def _mapping(value: Any) -> Mapping[str, Any]:
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return {}


def _list(value: Any) -> list[Any]:
    return value if type(value) is list else []


def _norm_meta(meta: Any, *, template: bool = False) -> dict[str, Any]:
    m = _mapping(meta)
    out: dict[str, Any] = {}
    for k in ("name", "namespace"):
        if isinstance(m.get(k), str) and m[k]:
            out[k] = m[k]
    labels = _mapping(m.get("labels"))
    if labels:
        out["labels"] = {
            str(k): v for k, v in sorted(labels.items()) if template or k != INSTANCE_LABEL
        }
    noise = _NOISE_TEMPLATE_ANNOTATIONS if template else _NOISE_ANNOTATIONS
    annotations = _mapping(m.get("annotations"))
    if annotations:
        out["annotations"] = {str(k): v for k, v in sorted(annotations.items()) if k not in noise}
    return out


# one encoder each: json.dumps() with options builds a new encoder on every call
_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def _sort_key(item: Any) -> str:
    return _CANONICAL_JSON.encode(item)


def _by_name(items: Any) -> list[Any]:
    lst = _list(items)
    return sorted(lst, key=lambda x: str(x.get("name", "")) if _is_map(x) else "")


def default_pull_policy(image: str) -> str:
    """The API server's default: ``Always`` for ``:latest`` or an untagged image."""
    ref = ImageRef.parse(image)
    return "Always" if ref.digest is None and ref.tag in (None, "latest") else "IfNotPresent"


def _norm_resources(res: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in ("requests", "limits"):
        values = _mapping(_mapping(res).get(part))
        if values:
            out[part] = {str(k): canonical_quantity(v, str(k)) for k, v in sorted(values.items())}
    for k, v in _mapping(res).items():
        if k not in ("requests", "limits"):
            out[k] = v
    return out


def _norm_env(entry: Any) -> Any:
    if not _is_map(entry):
        return entry
    e = dict(entry)
    if e.get("value") == "":
        del e["value"]
    vf = e.get("valueFrom")
    if _is_map(vf):
        vf = dict(vf)
        for ref in ("configMapKeyRef", "secretKeyRef"):
            if _is_map(vf.get(ref)):
                r = dict(vf[ref])
                _drop(r, "optional", False)
                vf[ref] = r
        if _is_map(vf.get("fieldRef")):
            fr = dict(vf["fieldRef"])
            _drop(fr, "apiVersion", "v1")
            vf["fieldRef"] = fr
        if _is_map(vf.get("resourceFieldRef")):
            rr = dict(vf["resourceFieldRef"])
            if "divisor" in rr and canonical_quantity(rr["divisor"], "x") in ("0", "1"):
                del rr["divisor"]
            vf["resourceFieldRef"] = rr
        e["valueFrom"] = vf
    return e


def _norm_probe(probe: Any) -> Any:
    if not _is_map(probe):
        return probe
    p = dict(probe)
    for k, v in _PROBE_DEFAULTS.items():
        _drop(p, k, v)
    _drop(p, "failureThreshold", 3)
    if _is_map(p.get("httpGet")):
        hg = dict(p["httpGet"])
        _drop(hg, "scheme", "HTTP")
        p["httpGet"] = hg
    return p


def _norm_container(c: Any) -> Any:
    if not _is_map(c):
        return c
    out = dict(c)
    image = out.get("image")
    if isinstance(image, str) and out.get("imagePullPolicy") == default_pull_policy(image):
        del out["imagePullPolicy"]
    _drop(out, "terminationMessagePath", "/dev/termination-log")
    _drop(out, "terminationMessagePolicy", "File")
    if "resources" in out:
        out["resources"] = _norm_resources(out["resources"])
    if "env" in out:
        env = [_norm_env(e) for e in _list(out["env"])]
        out["env"] = sorted(env, key=lambda e: str(e.get("name", "")) if _is_map(e) else "")
    if "envFrom" in out:
        out["envFrom"] = sorted((_norm_env_from(e) for e in _list(out["envFrom"])), key=_sort_key)
    if "ports" in out:
        ports = []
        for p in _list(out["ports"]):
            if _is_map(p):
                p = dict(p)
                _drop(p, "protocol", "TCP")
            ports.append(p)
        out["ports"] = sorted(ports, key=_sort_key)
    for probe in _PROBES:
        if probe in out:
            out[probe] = _norm_probe(out[probe])
    return out


def _norm_env_from(entry: Any) -> Any:
    if not _is_map(entry):
        return entry
    e = dict(entry)
    for ref in ("configMapRef", "secretRef"):
        if _is_map(e.get(ref)):
            r = dict(e[ref])
            _drop(r, "optional", False)
            e[ref] = r
    return e


def _norm_volume(v: Any) -> Any:
    if not _is_map(v):
        return v
    out = dict(v)
    for source in ("configMap", "secret", "projected", "downwardAPI"):
        if _is_map(out.get(source)):
            s = dict(out[source])
            _drop(s, "defaultMode", 420)
            _drop(s, "optional", False)
            out[source] = s
    if _is_map(out.get("hostPath")):
        hp = dict(out["hostPath"])
        _drop(hp, "type", "")
        out["hostPath"] = hp
    return out


def _norm_toleration(t: Any) -> Any:
    if not _is_map(t):
        return t
    out = dict(t)
    _drop(out, "operator", "Equal")
    return out


def _norm_pod_spec(spec: Any) -> dict[str, Any]:
    s = dict(_mapping(spec))
    _drop(s, "dnsPolicy", "ClusterFirst")
    _drop(s, "restartPolicy", "Always")
    _drop(s, "schedulerName", "default-scheduler")
    _drop(s, "terminationGracePeriodSeconds", 30)
    _drop(s, "enableServiceLinks", True)
    if s.get("serviceAccount") == s.get("serviceAccountName") or "serviceAccountName" in s:
        s.pop("serviceAccount", None)  # the deprecated alias the API server fills in
    if "containers" in s:
        s["containers"] = [_norm_container(c) for c in _by_name(s["containers"])]
    if "initContainers" in s:  # they run one after another: their order is meaningful
        s["initContainers"] = [_norm_container(c) for c in _list(s["initContainers"])]
    s.pop("ephemeralContainers", None)  # added by `kubectl debug`, never desired state
    if "volumes" in s:
        s["volumes"] = [_norm_volume(v) for v in _by_name(s["volumes"])]
    if "tolerations" in s:
        s["tolerations"] = sorted(
            (_norm_toleration(t) for t in _list(s["tolerations"])), key=_sort_key
        )
    return s


def _norm_template(template: Any) -> dict[str, Any]:
    t = _mapping(template)
    out: dict[str, Any] = {}
    meta = _norm_meta(t.get("metadata"), template=True)
    if meta:
        out["metadata"] = meta
    out["spec"] = _norm_pod_spec(t.get("spec"))
    return out


def _norm_strategy(kind: str, strategy: Any) -> Any:
    if not _is_map(strategy):
        return strategy
    s = dict(strategy)
    rolling = s.get("rollingUpdate")
    if _is_map(rolling):
        r = dict(rolling)
        if kind == "Deployment":
            _drop(r, "maxSurge", "25%")
            _drop(r, "maxUnavailable", "25%")
        elif kind == "DaemonSet":
            _drop(r, "maxUnavailable", 1)
            _drop(r, "maxSurge", 0)
        else:
            _drop(r, "partition", 0)
            _drop(r, "maxUnavailable", 1)
        s["rollingUpdate"] = r
    _drop(s, "type", "RollingUpdate")
    return s


def _norm_claim(claim: Any) -> Any:
    if not _is_map(claim):
        return claim
    c = {k: v for k, v in claim.items() if k not in ("apiVersion", "kind", "status")}
    if "metadata" in c:
        c["metadata"] = _norm_meta(c["metadata"])
    if _is_map(c.get("spec")):
        spec = dict(c["spec"])
        _drop(spec, "volumeMode", "Filesystem")
        if "resources" in spec:
            spec["resources"] = _norm_resources(spec["resources"])
        c["spec"] = spec
    return c


def _norm_workload_spec(kind: str, spec: Any) -> dict[str, Any]:
    s = dict(_mapping(spec))
    _drop(s, "revisionHistoryLimit", 10)
    _drop(s, "minReadySeconds", 0)
    if kind == "Deployment":
        _drop(s, "progressDeadlineSeconds", 600)
        if "strategy" in s:
            s["strategy"] = _norm_strategy(kind, s["strategy"])
    else:
        if "updateStrategy" in s:
            s["updateStrategy"] = _norm_strategy(kind, s["updateStrategy"])
    if kind == "StatefulSet":
        _drop(s, "podManagementPolicy", "OrderedReady")
        policy = s.get("persistentVolumeClaimRetentionPolicy")
        if _is_map(policy):
            p = dict(policy)
            _drop(p, "whenDeleted", "Retain")
            _drop(p, "whenScaled", "Retain")
            s["persistentVolumeClaimRetentionPolicy"] = p
        if "volumeClaimTemplates" in s:
            s["volumeClaimTemplates"] = [_norm_claim(c) for c in _list(s["volumeClaimTemplates"])]
    if "template" in s:
        s["template"] = _norm_template(s["template"])
    return s


def _norm_hpa_spec(spec: Any) -> dict[str, Any]:
    s = {k: v for k, v in _mapping(spec).items() if k != "behavior"}  # behavior: defaulted
    _drop(s, "minReplicas", 1)
    ref = s.get("scaleTargetRef")
    if _is_map(ref):
        s["scaleTargetRef"] = {k: ref[k] for k in ("kind", "name") if k in ref}
    return s


def normalise(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The comparable form of an object (desired or observed); see the module doc.

    ``normalise(normalise(x)) == normalise(x)``; Secret content is digested on the way.
    """
    kind = obj.get("kind")
    if kind == "Secret":
        obj = _redact_secret(obj)
    out: dict[str, Any] = {}
    for k in ("apiVersion", "kind"):
        if isinstance(obj.get(k), str):
            out[k] = obj[k]
    meta = _norm_meta(obj.get("metadata"))
    if meta:
        out["metadata"] = meta
    if kind in WORKLOAD_KINDS:
        out["spec"] = _norm_workload_spec(str(kind), obj.get("spec"))
    elif kind == "ConfigMap":
        for k in ("data", "binaryData"):
            if _is_map(obj.get(k)):
                out[k] = dict(sorted(obj[k].items()))
        if obj.get("immutable") is True:
            out["immutable"] = True
    elif kind == "Secret":
        if _is_map(obj.get("data")):
            out["data"] = dict(sorted(obj["data"].items()))
        if obj.get("type") not in (None, "Opaque"):
            out["type"] = obj["type"]
        if obj.get("immutable") is True:
            out["immutable"] = True
    elif kind == AUTOSCALER_KIND:
        out["spec"] = _norm_hpa_spec(obj.get("spec"))
    else:
        for k, v in obj.items():
            if k not in ("apiVersion", "kind", "metadata", "status"):
                out[k] = v
    pruned: dict[str, Any] = _prune(out)
    return pruned


# =========================================================================== models


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image reference split the way registries read it; ``nginx`` and
    ``docker.io/library/nginx:latest`` are the same image."""

    repository: str
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, text: str) -> ImageRef:
        name, _, digest = text.strip().partition("@")
        slash = name.rfind("/")
        colon = name.rfind(":")
        tag: str | None = None
        if colon > slash:
            name, tag = name[:colon], name[colon + 1 :]
        first, sep, rest = name.partition("/")
        if not sep:
            name = f"docker.io/library/{name}"
        elif "." not in first and ":" not in first and first != "localhost":
            name = f"docker.io/{name}"
        elif first in ("index.docker.io", "registry-1.docker.io"):
            name = f"docker.io/{rest}"
        if name.startswith("docker.io/") and name.count("/") == 1:
            name = "docker.io/library/" + name.split("/", 1)[1]
        if tag is None and not digest:
            tag = "latest"
        return cls(name, tag, digest or None)


def image_drift(desired: str, actual: str) -> tuple[str, ...]:
    """Which parts of an image differ: ``repository``, ``tag``, ``digest`` (empty: none).

    A digest counts only when Git states one: a live digest added to the same tag is the
    same intent (admission controllers pin tags to digests).
    """
    if desired == actual:
        return ()
    want, have = ImageRef.parse(desired), ImageRef.parse(actual)
    out = []
    if want.repository != have.repository:
        out.append("repository")
    if want.tag is not None and want.tag != have.tag:
        out.append("tag")
    if want.digest is not None and want.digest != have.digest:
        out.append("digest")
    return tuple(out)


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


def _model(obj: ManifestObject) -> Model:
    """``model_from`` for an indexed object, whose key is known."""
    kind = obj.key.kind
    if kind in WORKLOAD_KINDS:
        return _workload(obj.body, obj.key, obj.app, obj.source)
    if kind in CONFIG_KINDS:
        return _config(obj.body, obj.key, obj.app, obj.source)
    return _autoscaler(obj.body, obj.key, obj.app, obj.source)


# =========================================================================== object index


@dataclass(frozen=True, slots=True)
class ManifestObject:
    """One redacted object of a side, with where it came from."""

    key: ObjectKey  # key_of(body): the index builds the model from both
    body: Mapping[str, Any]
    source: str | None
    app: str | None


class ObjectIndex:
    """The objects of one side: an application's desired manifests, or one cluster's
    observed objects (a snapshot, or the cache a watcher keeps warm). Models are built once
    per object and kept until the object changes."""

    __slots__ = (
        "_aliases",
        "_autoscaled",
        "_by_app",
        "_by_kind_name",
        "_desired_keys",
        "_hpas",
        "_models",
        "app_label",
        "objects",
    )

    def __init__(
        self, objects: Iterable[ManifestObject] = (), *, app_label: str | None = None
    ) -> None:
        self.app_label = app_label
        self.objects: dict[ObjectKey, ManifestObject] = {}
        self._by_app: dict[str, set[ObjectKey]] = {}
        self._aliases: dict[str, tuple[str, ...]] = {}
        self._by_kind_name: dict[tuple[str, str], list[ObjectKey]] = {}
        self._models: dict[ObjectKey, Model] = {}
        self._hpas: set[ObjectKey] = set()
        self._autoscaled: set[tuple[str, str | None, str]] | None = None
        self._desired_keys: dict[str, list[ObjectKey]] = {}  # keys_for_app, until a change
        for obj in objects:
            self.put(obj)

    @staticmethod
    def wrap(
        body: Mapping[str, Any], *, source: str | None = None, app_label: str | None = None
    ) -> ManifestObject | None:
        """A redacted ``ManifestObject`` for a raw object of a supported kind, else None."""
        kind = body.get("kind")  # key_of and app_of, reading the metadata once
        if kind not in KINDS:
            return None
        meta: Any = body.get("metadata")
        key = _key_in(kind, meta)
        if key is None:
            return None
        return ManifestObject(key, redact(body), source, _app_in(meta, app_label))

    def add(self, body: Mapping[str, Any], *, source: str | None = None) -> ObjectKey | None:
        obj = self.wrap(body, source=source, app_label=self.app_label)
        if obj is None:
            return None
        self.put(obj)
        return obj.key

    def put(self, obj: ManifestObject) -> None:
        key = obj.key
        if key in self.objects:
            self.discard(key)
        self.objects[key] = obj
        if self._desired_keys:
            self._desired_keys.clear()
        if obj.app:
            by_app = self._by_app.get(obj.app)
            if by_app is None:
                by_app = self._by_app[obj.app] = set()
            by_app.add(key)
        kind_name = (key.kind, key.name)
        same = self._by_kind_name.get(kind_name)
        if same is None:
            self._by_kind_name[kind_name] = [key]
        else:
            same.append(key)
        if key.kind == AUTOSCALER_KIND:
            self._hpas.add(key)
            self._autoscaled = None

    def discard(self, key: ObjectKey) -> None:
        old = self.objects.pop(key, None)
        if old is None:
            return
        self._desired_keys.clear()
        self._models.pop(key, None)
        if key in self._hpas:
            self._hpas.discard(key)
            self._autoscaled = None
        if old.app:
            self._by_app.get(old.app, set()).discard(key)
        same = self._by_kind_name.get((key.kind, key.name), [])
        if key in same:
            same.remove(key)

    def __len__(self) -> int:
        return len(self.objects)

    def app_keys(self, app: str) -> set[ObjectKey]:
        keys = self._by_app.get(app, set())
        for other in self._aliases.get(app, ()):
            keys = keys | self._by_app.get(other, set())
        return keys

    def set_aliases(self, app: str, others: Iterable[str]) -> None:
        """Objects labelled for any of ``others`` count as ``app``'s here: in this cluster the
        app is deployed as another Argo CD application (an ApplicationSet's
        ``shop-prod-eu-1`` for ``shop``)."""
        found = tuple(sorted(set(others) - {app}))
        if found:
            self._aliases[app] = found
        else:
            self._aliases.pop(app, None)

    def keys_for_app(self, app: str) -> list[ObjectKey]:
        """Desired side: objects that name ``app``, or name no application at all (a tree
        given for one app rarely carries Argo CD's tracking label: Argo CD adds it on apply).
        """
        keys = self._desired_keys.get(app)
        if keys is None:
            keys = sorted([k for k, o in self.objects.items() if o.app is None or o.app == app])
            self._desired_keys[app] = keys
        return list(keys)

    def autoscalers(self) -> set[ObjectKey]:
        return self._hpas

    def autoscaled(self) -> set[tuple[str, str | None, str]]:
        """``(kind, namespace, name)`` of every workload an HPA here scales (kept until an
        HPA changes)."""
        if self._autoscaled is None:
            found = set()
            for key in self._hpas:
                hpa = self.model(key)
                if isinstance(hpa, Autoscaler):
                    found.add((hpa.target_kind, key.namespace, hpa.target_name))
            self._autoscaled = found
        return self._autoscaled

    def candidates(self, kind: str, name: str) -> list[ObjectKey]:
        return self._by_kind_name.get((kind, name), [])

    def model(self, key: ObjectKey) -> Model:
        cached = self._models.get(key)
        if cached is None:
            cached = self._models[key] = _model(self.objects[key])
        return cached


# =========================================================================== diff


@dataclass(frozen=True, slots=True)
class WorkloadOptions:
    """Knobs of the workload diff (``fleet:`` in the config file)."""

    ignore_differences: tuple[IgnoreDifference, ...] = ()
    severities: tuple[SeverityRule, ...] = ()
    ignores: tuple[IgnoreRule, ...] = ()
    namespace: str = "default"  # where desired objects that state no namespace go
    report_extra: bool = True  # live objects labelled for the app that Git does not hold


class _Out:
    __slots__ = ("app", "cluster", "findings", "ref", "source")

    def __init__(self, cluster: str, ref: str, app: str | None, source: str | None) -> None:
        self.cluster, self.ref, self.app, self.source = cluster, ref, app, source
        self.findings: list[Finding] = []

    def add(
        self,
        field_: str,
        expected: JsonValue,
        actual: JsonValue,
        severity: Severity,
        drift: str,
        message: str = "",
        **extra: Any,
    ) -> None:
        self.findings.append(
            Finding(
                cluster=self.cluster,
                pool=self.ref,
                layer=Layer.WORKLOAD,
                field=field_,
                expected=expected,
                actual=actual,
                severity=severity,
                source=self.source,
                message=message,
                extra={"workload": self.ref, "app": self.app, "driftKind": drift, **extra},
            )
        )


def _env_display(name: str, var: EnvVar | None) -> str | None:
    if var is None:
        return None
    if _SECRETISH.search(name) and var.value_from is None:
        return "<redacted>"  # a literal that looks like a credential is never printed
    return var.display()


def _diff_container(out: _Out, want: Container, have: Container) -> None:
    name = want.name
    if want.image != have.image:
        aspects = image_drift(want.image, have.image)
        if aspects:
            out.add(
                f"image.{name}",
                want.image,
                have.image,
                Severity.HIGH,
                "image",
                f"{'/'.join(aspects)} differs",
                aspects=list(aspects),
            )
    if want.env != have.env:
        want_env = {e.name: e for e in want.env}
        have_env = {e.name: e for e in have.env}
        for var in sorted(want_env.keys() | have_env.keys()):
            w, h = want_env.get(var), have_env.get(var)
            if w == h:
                continue
            expected, actual = _env_display(var, w), _env_display(var, h)
            message = ""
            if expected == actual == "<redacted>":
                message = "value differs (not shown: the name looks like a credential)"
            out.add(
                f"env.{name}.{var}", expected, actual, Severity.MEDIUM, "configuration", message
            )
    if want.env_from != have.env_from:
        out.add(
            f"envFrom.{name}",
            list(want.env_from),
            list(have.env_from),
            Severity.MEDIUM,
            "configuration",
        )
    for part, want_res, have_res in (
        ("requests", want.requests, have.requests),
        ("limits", want.limits, have.limits),
    ):
        if want_res == have_res:
            continue
        w_map, h_map = dict(want_res), dict(have_res)
        for res in sorted(w_map.keys() | h_map.keys()):
            w_q, h_q = w_map.get(res), h_map.get(res)
            if w_q == h_q:
                continue
            severity = Severity.MEDIUM
            if part == "limits" and res == "memory" and w_q and h_q and _less(h_q, w_q):
                severity = Severity.HIGH  # a lower memory limit: OOM kills (seed 000)
            out.add(f"resources.{name}.{part}.{res}", w_q, h_q, severity, "resources")


def _less(a: str, b: str) -> bool:
    try:
        return parse_quantity(a) < parse_quantity(b)
    except ValueError:
        return False


def _workload_drifts(desired: Workload, actual: Workload, hpa_owned: bool) -> bool:
    """False when ``diff_workload`` finds nothing for sure: every field it compares is equal
    (identity, affinity, ``app`` and ``source`` aside)."""
    if desired.replicas is not None and not hpa_owned and desired.replicas != actual.replicas:
        return True
    return not (
        desired.containers == actual.containers
        and desired.init_containers == actual.init_containers
        and desired.mesh == actual.mesh
        and desired.volumes == actual.volumes
        and desired.node_selector == actual.node_selector
        and (
            desired.tolerations == actual.tolerations
            or set(desired.tolerations) == set(actual.tolerations)
        )
    )


def diff_workload(
    desired: Workload,
    actual: Workload,
    *,
    cluster: str,
    ref: str | None = None,
    hpa_owned: bool = False,
) -> list[Finding]:
    """Findings between one desired workload and its observed counterpart (both models)."""
    if not _workload_drifts(desired, actual, hpa_owned):
        return []
    out = _Out(cluster, ref or desired.key.ref, desired.app or actual.app, desired.source)
    if desired.replicas is not None and not hpa_owned and desired.replicas != actual.replicas:
        out.add("replicas", desired.replicas, actual.replicas, Severity.MEDIUM, "resources")
    for want_list, have_list, init in (
        (desired.containers, actual.containers, False),
        (desired.init_containers, actual.init_containers, True),
    ):
        if want_list == have_list:
            continue
        want_by = {c.name: c for c in want_list}
        have_by = {c.name: c for c in have_list}
        for name in sorted(want_by.keys() | have_by.keys()):
            w, h = want_by.get(name), have_by.get(name)
            if w is not None and h is not None:
                if w != h:
                    _diff_container(out, w, h)
                continue
            present = w or h
            assert present is not None
            if init and not present.sidecar:
                field_, severity = f"initContainer.{name}", Severity.MEDIUM
            else:
                field_, severity = f"sidecar.{name}", Severity.HIGH
            out.add(
                field_,
                w.image if w else None,
                h.image if h else None,
                severity,
                "dependency",
                "container added in the cluster" if w is None else "container missing",
            )
    if desired.mesh != actual.mesh:
        w_mesh, h_mesh = dict(desired.mesh), dict(actual.mesh)
        for key in sorted(w_mesh.keys() | h_mesh.keys()):
            if w_mesh.get(key) != h_mesh.get(key):
                out.add(
                    f"mesh.{key}", w_mesh.get(key), h_mesh.get(key), Severity.HIGH, "dependency"
                )
    if desired.volumes != actual.volumes:
        w_vol, h_vol = dict(desired.volumes), dict(actual.volumes)
        for vol in sorted(w_vol.keys() | h_vol.keys()):
            if w_vol.get(vol) != h_vol.get(vol):
                out.add(
                    f"volume.{vol}",
                    w_vol.get(vol),
                    h_vol.get(vol),
                    Severity.MEDIUM,
                    "configuration",
                )
    if desired.node_selector != actual.node_selector:
        w_sel, h_sel = dict(desired.node_selector), dict(actual.node_selector)
        for key in sorted(w_sel.keys() | h_sel.keys()):
            if w_sel.get(key) != h_sel.get(key):
                out.add(
                    f"nodeSelector.{key}",
                    w_sel.get(key),
                    h_sel.get(key),
                    Severity.MEDIUM,
                    "scheduling",
                )
    if set(desired.tolerations) != set(actual.tolerations):
        out.add(
            "tolerations",
            sorted(t.display() for t in desired.tolerations),
            sorted(t.display() for t in actual.tolerations),
            Severity.MEDIUM,
            "scheduling",
        )
    return out.findings


def diff_config(
    desired: ConfigObject, actual: ConfigObject, *, cluster: str, ref: str | None = None
) -> list[Finding]:
    """Content drift of a ConfigMap or Secret, by digest; a Secret's values never appear."""
    if desired.digests == actual.digests:
        return []
    out = _Out(
        cluster,
        ref or ObjectKey(desired.kind, desired.namespace, desired.name).ref,
        desired.app or actual.app,
        desired.source,
    )
    want, have = dict(desired.digests), dict(actual.digests)
    changes = {
        "changedKeys": sorted(k for k in want.keys() & have.keys() if want[k] != have[k]),
        "addedKeys": sorted(have.keys() - want.keys()),
        "removedKeys": sorted(want.keys() - have.keys()),
    }
    summary = "; ".join(f"{k[:-4]}: {', '.join(v)}" for k, v in changes.items() if v)
    if desired.kind == "Secret":
        out.add(
            f"secret.{desired.name}",
            sorted(want),
            sorted(have),
            Severity.MEDIUM,
            "configuration",
            f"content differs ({summary}); values are never shown",
            **changes,
        )
    else:
        out.add(
            f"config.{desired.name}",
            desired.digest,
            actual.digest,
            Severity.MEDIUM,
            "configuration",
            f"content differs ({summary})",
            **changes,
        )
    return out.findings


def _autoscaler_drifts(desired: Autoscaler, actual: Autoscaler) -> bool:
    """Whether ``diff_autoscaler`` finds anything: the fields it compares."""
    return (
        desired.min_replicas != actual.min_replicas
        or desired.max_replicas != actual.max_replicas
        or desired.target_kind != actual.target_kind
        or desired.target_name != actual.target_name
    )


def diff_autoscaler(
    desired: Autoscaler, actual: Autoscaler, *, cluster: str, ref: str | None = None
) -> list[Finding]:
    if not _autoscaler_drifts(desired, actual):
        return []
    out = _Out(
        cluster,
        ref or ObjectKey(AUTOSCALER_KIND, desired.namespace, desired.name).ref,
        desired.app or actual.app,
        desired.source,
    )
    name = desired.name
    for field_, want, have in (
        ("minReplicas", desired.min_replicas, actual.min_replicas),
        ("maxReplicas", desired.max_replicas, actual.max_replicas),
    ):
        if want != have:
            out.add(f"hpa.{name}.{field_}", want, have, Severity.MEDIUM, "resources")
    if (desired.target_kind, desired.target_name) != (actual.target_kind, actual.target_name):
        out.add(
            f"hpa.{name}.scaleTargetRef",
            f"{desired.target_kind}/{desired.target_name}",
            f"{actual.target_kind}/{actual.target_name}",
            Severity.HIGH,
            "resources",
        )
    return out.findings


class Pair(NamedTuple):
    key: ObjectKey  # the resolved identity (namespace filled in)
    desired: ObjectKey | None
    observed: ObjectKey | None


def pair_objects(
    app: str,
    desired: ObjectIndex,
    observed: ObjectIndex,
    *,
    namespace: str = "default",
    report_extra: bool = True,
) -> list[Pair]:
    """Desired objects of ``app`` matched to observed ones, plus (``report_extra``) observed
    objects labelled for ``app`` that Git does not hold.

    A desired object without a namespace pairs with the observed object of the same kind and
    name that belongs to the app, else the one in ``namespace``, else the only one there is;
    when it is missing, it is reported in the namespace where the app's other objects run.
    """
    pairs: list[Pair] = []
    taken: set[ObjectKey] = set()
    app_objects = observed.app_keys(app)
    unresolved: list[ObjectKey] = []
    seen_namespaces: Counter[str] = Counter()
    present = observed.objects
    by_kind_name = observed._by_kind_name
    for dkey in desired.keys_for_app(app):
        okey: ObjectKey | None = None
        if dkey.namespace is not None:
            okey = dkey if dkey in present else None
        else:
            found = by_kind_name.get((dkey.kind, dkey.name), ())
            if len(found) == 1:  # the common case: what the lists below come to
                okey = found[0]
            else:
                mine = [k for k in found if k in app_objects] or list(found)
                in_ns = [k for k in mine if k.namespace == namespace]
                if in_ns:
                    okey = in_ns[0]
                elif len(mine) == 1:
                    okey = mine[0]
            if okey is None:
                unresolved.append(dkey)
                continue
            ns = okey.namespace or ""
            seen_namespaces[ns] = seen_namespaces.get(ns, 0) + 1
        if okey is not None:
            taken.add(okey)
        pairs.append(Pair(okey or dkey, dkey, okey))
    # a desired object missing from the cluster is reported in the namespace where the rest
    # of the app runs there (else ``namespace``)
    top = (seen_namespaces.most_common(1)[0][0] if seen_namespaces else "") or namespace
    for dkey in unresolved:
        pairs.append(Pair(dkey._replace(namespace=top), dkey, None))
    if report_extra:
        for okey in sorted(app_objects - taken):
            pairs.append(Pair(okey, None, okey))
    return pairs


@dataclass(slots=True)
class AppDiff:
    cluster: str
    app: str
    findings: list[Finding]
    compared: int  # objects present on both sides


def _hpa_targets(
    pairs: Sequence[Pair], desired: ObjectIndex, observed: ObjectIndex
) -> set[tuple[str, str | None, str]]:
    """Workloads whose replicas an HPA owns: one in Git, or any HPA in the cluster (made by
    hand, or by KEDA) -- either way the replica count is not Git's to state."""
    targets = observed.autoscaled()  # the index's own set: read only
    in_git: set[tuple[str, str | None, str]] = set()
    for p in pairs:
        if p.key.kind == AUTOSCALER_KIND and p.desired is not None:
            hpa = desired.model(p.desired)
            if isinstance(hpa, Autoscaler):
                in_git.add((hpa.target_kind, p.key.namespace, hpa.target_name))
    return targets | in_git if in_git - targets else targets


def _models_for(
    pair: Pair,
    desired: ObjectIndex,
    observed: ObjectIndex,
    rules: Sequence[IgnoreDifference],
) -> tuple[Model | None, Model | None]:
    if not rules:
        return (
            desired.model(pair.desired) if pair.desired else None,
            observed.model(pair.observed) if pair.observed else None,
        )
    d = desired.objects.get(pair.desired) if pair.desired else None
    o = observed.objects.get(pair.observed) if pair.observed else None
    if d is not None and o is not None:
        identity = (GROUPS.get(pair.key.kind, ""), pair.key.kind, pair.key.namespace, pair.key.name)
        d_body, o_body = apply_ignore_differences(rules, identity, d.body, o.body)
        if d_body is not d.body or o_body is not o.body:
            d_model = model_from(d_body or {}, app=d.app, source=d.source)
            o_model = model_from(o_body or {}, app=o.app, source=o.source)
            return d_model, o_model
    return (
        desired.model(pair.desired) if pair.desired else None,
        observed.model(pair.observed) if pair.observed else None,
    )


def _presence_field(key: ObjectKey) -> str:
    if key.kind == "ConfigMap":
        return f"config.{key.name}"
    if key.kind == "Secret":
        return f"secret.{key.name}"
    if key.kind == AUTOSCALER_KIND:
        return f"hpa.{key.name}"
    return "workload"


def diff_app(
    cluster: str,
    app: str,
    desired: ObjectIndex,
    observed: ObjectIndex,
    *,
    options: WorkloadOptions = WorkloadOptions(),
) -> AppDiff:
    """Every drift of ``app`` in one cluster."""
    pairs = pair_objects(
        app,
        desired,
        observed,
        namespace=options.namespace,
        report_extra=options.report_extra,
    )
    owned = _hpa_targets(pairs, desired, observed)
    rules = options.ignore_differences
    findings: list[Finding] = []
    compared = 0
    for pair in pairs:
        want, have = _models_for(pair, desired, observed, rules)
        key = pair.key
        if want is None or have is None:
            ref = key.ref
            present = want or have
            assert present is not None
            out = _Out(cluster, ref, app, present.source if want else None)
            missing = have is None
            out.add(
                _presence_field(key),
                ref if missing else None,
                None if missing else ref,
                Severity.HIGH if missing else Severity.MEDIUM,
                "presence",
                "in Git, missing in the cluster" if missing else "in the cluster, not in Git",
            )
            findings.extend(out.findings)
            continue
        compared += 1
        # the drift checks first: most pairs are in sync, and then ``ref`` is not needed
        if isinstance(want, Workload) and isinstance(have, Workload):
            hpa = key in owned  # an ObjectKey equals the (kind, namespace, name) tuple
            if _workload_drifts(want, have, hpa):
                findings.extend(
                    diff_workload(want, have, cluster=cluster, ref=key.ref, hpa_owned=hpa)
                )
        elif isinstance(want, ConfigObject) and isinstance(have, ConfigObject):
            if want.digests != have.digests:
                findings.extend(diff_config(want, have, cluster=cluster, ref=key.ref))
        elif (
            isinstance(want, Autoscaler)
            and isinstance(have, Autoscaler)
            and _autoscaler_drifts(want, have)
        ):
            findings.extend(diff_autoscaler(want, have, cluster=cluster, ref=key.ref))
    findings = apply_rules(findings, severities=options.severities, ignores=options.ignores)
    return AppDiff(cluster, app, findings, compared)


def diff_fleet_workloads(
    app: str,
    desired: Mapping[str, ObjectIndex],
    observed: Mapping[str, ObjectIndex],
    *,
    options: WorkloadOptions = WorkloadOptions(),
) -> list[AppDiff]:
    """``diff_app`` for every observed cluster; ``desired`` maps a cluster to its desired
    index (clusters sharing one Git source share one index: its models are built once)."""
    return [
        diff_app(cluster, app, desired[cluster], index, options=options)
        for cluster, index in observed.items()
        if cluster in desired
    ]


# =========================================================================== versions


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One container of one workload in one cluster: what runs, what Git says, what peers run."""

    cluster: str
    kind: str
    namespace: str | None
    workload: str
    container: str
    image: str | None
    desired_image: str | None
    drift: bool
    init: bool = False
    peer_image: str | None = None  # the image most clusters run (None: none, or no majority)
    diverges_from_peers: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "kind": self.kind,
            "namespace": self.namespace,
            "workload": self.workload,
            "container": self.container,
            "image": self.image,
            "desiredImage": self.desired_image,
            "drift": self.drift,
            "init": self.init,
            "peerImage": self.peer_image,
            "divergesFromPeers": self.diverges_from_peers,
        }


def _image_rows(
    cluster: str, key: ObjectKey, want: Workload | None, have: Workload | None
) -> list[VersionRow]:
    rows = []
    want_by = {c.name: c for c in want.all_containers()} if want else {}
    have_by = {c.name: c for c in have.all_containers()} if have else {}
    inits = {c.name for w in (want, have) if w for c in w.init_containers}
    order = list(want_by) + [n for n in have_by if n not in want_by]
    for name in order:
        w, h = want_by.get(name), have_by.get(name)
        image = h.image if h else None
        desired_image = w.image if w else None
        if desired_image is None or image is None:
            drift = True
        else:
            drift = bool(image_drift(desired_image, image))
        rows.append(
            VersionRow(
                cluster,
                key.kind,
                key.namespace,
                key.name,
                name,
                image,
                desired_image,
                drift,
                name in inits,
            )
        )
    return rows


def fleet_versions(
    app: str,
    desired: Mapping[str, ObjectIndex],
    observed: Mapping[str, ObjectIndex],
    *,
    namespace: str = "default",
) -> list[VersionRow]:
    """The cluster x container table of images for ``app``: per row, Git's image, the
    cluster's, and the image most clusters run (so a cluster that diverges from its peers
    shows even where Git itself is behind)."""
    rows: list[VersionRow] = []
    for cluster, index in observed.items():
        want_index = desired.get(cluster)
        if want_index is None:
            continue
        for pair in pair_objects(app, want_index, index, namespace=namespace):
            if pair.key.kind not in WORKLOAD_KINDS:
                continue
            w = want_index.model(pair.desired) if pair.desired else None
            h = index.model(pair.observed) if pair.observed else None
            rows.extend(
                _image_rows(
                    cluster,
                    pair.key,
                    w if isinstance(w, Workload) else None,
                    h if isinstance(h, Workload) else None,
                )
            )
    # peers: the image most clusters run for each container, absence included (a sidecar
    # in one cluster of three diverges from its peers, who run none)
    clusters = [c for c in observed if c in desired]
    seen: dict[tuple[str, str | None, str, str], dict[str, str | None]] = {}
    for r in rows:
        seen.setdefault((r.kind, r.namespace, r.workload, r.container), {})[r.cluster] = r.image
    peers: dict[tuple[str, str | None, str, str], tuple[bool, str | None]] = {}
    for k, images in seen.items():
        counter: Counter[str | None] = Counter(images.values())
        missing = sum(1 for c in clusters if c not in images)
        if missing:
            counter[None] += missing
        top = counter.most_common(2)
        majority = len(top) == 1 or top[0][1] > top[1][1]
        peers[k] = (majority, top[0][0] if majority else None)
    out = []
    for r in rows:
        known, peer = peers[(r.kind, r.namespace, r.workload, r.container)]
        out.append(
            VersionRow(
                r.cluster,
                r.kind,
                r.namespace,
                r.workload,
                r.container,
                r.image,
                r.desired_image,
                r.drift,
                r.init,
                peer,
                known and r.image != peer,
            )
        )
    out.sort(
        key=lambda r: (
            r.kind,
            r.namespace or "",
            r.workload,
            r.init is False,
            r.container,
            r.cluster,
        )
    )
    return out
