"""Observed nodes from ``kubectl get nodes -o json`` (or ``-o yaml``): a ``List``/``NodeList``
of Nodes, or a single Node object.

Two readers, one reading. JSON lists go through ``nodestream`` first: the items array in
chunks, only the fields the diff needs decoded (a 100,000-node dump is ~900 MB, ~90 % of it
image lists and conditions); it refuses whatever it is not sure of. Everything else -- YAML, a
single Node, and whatever the stream refused, including every malformed input -- is parsed
whole by ``parse_document``, which names the file and the line, item or field of a problem.
A ``NodeList`` whose ``items`` is ``null`` (Go's empty slice) holds no nodes; an item of
another kind (``kubectl get nodes,pods``) or a second Node of one name is an error, as the
stream reader refuses both too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetwarden.core.describing import describe_type
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import Taint
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.formats import nodestream
from fleetwarden.formats.documents import load_data
from fleetwarden.formats.errors import FormatError

__all__ = [
    "LIST_KINDS",
    "node_from_object",
    "nodes_of_body",
    "parse_document",
    "parse_nodes",
    "stream_nodes",
    "stream_rows",
    "streamed_kind_ok",
]

_EFFECTS = frozenset(("NoSchedule", "PreferNoSchedule", "NoExecute"))
LIST_KINDS = ("List", "NodeList")


def parse_nodes(path: str, data: bytes | str) -> list[ObservedNode]:
    """Every Node in a dump. Raises ``FormatError`` naming the file (and item/field)."""
    raw = data.encode() if isinstance(data, str) else data
    if raw.lstrip()[:1] == b"{":
        try:
            return stream_nodes(lambda offset: _bytes_reader(raw, offset))
        except nodestream.Unstreamable:
            pass  # the whole-document reader decides (and names any problem)
    return parse_document(path, raw)


def stream_nodes(open_at: nodestream.Opener) -> list[ObservedNode]:
    """The nodes of a JSON ``List``/``NodeList`` read in chunks; ``open_at(offset)`` reads
    the input from ``offset`` on. Raises ``nodestream.Unstreamable`` for anything else."""
    return stream_rows(open_at).nodes()


def stream_rows(
    open_at: nodestream.Opener, sink: nodestream.Sink | None = None
) -> nodestream.ItemsRead:
    """``stream_nodes`` as rows, handed to ``sink`` as they are read when given (whatever it
    was fed is then still to be checked: ``Unstreamable`` may come after)."""
    head = nodestream.read_head(open_at(0))
    got = nodestream.read_items(
        open_at(head.items_at), start=head.items_at, separator=head.separator, sink=sink
    )
    if not streamed_kind_ok(head.keys, got.keys or {}):
        raise nodestream.Unstreamable
    return got


def streamed_kind_ok(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """The document's kind (read before and after its items; the last one counts, as in any
    JSON reader) says it is a list."""
    kind = after["kind"] if "kind" in after else before.get("kind")
    return kind in LIST_KINDS


def _bytes_reader(data: bytes, offset: int) -> nodestream.ReadInto:
    view = memoryview(data)
    at = offset

    def read(into: memoryview) -> int:
        nonlocal at
        n = min(len(into), len(view) - at)
        if n <= 0:
            return 0
        into[:n] = view[at : at + n]
        at += n
        return n

    return read


def parse_document(path: str, raw: bytes) -> list[ObservedNode]:
    """The whole-document reader: any JSON or YAML dump, every problem named precisely."""
    if not raw.strip():
        raise FormatError(
            path,
            "empty file, not a node dump (kubectl get nodes -o json writes a List even when "
            "there are no nodes)",
        )
    body = load_data(
        path,
        raw,
        what="node dump",
        one="a List of Nodes or a single Node, as kubectl get nodes -o yaml prints it",
    )
    return nodes_of_body(path, body)


def nodes_of_body(path: str, body: Any) -> list[ObservedNode]:
    """Nodes of a parsed dump (a ``json.loads``/YAML value)."""
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
    if items is None and "items" in body:
        items = []  # Go marshals an empty slice as null
    if kind not in LIST_KINDS or not isinstance(items, list):
        raise FormatError(
            path,
            "expected a Node or a List of Nodes (kubectl get nodes -o json)",
            field="kind" if kind not in LIST_KINDS else "items",
        )
    nodes = []
    first: dict[str, int] = {}  # name -> the item it was first read from
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise FormatError(path, "not an object", field=f"items[{i}]")
        item_kind = item.get("kind")
        if item_kind is not None and item_kind != "Node":
            raise FormatError(path, _not_a_node(item_kind), field=f"items[{i}].kind")
        node = node_from_object(item, path=path, where=f"items[{i}].")
        if first.setdefault(node.name, i) != i:
            raise FormatError(
                path,
                f"node {node.name!r} is listed twice (items[{first[node.name]}] and items[{i}]):"
                " a cluster holds one Node of a name -- were two dumps put together?",
                field=f"items[{i}].metadata.name",
            )
        nodes.append(node)
    return nodes


def _not_a_node(kind: Any) -> str:
    """Why an item of another kind is refused: skipped, it would vanish from the count (a
    Pod in a NodeList left its pool "empty" with exit 0)."""
    what = repr(kind) if isinstance(kind, str) else describe_type(kind)
    return (
        f"a {what} item, not a Node: a node dump holds Nodes only (kubectl get nodes -o json); "
        "leave the other kinds out (kubectl get nodes,pods mixes them)"
    )


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
    return ObservedNode(
        name=name,
        labels=labels,
        taints=tuple(taints),
        kubelet_version=_info_str(info, "kubeletVersion", name, path, where),
        os_image=_info_str(info, "osImage", name, path, where),
        allocatable=_quantities(
            status.get("allocatable"), name, path, f"{where}status.allocatable"
        ),
        capacity=_quantities(status.get("capacity"), name, path, f"{where}status.capacity"),
        unschedulable=bool(spec.get("unschedulable", False)),
    )


def _info_str(info: Mapping[str, Any], key: str, node: str, path: str, where: str) -> str | None:
    """A ``nodeInfo`` string, None when absent; any other type is not what the API serves."""
    value = info.get(key)
    if value is None or isinstance(value, str):
        return value
    raise FormatError(
        path,
        f"node {node!r}: expected a string, got {describe_type(value)}",
        field=f"{where}status.nodeInfo.{key}",
    )


def _quantities(value: Any, node: str, path: str, field: str) -> dict[str, str]:
    """A resource map (``allocatable``, ``capacity``): every value a Kubernetes quantity, as
    the API server guarantees; anything else would be compared as if absent."""
    out = _str_map(value, path, field)
    for key, text in out.items():
        try:
            parse_quantity(text)
        except ValueError:
            raise FormatError(
                path, f"node {node!r}: not a Kubernetes quantity: {text!r}", field=f"{field}.{key}"
            ) from None
    return out


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
