"""Normalisation (step 3 of the workload pipeline): API-server defaults dropped, lists keyed
by name sorted, one spelling per quantity, empty values and noise metadata removed.
``normalise`` is idempotent. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from fleetwarden.core.quantities import parse_quantity
from fleetwarden.core.workloads.images import default_pull_policy
from fleetwarden.core.workloads.objects import (
    AUTOSCALER_KIND,
    INSTANCE_LABEL,
    LAST_APPLIED,
    TRACKING_ANNOTATION,
    WORKLOAD_KINDS,
    _is_map,
    _list,
    _mapping,
)
from fleetwarden.core.workloads.redaction import _redact_secret

__all__ = ["canonical_quantity", "normalise"]

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

_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1}


# =========================================================================== identity


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


def _drop(obj: dict[str, Any], key: str, default: Any) -> None:
    if key in obj and obj[key] == default and type(obj[key]) is type(default):
        del obj[key]


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
