"""Skimming manifests: each document's top-level ``apiVersion``, ``kind`` and
``metadata.name``/``namespace`` without building the whole object.

The deprecation check needs only those four values, and building every object of a large
manifest tree (Python dicts for every CRD schema and ConfigMap) is most of its time.
``skim_yaml`` reads them from the lines that hold them, or returns ``None`` when it cannot be
sure; the caller then parses the file fully, so the result is always the full parse's:

- libyaml's own parser (C, the one ``CSafeLoader`` runs, no Python objects) must accept the
  whole stream, so a syntax error anywhere sends the file to the full parse, which reports it
  with its line exactly as before;
- nothing may be in the text that makes PyYAML's composer or safe constructor fail or changes
  what the top-level keys mean: anchors, aliases, tags, merge keys, complex keys, directives,
  ``...``, tab indentation, line breaks other than ``\\n``/``\\r\\n``, a quoted scalar or a flow
  collection spanning lines, a flow collection that is not flat, a plain ``=``, a ``0b_``/``0x_``
  integer, an invalid timestamp, an integer too long for ``int()``. These are found by regular
  expressions that may see one where there is none (a quote inside a block scalar): that costs a
  full parse, never a wrong answer;
- each document must be a block mapping starting at column 0; the values read must be a plain
  scalar on the key's line (resolved as PyYAML resolves it) or a quoted one without escapes, and
  ``metadata`` a block mapping. Anything else (a ``List``, a value on the next line, a multi-line
  plain scalar) is a full parse.

``skim_json`` reads a JSON text as JSON (orjson), as Pluto does: a text that is valid JSON is
taken as such even where PyYAML's YAML 1.1 parser would refuse it (a key over 1,024 characters);
values that are not strings go to the full parse, since YAML 1.1 reads ``1e5`` as a string.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, NamedTuple

import orjson
import yaml

__all__ = ["Head", "skim_json", "skim_yaml"]


class Head(NamedTuple):
    """A document's top-level values as ``Document`` exposes them: ``""`` for an apiVersion or
    kind that is missing or not a string, ``None`` for such a name or namespace."""

    api_version: str
    kind: str
    name: str | None
    namespace: str | None


_CParser: Any  # libyaml's parser without composing: validates the stream in C
try:
    from yaml import _yaml

    _CParser = _yaml.CParser
except ImportError:  # PyYAML without libyaml: every file is parsed fully
    _CParser = None

_RESOLVER = yaml.resolver.Resolver()
_STR = "tag:yaml.org,2002:str"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_NULL = "tag:yaml.org,2002:null"

# Hazards are found by scanning for their first character (the regex engine skips ahead to it)
# and then asking whether a token may start there (`_at_token_start`).
_OTHER_BREAKS = re.compile(r"[\r\x85\u2028\u2029\ufeff]")  # other line breaks, a late BOM
_TAB_INDENT = re.compile(r"\n *\t")
_MARKERS = re.compile(r"\n(?:%|\.\.\.(?:[ \t]|$))", re.MULTILINE)  # a directive, a document end
_LONG_RUN = 4300  # digits past int()'s limit
_LONG_INT = re.compile(rf"[0-9_]{{{_LONG_RUN}}}")
_DIGITS = frozenset("0123456789_")
_SPECIAL = re.compile(r"[&*!?=]")
_EQUALS_ALONE = re.compile(r"=[ \t]*(?:$|#|:)", re.MULTILINE)  # the scalar `=`
# a quoted scalar still open at the end of its line, and the whole of one
# (one pattern per kind: a match holds no other quote of its kind that could start a token,
# only an escaped `\"` or a doubled `''`, so matching without overlaps misses none)
_OPEN_DQ = re.compile(r"\"(?:[^\"\\\n]|\\.)*\\?$", re.MULTILINE)
_OPEN_SQ = re.compile(r"'(?:[^'\n]|'')*$", re.MULTILINE)
_SPACES = re.compile(" *")
_DQ_SPAN = re.compile(r'"(?:[^"\\]|\\[\s\S])*"')
_SQ_SPAN = re.compile(r"'(?:[^']|'')*'")
_DATE_DASHES = re.compile(r"-[0-9]{1,2}-[0-9]")  # starts with a literal: found fast
_TIMESTAMP_LIKE = re.compile(
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}"
    r"(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?"
)
# a flow collection opening; its line must be one flat collection
_FLOW_OPEN = re.compile(r"[\[{]")
_Q = r"(?:\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\n]|'')*')"
_PLAIN_IN_FLOW = r"[A-Za-z0-9_./$][^,\[\]{}:#\n\"']*?"
_S = rf"(?:{_Q}|{_PLAIN_IN_FLOW})"
_PAIR = rf"(?:{_Q}[ \t]*:[ \t]*{_S}|{_PLAIN_IN_FLOW}[ \t]*:[ \t]+{_S})"
_SEQ = rf"\[[ \t]*(?:{_S}(?:[ \t]*,[ \t]*{_S})*(?:[ \t]*,)?)?[ \t]*\]"
_MAP = rf"\{{[ \t]*(?:{_PAIR}(?:[ \t]*,[ \t]*{_PAIR})*(?:[ \t]*,)?)?[ \t]*\}}"
# a plain key: no indicator first, `:` only when not followed by a space
_PLAIN_KEY = r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^:#\n\[\]{}]|:(?=\S))*?"
_FLAT_LINE = re.compile(
    rf"[ \t]*(?:-[ \t]+)*(?:(?:{_PLAIN_KEY}|{_Q})[ \t]*:[ \t]+)?"
    rf"(?:{_SEQ}|{_MAP})[ \t]*(?:#.*)?"
)

_DOC_START = re.compile(r"\n---(?=[ \t\n]|\Z)(.*)")
_CONTENT = re.compile(r"\n(?![ \t]*(?:#|\n|\Z))")  # a line that is not blank/comment
_TOP_KEY = re.compile(r"\n(apiVersion|kind|metadata)[ \t]*:(.*)")
_QUOTED_TOP = re.compile(r"\n[\"']")
_COLUMN0 = re.compile(r"\n[^ \t\n#]")  # the next top-level line
_FIRST_KEY = re.compile(rf"{_PLAIN_KEY}[ \t]*:(?:[ \t]|$)", re.MULTILINE)
_NEXT_CONTENT = re.compile(r"(?:[ \t]*\n)*( *)([^ \n]?)")
_DQ = re.compile(r"\"([^\"\\]*)\"[ \t]*(?:#.*)?")
_SQ = re.compile(r"'((?:[^']|'')*)'[ \t]*(?:#.*)?")
_COMMENT = re.compile(r"[ \t]#")
_COMMENT_TAIL = re.compile(r"(?:^|[ \t])#.*")
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@` \t")  # what a plain scalar here may not start with


def _plain_tag(value: str) -> str:
    """The tag PyYAML's resolver gives a plain scalar (str, int, bool, null, timestamp...)."""
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    return tag


class _Unsure(Exception):
    """The line scan cannot be sure: parse the file fully."""


def skim_yaml(text: str) -> list[Head] | None:
    """The heads of every document that is not empty, in order; ``None`` when unsure."""
    if _CParser is None or ("\r" in text and not _crlf_only(text)):
        return None
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    # every line, the first too, starts after a "\n": patterns find line starts by that
    # literal character (fast), never by `^` (tried at every position)
    lines = "\n" + text
    if _hazard(lines) or _bad_quote(lines) or _bad_timestamp(lines) or _bad_flow(lines):
        return None
    try:
        _CParser(text).raw_parse()
    except (yaml.YAMLError, ValueError, TypeError):
        return None  # the full parse says what is wrong, with the line
    try:
        return _heads(lines)
    except _Unsure:
        return None


def skim_json(text: str) -> list[Head] | None:
    """The heads of a JSON object (a ``List``'s items); ``None`` when it is not JSON, not an
    object, or a value read is not a string."""
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    items = body.get("items")
    if body.get("kind") == "List" and isinstance(items, list):
        if not all(isinstance(item, dict) for item in items):
            return None
        bodies: list[dict[str, Any]] = items
    else:
        bodies = [body]
    heads = []
    for b in bodies:
        meta = b.get("metadata")
        values = [b.get("apiVersion"), b.get("kind")]
        values += (
            [meta.get("name"), meta.get("namespace")] if isinstance(meta, dict) else [None] * 2
        )
        if any(v is not None and not isinstance(v, str) for v in values):
            return None
        heads.append(Head(values[0] or "", values[1] or "", values[2], values[3]))
    return heads


def _crlf_only(text: str) -> bool:
    return text.count("\r") == text.count("\r\n")


def _at_token_start(text: str, i: int) -> bool:
    """Whether a token may start at ``i`` in block context: only the indentation before it,
    or an indicator ``:``, ``-``, ``?`` and a space (inside flow collections `_bad_flow` rules)."""
    before = text[text.rfind("\n", 0, i) + 1 : i]
    stripped = before.rstrip(" \t")
    return not stripped or (len(stripped) < len(before) and stripped[-1] in ":-?")


def _hazard(text: str) -> bool:
    """Anything that makes the composer or the safe constructor fail, or gives a top-level line
    another meaning: see the module docstring."""
    if not text.isascii() and _OTHER_BREAKS.search(text):  # past ASCII; \r: skim_yaml
        return True
    if "<<" in text or "0b_" in text or "0x_" in text:
        return True
    if "\t" in text and _TAB_INDENT.search(text):
        return True
    if _MARKERS.search(text) or _long_int(text):
        return True
    for m in _SPECIAL.finditer(text):
        i = m.start()
        c, after = text[i], text[i + 1 : i + 2]
        if c in "&*":
            hit = after.isalnum() or after in ("_", "-")  # an anchor or alias name follows
        elif c == "?":
            hit = after in ("", " ", "\t", "\n")  # a complex key
        elif c == "=":
            hit = _EQUALS_ALONE.match(text, i) is not None
        else:
            hit = True  # a tag
        if hit and _at_token_start(text, i):
            return True
    return False


def _long_int(text: str) -> bool:
    """A run of 4,300 digits (or ``_``): int() refuses it. Such a run covers a multiple of
    half its length, so only the windows around those points are searched (trying the
    pattern at every digit of a large file was a tenth of the skim)."""
    step = _LONG_RUN // 2
    for at in range(step, len(text), step):
        if text[at] in _DIGITS and _LONG_INT.search(text, max(at - _LONG_RUN, 0), at + _LONG_RUN):
            return True
    return False


def _bad_quote(text: str) -> bool:
    """A quoted scalar going on over lines not all indented deeper than the line it opens on:
    libyaml does not check their indentation, so such a line could pass for a key."""
    if '"' not in text and "'" not in text:
        return False
    for pattern, span_of in ((_OPEN_DQ, _DQ_SPAN), (_OPEN_SQ, _SQ_SPAN)):
        for m in pattern.finditer(text):
            quote_at = m.start()
            if not _at_token_start(text, quote_at):
                continue  # a quote inside a plain scalar
            span = span_of.match(text, quote_at)
            if span is None:
                return True  # never closed: the full parse reports it
            line_start = text.rfind("\n", 0, quote_at) + 1
            indent = _SPACES.match(text, line_start).end() - line_start  # type: ignore[union-attr]
            if _shallow(indent).search(text, quote_at, span.end()):
                return True
    return False


@lru_cache(maxsize=64)
def _shallow(indent: int) -> re.Pattern[str]:
    """A line indented ``indent`` spaces or less (blank lines aside)."""
    return re.compile(rf"\n {{0,{indent}}}[^ \n]")


def _bad_timestamp(text: str) -> bool:
    """A scalar PyYAML would build as a timestamp and fail on (``2001-02-30``)."""
    if "-" not in text:
        return False
    constructor = yaml.constructor.SafeConstructor()
    pos = 0
    while (dashes := _DATE_DASHES.search(text, pos)) is not None:
        pos = dashes.start() + 1  # overlapping: a candidate never hides the next
        m = _TIMESTAMP_LIKE.match(text, max(dashes.start() - 4, 0))
        if m is None:
            continue
        value = m.group()
        if _plain_tag(value) != _TIMESTAMP:
            continue
        try:
            constructor.construct_yaml_timestamp(yaml.ScalarNode(_TIMESTAMP, value))
        except Exception:  # whatever it raises, the full parse raises too
            return True
    return False


def _bad_flow(text: str) -> bool:
    """A flow collection that is not one flat collection closed on its line."""
    if "[" not in text and "{" not in text:
        return False
    seen = -1
    for m in _FLOW_OPEN.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if start == seen or not _at_token_start(text, m.start()):
            continue  # judged already, or inside a plain scalar (flow inside flow: its line)
        seen = start
        end = text.find("\n", start)
        if not _FLAT_LINE.fullmatch(text, start, len(text) if end < 0 else end):
            return True
    return False


def _heads(text: str) -> list[Head]:
    """``text`` starts with a "\n"; each document runs from a line end to a line end."""
    starts, ends = [0], []
    for m in _DOC_START.finditer(text):
        rest = m.group(1).strip(" \t")
        if rest and not rest.startswith("#"):
            raise _Unsure  # content on the `---` line
        ends.append(m.start())
        starts.append(m.end())
    ends.append(len(text))
    heads = []
    for start, end in zip(starts, ends, strict=True):
        head = _document(text, start, end)
        if head is not None:
            heads.append(head)
    return heads


def _document(text: str, start: int, end: int) -> Head | None:
    first = _CONTENT.search(text, start, end)
    if first is None:
        return None  # empty: the full parse has no document (or None) here
    if not _FIRST_KEY.match(text, first.end(), end) or _QUOTED_TOP.search(text, start, end):
        raise _Unsure  # not a block mapping at column 0, or a quoted key there
    values: dict[str, Any] = {}
    meta: tuple[str | None, str | None] = (None, None)
    for m in _TOP_KEY.finditer(text, start, end):
        key, rest = m.group(1), m.group(2)
        if key == "metadata":
            meta = _metadata(text, rest, m.end(), end)
        else:
            values[key] = _value(text, rest, m.end(), 0)
    api_version, kind = values.get("apiVersion"), values.get("kind")
    if kind == "List":
        raise _Unsure  # the full parse expands its items
    return Head(
        api_version if isinstance(api_version, str) else "",
        kind if isinstance(kind, str) else "",
        *meta,
    )


_NOT_STR = object()


def _value(text: str, rest: str, line_end: int, indent: int) -> Any:
    """The scalar after ``key:`` on its line: a ``str``, or ``_NOT_STR`` (a number, a bool,
    null)."""
    rest = rest.lstrip(" \t")
    if not rest or rest[0] == "#":
        raise _Unsure  # the value is on the next lines, or null
    c = rest[0]
    if c == '"':
        m = _DQ.fullmatch(rest)
        if m is None:
            raise _Unsure  # escapes, or more after it
        return m.group(1)
    if c == "'":
        m = _SQ.fullmatch(rest)
        if m is None:
            raise _Unsure
        return m.group(1).replace("''", "'")
    if c in _INDICATORS:
        raise _Unsure
    cut = _COMMENT.search(rest)
    plain = (rest[: cut.start()] if cut else rest).rstrip(" \t")
    nxt = _NEXT_CONTENT.match(text, line_end + 1)
    if nxt is not None and nxt.group(2) not in ("", "#") and len(nxt.group(1)) > indent:
        raise _Unsure  # a plain scalar going on over the next lines
    if _plain_tag(plain) != _STR:
        return _NOT_STR
    return plain


def _metadata(text: str, rest: str, line_end: int, end: int) -> tuple[str | None, str | None]:
    """``metadata``'s name and namespace; ``line_end`` is the "\n" ending its line."""
    value = _COMMENT_TAIL.sub("", rest).strip(" \t")
    if value == "{}" or (value and _plain_tag(value) == _NULL):
        return None, None  # an empty mapping, or null
    if value:
        raise _Unsure  # flow style or a scalar
    first = _CONTENT.search(text, line_end, end)
    if first is None:
        return None, None  # null: nothing follows
    at = first.end()
    if text[at] != " ":
        if text[at] == "-":
            raise _Unsure  # a sequence at column 0
        return None, None  # null: the next top-level key follows
    stop = _COLUMN0.search(text, line_end, end)
    body_end = stop.start() if stop else end
    indent = _SPACES.match(text, at).end() - at  # type: ignore[union-attr]
    if text[at + indent] in _INDICATORS:
        raise _Unsure  # a sequence, a quoted or complex key
    if _quoted_key(indent).search(text, line_end, body_end):
        raise _Unsure
    found: dict[str, Any] = {}
    for m in _meta_key(indent).finditer(text, line_end, body_end):
        found[m.group(1)] = _value(text, m.group(2), m.end(), indent)
    name, namespace = found.get("name"), found.get("namespace")
    return (
        name if isinstance(name, str) else None,
        namespace if isinstance(namespace, str) else None,
    )


@lru_cache(maxsize=32)
def _meta_key(indent: int) -> re.Pattern[str]:
    return re.compile(rf"\n {{{indent}}}(name|namespace)[ \t]*:(.*)")


@lru_cache(maxsize=32)
def _quoted_key(indent: int) -> re.Pattern[str]:
    return re.compile(rf"\n {{{indent}}}[\"'?{{\[]")
