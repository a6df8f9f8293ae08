"""Where each attribute of a ``.tf`` file is written: path -> line, for provenance.

python-hcl2 returns values without line numbers, so the text is scanned once more, for structure
only: blocks, attributes, object keys and list items, with strings, heredocs, comments and
expressions skipped. Paths follow the plain values the readers see: a top-level block is
``("resource", "aws_eks_node_group", "demo")`` (also with its position, ``("resource", 0, ...)``);
a nested block is a list item, ``("scaling_config", 0, "min_size")``; object keys lose their
quotes (``("labels", "example.com/role")``); list items are their index. An expression the scan
does not understand is skipped to the end of its line, so a line can be missing (the reader then
shows the nearest stated ancestor) but never wrong by more than the span of one expression.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Path", "line_index"]

Path = tuple[str | int, ...]

_IDENT = re.compile(r"[A-Za-z_][\w-]*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_HEREDOC = re.compile(r"<<-?([A-Za-z_][\w-]*)[ \t]*\r?\n")
_PUNCT = frozenset("{}[]()=:,")
_CLOSE = {"{": "}", "[": "]", "(": ")"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "ident", "string", "number", "heredoc", "newline", a punctuation char, "other"
    text: str
    line: int


def _tokens(text: str) -> Iterator[_Token]:
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            yield _Token("newline", "\n", line)
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif c == "#" or text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
        elif c == '"':
            end = _string_end(text, i + 1)
            yield _Token("string", text[i + 1 : end - 1], line)
            line += text.count("\n", i, end)
            i = end
        elif c == "<" and (match := _HEREDOC.match(text, i)):
            end = _heredoc_end(text, match.end(), match[1])
            yield _Token("heredoc", "", line)
            line += text.count("\n", i, end)
            i = end
        elif c in _PUNCT:
            yield _Token(c, c, line)
            i += 1
        elif match := _IDENT.match(text, i):
            yield _Token("ident", match[0], line)
            i = match.end()
        elif match := _NUMBER.match(text, i):
            yield _Token("number", match[0], line)
            i = match.end()
        else:
            yield _Token("other", c, line)
            i += 1


def _string_end(text: str, i: int) -> int:
    """Index just past the closing quote of a string whose body starts at ``i``
    (escapes and ``${ ... }`` / ``%{ ... }`` templates with nested strings skipped)."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c in "$%" and text.startswith("{", i + 1) and not text.startswith(c, i - 1):
            i = _template_end(text, i + 2)
        elif c == "\n":  # a quoted string cannot span lines: stop at the line's end
            return i
        else:
            i += 1
    return n


def _template_end(text: str, i: int) -> int:
    depth, n = 1, len(text)
    while i < n and depth:
        c = text[i]
        if c == '"':
            i = _string_end(text, i + 1)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    return i


def _heredoc_end(text: str, i: int, marker: str) -> int:
    """Index just past the heredoc's closing marker line (the body starts at ``i``)."""
    closing = re.compile(rf"^[ \t]*{re.escape(marker)}[ \t]*\r?$", re.M)
    match = closing.search(text, i)
    return len(text) if match is None else match.end()


class _Scanner:
    def __init__(self, text: str) -> None:
        self.tokens = list(_tokens(text))
        self.at = 0
        self.lines: dict[Path, int] = {}

    # -- token helpers ---------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> _Token | None:
        at = self.at + ahead
        return self.tokens[at] if at < len(self.tokens) else None

    def take(self) -> _Token | None:
        token = self.peek()
        self.at += 1
        return token

    def skip_newlines(self) -> None:
        while (token := self.peek()) is not None and token.kind == "newline":
            self.at += 1

    def note(self, path: Path, line: int) -> None:
        self.lines.setdefault(path, line)

    # -- structure -------------------------------------------------------------------------

    def body(self, path: Path, *, top: bool = False) -> None:
        """Attributes and blocks until the closing ``}`` (or the end of the text)."""
        counts: dict[str, int] = {}
        while True:
            self.skip_newlines()
            token = self.peek()
            if token is None:
                return
            if token.kind == "}":
                self.at += 1
                return
            if token.kind not in ("ident", "string"):
                self.skip_expression()
                continue
            self.at += 1
            following = self.peek()
            if following is not None and following.kind in ("=", ":"):
                self.at += 1
                self.note((*path, token.text), token.line)
                self.value((*path, token.text))
                continue
            labels = []
            while (label := self.peek()) is not None and label.kind in ("ident", "string"):
                labels.append(label.text)
                self.at += 1
            opener = self.peek()
            if opener is None or opener.kind != "{":
                self.skip_expression()
                continue
            self.at += 1
            index = counts.get(token.text, 0)
            counts[token.text] = index + 1
            inner: Path = (*path, token.text, index, *labels)
            self.note(inner, token.line)
            if top and labels:  # resource "a" "b" -> ("resource", "a", "b") as well
                self.note((*path, token.text, *labels), token.line)
                self.body((*path, token.text, *labels))
                self.lines.setdefault(inner, token.line)
            else:
                self.body(inner)

    def value(self, path: Path) -> None:
        token = self.peek()
        if token is None:
            return
        if token.kind == "{" and not self._for_expression(1):
            self.at += 1
            self.object(path)
            self.skip_expression(progress=False)  # what follows it (an index, an operator)
        elif token.kind == "[" and not self._for_expression(1):
            self.at += 1
            self.list(path)
            self.skip_expression(progress=False)
        else:
            self.skip_expression()

    def member(self, closing: str) -> _Token | None:
        """The first token of the next member inside brackets; None once ``closing`` is consumed."""
        while True:
            self.skip_newlines()
            token = self.peek()
            if token is None:
                return None
            if token.kind == closing:
                self.at += 1
                return None
            if token.kind != ",":
                return token
            self.at += 1

    def object(self, path: Path) -> None:
        while (token := self.member("}")) is not None:
            if token.kind in ("ident", "string", "number"):
                self.at += 1
                following = self.peek()
                if following is not None and following.kind in ("=", ":"):
                    self.at += 1
                    self.note((*path, token.text), token.line)
                    self.value((*path, token.text))
                    continue
            self.skip_expression()

    def list(self, path: Path) -> None:
        index = 0
        while (token := self.member("]")) is not None:
            self.note((*path, index), token.line)
            self.value((*path, index))
            index += 1

    def _for_expression(self, ahead: int) -> bool:
        """``[for ...]`` / ``{for ...}``: comprehensions are skipped, not indexed."""
        at = ahead
        while (token := self.peek(at)) is not None and token.kind == "newline":
            at += 1
        return token is not None and token.kind == "ident" and token.text == "for"

    def skip_expression(self, *, progress: bool = True) -> None:
        """Up to the end of the expression: a newline, ``,`` or a closer at depth 0 (a stray
        closer that ends nothing is skipped, so every call moves on)."""
        start = self.at
        stack: list[str] = []
        while (token := self.peek()) is not None:
            kind = token.kind
            if not stack and kind in ("newline", ",", "}", "]", ")"):
                if kind in ("newline", ",") or (progress and self.at == start):
                    self.at += 1
                return
            self.at += 1
            if kind in _CLOSE:
                stack.append(_CLOSE[kind])
            elif stack and kind == stack[-1]:
                stack.pop()


def line_index(text: str) -> dict[Path, int]:
    """Line (1-based) of every block, attribute, object key and list item of an HCL text."""
    scanner = _Scanner(text)
    # nested thousands deep: the lines found so far are kept (hcl2 refuses such a file anyway)
    with contextlib.suppress(RecursionError):
        scanner.body((), top=True)
    return scanner.lines
