"""``adapters.typer_cli.with_options``: options declared once for several commands reach
each command in their place (``--help`` order), with their help, and the command gets what
the shared function made of them."""

from __future__ import annotations

from typing import Annotated

import typer
from typer.testing import CliRunner

from fleetwarden.adapters.typer_cli import with_options

Name = Annotated[str, typer.Option("--name", metavar="NAME", help="Who is greeted.")]
Times = Annotated[int, typer.Option("--times", metavar="N", help="How often.")]


def greeting(name: Name = "world", times: Times = 1) -> str:
    return " ".join([f"hello {name}"] * times)


app = typer.Typer(rich_markup_mode=None)


@app.command("first")
@with_options(greeting, "text")
def first(
    loud: Annotated[bool, typer.Option("--loud", help="Upper case.")] = False,
    *,
    text: str,
) -> None:
    typer.echo(text.upper() if loud else text)


@app.command("middle")
@with_options(greeting, "text", before="end")
def middle(
    start: Annotated[str, typer.Option("--start", help="Said first.")] = "<",
    end: Annotated[str, typer.Option("--end", help="Said last.")] = ">",
    *,
    text: str,
) -> None:
    typer.echo(f"{start}{text}{end}")


def _options(command: str) -> list[str]:
    out = CliRunner().invoke(app, [command, "--help"], terminal_width=100).output
    return [w for w in out.split() if w.startswith("--")]


def test_the_shared_options_come_first_by_default_and_before_the_named_parameter():
    assert _options("first") == ["--name", "--times", "--loud", "--help"]
    assert _options("middle") == ["--start", "--name", "--times", "--end", "--help"]


def test_the_command_gets_what_the_shared_function_made_of_its_options():
    runner = CliRunner()
    r = runner.invoke(app, ["first", "--name", "fleet", "--times", "2", "--loud"])
    assert (r.exit_code, r.output) == (0, "HELLO FLEET HELLO FLEET\n")
    r = runner.invoke(app, ["middle", "--end", "]", "--start", "["])
    assert (r.exit_code, r.output) == (0, "[hello world]\n")


def test_the_shared_help_and_placeholders_are_shown():
    out = CliRunner().invoke(app, ["middle", "--help"], terminal_width=100).output
    assert "--name NAME" in out and "Who is greeted." in out and "--times N" in out
