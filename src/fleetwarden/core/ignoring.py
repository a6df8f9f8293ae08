"""Argo CD's ``ignoreDifferences``: fields left out of the workload diff, in Argo CD's own format.

One rule is what an ``Application.spec.ignoreDifferences`` item (or an ``argocd-cm``
``resource.customizations.ignoreDifferences.<group_kind>`` value) says::

    - group: apps                 # "" is the core group; "*" and shell globs match any
      kind: Deployment            # required in an Application; globs allowed
      name: guestbook-ui          # optional, exact
      namespace: default          # optional, exact
      jsonPointers: [/spec/replicas]
      jqPathExpressions: ['.spec.template.spec.containers[] | select(.name == "istio-proxy")']
      managedFieldsManagers: [kube-controller-manager]

Like Argo CD, an ignored field is removed from *both* sides before they are compared (Argo CD
copies the live value into the desired object, which compares the same). Rules apply to objects
in their original list order, before the normaliser sorts lists by name, so an index in a
pointer means what the author of the rule saw.

Supported jq: a documented subset of *paths*, which is all ``ignoreDifferences`` needs:

- ``.a.b``, ``.a."dotted.key"``, ``.a["dotted.key"]`` — object keys
- ``.a[0]``, ``.a[-1]`` — list elements; ``.a[]`` — every element
- ``|`` — pipes between path segments
- ``select(PATH == LITERAL)`` and ``select(PATH != LITERAL)`` (LITERAL: a string, number,
  ``true``, ``false`` or ``null``) and ``select(PATH)`` (truthy), on the current element
- a trailing ``?`` after a segment is accepted and changes nothing (missing paths never fail)

Anything else (``..``, functions other than ``select``, arithmetic, ``and``/``or``, slices)
is refused with a ``ValueError`` that names the position: a rule that silently matched nothing
would hide drift the user expects to be ignored, or worse, show drift they meant to silence.

``managedFieldsManagers`` removes every field the named managers own in the live object's
``metadata.managedFields`` (FieldsV1: ``f:`` keys, ``k:{...}`` list items by key fields,
``v:`` set members, ``i:`` indices).

Pure: no I/O; the YAML of ``argocd-cm`` values is read by ``formats.workloads``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from fleetwarden.core.describing import describe_type
from fleetwarden.core.integers import ascii_int

__all__ = [
    "IgnoreDifference",
    "JqPath",
    "Path",
    "apply_ignore_differences",
    "managed_paths",
    "parse_jq_path",
    "parse_json_pointer",
    "remove_paths",
    "resolve_pointer",
    "rule_from_mapping",
]

PathStep = str | int
Path = tuple[PathStep, ...]


# --------------------------------------------------------------------------- JSON pointers


def parse_json_pointer(text: str) -> tuple[str, ...]:
    """RFC 6901: ``/spec/template/spec/containers/0/image``; ``~1`` is ``/``, ``~0`` is ``~``.

    Steps stay strings: whether ``0`` is a list index or a map key depends on the object.
    """
    if text == "":
        return ()
    if not text.startswith("/"):
        raise ValueError(f"JSON pointer {text!r} must start with '/'")
    steps = []
    for raw in text[1:].split("/"):
        i = raw.find("~")
        while i != -1:
            if i + 1 >= len(raw) or raw[i + 1] not in "01":
                raise ValueError(f"JSON pointer {text!r}: '~' must be followed by 0 or 1")
            i = raw.find("~", i + 2)
        steps.append(raw.replace("~1", "/").replace("~0", "~"))
    return tuple(steps)


def resolve_pointer(obj: Any, steps: Sequence[str]) -> list[Path]:
    """The concrete path a pointer names in ``obj`` ([] when it does not exist there)."""
    path: list[PathStep] = []
    node = obj
    for step in steps:
        if isinstance(node, Mapping):
            if step not in node:
                return []
            path.append(step)
            node = node[step]
        elif isinstance(node, list):
            index = ascii_int(step)
            if index is None or (len(step) > 1 and step[0] == "0"):
                return []
            if index >= len(node):
                return []
            path.append(index)
            node = node[index]
        else:
            return []
    return [tuple(path)]


# --------------------------------------------------------------------------- jq paths


@dataclass(frozen=True, slots=True)
class _Key:
    name: str


@dataclass(frozen=True, slots=True)
class _Index:
    index: int


@dataclass(frozen=True, slots=True)
class _Each:
    pass


@dataclass(frozen=True, slots=True)
class _Select:
    path: tuple[_Key | _Index | _Each, ...]
    op: str  # "==" | "!=" | "truthy"
    literal: Any = None


_Step = _Key | _Index | _Each | _Select


@dataclass(frozen=True, slots=True)
class JqPath:
    """A parsed jq path expression of the supported subset; ``paths(obj)`` evaluates it."""

    text: str
    steps: tuple[_Step, ...]

    def paths(self, obj: Any) -> list[Path]:
        """Every concrete path in ``obj`` the expression selects, in document order."""
        current: list[tuple[Path, Any]] = [((), obj)]
        for step in self.steps:
            current = _apply_step(step, current)
            if not current:
                break
        return [p for p, _ in current]


def _apply_step(step: _Step, items: list[tuple[Path, Any]]) -> list[tuple[Path, Any]]:
    out: list[tuple[Path, Any]] = []
    if isinstance(step, _Key):
        for path, value in items:
            if isinstance(value, Mapping) and step.name in value:
                out.append(((*path, step.name), value[step.name]))
    elif isinstance(step, _Index):
        for path, value in items:
            if isinstance(value, list):
                i = step.index if step.index >= 0 else len(value) + step.index
                if 0 <= i < len(value):
                    out.append(((*path, i), value[i]))
    elif isinstance(step, _Each):
        for path, value in items:
            if isinstance(value, list):
                out.extend(((*path, i), v) for i, v in enumerate(value))
            elif isinstance(value, Mapping):
                out.extend(((*path, k), v) for k, v in value.items())
    else:
        for path, value in items:
            if _select(step, value):
                out.append((path, value))
    return out


def _select(step: _Select, value: Any) -> bool:
    found = [v for _, v in _walk(step.path, value)]
    if step.op == "truthy":
        return any(v is not None and v is not False for v in found)
    hit = any(_jq_equal(v, step.literal) for v in found) if found else step.literal is None
    return hit if step.op == "==" else not hit


def _walk(steps: Sequence[_Key | _Index | _Each], value: Any) -> list[tuple[Path, Any]]:
    items: list[tuple[Path, Any]] = [((), value)]
    for s in steps:
        items = _apply_step(s, items)
    return items


def _jq_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def fail(self, why: str) -> ValueError:
        return ValueError(
            f"jq path {self.text!r} at position {self.pos}: {why} (supported: .a.b, .a[0], "
            '.a[], .a["k"], pipes, select(.x == "v"))'
        )

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n":
            self.pos += 1

    def peek(self, token: str) -> bool:
        self.ws()
        return self.text.startswith(token, self.pos)

    def take(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def pipeline(self) -> tuple[_Step, ...]:
        steps: list[_Step] = []
        while True:
            self.ws()
            if self.take("select"):
                steps.append(self.select())
            else:
                steps.extend(self.path(allow_empty=False))
            if not self.take("|"):
                break
        self.ws()
        if self.pos != len(self.text):
            raise self.fail("unexpected text")
        return tuple(steps)

    def select(self) -> _Select:
        if not self.take("("):
            raise self.fail("expected '(' after select")
        path = self.path(allow_empty=True)
        if self.take("=="):
            op = "=="
        elif self.take("!="):
            op = "!="
        else:
            op = "truthy"
        literal = self.literal() if op != "truthy" else None
        if not self.take(")"):
            raise self.fail("expected ')' closing select")
        self.take("?")
        return _Select(tuple(path), op, literal)

    def literal(self) -> Any:
        self.ws()
        if self.peek('"'):
            return self.string()
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.take(word):
                return value
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in "+-0123456789.eE":
            self.pos += 1
        token = self.text[start : self.pos]
        try:
            return json.loads(token)
        except ValueError:
            self.pos = start
            raise self.fail("expected a string, number, true, false or null") from None

    def string(self) -> str:
        start = self.pos
        if self.text[self.pos] != '"':
            raise self.fail("expected a string")
        self.pos += 1
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\":
                self.pos += 2
                continue
            if ch == '"':
                self.pos += 1
                try:
                    value = json.loads(self.text[start : self.pos])
                except ValueError:
                    raise self.fail("bad string literal") from None
                if not isinstance(value, str):
                    raise self.fail("bad string literal")
                return value
            self.pos += 1
        raise self.fail("unterminated string")

    def path(self, *, allow_empty: bool) -> list[_Key | _Index | _Each]:
        self.ws()
        if not self.peek("."):
            raise self.fail("a path must start with '.'")
        steps: list[_Key | _Index | _Each] = []
        self.pos += 1
        if self.peek("."):
            raise self.fail("recursive descent '..' is not supported")
        first = True
        while True:
            if self.pos < len(self.text) and self.text[self.pos] == "[":
                steps.append(self.bracket())
            elif first and self.pos < len(self.text) and _ident_start(self.text[self.pos]):
                steps.append(_Key(self.ident()))
            elif first and self.pos < len(self.text) and self.text[self.pos] == '"':
                steps.append(_Key(self.string()))
            elif self.pos < len(self.text) and self.text[self.pos] == ".":
                self.pos += 1
                if self.pos < len(self.text) and self.text[self.pos] == '"':
                    steps.append(_Key(self.string()))
                elif self.pos < len(self.text) and _ident_start(self.text[self.pos]):
                    steps.append(_Key(self.ident()))
                elif self.pos < len(self.text) and self.text[self.pos] == "[":
                    steps.append(self.bracket())
                else:
                    raise self.fail("expected a key after '.'")
            else:
                break
            first = False
            if self.pos < len(self.text) and self.text[self.pos] == "?":
                self.pos += 1
        if not steps and not allow_empty:
            return []  # "." alone: the identity (deletes the whole object's content)
        return steps

    def bracket(self) -> _Key | _Index | _Each:
        self.pos += 1  # '['
        self.ws()
        if self.take("]"):
            return _Each()
        if self.peek('"'):
            name = self.string()
            if not self.take("]"):
                raise self.fail("expected ']'")
            return _Key(name)
        start = self.pos
        if self.pos < len(self.text) and self.text[self.pos] == "-":
            self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos] in "0123456789":
            self.pos += 1
        token = self.text[start : self.pos]
        if token in ("", "-"):
            raise self.fail("expected an index, a string or ']' (slices are not supported)")
        if not self.take("]"):
            raise self.fail("expected ']' (slices are not supported)")
        return _Index(int(token))

    def ident(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] in "_$"
        ):
            self.pos += 1
        return self.text[start : self.pos]


def _ident_start(ch: str) -> bool:
    return ch.isalpha() or ch in "_$"


def parse_jq_path(text: str) -> JqPath:
    """Parse one ``jqPathExpressions`` item; ``ValueError`` names what is not supported."""
    if not text.strip():
        raise ValueError("empty jq path expression")
    steps = _Parser(text).pipeline()
    if not steps:
        raise ValueError(f"jq path {text!r} selects the whole object; refusing to ignore it all")
    return JqPath(text, steps)


# --------------------------------------------------------------------------- managed fields

_Pattern = tuple[tuple[str, Any], ...]  # ("f", key) | ("k", {fields}) | ("v", value) | ("i", n)


def managed_paths(live: Mapping[str, Any], managers: Iterable[str]) -> list[_Pattern]:
    """The leaf field patterns that ``managers`` own in ``live``'s ``metadata.managedFields``."""
    wanted = set(managers)
    meta = live.get("metadata")
    entries = meta.get("managedFields") if isinstance(meta, Mapping) else None
    if not wanted or not isinstance(entries, list):
        return []
    out: list[_Pattern] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get("manager") not in wanted:
            continue
        if entry.get("subresource") == "status":
            continue  # status is never compared
        fields = entry.get("fieldsV1")
        if isinstance(fields, Mapping):
            _collect(fields, (), out)
    return out


def _collect(fields: Mapping[str, Any], prefix: _Pattern, out: list[_Pattern]) -> None:
    children = [k for k in fields if k != "."]
    if not children:
        if prefix:
            out.append(prefix)
        return
    if "." in fields and prefix:
        # the manager owns the item itself (e.g. a container it added): ignore all of it
        out.append(prefix)
        return
    for key in children:
        step = _fields_step(key)
        if step is None:
            continue
        value = fields[key]
        _collect(value if isinstance(value, Mapping) else {}, (*prefix, step), out)


def _fields_step(key: str) -> tuple[str, Any] | None:
    kind, _, rest = key.partition(":")
    if kind == "f":
        return ("f", rest)
    if kind == "k":
        try:
            return ("k", json.loads(rest))
        except ValueError:
            return None
    if kind == "v":
        try:
            return ("v", json.loads(rest))
        except ValueError:
            return None
    if kind == "i" and (index := ascii_int(rest)) is not None:
        return ("i", index)
    return None


def _resolve_pattern(obj: Any, pattern: _Pattern) -> list[Path]:
    path: list[PathStep] = []
    node = obj
    for kind, arg in pattern:
        if kind == "f":
            if not isinstance(node, Mapping) or arg not in node:
                return []
            path.append(arg)
            node = node[arg]
            continue
        if not isinstance(node, list):
            return []
        index: int | None = None
        if kind == "i":
            index = arg if arg < len(node) else None
        elif kind == "k" and isinstance(arg, Mapping):
            for i, item in enumerate(node):
                if isinstance(item, Mapping) and all(
                    _key_field_equal(item.get(k), v) for k, v in arg.items()
                ):
                    index = i
                    break
        elif kind == "v":
            for i, item in enumerate(node):
                if item == arg:
                    index = i
                    break
        if index is None:
            return []
        path.append(index)
        node = node[index]
    return [tuple(path)]


def _key_field_equal(have: Any, want: Any) -> bool:
    # FieldsV1 keys carry the defaulted value ("protocol":"TCP"); the desired side may omit it
    if have is None and want == "TCP":
        return True
    return bool(have == want)


# --------------------------------------------------------------------------- removal


def remove_paths(obj: Mapping[str, Any], paths: Iterable[Path]) -> dict[str, Any]:
    """A copy of ``obj`` without the given paths; only the containers on the way are copied.

    List elements are removed from the highest index down, so several removals from one list
    (``containers[] | select(...)``) do not shift each other.
    """
    ordered = sorted(
        {p for p in paths if p},
        key=lambda p: tuple((0, s) if isinstance(s, int) else (1, s) for s in p),
        reverse=True,
    )
    root: Any = dict(obj)
    copied: set[tuple[PathStep, ...]] = {()}
    for path in ordered:
        node = root
        parent_path: tuple[PathStep, ...] = ()
        ok = True
        for step in path[:-1]:
            child = _child(node, step)
            if child is None:
                ok = False
                break
            child_path = (*parent_path, step)
            if child_path not in copied:
                child = dict(child) if isinstance(child, Mapping) else list(child)
                node[step] = child
                copied.add(child_path)
            node = child
            parent_path = child_path
        if not ok:
            continue
        last = path[-1]
        if isinstance(node, dict) and isinstance(last, str):
            node.pop(last, None)
        elif isinstance(node, list) and isinstance(last, int) and 0 <= last < len(node):
            del node[last]
    result: dict[str, Any] = root
    return result


def _child(node: Any, step: PathStep) -> Any:
    if isinstance(node, dict) and isinstance(step, str):
        child = node.get(step)
    elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
        child = node[step]
    else:
        return None
    return child if isinstance(child, Mapping | list) else None


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class IgnoreDifference:
    """One ``ignoreDifferences`` item. ``group``/``kind`` are globs; name/namespace exact."""

    kind: str = "*"
    group: str = "*"
    name: str | None = None
    namespace: str | None = None
    json_pointers: tuple[tuple[str, ...], ...] = ()
    jq_paths: tuple[JqPath, ...] = ()
    managers: tuple[str, ...] = ()
    source: str = ""

    def applies(self, group: str, kind: str, namespace: str | None, name: str) -> bool:
        if self.name is not None and self.name != name:
            return False
        if self.namespace is not None and self.namespace != (namespace or ""):
            return False
        return fnmatchcase(group, self.group) and fnmatchcase(kind, self.kind)

    def paths(self, obj: Mapping[str, Any], live: Mapping[str, Any] | None) -> list[Path]:
        """Concrete paths this rule removes from ``obj`` (``live`` names the managers' fields)."""
        out: list[Path] = []
        for pointer in self.json_pointers:
            out.extend(resolve_pointer(obj, pointer))
        for jq in self.jq_paths:
            out.extend(jq.paths(obj))
        if self.managers and live is not None:
            for pattern in managed_paths(live, self.managers):
                out.extend(_resolve_pattern(obj, pattern))
        return out


def rule_from_mapping(
    raw: Mapping[str, Any],
    *,
    group: str | None = None,
    kind: str | None = None,
    source: str = "",
) -> IgnoreDifference:
    """One rule from its YAML/JSON mapping. ``group``/``kind`` come from an ``argocd-cm`` key
    (``resource.customizations.ignoreDifferences.apps_Deployment``) when given.

    ``ValueError`` names the field that is wrong (unknown keys are refused: a typo such as
    ``jsonPointer`` would otherwise silently ignore nothing).
    """
    known = {
        "group",
        "kind",
        "name",
        "namespace",
        "jsonPointers",
        "jqPathExpressions",
        "managedFieldsManagers",
    }
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(
            f"unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )

    def text(field: str) -> str | None:
        value = raw.get(field)
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"{field}: expected a string, got {describe_type(value)}")
        return value

    def texts(field: str) -> list[str]:
        value = raw.get(field)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{field}: expected a list of strings")
        return list(value)

    pointers = []
    for i, p in enumerate(texts("jsonPointers")):
        try:
            pointers.append(parse_json_pointer(p))
        except ValueError as exc:
            raise ValueError(f"jsonPointers[{i}]: {exc}") from None
    jqs = []
    for i, p in enumerate(texts("jqPathExpressions")):
        try:
            jqs.append(parse_jq_path(p))
        except ValueError as exc:
            raise ValueError(f"jqPathExpressions[{i}]: {exc}") from None
    rule_group = group if group is not None else text("group")
    rule_kind = kind if kind is not None else text("kind")
    return IgnoreDifference(
        kind=rule_kind if rule_kind else "*",
        group="" if rule_group is None else rule_group,
        name=text("name"),
        namespace=text("namespace"),
        json_pointers=tuple(pointers),
        jq_paths=tuple(jqs),
        managers=tuple(texts("managedFieldsManagers")),
        source=source,
    )


def apply_ignore_differences(
    rules: Sequence[IgnoreDifference],
    identity: tuple[str, str, str | None, str],
    desired: Mapping[str, Any] | None,
    live: Mapping[str, Any] | None,
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """Both sides without the fields the matching rules name. ``identity`` is
    ``(group, kind, namespace, name)``. Objects no rule matches are returned as they are."""
    group, kind, namespace, name = identity
    matching = [r for r in rules if r.applies(group, kind, namespace, name)]
    if not matching:
        return desired, live

    def strip(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if obj is None:
            return None
        paths: list[Path] = []
        for rule in matching:
            paths.extend(rule.paths(obj, live))
        return remove_paths(obj, paths) if paths else obj

    return strip(desired), strip(live)
