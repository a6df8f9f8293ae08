"""A command's text output: stdout, or the file a command was told to write (``--output``).

``writing(path, what)`` opens the file (created or truncated; None: stdout) and gives its
``write``; the output is flushed at the end and the file closed whatever happens. Errors:
``OutputError``, whose message names the file (or stdout), ``what`` was written and why it
failed; ``ReaderGone`` when stdout's reader went away (``| head``): stdout is then pointed at
``/dev/null``, or Python would report the broken pipe again when it flushes stdout at exit.

What it does not do: encode (the caller gives text), or decide what a failure means for the
exit code (the command's).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["OutputError", "ReaderGone", "writing"]


class OutputError(Exception):
    """The output cannot be opened or written; the message names it and says why."""


class ReaderGone(Exception):
    """stdout's reader closed the pipe: it has all it wanted."""


@contextmanager
def writing(path: Path | None, what: str) -> Iterator[Callable[[str], object]]:
    """``write(text)`` to ``path`` (None: stdout), ``what`` naming the output in errors."""
    target: TextIO
    if path is None:
        target = sys.stdout
    else:
        try:
            target = path.open("w", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"{path}: cannot write {what}: {exc.strerror or exc}") from None
    try:
        yield target.write
        target.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise ReaderGone from None
    except OSError as exc:
        where = path or "stdout"
        raise OutputError(f"{where}: writing {what} failed: {exc.strerror or exc}") from None
    finally:
        if target is not sys.stdout:
            target.close()
