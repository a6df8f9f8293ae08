"""Karpenter ``NodePool`` (karpenter.sh v1 and v1beta1) and the older v1alpha5 ``Provisioner``.

A Karpenter pool is heterogeneous by design: it is described by *requirements* on node labels
(instance family, size, arch, capacity type), not by one instance type. Nodes carry
``karpenter.sh/nodepool`` (``karpenter.sh/provisioner-name`` for v1alpha5). The cluster is not
named in these objects: give it as ``CLUSTER=PATH``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import NodePoolSpec, Provider, Requirement, Taint, normalise_effect
from fleetwarden.formats.documents import (
    Document,
    PoolsRead,
    expect_list,
    expect_mapping,
    expect_str,
)
from fleetwarden.formats.errors import FormatError

__all__ = ["read_pools"]

_POOL_KINDS = {("karpenter.sh", "NodePool"), ("karpenter.sh", "Provisioner")}
_CLASS_KINDS = {"EC2NodeClass", "AWSNodeTemplate", "KWOKNodeClass", "AKSNodeClass"}
_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"}


def read_pools(docs: Sequence[Document]) -> PoolsRead:
    out = PoolsRead()
    classes: dict[tuple[str, str], Document] = {}
    pool_docs: list[Document] = []
    for doc in docs:
        group = doc.group
        if (group, doc.kind) in _POOL_KINDS:
            out.claimed.add((doc.path, doc.index))
            pool_docs.append(doc)
        elif group.startswith("karpenter.") and doc.kind in _CLASS_KINDS:
            out.claimed.add((doc.path, doc.index))
            if doc.name:
                classes[(doc.kind, doc.name)] = doc
        elif doc.kind == "CustomResourceDefinition" and group == "apiextensions.k8s.io":
            spec = doc.body.get("spec")
            if isinstance(spec, Mapping) and str(spec.get("group", "")).startswith("karpenter."):
                out.claimed.add((doc.path, doc.index))
                out.notes.setdefault(doc.path, "no node-pool definition (Karpenter CRD schema)")
    for doc in pool_docs:
        out.pools.append(_pool_of(doc, classes))
    for doc in docs:
        if (doc.path, doc.index) in out.claimed and not any(
            p.source == doc.path for p in out.pools
        ):
            out.notes.setdefault(doc.path, "no node-pool definition (only Karpenter node classes)")
    return out


def _pool_of(doc: Document, classes: Mapping[tuple[str, str], Document]) -> NodePoolSpec:
    name = doc.name
    if not name:
        raise FormatError(doc.path, "missing", field=doc.where("metadata.name"))
    spec = expect_mapping(doc, doc.body.get("spec"), "spec")
    legacy = doc.kind == "Provisioner"
    if legacy:
        tmpl_meta: Mapping[str, Any] = spec
        tmpl_spec: Mapping[str, Any] = spec
        prefix = "spec"
        meta_prefix = "spec"
    else:
        template = expect_mapping(doc, spec.get("template"), "spec.template")
        tmpl_meta = expect_mapping(doc, template.get("metadata"), "spec.template.metadata")
        tmpl_spec = expect_mapping(doc, template.get("spec"), "spec.template.spec")
        prefix = "spec.template.spec"
        meta_prefix = "spec.template.metadata"
    labels = {
        str(k): str(expect_str(doc, v, f"{meta_prefix}.labels.{k}", allow_none=False))
        for k, v in expect_mapping(doc, tmpl_meta.get("labels"), f"{meta_prefix}.labels").items()
    }
    requirements = _requirements(doc, tmpl_spec.get("requirements"), f"{prefix}.requirements")
    return NodePoolSpec(
        name=name,
        cluster=None,
        provider=Provider.KARPENTER,
        source=doc.path,
        source_format="karpenter",
        # the requirement itself is checked; listing the types too would double-report
        instance_types=(),
        requirements=requirements,
        labels=labels,
        taints=_taints(doc, tmpl_spec.get("taints"), f"{prefix}.taints"),
        startup_taints=_taints(doc, tmpl_spec.get("startupTaints"), f"{prefix}.startupTaints"),
        os_family=_os_family(doc, tmpl_spec, classes, legacy=legacy),
        heterogeneous=True,
    )


def _requirements(doc: Document, raw: Any, where: str) -> tuple[Requirement, ...]:
    out = []
    for i, item in enumerate(expect_list(doc, raw, where)):
        r = expect_mapping(doc, item, f"{where}[{i}]")
        key = expect_str(doc, r.get("key"), f"{where}[{i}].key", allow_none=False)
        op = expect_str(doc, r.get("operator"), f"{where}[{i}].operator", allow_none=False)
        if op not in _OPERATORS:
            raise FormatError(
                doc.path, f"unknown operator {op!r}", field=doc.where(f"{where}[{i}].operator")
            )
        values = tuple(
            str(expect_str(doc, v, f"{where}[{i}].values[{j}]", allow_none=False))
            for j, v in enumerate(expect_list(doc, r.get("values"), f"{where}[{i}].values"))
        )
        # Karpenter's Gte/Lte are Gt/Lt shifted by one
        if op in ("Gte", "Lte") and values and values[0].lstrip("-").isdigit():
            bound = int(values[0])
            op, values = ("Gt", (str(bound - 1),)) if op == "Gte" else ("Lt", (str(bound + 1),))
        out.append(Requirement(str(key), str(op), values))
    return tuple(out)


def _taints(doc: Document, raw: Any, where: str) -> tuple[Taint, ...]:
    out = []
    for i, item in enumerate(expect_list(doc, raw, where)):
        t = expect_mapping(doc, item, f"{where}[{i}]")
        key = expect_str(doc, t.get("key"), f"{where}[{i}].key", allow_none=False)
        value = expect_str(doc, t.get("value"), f"{where}[{i}].value")
        effect = expect_str(doc, t.get("effect"), f"{where}[{i}].effect", allow_none=False)
        try:
            out.append(Taint(str(key), value, normalise_effect(str(effect))))
        except ValueError as exc:
            raise FormatError(doc.path, str(exc), field=doc.where(f"{where}[{i}].effect")) from None
    return tuple(sorted(out))


def _os_family(
    doc: Document,
    tmpl_spec: Mapping[str, Any],
    classes: Mapping[tuple[str, str], Document],
    *,
    legacy: bool,
) -> str | None:
    """The OS family from the referenced node class, when it is in the same tree."""
    ref_field = "providerRef" if legacy else "nodeClassRef"
    ref = tmpl_spec.get(ref_field)
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
        return None
    kinds = ("AWSNodeTemplate",) if legacy else (str(ref.get("kind", "EC2NodeClass")),)
    for kind in kinds:
        cls = classes.get((kind, ref["name"]))
        if cls is None:
            continue
        spec = cls.body.get("spec")
        if not isinstance(spec, Mapping):
            return None
        family = spec.get("amiFamily")
        if isinstance(family, str):
            return osfamilies.family_of_setting(family)
        for term in spec.get("amiSelectorTerms") or ():
            if isinstance(term, Mapping) and isinstance(term.get("alias"), str):
                return osfamilies.family_of_setting(term["alias"])
    return None
