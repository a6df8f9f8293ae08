"""The diff as it was before nodes were checked by shared facts: every node on its own, L3
medians by sorting every value. A test oracle for ``core.diffing`` (tests/core/
test_diffing_shared.py) and for the whole fast scan path (tests/adapters/test_scan_paths.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fleetwarden.core import diffing, osfamilies, versions
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.nodes import INSTANCE_TYPE_LABELS, ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.core.rules import DiffOptions, apply_rules


def _plain_nodes(spec: NodePoolSpec, nodes: list[ObservedNode], out: Any, options: DiffOptions):
    labels = () if "labels" in spec.unresolved_fields else tuple(spec.labels.items())
    check_taints = "taints" not in spec.unresolved_fields
    transient = frozenset(options.transient_taints) | {t.key for t in spec.startup_taints}
    want_taints = {(t.key, t.effect): (t.value or "") for t in spec.taints}
    types = frozenset(spec.instance_types)
    single = spec.instance_types[0] if len(spec.instance_types) == 1 else list(spec.instance_types)
    families = (spec.os_family, *spec.os_family_alternatives) if spec.os_family else ()
    shown = families[0] if len(families) == 1 else list(families)
    disk = spec.disk_size_gib
    for node in nodes:
        name, nl = node.name, node.labels
        for key, value in labels:
            if nl.get(key) != value:
                out.add(Layer.L1, f"labels.{key}", value, nl.get(key), Severity.HIGH, name)
        if check_taints and (want_taints or node.taints):
            seen = set()
            for t in node.taints:
                if t.key in transient:
                    continue
                k = (t.key, t.effect)
                seen.add(k)
                have = t.value or ""
                if k not in want_taints or want_taints[k] != have:
                    want = want_taints.get(k)
                    field = f"taints.{t.key}:{t.effect}"
                    out.add(Layer.L2, field, want, have, Severity.HIGH, name)
            for k, want in want_taints.items():
                if k not in seen:
                    out.add(Layer.L2, f"taints.{k[0]}:{k[1]}", want, None, Severity.HIGH, name)
        v = spec.kubernetes_version
        if v:
            have = node.kubelet_version
            ok = versions.matches(v, have) if have else None
            if ok is False:
                out.add(Layer.L4, "kubeletVersion", v, have, Severity.HIGH, name)
            elif ok is None and versions.parse_version(v) is not None:
                out.add(Layer.L4, "kubeletVersion.unknown", v, have, Severity.HIGH, name)
                out.explain("kubeletVersion.unknown", diffing._VERSION_UNKNOWN_WHY)
        itype = node.instance_type
        if itype is not None:
            if types and itype not in types:
                out.add(Layer.SPEC, "instanceType", single, itype, Severity.CRITICAL, name)
            for req in spec.requirements:
                if req.satisfied_by(nl) is False:
                    is_type = req.key in INSTANCE_TYPE_LABELS
                    vals = ", ".join(req.values)
                    out.add(
                        Layer.SPEC,
                        "instanceType" if is_type else f"requirements.{req.key}",
                        f"{req.operator} [{vals}]"
                        if is_type
                        else f"{req.key} {req.operator} [{vals}]",
                        itype if is_type else nl.get(req.key),
                        Severity.CRITICAL if is_type else Severity.HIGH,
                        name,
                    )
        if families and node.os_image:
            have_family = osfamilies.family_of_image(node.os_image)
            ok = have_family is None or any(
                osfamilies.family_matches(f, have_family) for f in families
            )
            if not ok:
                out.add(Layer.SPEC, "osImage", shown, node.os_image, Severity.HIGH, name)
        raw = node.capacity.get("ephemeral-storage")
        if disk and raw:
            try:
                gib = parse_quantity(raw) / float(2**30)
            except ValueError:
                continue
            if not (disk * (1 - options.disk_tolerance) <= gib <= disk * 1.05):
                out.add(Layer.SPEC, "diskSize", disk, round(gib), Severity.MEDIUM, name)


def _plain_outliers(resource, expected_raw, expected, nodes, tol, out) -> None:
    if expected <= 0:
        return
    severity = Severity.HIGH if resource == "memory" else Severity.MEDIUM
    for node in nodes:
        raw = node.allocatable.get(resource)
        if raw is None:
            continue
        try:
            have = parse_quantity(raw)
        except ValueError:
            continue
        if abs(have - expected) / expected > tol:
            out.add(Layer.L3, f"allocatable.{resource}", expected_raw, raw, severity, node.name)


def _plain_allocatable(spec, nodes, out, options) -> None:
    heterogeneous = spec.heterogeneous or len(spec.instance_types) > 1
    for resource in options.resources:
        stated = spec.allocatable.get(resource)
        if stated is not None:
            try:
                want = parse_quantity(stated)
            except ValueError:
                continue
            _plain_outliers(resource, stated, want, nodes, options.tolerance, out)
            continue
        groups: dict[str | None, list[ObservedNode]] = defaultdict(list)
        for node in nodes:
            groups[node.instance_type if heterogeneous else None].append(node)
        for members in groups.values():
            values = []
            for node in members:
                raw = node.allocatable.get(resource)
                try:
                    if raw is not None:
                        values.append((parse_quantity(raw), raw))
                except ValueError:
                    continue
            if len(members) < options.median_min_nodes or len(values) < options.median_min_nodes:
                continue
            values.sort(key=lambda pair: pair[0])
            value, raw = values[(len(values) - 1) // 2]
            _plain_outliers(resource, raw, value, members, options.tolerance, out)


def _plain_versions_mixed(spec, nodes, out) -> None:
    want = spec.kubernetes_version
    distinct = {node.kubelet_version for node in nodes if node.kubelet_version}
    if len(distinct) < 2:
        return
    seen: dict[tuple[int, int, int | None], str] = {}
    for have in sorted(distinct):
        if want and versions.matches(want, have) is False:
            continue
        parsed = versions.parse_version(have)
        if parsed is not None and parsed not in seen:
            seen[parsed] = have
    if len(seen) > 1:
        actual = [seen[k] for k in sorted(seen, key=lambda v: (v[0], v[1], v[2] or 0))]
        out.add(Layer.L4, "kubeletVersion.mixed", want, actual, Severity.MEDIUM, None)


def plain_findings(
    spec: NodePoolSpec, nodes: Sequence[ObservedNode], options: DiffOptions, cluster: str = "c"
) -> list[Finding]:
    """``diffing.diff_pool``, node by node."""
    out = diffing._Collector(cluster, spec.name, spec.source or None, spec)
    diffing._diff_count(spec, len(nodes), out)
    if nodes:
        _plain_nodes(spec, nodes, out, options)
        _plain_allocatable(spec, nodes, out, options)
        _plain_versions_mixed(spec, nodes, out)
    return apply_rules(out.findings(), severities=options.severities, ignores=options.ignores)


def plain_cluster_findings(
    cluster: str, specs: Sequence[NodePoolSpec], nodes: Sequence[ObservedNode], options: DiffOptions
) -> list[Finding]:
    """``diffing.diff_cluster``'s findings, every pool diffed node by node."""
    grouped = diffing.group_nodes(nodes, options=options)
    index = diffing.PoolIndex(specs)
    members: dict[str, list[ObservedNode]] = {spec.name: [] for spec in specs}
    findings: list[Finding] = []
    for group, group_nodes_ in grouped.items():
        spec = index.spec_for(group)
        if spec is None:
            findings.extend(diffing.diff_strays(cluster, group, group_nodes_, options=options))
        else:
            members[spec.name].extend(group_nodes_)
    for spec in specs:
        findings.extend(plain_findings(spec, members[spec.name], options, cluster))
    return findings
