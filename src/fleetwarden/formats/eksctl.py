"""eksctl ``ClusterConfig``: ``nodeGroups`` and ``managedNodeGroups`` as desired pools.

Nodes of an eksctl nodegroup carry ``alpha.eksctl.io/nodegroup-name`` (unmanaged) or
``eks.amazonaws.com/nodegroup`` (managed); both name the nodegroup, so the pool name is the
nodegroup name. eksctl defaults ``minSize``/``maxSize`` to ``desiredCapacity`` when unset,
and the nodegroup version to the cluster's ``metadata.version``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import NodePoolSpec, Provider, Taint, normalise_effect
from fleetwarden.formats.documents import (
    Document,
    PoolsRead,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
)
from fleetwarden.formats.errors import FormatError

__all__ = ["read_pools"]

_GROUP = "eksctl.io"


def read_pools(docs: Sequence[Document]) -> PoolsRead:
    out = PoolsRead()
    for doc in docs:
        if doc.group != _GROUP or doc.kind != "ClusterConfig":
            continue
        out.claimed.add((doc.path, doc.index))
        pools = _pools_of(doc)
        out.pools.extend(pools)
        if not pools:
            auto = expect_mapping(doc, doc.body.get("autoModeConfig"), "autoModeConfig")
            why = " (EKS Auto Mode: nodes come from built-in NodePools)" if auto else ""
            out.notes.setdefault(doc.path, f"no node-pool definition (eksctl ClusterConfig{why})")
    return out


def _pools_of(doc: Document) -> list[NodePoolSpec]:
    meta = expect_mapping(doc, doc.body.get("metadata"), "metadata")
    cluster = expect_str(doc, meta.get("name"), "metadata.name")
    version = expect_str(doc, meta.get("version"), "metadata.version")
    pools = []
    for section, managed in (("nodeGroups", False), ("managedNodeGroups", True)):
        for i, raw in enumerate(expect_list(doc, doc.body.get(section), section)):
            where = f"{section}[{i}]"
            ng = expect_mapping(doc, raw, where)
            pools.append(
                _pool_of(doc, ng, where, cluster=cluster, version=version, managed=managed)
            )
    return pools


def _pool_of(
    doc: Document,
    ng: Mapping[str, Any],
    where: str,
    *,
    cluster: str | None,
    version: str | None,
    managed: bool,
) -> NodePoolSpec:
    name = expect_str(doc, ng.get("name"), f"{where}.name", allow_none=False)
    assert name is not None
    types: list[str] = []
    single = expect_str(doc, ng.get("instanceType"), f"{where}.instanceType")
    if single and single != "mixed":
        types.append(single)
    for j, t in enumerate(expect_list(doc, ng.get("instanceTypes"), f"{where}.instanceTypes")):
        types.append(str(expect_str(doc, t, f"{where}.instanceTypes[{j}]", allow_none=False)))
    dist = expect_mapping(doc, ng.get("instancesDistribution"), f"{where}.instancesDistribution")
    for j, t in enumerate(
        expect_list(doc, dist.get("instanceTypes"), f"{where}.instancesDistribution.instanceTypes")
    ):
        types.append(
            str(
                expect_str(
                    doc, t, f"{where}.instancesDistribution.instanceTypes[{j}]", allow_none=False
                )
            )
        )
    desired = expect_int(doc, ng.get("desiredCapacity"), f"{where}.desiredCapacity")
    lo = expect_int(doc, ng.get("minSize"), f"{where}.minSize")
    hi = expect_int(doc, ng.get("maxSize"), f"{where}.maxSize")
    if desired is not None:  # eksctl's own defaulting
        lo = desired if lo is None else lo
        hi = desired if hi is None else hi
    labels = {
        str(k): str(expect_str(doc, v, f"{where}.labels.{k}", allow_none=False))
        for k, v in expect_mapping(doc, ng.get("labels"), f"{where}.labels").items()
    }
    family_setting = expect_str(doc, ng.get("amiFamily"), f"{where}.amiFamily")
    return NodePoolSpec(
        name=name,
        cluster=cluster,
        provider=Provider.AWS,
        source=doc.path,
        source_format="eksctl",
        instance_types=tuple(dict.fromkeys(types)),
        disk_size_gib=expect_int(doc, ng.get("volumeSize"), f"{where}.volumeSize"),
        disk_type=expect_str(doc, ng.get("volumeType"), f"{where}.volumeType"),
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels=labels,
        taints=_taints(doc, ng.get("taints"), f"{where}.taints"),
        kubernetes_version=version,
        # eksctl's default family is AmazonLinux2023 since 0.190; only a stated one is checked
        os_family=osfamilies.family_of_setting(family_setting) if family_setting else None,
    )


def _taints(doc: Document, raw: Any, where: str) -> tuple[Taint, ...]:
    """eksctl accepts a list of {key, value, effect} or the legacy map key: "value:Effect"."""
    out = []
    if isinstance(raw, Mapping):
        for key, spec in raw.items():
            text = str(expect_str(doc, spec, f"{where}.{key}", allow_none=False))
            value, _, effect = text.rpartition(":")
            out.append(Taint(str(key), value or None, _effect(doc, effect, f"{where}.{key}")))
        return tuple(sorted(out))
    for i, item in enumerate(expect_list(doc, raw, where)):
        t = expect_mapping(doc, item, f"{where}[{i}]")
        key = expect_str(doc, t.get("key"), f"{where}[{i}].key", allow_none=False)
        value = expect_str(doc, t.get("value"), f"{where}[{i}].value")
        effect = expect_str(doc, t.get("effect"), f"{where}[{i}].effect", allow_none=False)
        out.append(Taint(str(key), value, _effect(doc, str(effect), f"{where}[{i}].effect")))
    return tuple(sorted(out))


def _effect(doc: Document, text: str, where: str) -> str:
    try:
        return normalise_effect(text)
    except ValueError as exc:
        raise FormatError(doc.path, str(exc), field=doc.where(where)) from None
