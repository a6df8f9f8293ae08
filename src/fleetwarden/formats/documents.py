"""YAML / JSON documents as read from desired-state trees, and what a reader returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from fleetwarden.core.describing import describe_type
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats.errors import FormatError

__all__ = [
    "YAML_SUFFIXES",
    "Document",
    "LineIndex",
    "PoolsRead",
    "SourceFile",
    "decode_text",
    "expect_int",
    "expect_list",
    "expect_mapping",
    "expect_str",
    "load_data",
    "parse_yaml_documents",
]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    data: bytes
    direct: bool = False  # named on the command line itself, not found in a directory


def decode_text(f: SourceFile) -> str:
    """The file as text; binary or non-UTF-8 data is a FormatError naming the file."""
    if b"\x00" in f.data[:8192]:
        raise FormatError(f.path, "binary data, not a text file")
    try:
        return f.data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f.path, f"not UTF-8 text (invalid byte at offset {exc.start})") from None


class LineIndex:
    """Line numbers of a YAML file's values, composed on first use (readers ask only for the
    documents they claim; most of a tree's files never pay for it)."""

    __slots__ = ("_lines", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines: list[dict[tuple[str | int, ...], int]] | None = None

    def line(self, index: int, path: tuple[str | int, ...]) -> int | None:
        if self._lines is None:
            self._lines = self._compose()
        if index >= len(self._lines):
            return None
        return self._lines[index].get(path)

    def _compose(self) -> list[dict[tuple[str | int, ...], int]]:
        try:
            nodes = list(yaml.compose_all(self._text, Loader=_Loader))
        except (yaml.YAMLError, ValueError, TypeError, RecursionError):
            return []
        out: list[dict[tuple[str | int, ...], int]] = []
        for node in nodes:
            if node is None or not isinstance(node, yaml.MappingNode):
                continue
            items = _list_items(node)
            for part in items if items is not None else [node]:
                lines: dict[tuple[str | int, ...], int] = {(): part.start_mark.line + 1}
                _index(part, (), lines)
                out.append(lines)
        return out


def _list_items(node: yaml.MappingNode) -> list[yaml.Node] | None:
    """The items of a ``kind: List`` document, as parse_yaml_documents expands them."""
    kind = items = None
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "kind":
            kind = value.value if isinstance(value, yaml.ScalarNode) else None
        if isinstance(key, yaml.ScalarNode) and key.value == "items":
            items = value
    if kind == "List" and isinstance(items, yaml.SequenceNode):
        return list(items.value)
    return None


def _index(
    node: yaml.Node, at: tuple[str | int, ...], lines: dict[tuple[str | int, ...], int]
) -> None:
    if len(at) > 24:  # deep enough for any pool definition; hostile nesting stops here
        return
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                path = (*at, key.value)
                lines[path] = key.start_mark.line + 1
                _index(value, path, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = (*at, i)
            lines[path] = item.start_mark.line + 1
            _index(item, path, lines)


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML/JSON document of a file: ``index`` is its position in a multi-document file."""

    path: str
    index: int
    body: Mapping[str, Any]
    lines: LineIndex | None = field(default=None, compare=False, repr=False)

    def line_of(self, path: tuple[str | int, ...]) -> int | None:
        """1-based line of the value at ``path`` (``("spec", "replicas")``), when known."""
        return self.lines.line(self.index, path) if self.lines is not None else None

    @property
    def api_version(self) -> str:
        v = self.body.get("apiVersion")
        return v if isinstance(v, str) else ""

    @property
    def kind(self) -> str:
        v = self.body.get("kind")
        return v if isinstance(v, str) else ""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def name(self) -> str | None:
        meta = self.body.get("metadata")
        if isinstance(meta, Mapping):
            name = meta.get("name")
            if isinstance(name, str):
                return name
        return None

    @property
    def namespace(self) -> str | None:
        meta = self.body.get("metadata")
        if isinstance(meta, Mapping):
            ns = meta.get("namespace")
            if isinstance(ns, str):
                return ns
        return None

    def where(self, field_: str) -> str:
        """A field path qualified by the document, for error messages."""
        label = f"{self.kind}/{self.name}" if self.kind and self.name else f"document {self.index}"
        return f"{label}: {field_}"


@dataclass(slots=True)
class PoolsRead:
    """What a reader found: pools, and which documents it recognised as its own."""

    pools: list[NodePoolSpec] = field(default_factory=list)
    claimed: set[tuple[str, int]] = field(default_factory=set)
    notes: dict[str, str] = field(default_factory=dict)  # path -> why it held no pool
    # path -> definitions of pools it holds beside those read, each "where: why not read"
    unread: dict[str, list[str]] = field(default_factory=dict)

    def extend(self, other: PoolsRead) -> None:
        self.pools.extend(other.pools)
        self.claimed |= other.claimed
        for path, note in other.notes.items():
            self.notes.setdefault(path, note)
        for path, remarks in other.unread.items():
            self.unread.setdefault(path, []).extend(remarks)


def parse_yaml_documents(
    path: str, text: str, *, others: list[str] | None = None
) -> list[Document]:
    """All mapping documents of a YAML (or JSON) text; a ``List`` is expanded into its items.

    Raises ``FormatError`` with the line for a syntax error, and for a document that is not a
    mapping (a scalar or a list at the top level is never a Kubernetes object) — unless
    ``others`` is given: such documents are then described there and passed by.
    """
    try:
        raw = list(yaml.load_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise FormatError(path, f"YAML syntax error: {exc.problem or exc}", line=line) from None
    except yaml.YAMLError as exc:
        raise FormatError(path, f"YAML error: {exc}") from None
    except (ValueError, TypeError, RecursionError) as exc:  # odd scalars, deep nesting
        raise FormatError(path, f"cannot parse: {exc}") from None
    docs: list[Document] = []
    lines = LineIndex(text)
    for i, body in enumerate(raw):
        if body is None:
            continue
        if not isinstance(body, Mapping):
            if others is not None:  # the caller reads objects only and says what it passed by
                others.append(describe_type(body))
                continue
            raise FormatError(path, f"document {i} is {describe_type(body)}, not a mapping")
        if body.get("kind") == "List" and isinstance(body.get("items"), list):
            for j, item in enumerate(body["items"]):
                if not isinstance(item, Mapping):
                    raise FormatError(path, "not an object", field=f"items[{j}]")
                docs.append(Document(path, len(docs), item, lines))
            continue
        docs.append(Document(path, len(docs), body, lines))
    return docs


def load_data(
    path: str, data: bytes | str, *, what: str = "JSON or YAML document", one: str = ""
) -> Any:
    """One JSON (orjson) or YAML document of a dump: ``kubectl get ... -o json|yaml``.

    Binary data, invalid JSON/YAML and non-UTF-8 text are a ``FormatError`` naming the file
    (and the line where the parser says); so is a second YAML document (``---``), with the
    line where it starts and ``one``: what the one document should be.
    """
    raw = data.encode() if isinstance(data, str) else data
    if b"\x00" in raw[:8192]:
        raise FormatError(path, f"binary data, not a {what}")
    if raw.lstrip()[:1] in (b"{", b"["):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise FormatError(
                path, f"invalid JSON: {exc}", line=getattr(exc, "lineno", None)
            ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"not UTF-8 text (byte {exc.start})") from None
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.composer.ComposerError as exc:
        if exc.context != "expected a single document in the stream" or exc.problem_mark is None:
            raise FormatError(path, f"YAML error: {exc.problem or exc}") from None
        line = exc.problem_mark.line + 1
        raise FormatError(
            path,
            f"a second YAML document starts here: a {what} is one document"
            + (f", {one}" if one else ""),
            line=line,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise FormatError(
            path,
            f"YAML syntax error: {exc.problem or exc}",
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        # one line: PyYAML's reader errors put where on a second line
        raise FormatError(path, f"cannot parse: {' '.join(str(exc).split())}") from None


def expect_mapping(doc: Document, value: Any, field_: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FormatError(
            doc.path, f"expected a mapping, got {_kind(value)}", field=doc.where(field_)
        )
    return value


def expect_list(doc: Document, value: Any, field_: str) -> Sequence[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FormatError(doc.path, f"expected a list, got {_kind(value)}", field=doc.where(field_))
    return value


def expect_str(doc: Document, value: Any, field_: str, *, allow_none: bool = True) -> str | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FormatError(
            doc.path, f"expected a string, got {_kind(value)}", field=doc.where(field_)
        )
    return str(value)


def expect_int(doc: Document, value: Any, field_: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            return int(value.strip())
        raise FormatError(
            doc.path,
            f"expected an integer, got {_kind(value)} {value!r:.40}",
            field=doc.where(field_),
        )
    if value < 0:
        raise FormatError(doc.path, f"must not be negative, got {value}", field=doc.where(field_))
    return value


def _kind(value: Any) -> str:
    return describe_type(value)
