"""Typer plumbing of the command line, shared by the command modules of ``cli/`` -- what
``adapters/asgi.py`` is to the HTTP routes.

- ``LazyGroup``: a Typer group whose commands are imported when resolved (run, or asked for
  their own ``--help``), not at start-up. The group knows each command by name, module and
  one-line summary (its ``catalogue``); the top-level help lists the summaries without
  importing anything, and a typo is matched against every name, loaded or not.
- Help placeholders that name the values (``--format table|json``, not Typer's
  ``<table|json>``; ``ID``, not ``ID <str>``), applied to every command the group loads.
- ``with_options``: options that several commands spell alike, declared once.
- ``drop_unreadable_sizes``: a ``COLUMNS``/``LINES`` rich cannot read is dropped, not a
  traceback.

Limits: it knows no command and decides nothing about one; ``cli/main.py`` holds the
catalogue, the command modules their options.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import typer
from typer.core import TyperGroup

from fleetwarden.core.integers import ascii_int

__all__ = ["LazyCommand", "LazyGroup", "drop_unreadable_sizes", "with_options"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class LazyCommand:
    module: str  # has register(app: typer.Typer) adding the command
    summary: str  # the line shown by the group's --help (never cut)


class LazyGroup(TyperGroup):
    """A Typer group whose commands are imported when resolved; subclasses set ``catalogue``."""

    catalogue: ClassVar[Mapping[str, LazyCommand]] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(n for n in self.catalogue if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands or cmd_name not in self.catalogue:
            return self.commands.get(cmd_name)
        module = importlib.import_module(self.catalogue[cmd_name].module)
        sub = typer.Typer(rich_markup_mode=None, add_completion=False)
        module.register(sub)
        for name, command in typer.main.get_group(sub).commands.items():
            known = self.catalogue.get(name)
            command.short_help = known.summary if known is not None else None
            _name_values(command)
            self.commands.setdefault(name, command)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.catalogue and args[0] not in self.commands:
            # a typo: suggest from every known name, not only the ones loaded so far
            for name in self.catalogue:
                self.commands.setdefault(name, _Placeholder(name))  # type: ignore[arg-type]
            try:
                return super().resolve_command(ctx, args)
            finally:
                for name in [n for n, c in self.commands.items() if isinstance(c, _Placeholder)]:
                    del self.commands[name]
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, command.summary) for name, command in self.catalogue.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _name_values(command: Any) -> None:
    """Placeholders that name the values: an option of a fixed set of values without a
    metavar shows them bare (``--format table|json``, not Typer's ``<table|json>``); an
    argument with a metavar does not repeat its Python type after it (``ID``, not
    ``ID <str>``)."""
    for param in getattr(command, "params", ()):
        kind = getattr(param, "param_type_name", None)
        if kind == "argument" and param.metavar:
            param.display_type_rich = lambda ctx: None
        elif kind == "option" and param.metavar is None and not param.is_flag:
            choices = _choices(param)
            if choices:
                param.metavar = "|".join(dict.fromkeys(choices))
    for sub in getattr(command, "commands", {}).values():
        _name_values(sub)


def _choices(param: Any) -> list[str]:
    """The values an option takes from a fixed set (an Enum or a Literal), as typed on the
    command line; empty for any other option. Typer keeps them on the parameter's type
    descriptor (0.29) or its Choice type (before)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        found = descriptor.choices if getattr(descriptor, "is_choice", False) else None
    else:
        found = getattr(getattr(param, "type", None), "choices", None)
    return [str(getattr(c, "value", c)) for c in found or ()]


class _Placeholder:
    """Stands for an unloaded command while a typo's suggestions are computed."""

    hidden = True

    def __init__(self, name: str) -> None:
        self.name = name


def with_options(
    shared: Callable[..., Any], name: str, *, before: str | None = None
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Options that several commands spell alike, declared once as the parameters of
    ``shared``: the command gets them (in ``shared``'s order, with its help) before its own
    parameter ``before`` (default: first), and receives what ``shared`` returns as ``name``.
    Typer reads the command's ``__signature__``, so ``--help`` lists them as if written out."""
    first = list(inspect.signature(shared, eval_str=True).parameters.values())

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        own = inspect.signature(command, eval_str=True)
        params = [p for p in own.parameters.values() if p.name != name]
        at = next((i for i, p in enumerate(params) if p.name == before), 0)

        @functools.wraps(command)
        def run(**kwargs: Any) -> R:
            values = {p.name: kwargs.pop(p.name) for p in first}
            return command(**{name: shared(**values)}, **kwargs)

        del run.__wrapped__  # Typer must see the signature below, not the command's
        sig = own.replace(parameters=[*params[:at], *first, *params[at:]])
        run.__signature__ = sig  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
        return run

    return decorate


def drop_unreadable_sizes() -> None:
    """rich (and so Typer's help) reads ``COLUMNS`` and ``LINES`` with ``str.isdigit()`` and
    then ``int()``: a value such as "²" passes the one and fails the other, a traceback before
    any command runs. Such a value is no size; it is dropped, as if unset."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and value.strip() and ascii_int(value.strip(), max_digits=6) is None:
            del os.environ[name]
