"""JSON for machines, safe to show on a terminal, and ``emit``: a command's result as JSON or,
for people, as its table. No rich: commands that print JSON only load this, not the table
renderer."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["dumps", "emit", "emit_with", "json_safe"]

# what json.dumps leaves as is (it escapes C0 itself): C1 controls and bidi overrides, as JSON
# \u escapes
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def dumps(value: Any) -> str:
    """Indented JSON, UTF-8 kept, but C1 controls and bidi overrides as ``\\u`` escapes (the
    same JSON value; a terminal showing it is not driven by it)."""
    return json_safe(json.dumps(value, indent=2, ensure_ascii=False))


def json_safe(text: str) -> str:
    """JSON text made by another encoder (C0 escaped, UTF-8 kept) with its C1 controls and
    bidi overrides as ``\\u`` escapes: they can only be inside strings, so it is the same
    JSON value, and a terminal showing it is not driven by it."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit(
    as_json: bool, data: Callable[[], Any], show: Callable[[Console], None], *, wide: bool = False
) -> None:
    """``data()`` as JSON on stdout, or -- for people -- ``show`` given a console as wide as
    the terminal (``--wide``: wider); rich is loaded for people only."""
    if as_json:
        sys.stdout.write(dumps(data()) + "\n")
        return
    from fleetwarden.presenting.rendering import make_console

    show(make_console(wide=wide))


def emit_with(
    as_json: bool,
    data: Callable[[], Any],
    printer: str,
    value: Any,
    *,
    wide: bool = False,
    **options: Any,
) -> None:
    """``emit`` with the table printed by ``presenting.<printer>`` (``module.function``, given
    a console, ``value``, ``wide`` and ``options``): the printer's module, and rich, load for
    people only."""

    def show(console: Console) -> None:
        from importlib import import_module

        module, name = printer.rsplit(".", 1)
        print_table = getattr(import_module(f"fleetwarden.presenting.{module}"), name)
        print_table(console, value, wide=wide, **options)

    emit(as_json, data, show, wide=wide)
