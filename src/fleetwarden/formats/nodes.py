"""Observed nodes from ``kubectl get nodes -o json`` (or ``-o yaml``): a ``List``/``NodeList``
of Nodes, or a single Node object.

Dumps are large (kubectl prints ~9 KB per node, most of it image lists and conditions), so JSON
goes through simdjson's lazy parser and only the fields the diff needs are materialised; about
5x faster than a full parse. Invalid JSON is re-parsed with orjson for a precise message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import simdjson

from fleetwarden.core.describing import describe_type
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import Taint
from fleetwarden.formats.documents import load_data
from fleetwarden.formats.errors import FormatError

__all__ = ["node_from_object", "parse_nodes"]

_EFFECTS = frozenset(("NoSchedule", "PreferNoSchedule", "NoExecute"))


def parse_nodes(path: str, data: bytes | str) -> list[ObservedNode]:
    """Every Node in a dump. Raises ``FormatError`` naming the file (and item/field)."""
    raw = data.encode() if isinstance(data, str) else data
    if raw.lstrip()[:1] == b"{":
        fast = _parse_lazy(path, raw)
        if fast is not None:
            return fast
    if not raw.strip():
        raise FormatError(
            path,
            "empty file, not a node dump (kubectl get nodes -o json writes a List even when "
            "there are no nodes)",
        )
    body = load_data(path, raw, what="JSON or YAML node dump")
    if not isinstance(body, Mapping):
        raise FormatError(
            path,
            f"expected a Node or a List of Nodes (kubectl get nodes -o json), got "
            f"{describe_type(body)}",
        )
    kind = body.get("kind")
    if kind is None and "items" not in body and isinstance(body.get("metadata"), Mapping):
        kind = "Node"  # some tools store Node objects without their kind (insights-operator)
    if kind == "Node":
        return [node_from_object(body, path=path, where="")]
    items = body.get("items")
    if kind not in ("List", "NodeList") or not isinstance(items, list):
        raise FormatError(
            path,
            "expected a Node or a List of Nodes (kubectl get nodes -o json)",
            field="kind" if kind not in ("List", "NodeList") else "items",
        )
    nodes = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise FormatError(path, "not an object", field=f"items[{i}]")
        item_kind = item.get("kind", "Node")
        if item_kind != "Node":
            continue  # a mixed List (kubectl get nodes,pods): only Nodes matter here
        nodes.append(node_from_object(item, path=path, where=f"items[{i}]."))
    return nodes


def _parse_lazy(path: str, raw: bytes) -> list[ObservedNode] | None:
    """The fast path for JSON lists; None when the document is not a plain List of Nodes
    (the caller then takes the full path, which also produces the precise error)."""
    try:
        doc = simdjson.Parser().parse(raw)
    except ValueError:
        return None  # invalid JSON: orjson reports where
    if not isinstance(doc, simdjson.Object):
        return None
    items = doc.get("items")
    if doc.get("kind") not in ("List", "NodeList") or not isinstance(items, simdjson.Array):
        return None
    nodes = []
    for i, item in enumerate(items):
        if not isinstance(item, simdjson.Object):
            raise FormatError(path, "not an object", field=f"items[{i}]")
        if item.get("kind", "Node") != "Node":
            continue
        slim: dict[str, Any] = {}
        for part, keys in _NEEDED:
            section = item.get(part)
            if isinstance(section, simdjson.Object):
                slim[part] = {k: _py(section.get(k)) for k in keys if k in section}
            else:
                slim[part] = _py(section)
        nodes.append(node_from_object(slim, path=path, where=f"items[{i}]."))
    return nodes


_NEEDED = (
    ("metadata", ("name", "labels")),
    ("spec", ("taints", "unschedulable")),
    ("status", ("allocatable", "capacity", "nodeInfo")),
)


def _py(value: Any) -> Any:
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def node_from_object(
    obj: Mapping[str, Any], *, path: str = "<node>", where: str = ""
) -> ObservedNode:
    """One Node object (as the API serves it) -> ``ObservedNode``."""
    meta = _mapping(obj.get("metadata"), path, f"{where}metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise FormatError(path, "missing or not a string", field=f"{where}metadata.name")
    labels = _str_map(meta.get("labels"), path, f"{where}metadata.labels")
    spec = _mapping(obj.get("spec"), path, f"{where}spec")
    status = _mapping(obj.get("status"), path, f"{where}status")
    info = _mapping(status.get("nodeInfo"), path, f"{where}status.nodeInfo")
    taints_raw = spec.get("taints") or []
    if not isinstance(taints_raw, list):
        raise FormatError(path, "expected a list", field=f"{where}spec.taints")
    taints = []
    for i, t in enumerate(taints_raw):
        if not isinstance(t, Mapping) or not isinstance(t.get("key"), str):
            raise FormatError(
                path, "expected {key, value, effect}", field=f"{where}spec.taints[{i}]"
            )
        effect = t.get("effect")
        if effect not in _EFFECTS:
            raise FormatError(
                path, f"unknown effect {effect!r}", field=f"{where}spec.taints[{i}].effect"
            )
        value = t.get("value")
        taints.append(Taint(t["key"], None if value is None else str(value), effect))
    kubelet = info.get("kubeletVersion")
    os_image = info.get("osImage")
    return ObservedNode(
        name=name,
        labels=labels,
        taints=tuple(taints),
        kubelet_version=kubelet if isinstance(kubelet, str) else None,
        os_image=os_image if isinstance(os_image, str) else None,
        allocatable=_str_map(status.get("allocatable"), path, f"{where}status.allocatable"),
        capacity=_str_map(status.get("capacity"), path, f"{where}status.capacity"),
        unschedulable=bool(spec.get("unschedulable", False)),
    )


def _mapping(value: Any, path: str, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FormatError(path, f"expected an object, got {describe_type(value)}", field=field)
    return value


def _str_map(value: Any, path: str, field: str) -> dict[str, str]:
    m = _mapping(value, path, field)
    if type(m) is dict and all(type(v) is str for v in m.values()):
        return m  # the common case: already a str -> str map (JSON keys are strings)
    out = {}
    for k, v in m.items():
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise FormatError(
                path, f"expected a string value, got {describe_type(v)}", field=f"{field}.{k}"
            )
        out[str(k)] = v if isinstance(v, str) else str(v)
    return out
