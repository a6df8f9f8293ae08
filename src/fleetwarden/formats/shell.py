"""Shell text as a POSIX shell reads it, as far as kubelet flags in scripts need: its words
(quotes removed, an unquoted operator ending a word) and the text without its comments; and the
items of a systemd ``Environment=`` value (``unit_words``), which scripts write into drop-ins.

No expansion is done (a variable stays as written: ``formats.bootstrap`` leaves it unresolved),
nor any other shell grammar. Pure.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["uncommented", "unit_words", "words"]


def words(text: str, *, operators: bool = True) -> list[str] | None:
    """The words of a shell text; None where its quotes (or a ``$(...)``, ``${...}``,
    backquotes) do not close (a script fragment). ``operators``: POSIX shell token recognition
    (2.3): an unquoted operator character (``;``, ``&``, ``|``, ``<``, ``>``, ``(``, ``)``) ends
    a word and is a token of its own (a run of ``;&|<>`` one token: ``&&``, ``>>``), so
    ``(kubelet --max-pods=20)`` passes ``--max-pods=20``; quotes are removed (a backslash
    escapes the next character, in double quotes only ``$`` `````` ``"`` ``\\`` and a
    newline); a command or parameter substitution stays in its word as written
    (``--max-pods=$(cat f)``: unresolved). Else words are split at spaces only, quotes
    removed (``shlex``). Comments are removed before (``uncommented``)."""
    if operators:
        return _posix_words(text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars="")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


_BLANK = " \t\r\n"
_RUN = ";&|<>"  # operator characters a run of which is one token
_IN_DOUBLE_QUOTES = '$`"\\\n'  # what a backslash escapes inside double quotes


def _posix_words(text: str) -> list[str] | None:
    out: list[str] = []
    word: list[str] = []
    started = False  # a word is open ('' is one)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _BLANK or c in _RUN or c in "()":
            if started:
                out.append("".join(word))
                word, started = [], False
            if c in _BLANK:
                i += 1
                continue
            j = i + 1
            while c in _RUN and j < n and text[j] in _RUN:
                j += 1
            out.append(text[i:j])
            i = j
            continue
        started = True
        if c == "\\":
            if text[i + 1 : i + 2] not in ("", "\n"):  # backslash-newline: a continuation
                word.append(text[i + 1])
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                return None
            word.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i = _double_quoted(text, i + 1, word)
        elif c == "`" or text.startswith(("$(", "${"), i):
            end = _substitution_end(text, i)
            word.append(text[i:end])
            i = end
        else:
            word.append(c)
            i += 1
        if i < 0:
            return None
    if started:
        out.append("".join(word))
    return out


def _double_quoted(text: str, i: int, word: list[str]) -> int:
    """The text of a double-quoted string from ``i`` (after its quote) added to ``word``; the
    index after its closing quote (-1: it does not close)."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\" and text[i + 1 : i + 2] and text[i + 1] in _IN_DOUBLE_QUOTES:
            if text[i + 1] != "\n":
                word.append(text[i + 1])
            i += 2
        elif c == "`" or text.startswith(("$(", "${"), i):
            end = _substitution_end(text, i)
            if end < 0:
                return -1
            word.append(text[i:end])
            i = end
        else:
            word.append(c)
            i += 1
    return -1


def _substitution_end(text: str, i: int) -> int:
    """The index after the ``$(...)`` (``$((...))``), ``${...}`` or backquoted command that
    starts at ``i``, its own quotes and nested substitutions skipped (-1: it does not close)."""
    n = len(text)
    if text[i] == "`":
        j = i + 1
        while j < n and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        return j + 1 if j < n else -1
    close = ")" if text[i + 1] == "(" else "}"
    depth, j = 0, i + 1
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "'" and close == ")":
            end = text.find("'", j + 1)
            if end < 0:
                return -1
            j = end + 1
            continue
        if c == '"':
            j = _double_quoted(text, j + 1, [])
            if j < 0:
                return -1
            continue
        if c == "`" or (c == "$" and text.startswith(("$(", "${"), j)):
            end = _substitution_end(text, j)
            if end < 0:
                return -1
            j = end
            continue
        if c == text[i + 1]:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


def unit_words(value: str) -> list[str] | None:
    """The items of a systemd setting's value (``Environment=``), as systemd.syntax(7)
    "Quoting" splits them: at blanks, where a quote that begins an item wraps all of it to the
    matching quote (removed); None where such a quote does not close (systemd ignores the
    line). A quote inside an item is kept, and so is a backslash with the character it escapes:
    what systemd makes of those is not followed here, so a reader can leave such a value alone."""
    items: list[str] = []
    i, n = 0, len(value)
    while i < n:
        if value[i] in " \t":
            i += 1
            continue
        quote = value[i] if value[i] in "'\"" else ""
        j, item = i + 1 if quote else i, []
        while j < n and (value[j] != quote if quote else value[j] not in " \t"):
            step = 2 if value[j] == "\\" else 1
            item.append(value[j : j + step])
            j += step
        if quote and j >= n:
            return None
        items.append("".join(item))
        i = j + 1 if quote else j
    return items


# a whole line commented out -- in a script, an environment file or a systemd unit alike
_COMMENT_LINE = re.compile(r"[ \t]*#")
# "<<WORD", "<<-WORD", "<<'WORD'", '<<"WORD"' (not "<<<", a here-string)
_HEREDOC = re.compile(r"""<<(-?)[ \t]*(?:'([^'\n]*)'|"([^"\n]*)"|\\?([A-Za-z0-9_]+))""")
_WORD_END = " \t;&|()<>"  # after these, unquoted, a new word begins


def uncommented(text: str) -> str:
    """A shell text without its comments (POSIX shell, 2.3 Token Recognition: a ``#`` that
    begins a word starts a comment to the end of the line: ``--max-pods=20 # was 30`` passes
    ``--max-pods=20`` alone). A ``#`` inside a word (``a#b``, ``$#``, ``${#x}``) or quotes is
    no comment -- unlike shlex's, which cuts a word at any ``#``. A here-document's lines are
    the file it writes, not the shell's: only whole lines commented out are dropped there (a
    comment in an environment file or a systemd unit alike), as they are everywhere outside
    quotes."""
    out: list[str] = []
    quote = ""  # the quote open at the end of the line before
    pending: list[tuple[str, bool]] = []  # here-documents opened on this line
    heredoc: tuple[str, bool] | None = None  # the one whose lines these are
    waiting: list[tuple[str, bool]] = []
    for line in text.split("\n"):
        if heredoc is not None:
            word, tabs = heredoc
            if (line.lstrip("\t") if tabs else line) == word:
                heredoc = waiting.pop(0) if waiting else None
            if not _COMMENT_LINE.match(line):
                out.append(line)
            continue
        if not quote and _COMMENT_LINE.match(line):
            continue
        cut, quote, pending = _scan_line(line, quote)
        out.append(cut)
        if pending and not quote:
            heredoc, waiting = pending[0], pending[1:]
    return "\n".join(out)


def _scan_line(line: str, quote: str) -> tuple[str, str, list[tuple[str, bool]]]:
    """One line up to its comment, the quote still open after it, the here-documents it opens."""
    heredocs: list[tuple[str, bool]] = []
    begins_word = True
    i = 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1  # the next character is literal (in double quotes too, near enough)
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and begins_word:
            return line[:i], quote, heredocs
        elif line.startswith("<<", i) and not line.startswith("<<<", i):
            opened = _HEREDOC.match(line, i)
            if opened is not None:
                word = opened[2] if opened[2] is not None else opened[3] or opened[4] or ""
                heredocs.append((word, opened[1] == "-"))
                i = opened.end()
                begins_word = False
                continue
        begins_word = not quote and c in _WORD_END
        i += 1
    return line, quote, heredocs
