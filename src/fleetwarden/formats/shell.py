"""Shell text as a POSIX shell reads it, as far as kubelet flags in scripts need: its words
(quotes removed, an unquoted operator ending a word) and the text without its comments.

No expansion is done (a variable stays as written: ``formats.bootstrap`` leaves it unresolved),
nor any other shell grammar. Pure.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["uncommented", "words"]


def words(text: str, *, operators: bool = True) -> list[str] | None:
    """The words of a shell text; None where its quotes do not balance (a script fragment).
    ``operators``: an unquoted operator (``;``, ``&&``, ``|``, ``>>``) ends a word, as in a shell
    (``--max-pods=20;`` passes ``--max-pods=20``); parentheses are left in the word, where
    ``$(...)`` keeps its ``$(`` (a substitution, unresolved). Else words are split at spaces
    only. Comments are removed before (``uncommented``)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>" if operators else "")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


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
