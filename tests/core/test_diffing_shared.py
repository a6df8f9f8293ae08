"""The diff checks each distinct combination of a node's compared facts once (nodes of a pool
share them) and finds L3 medians by counting texts: the findings must be exactly those of the
plain node-by-node pass. ``_plain_findings`` below is that pass, written out as it was before
the sharing; hypothesis draws pools and nodes whose facts collide, repeat, are shared by
identity or only by content, and quantities that read as the same amount from different texts
(which makes the median depend on node order)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import diffing, osfamilies, versions
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.nodes import INSTANCE_TYPE_LABELS, ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Requirement, Taint
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
        if v and node.kubelet_version and versions.matches(v, node.kubelet_version) is False:
            out.add(Layer.L4, "kubeletVersion", v, node.kubelet_version, Severity.HIGH, name)
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


def _plain_findings(spec: NodePoolSpec, nodes: list[ObservedNode], options: DiffOptions):
    out = diffing._Collector("c", spec.name, spec.source or None, spec)
    diffing._diff_count(spec, nodes, out)
    if nodes:
        _plain_nodes(spec, nodes, out, options)
        _plain_allocatable(spec, nodes, out, options)
        diffing._diff_versions_mixed(spec, nodes, out)
    return apply_rules(out.findings(), severities=options.severities, ignores=options.ignores)


# --- what hypothesis draws: few distinct values, so nodes collide and share ----------------

SMALL = st.sampled_from(["a", "b", "m5.large", "t3.medium", ""])
QUANTITY = st.sampled_from(
    ["1Gi", "1073741824", "1024Mi", "2Gi", "1", "1000m", "2", "950m", "29", "x", "110", "0"]
)
TAINT = st.builds(
    Taint,
    st.sampled_from(["dedicated", "gpu", "node.kubernetes.io/not-ready"]),
    st.sampled_from([None, "", "a", "b"]),
    st.sampled_from(["NoSchedule", "NoExecute"]),
)
LABEL_KEYS = st.sampled_from(["team", "tier", *INSTANCE_TYPE_LABELS, "zone"])


@st.composite
def pools_and_nodes(draw: st.DrawFn) -> tuple[NodePoolSpec, list[ObservedNode]]:
    spec = NodePoolSpec(
        name="p",
        cluster="c",
        instance_types=tuple(draw(st.lists(SMALL.filter(bool), max_size=2, unique=True))),
        requirements=tuple(
            draw(
                st.lists(
                    st.builds(
                        Requirement,
                        LABEL_KEYS,
                        st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt"]),
                        st.lists(SMALL | st.sampled_from(["3", "10"]), max_size=2).map(tuple),
                    ),
                    max_size=2,
                )
            )
        ),
        labels=draw(st.dictionaries(LABEL_KEYS, SMALL, max_size=3)),
        taints=tuple(draw(st.lists(TAINT, max_size=2))),
        kubernetes_version=draw(st.sampled_from([None, "1.29", "1.30", "1.30.2"])),
        os_family=draw(st.sampled_from([None, "AmazonLinux2", "Bottlerocket"])),
        disk_size_gib=draw(st.sampled_from([None, 20, 100])),
        allocatable=draw(st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITY, max_size=1)),
        heterogeneous=draw(st.booleans()),
    )
    # a few shared objects (as the stream reader shares them) and fresh equal copies
    taint_sets = draw(st.lists(st.lists(TAINT, max_size=3).map(tuple), min_size=1, max_size=3))
    maps = draw(
        st.lists(
            st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), QUANTITY, max_size=3),
            min_size=1,
            max_size=4,
        )
    )
    nodes = []
    for i in range(draw(st.integers(0, 14))):
        taints = draw(st.sampled_from(taint_sets))
        alloc = draw(st.sampled_from(maps))
        nodes.append(
            ObservedNode(
                name=f"n{i}",
                labels=draw(st.dictionaries(LABEL_KEYS, SMALL, max_size=4)),
                taints=tuple(taints) if draw(st.booleans()) else taints,
                kubelet_version=draw(st.sampled_from([None, "v1.30.2", "v1.29.1-eks", "x"])),
                os_image=draw(
                    st.sampled_from([None, "Amazon Linux 2", "Bottlerocket OS 1.19", "Ubuntu"])
                ),
                allocatable=dict(alloc) if draw(st.booleans()) else alloc,
                capacity=draw(
                    st.sampled_from([{}, {"ephemeral-storage": "20Gi"}, {"ephemeral-storage": "x"}])
                ),
            )
        )
    return spec, nodes


def _shown(findings: list[Finding]) -> list[tuple[Any, ...]]:
    return [
        (f.layer, f.field, f.expected, f.actual, f.severity, f.nodes, f.provenance)
        for f in findings
    ]


@settings(max_examples=400, deadline=None)
@given(pools_and_nodes(), st.sampled_from([DiffOptions(), DiffOptions(median_min_nodes=1)]))
def test_shared_checks_give_exactly_the_node_by_node_findings(case, options):
    spec, nodes = case
    assert _shown(diffing.diff_pool(spec, nodes, options=options)) == _shown(
        _plain_findings(spec, nodes, options)
    )


def test_the_median_text_follows_node_order_when_two_texts_are_one_amount():
    """1Gi and 1073741824 are one amount: the stable sort's median is the text of whichever
    comes first in node order at that position, and the finding quotes that text."""
    big = {"memory": "4Gi"}
    for order in (["1Gi", "1073741824", "1Gi"], ["1073741824", "1Gi", "1073741824"]):
        nodes = [ObservedNode(f"n{i}", allocatable={"memory": m}) for i, m in enumerate(order)]
        nodes.append(ObservedNode("odd", allocatable=big))
        nodes.append(ObservedNode("odd2", allocatable=big))
        spec = NodePoolSpec(name="p", cluster="c")
        got = [f for f in diffing.diff_pool(spec, nodes) if f.layer is Layer.L3]
        plain = [f for f in _plain_findings(spec, nodes, DiffOptions()) if f.layer is Layer.L3]
        assert _shown(got) == _shown(plain)
        assert got and got[0].expected == order[2]  # (5 - 1) // 2 of the stable sort
