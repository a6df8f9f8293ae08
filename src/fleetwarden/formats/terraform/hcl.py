"""HCL text as plain values: literals as values, anything Terraform evaluates as ``Expr``."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import hcl2
from hcl2.utils import process_escape_sequences
from lark.exceptions import LarkError, UnexpectedInput

from fleetwarden.formats.errors import FormatError

__all__ = ["Expr", "block", "blocks", "body_of", "first_unknown", "plain", "source_text"]

# Real .tf files are kilobytes. hcl2 reads about 50-100 kB a second, so the limit keeps a
# hostile file from holding the reader for more than a few seconds.
_MAX_CHARS = 256 * 1024
_META_KEYS = frozenset(
    {"__is_block__", "__comments__", "__inline_comments__", "__start_line__", "__end_line__"}
)
_INTERPOLATION = re.compile(r"(?<!\$)\$\{|(?<!%)%\{")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_HEREDOC = re.compile(r"<<(-?)([A-Za-z_][\w.-]*)\r?\n(.*?)\r?\n?[ \t]*\2\Z", re.S)


@dataclass(frozen=True, slots=True)
class Expr:
    """An expression Terraform would have to evaluate, kept as written."""

    text: str


def body_of(path: str, text: str) -> dict[Any, Any]:
    """The file's top-level body as plain values; ``FormatError`` for anything not HCL."""
    if len(text) > _MAX_CHARS:
        raise FormatError(path, f"file too large for a Terraform file ({len(text)} characters)")
    if "\x00" in text:
        raise FormatError(path, "binary data, not a Terraform file")
    try:
        body = plain(hcl2.loads(text))
    except UnexpectedInput as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        line = exc.line if isinstance(exc.line, int) and exc.line > 0 else None
        raise FormatError(path, f"HCL syntax error: {message}", line=line) from None
    except LarkError as exc:  # a VisitError from hcl2's transformer wraps the real cause
        cause = getattr(exc, "orig_exc", exc)
        raise FormatError(path, f"HCL error: {cause}") from None
    except RecursionError:
        raise FormatError(path, "nested too deeply to read") from None
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError) as exc:
        raise FormatError(path, f"cannot read HCL: {exc}") from None
    if not isinstance(body, dict):
        raise FormatError(path, "not a Terraform file (no top-level body)")
    return body


def plain(raw: Any) -> Any:
    """hcl2's output as plain values.

    hcl2 keeps the source form: strings and block labels keep their quotes and escapes,
    heredocs their markers, expressions come as ``${...}``, blocks carry ``__is_block__`` and
    comments ``__comments__``. Here literal strings become their value, numbers stay numbers,
    anything Terraform would evaluate becomes an ``Expr`` with its text, and metadata goes.
    """
    if isinstance(raw, dict):
        return {plain(k): plain(v) for k, v in raw.items() if k not in _META_KEYS}
    if isinstance(raw, list):
        return [plain(v) for v in raw]
    if not isinstance(raw, str):
        return raw  # int, float, bool, None
    if raw.startswith("${") and raw.endswith("}"):
        inner = raw[2:-1].strip()
        if _NUMBER.fullmatch(inner):
            number = float(inner)
            return int(number) if number.is_integer() and "." not in inner else number
        return Expr(inner)
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        quoted = raw[1:-1]
        if _INTERPOLATION.search(quoted):
            return Expr(raw)
        heredoc = _HEREDOC.match(quoted)
        if heredoc:  # heredocs keep backslashes: HCL does not process escapes in them
            text = textwrap.dedent(heredoc[3]) if heredoc[1] else heredoc[3]
        else:
            text = process_escape_sequences(quoted)
        return text.replace("$${", "${").replace("%%{", "%{")
    return raw


def first_unknown(value: Any) -> Expr | None:
    """The first expression left anywhere in a (resolved) value, or None when fully known."""
    if isinstance(value, Expr):
        return value
    items: Iterator[Any] = iter(())
    if isinstance(value, dict):
        items = (x for kv in value.items() for x in kv)
    elif isinstance(value, list):
        items = iter(value)
    for item in items:
        found = first_unknown(item)
        if found is not None:
            return found
    return None


def source_text(value: Any) -> str:
    if isinstance(value, Expr):
        return value.text
    return json.dumps(value, default=str, ensure_ascii=False)


def blocks(body: Mapping[Any, Any], kind: str, labels: int) -> Iterator[tuple[Any, ...]]:
    """(label, ..., block body) for every ``kind`` block with that many labels."""
    entries = body.get(kind)
    for entry in entries if isinstance(entries, list) else ():
        yield from _labelled(entry, labels, ())


def _labelled(entry: Any, labels: int, seen: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
    if not isinstance(entry, dict):
        return
    if labels == 0:
        yield (*seen, entry)
        return
    for label, inner in entry.items():
        if isinstance(label, str):
            yield from _labelled(inner, labels - 1, (*seen, label))


def block(body: Mapping[Any, Any], name: str) -> dict[Any, Any]:
    """The first ``name`` block (or object attribute) of a body; {} when there is none."""
    value = body.get(name)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return value[0]
    return value if isinstance(value, dict) else {}
