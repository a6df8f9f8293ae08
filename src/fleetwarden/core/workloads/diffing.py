"""The workload drift diff (step 5): desired against observed models, per object, per app
and per fleet, returning findings (``layer`` WORKLOAD). Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from fleetwarden.core.findings import Finding, JsonValue, Layer, Severity
from fleetwarden.core.ignoring import IgnoreDifference, apply_ignore_differences
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.core.rules import IgnoreRule, SeverityRule, apply_rules
from fleetwarden.core.workloads.images import image_drift
from fleetwarden.core.workloads.indexing import ObjectIndex
from fleetwarden.core.workloads.models import (
    Autoscaler,
    ConfigObject,
    Container,
    EnvVar,
    Model,
    Workload,
    model_from,
)
from fleetwarden.core.workloads.objects import AUTOSCALER_KIND, GROUPS, ObjectKey
from fleetwarden.core.workloads.redaction import _SECRETISH

__all__ = [
    "AppDiff",
    "Pair",
    "WorkloadOptions",
    "diff_app",
    "diff_autoscaler",
    "diff_config",
    "diff_fleet_workloads",
    "diff_workload",
    "pair_objects",
]


@dataclass(frozen=True, slots=True)
class WorkloadOptions:
    """Knobs of the workload diff (``fleet:`` in the config file)."""

    ignore_differences: tuple[IgnoreDifference, ...] = ()
    severities: tuple[SeverityRule, ...] = ()
    ignores: tuple[IgnoreRule, ...] = ()
    namespace: str = "default"  # where desired objects that state no namespace go
    report_extra: bool = True  # live objects labelled for the app that Git does not hold


class _Out:
    __slots__ = ("app", "cluster", "findings", "ref", "source", "subject")

    def __init__(self, cluster: str, key: ObjectKey, app: str | None, source: str | None) -> None:
        self.cluster, self.app, self.source = cluster, app, source
        self.ref, self.subject = key.ref, key.in_cluster(cluster)
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
                subject=self.subject,
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
    key: ObjectKey | None = None,
    hpa_owned: bool = False,
) -> list[Finding]:
    """Findings between one desired workload and its observed counterpart (both models);
    ``key``: the pair's key, when it differs from the desired model's (a defaulted namespace)."""
    if not _workload_drifts(desired, actual, hpa_owned):
        return []
    out = _Out(cluster, key or desired.key, desired.app or actual.app, desired.source)
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
        for switch in sorted(w_mesh.keys() | h_mesh.keys()):
            if w_mesh.get(switch) != h_mesh.get(switch):
                out.add(
                    f"mesh.{switch}",
                    w_mesh.get(switch),
                    h_mesh.get(switch),
                    Severity.HIGH,
                    "dependency",
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
        for label in sorted(w_sel.keys() | h_sel.keys()):
            if w_sel.get(label) != h_sel.get(label):
                out.add(
                    f"nodeSelector.{label}",
                    w_sel.get(label),
                    h_sel.get(label),
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
    desired: ConfigObject, actual: ConfigObject, *, cluster: str, key: ObjectKey | None = None
) -> list[Finding]:
    """Content drift of a ConfigMap or Secret, by digest; a Secret's values never appear."""
    if desired.digests == actual.digests:
        return []
    out = _Out(
        cluster,
        key or ObjectKey(desired.kind, desired.namespace, desired.name),
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
    desired: Autoscaler, actual: Autoscaler, *, cluster: str, key: ObjectKey | None = None
) -> list[Finding]:
    if not _autoscaler_drifts(desired, actual):
        return []
    out = _Out(
        cluster,
        key or ObjectKey(AUTOSCALER_KIND, desired.namespace, desired.name),
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
            out = _Out(cluster, key, app, present.source if want else None)
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
                findings.extend(diff_workload(want, have, cluster=cluster, key=key, hpa_owned=hpa))
        elif isinstance(want, ConfigObject) and isinstance(have, ConfigObject):
            if want.digests != have.digests:
                findings.extend(diff_config(want, have, cluster=cluster, key=key))
        elif (
            isinstance(want, Autoscaler)
            and isinstance(have, Autoscaler)
            and _autoscaler_drifts(want, have)
        ):
            findings.extend(diff_autoscaler(want, have, cluster=cluster, key=key))
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
