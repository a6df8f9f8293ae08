"""Reading Cluster API objects into one pool: typed reads at a path, each noted in the pool's
account.

A pool is read from several objects (the MachineDeployment, its infrastructure template, its
bootstrap template, sometimes a ClusterClass); each is a ``Source`` with its own view on the
pool's ``Ledger``, so every attribute is listed under the object that states it
(``AWSMachineTemplate/md-0: spec.template.spec.rootVolume.size``) with its ``file:line``.

Paths are tuples from the document root (label keys hold dots and slashes). A ``${VAR}`` value
(clusterctl / envsubst) is never guessed: the fact is left unset and the attribute is listed as
unresolved with the raw text. So is a field a ClusterClass patch may rewrite. A value of the
wrong type is a ``FormatError`` naming the file and the field -- a number in a string field
too (``object_str``), as the API server refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from fleetwarden.core.pools import (
    NodePoolSpec,
    Provisioner,
    Requirement,
    Taint,
    Unresolved,
    normalise_effect,
)
from fleetwarden.formats.accounting import Ledger, Path, View, dotted, pattern
from fleetwarden.formats.documents import (
    Document,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
)
from fleetwarden.formats.errors import FormatError

__all__ = [
    "Context",
    "Patched",
    "Pool",
    "Reader",
    "Source",
    "Tree",
    "go_int32",
    "object_str",
    "placeholder",
    "required_name",
]

# (path prefix, why) of fields a ClusterClass patch may rewrite
Patched = tuple[tuple[Path, str], ...]
_ZONE = "topology.kubernetes.io/zone"


def placeholder(text: str) -> bool:
    """A clusterctl / envsubst variable (``${VAR}``, ``${VAR:=default}``) is in the text."""
    return "${" in text


def object_str(
    doc: Document, value: Any, field_: str, *, allow_none: bool = True, line: int | None = None
) -> str | None:
    """``expect_str`` for a field of a Kubernetes object: a number is an error, not its text.
    The API server rejects a number in a string field, and YAML reads an unquoted ``1.30`` as
    the number 1.3 -- as text, a version the author never wrote."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise FormatError(
            doc.path,
            f"expected a string, got the number {value!r}: the API server rejects a number "
            "here; put the value in quotes as written (unquoted, YAML reads 1.30 as 1.3)",
            field=doc.where(field_),
            line=line,
        )
    return expect_str(doc, value, field_, allow_none=allow_none)


_GO_INT = re.compile(r"[+-]?[0-9]+\Z")


def go_int32(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 32)``: an optional sign and ASCII digits, nothing
    else (no spaces, no ``_``), within int32; None where Go returns an error."""
    if not _GO_INT.match(text):
        return None
    number = int(text)
    return number if -(2**31) <= number < 2**31 else None


def required_name(doc: Document) -> str:
    meta = expect_mapping(doc, doc.body.get("metadata"), "metadata")
    name = object_str(doc, meta.get("name"), "metadata.name")
    if not name:
        raise FormatError(doc.path, "a name is required", field=doc.where("metadata.name"))
    return name


class Tree:
    """Every document of the desired-state tree by kind + name, to follow references."""

    def __init__(self, docs: Sequence[Document]) -> None:
        self._by_key: dict[tuple[str, str], list[Document]] = {}
        for doc in docs:
            name = doc.name
            if doc.kind and name is not None:
                self._by_key.setdefault((doc.kind, name), []).append(doc)

    def find(self, kind: str, name: str, namespace: str | None, near: str) -> Document | None:
        """The object a reference points at: same namespace (an unset one matches any, as
        clusterctl puts a template's objects in one target namespace), same file first."""
        candidates = [
            d
            for d in self._by_key.get((kind, name), ())
            if d.namespace == namespace or d.namespace is None or namespace is None
        ]
        candidates.sort(key=lambda d: (d.path != near, d.namespace != namespace))
        return candidates[0] if candidates else None


@dataclass(slots=True)
class Pool:
    """The facts of one pool while its objects are read, and their account."""

    name: str
    source: str
    ledger: Ledger = field(default_factory=Ledger)
    cluster: str | None = None
    instance_types: list[str] = field(default_factory=list)
    disk_size_gib: int | None = None
    disk_type: str | None = None
    min_size: int | None = None
    max_size: int | None = None
    desired_size: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    startup_taints: list[Taint] = field(default_factory=list)
    kubernetes_version: str | None = None
    os_families: tuple[str, ...] = ()  # the first is expected; the others are accepted too
    allocatable: dict[str, str] = field(default_factory=dict)
    requirements: dict[str, tuple[str, ...]] = field(default_factory=dict)  # label -> In values
    unresolved: list[Unresolved] = field(default_factory=list)

    def unresolve(self, fact: str, expression: str) -> None:
        item = Unresolved(fact, expression)
        if item not in self.unresolved:
            self.unresolved.append(item)

    def rename(self, name: str) -> None:
        """The name nodes are grouped by, when the provider states it."""
        self.unresolved = [u for u in self.unresolved if u.field != "name"]
        self.name = name
        if placeholder(name):
            self.unresolve("name", name)

    def spec(self) -> NodePoolSpec:
        return NodePoolSpec(
            name=self.name,
            cluster=self.cluster,
            provider=Provisioner.CAPI,
            source=self.source,
            source_format="capi",
            instance_types=tuple(dict.fromkeys(self.instance_types)),
            requirements=tuple(
                Requirement(key, "In", values) for key, values in self.requirements.items()
            ),
            disk_size_gib=self.disk_size_gib,
            disk_type=self.disk_type,
            min_size=self.min_size,
            max_size=self.max_size,
            desired_size=self.desired_size,
            labels=MappingProxyType(dict(self.labels)),
            taints=tuple(dict.fromkeys(self.taints)),
            startup_taints=tuple(dict.fromkeys(self.startup_taints)),
            kubernetes_version=self.kubernetes_version,
            os_family=self.os_families[0] if self.os_families else None,
            os_family_alternatives=self.os_families[1:],
            allocatable=MappingProxyType(dict(self.allocatable)),
            unresolved=tuple(self.unresolved),
            provenance=dict(self.ledger.provenance),
            account=self.ledger.entries(),
        )


class Source:
    """One object a pool is read from (see the module docstring)."""

    def __init__(self, doc: Document, pool: Pool, *, patched: Patched = ()) -> None:
        self.doc, self.pool, self.patched = doc, pool, patched
        self.label = f"{doc.kind or 'document'}/{doc.name or doc.index}"
        self.view: View = pool.ledger.view(doc.path, lines=doc.line_of, label=self.label)

    # -- raw, type-checked access -------------------------------------------------------------

    def get(self, path: Path) -> Any:
        """The value at ``path`` (None when absent); a wrong container type is an error."""
        node: Any = self.doc.body
        for i, part in enumerate(path):
            if isinstance(part, int):
                items = self.items(node, path[:i])
                node = items[part] if part < len(items) else None
            else:
                node = self.mapping(node, path[:i]).get(part)
            if node is None:
                return None
        return node

    def at(self, path: Path) -> Mapping[str, Any]:
        """The mapping at ``path`` ({} when absent)."""
        return self.mapping(self.get(path), path)

    def mapping(self, value: Any, path: Path) -> Mapping[str, Any]:
        return expect_mapping(self.doc, value, dotted(path) or "(document)")

    def items(self, value: Any, path: Path) -> Sequence[Any]:
        return expect_list(self.doc, value, dotted(path))

    def string(self, value: Any, path: Path, *, allow_none: bool = True) -> str | None:
        line = self.doc.line_of(path) if isinstance(value, int | float) else None
        return object_str(self.doc, value, dotted(path), allow_none=allow_none, line=line)

    def error(self, path: Path, reason: str) -> FormatError:
        return FormatError(self.doc.path, reason, field=self.doc.where(dotted(path)))

    # -- reads that feed a fact ---------------------------------------------------------------

    def patch_of(self, path: Path) -> str | None:
        """Why a ClusterClass patch may rewrite ``path`` (or something below or above it)."""
        for prefix, why in self.patched:
            n = min(len(prefix), len(path))
            if prefix[:n] == path[:n]:
                return why
        return None

    def unresolved(self, path: Path, fact: str, expression: str) -> None:
        self.view.unresolved(path, expression, fact)
        self.pool.unresolve(fact, expression)

    def text(self, path: Path, fact: str) -> str | None:
        """A literal string at ``path``; a placeholder or a patched field is unresolved."""
        why = self.patch_of(path)
        if why is not None:
            self.unresolved(path, fact, why)
            return None
        text = self.string(self.get(path), path)
        if text is None:
            return None
        if placeholder(text):
            self.unresolved(path, fact, text)
            return None
        return text

    def count(self, path: Path, fact: str, *, annotation: bool = False) -> int | None:
        """A non-negative integer at ``path``; with ``annotation``, the text of one as CAPI
        and the cluster-autoscaler parse it (``"3"``, ``"+3"``: Go's strconv.ParseInt, base
        10, 32 bits). A string in an integer field is an error: the API server refuses it."""
        why = self.patch_of(path)
        if why is not None:
            self.unresolved(path, fact, why)
            return None
        value = self.get(path)
        if isinstance(value, str):
            if placeholder(value):
                self.unresolved(path, fact, value.strip())
                return None
            if not annotation:
                raise self.error(
                    path,
                    f"expected an integer, got the string {value!r:.40}: the API server "
                    "refuses a string here (write the number without quotes)",
                )
            number = go_int32(value)
            if number is None:
                raise self.error(
                    path,
                    f"{value!r:.40} is not a base-10 integer CAPI can read (strconv.ParseInt: "
                    "digits with an optional sign, no spaces, at most 2147483647)",
                )
            if number < 0:
                raise self.error(path, f"must not be negative, got {value!r:.40}")
            return number
        return expect_int(self.doc, value, dotted(path))

    def compared(self, path: Path, fact: str, value: Any = None) -> str:
        return self.view.compared(path, fact, value)

    def ignored(self, path: Path, reason: str) -> None:
        self.view.ignored(path, reason)

    def default(self, path: Path, fact: str, value: Any, why: str) -> bool:
        """``fact`` takes the provisioner's default because ``path`` states nothing; False
        (noted unresolved) when a ClusterClass patch may write it: the caller then leaves the
        fact unset."""
        patch = self.patch_of(path)
        if patch is not None:
            self.unresolved(path, fact, patch)
            return False
        self.pool.ledger.default(fact, f"{self.label}: {dotted(path)}", value, why)
        return True

    def unstated(self, path: Path, fact: str, reason: str) -> None:
        """``path`` states nothing and no default is certain: the fact is not compared."""
        self.pool.ledger.unstated(fact, f"{self.label}: {dotted(path)}", reason)

    def close(self, at: Path, reasons: Mapping[str, str]) -> None:
        """Account for every attribute below ``at``; ``reasons`` are keyed relative to it."""
        prefix = pattern(at)
        full = {f"{prefix}.{key}" if prefix else key: why for key, why in reasons.items()}
        self.view.close(self.at(at), full, at=at)

    # -- structured values --------------------------------------------------------------------

    def labels(
        self,
        path: Path,
        *,
        keep: Callable[[str], str | None] | None = None,
    ) -> None:
        """A label map; ``keep(key)`` returns why a key does not reach the Node (or None)."""
        why = self.patch_of(path)
        if why is not None:
            self.unresolved(path, "labels", why)
            return
        for raw_key, raw_value in self.at(path).items():
            key = self.string(raw_key, path, allow_none=False) or ""
            where = (*path, key)
            text = self.string(raw_value, where) or ""
            dropped = keep(key) if keep is not None else None
            if dropped is not None:
                self.ignored(where, dropped)
            elif placeholder(key) or placeholder(text):
                self.unresolved(where, f"labels.{key}", f"{key}={text}")
            else:
                self.pool.labels[key] = text
                self.compared(where, f"labels.{key}", text)

    def effect(self, value: Any, path: Path) -> str:
        text = self.string(value, path, allow_none=False) or ""
        try:
            # CAPA spells effects "no-schedule"; normalise_effect knows "no_schedule"
            return normalise_effect(text.replace("-", "_"))
        except ValueError as exc:
            raise self.error(path, str(exc)) from None

    def taint_objects(self, path: Path) -> list[tuple[Taint, str | None, Path]]:
        """``[{key, value, effect, propagation?}]`` as (taint, propagation, item path);
        a taint holding a placeholder is noted unresolved and left out."""
        out = []
        for i, item in enumerate(self.items(self.get(path), path)):
            where = (*path, i)
            entry = self.mapping(item, where)
            key = self.string(entry.get("key"), (*where, "key"), allow_none=False)
            if not key:
                raise self.error((*where, "key"), "a taint needs a key")
            value = self.string(entry.get("value"), (*where, "value"))
            effect = self.effect(entry.get("effect"), (*where, "effect"))
            propagation = self.string(entry.get("propagation"), (*where, "propagation"))
            if placeholder(key) or (value is not None and placeholder(value)):
                self.unresolved(where, "taints", f"{key}={value or ''}:{effect}")
                continue
            out.append((Taint(key, value or None, effect), propagation, where))
        return out

    def taint_strings(self, texts: Iterable[str], path: Path) -> list[Taint]:
        """Kubelet / AKS spelling: ``key=value:Effect`` or ``key:Effect``; a placeholder is
        noted unresolved and left out."""
        out = []
        for text in texts:
            if placeholder(text):
                self.unresolved(path, "taints", text)
                continue
            body, sep, effect_text = text.strip().rpartition(":")
            if not sep or not body:
                raise self.error(path, f"taint {text!r} is not key[=value]:Effect")
            key, _, value = body.partition("=")
            if not key:
                raise self.error(path, f"taint {text!r} has no key")
            out.append(Taint(key, value or None, self.effect(effect_text, path)))
        return out

    def zones(self, path: Path) -> None:
        """A list of zones the pool's nodes are placed in: every node's
        ``topology.kubernetes.io/zone`` is one of them."""
        zones = self.items(self.get(path), path)
        if not zones:
            return
        values = []
        for i, zone in enumerate(zones):
            text = self.string(zone, (*path, i), allow_none=False) or ""
            if text:
                values.append(text)
        why = self.patch_of(path)
        if why is not None or any(placeholder(z) for z in values):
            self.unresolved(path, f"requirements.{_ZONE}", why or ", ".join(values))
            return
        self.pool.requirements[_ZONE] = tuple(values)
        self.compared(path, f"requirements.{_ZONE}", values)

    def ref(self, path: Path) -> tuple[str, str, str | None] | None:
        """(kind, name, namespace) of an object reference (v1beta1 ``apiVersion`` or v1beta2
        ``apiGroup`` shape); None when absent or without a kind and a name."""
        ref = self.at(path)
        if not ref:
            return None
        kind = self.string(ref.get("kind"), (*path, "kind"))
        name = self.string(ref.get("name"), (*path, "name"))
        namespace = self.string(ref.get("namespace"), (*path, "namespace"))
        if not kind or not name:
            return None
        return kind, name, namespace or self.doc.namespace


@dataclass(frozen=True, slots=True)
class Context:
    """What a reader of a referenced object may need to know about the pool around it."""

    tree: Tree
    owner: str  # the pool object's kind: MachineDeployment | MachinePool
    topology: bool = False  # a ClusterClass template: the object's name is generated
    cluster: Document | None = None  # the Cluster, when it is in the tree
    bootstrap: str | None = None  # the bootstrap object's kind


# reads one referenced object's part at the given path into the pool, and accounts for it
Reader = Callable[[Source, Path, Context], None]
