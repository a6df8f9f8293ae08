"""``fleetwarden audit verify | query | export``: read the hash-chained audit store.

Every command takes the store as ``--store URL`` (``sqlite:///PATH``,
``postgresql://USER@HOST:PORT/DB``; ``env:NAME`` reads the URL from a variable, ``file:PATH``
from a file) or ``--config FILE`` (the ``store:`` key of ``fleetwarden serve``'s config; only
that key is read).  Exit codes: 0 ran (verify: the chain is intact), 1 ``verify`` found the
chain broken (the first bad record is named), 2 could not run (bad arguments, unreadable
config, unreachable store) with a message on stderr and never a traceback.

These commands only read: an SQLite file that does not exist is an error, not a new store
(schema migrations still run on an existing store that is behind).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, TypeVar

import typer
import yaml

from fleetwarden.app.healing import record_summary
from fleetwarden.cli.common import FORMAT_METAVAR, OutputFormat, WideOpt, fail
from fleetwarden.core.audit import AuditKind, AuditRecord
from fleetwarden.core.events import parse_time
from fleetwarden.ports.audit import AuditStoreError
from fleetwarden.presenting.rendering import (
    Col,
    Grid,
    dumps,
    json_safe,
    line,
    literal,
    make_console,
)

if TYPE_CHECKING:
    from fleetwarden.adapters.storage.audit_sql import SqlAuditStore

__all__ = ["audit_app", "parse_since", "register", "resolve_store_url"]


T = TypeVar("T")

audit_app = typer.Typer(
    name="audit",
    help="The audit store: every change event (with its actor), finding, decision, action "
    "and outcome, hash-chained. verify re-hashes the chain; query and export read it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help prints literally
)


def register(app: typer.Typer) -> None:
    """Add the ``audit`` command group to the ``fleetwarden`` app."""
    app.add_typer(audit_app, name="audit")


StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        metavar="URL",
        help="SQLAlchemy URL of the store: sqlite:///PATH or postgresql://USER@HOST:PORT/DB "
        "(env:NAME / file:PATH read it from a variable / a file).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="fleetwarden serve's YAML config: its `store` key names the store.",
    ),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format", "-o", metavar=FORMAT_METAVAR, help="table for people, json for machines."
    ),
]


# --------------------------------------------------------------------------- store URL


def resolve_store_url(store: str | None, config: Path | None) -> str:
    """The store URL from ``--store`` or the ``store:`` key of ``--config``.

    Raises ValueError with a message that names the option, file or variable.
    """
    if store and config:
        raise ValueError("give either --store or --config, not both")
    if store:
        return _indirect(store, "--store")
    if config is None:
        raise ValueError(
            "no audit store given: use --store URL (e.g. sqlite:///fleetwarden.db) or "
            "--config FILE (fleetwarden serve's config, its `store` key)"
        )
    try:
        text = config.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{config}: cannot read the config: {exc.strerror or exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(f"{config}: not valid YAML{where}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"{config}: the config must be a mapping with a `store` key")
    from fleetwarden.entrypoints.service_config import default_store

    value = raw.get("store") or default_store()  # the `store` default of `fleetwarden serve`
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{config}: `store` must be a database URL string")
    return _indirect(value.strip(), f"{config}: store")


def _indirect(value: str, where: str) -> str:
    if value.startswith("env:"):
        name = value[4:]
        url = os.environ.get(name)
        if not url:
            raise ValueError(f"{where}: environment variable {name} is not set")
        return url.strip()
    if value.startswith("file:"):
        path = Path(value[5:]).expanduser()
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    return value


def _url(store: str | None, config: Path | None) -> str:
    try:
        return resolve_store_url(store, config)
    except ValueError as exc:
        fail(str(exc))


def _with_store(url: str, work: Callable[[SqlAuditStore], Awaitable[T]]) -> T:
    """Open the store (read-only use: never create an SQLite file), run, close.

    Every store error becomes exit 2 with its message.
    """

    # Imported here: SQLAlchemy and Alembic add half a second to every other command.
    from fleetwarden.adapters.storage.audit_sql import open_audit_store

    async def main() -> T:
        store = await open_audit_store(url, create=False)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except AuditStoreError as exc:
        fail(str(exc))


# --------------------------------------------------------------------------- times

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, *, now: datetime, option: str) -> datetime:
    """RFC 3339 (``2026-11-29T10:00:00Z``), a date (``2026-11-29``, UTC) or an age
    (``90s``, ``15m``, ``24h``, ``7d``, ``2w`` before ``now``).  ValueError names the option."""
    value = text.strip()
    relative = _RELATIVE.match(value)
    if relative:
        amount, unit = float(relative.group(1)), relative.group(2)
        return now - timedelta(**{_UNITS[unit]: amount})
    parsed = parse_time(value)
    if parsed is None:
        try:
            parsed = datetime.fromisoformat(value).replace(tzinfo=UTC)
        except ValueError:
            raise ValueError(
                f"{option} {text!r}: expected RFC 3339 (2026-11-29T10:00:00Z), a date "
                "(2026-11-29) or an age (15m, 24h, 7d)"
            ) from None
    return parsed


def _time_option(text: str | None, option: str, now: datetime) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_since(text, now=now, option=option)
    except ValueError as exc:
        fail(str(exc))


def _anchors(values: list[str] | None) -> dict[int, str]:
    anchors: dict[int, str] = {}
    for value in values or ():
        seq, sep, digest = value.partition(":")
        if not sep or not seq.strip().isdigit() or not re.fullmatch(r"[0-9a-f]{64}", digest):
            fail(f"--expect {value!r}: expected SEQ:HASH (a seq and its 64-hex-digit hash)")
        anchors[int(seq)] = digest
    return anchors


# --------------------------------------------------------------------------- commands


@audit_app.command()
def verify(
    store: StoreOpt = None,
    config: ConfigOpt = None,
    output: FormatOpt = OutputFormat.table,
    expect: Annotated[
        list[str] | None,
        typer.Option(
            "--expect",
            metavar="SEQ:HASH",
            help="A chain head noted earlier (e.g. from a previous verify): the chain must "
            "still hold that record with that hash. Catches history cut from the end even "
            "when the store's own head row was rewritten too. Repeat.",
        ),
    ] = None,
) -> None:
    """Re-hash the chain: exit 0 when intact, 1 naming the first bad record.

    The first edited, deleted, inserted or reordered record is named by seq and id, with what
    is wrong with it.  Records cut from the end are seen through the store's chain head (and
    --expect).
    """
    url = _url(store, config)
    anchors = _anchors(expect)
    result = _with_store(url, lambda s: s.verify(anchors=anchors))
    if output is OutputFormat.json:
        sys.stdout.write(dumps(result.to_json()) + "\n")
    else:
        console = make_console()
        if result.ok:
            console.print(literal(result.summary()), highlight=False, soft_wrap=True)
        else:
            console.print(literal(result.summary(), "bold red"), highlight=False, soft_wrap=True)
            console.print(
                line(
                    f"{result.checked} records verified before it (last good: seq "
                    f"{result.last_seq}, hash {result.last_hash})"
                ),
                highlight=False,
                soft_wrap=True,
            )
    raise typer.Exit(0 if result.ok else 1)


@audit_app.command()
def query(
    store: StoreOpt = None,
    config: ConfigOpt = None,
    cluster: Annotated[
        str | None, typer.Option(metavar="GLOB", help="Only this cluster (* is a wildcard).")
    ] = None,
    pool: Annotated[
        str | None, typer.Option(metavar="GLOB", help="Only this node pool (* is a wildcard).")
    ] = None,
    actor: Annotated[
        str | None,
        typer.Option(
            metavar="GLOB",
            help="Only this actor, e.g. an IAM ARN ('*alice' for any ending in alice).",
        ),
    ] = None,
    kind: Annotated[
        list[AuditKind] | None,
        typer.Option(metavar="|".join(AuditKind), help="Only these kinds of record. Repeat."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="TIME", help="From this time on: RFC 3339, a date, or an age (15m, 24h, 7d)."
        ),
    ] = None,
    until: Annotated[
        str | None, typer.Option(metavar="TIME", help="Before this time (same forms as --since).")
    ] = None,
    ref: Annotated[
        str | None,
        typer.Option(
            metavar="ID", help="Only records that reference this record id (its consequences)."
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, metavar="N", help="At most this many, newest first.")
    ] = 100,
    output: FormatOpt = OutputFormat.table,
    wide: WideOpt = False,
) -> None:
    """Audit records, newest first, by cluster, pool, actor, kind, time or refs."""
    url = _url(store, config)
    now = datetime.now(UTC)
    start = _time_option(since, "--since", now)
    end = _time_option(until, "--until", now)
    found = _with_store(
        url,
        lambda s: s.query(
            cluster=cluster,
            pool=pool,
            actor=actor,
            kind=kind or None,
            since=start,
            until=end,
            ref=ref,
            limit=limit,
        ),
    )
    if output is OutputFormat.json:
        sys.stdout.write(dumps([r.to_json() for r in found]) + "\n")
        return
    console = make_console(wide=wide)
    if not found:
        console.print("no audit records match", highlight=False)
        return
    console.print(_table(found, wide=wide))


def _table(found: list[AuditRecord], *, wide: bool = False) -> Grid:
    table = Grid(
        Col("seq", 9, justify="right"),
        Col("at", 8),
        Col("kind", 7),
        Col("cluster", 5),
        Col("pool", 4),
        Col("actor", 3),
        Col("summary", 10),
        Col("refs", 1),
        Col("id", 2),
        wide=wide,
    )
    for r in found:
        table.add_row(
            literal(r.seq),
            literal(r.at_text[:19].replace("T", " ") + "Z"),
            literal(r.kind.value),
            literal(r.cluster or "—"),
            literal(r.pool or "—"),
            literal(r.actor or "—"),
            literal(record_summary(r)),
            list(r.refs) or "—",
            literal(r.id),
        )
    return table


@audit_app.command()
def export(
    store: StoreOpt = None,
    config: ConfigOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-O", metavar="FILE", help="Write here instead of stdout."),
    ] = None,
    after_seq: Annotated[
        int,
        typer.Option(
            min=0, metavar="SEQ", help="Only records after this seq (incremental exports)."
        ),
    ] = 0,
) -> None:
    """Every record in seq order, as JSON lines.

    Each line: seq, id, kind, at, cluster, pool, actor, summary, refs, key, payload, prevHash,
    hash -- enough to verify the chain again elsewhere.
    """
    url = _url(store, config)
    target: TextIO
    if output is None:
        target = sys.stdout
    else:
        try:
            target = output.open("w", encoding="utf-8")
        except OSError as exc:
            fail(f"{output}: cannot write the export: {exc.strerror or exc}")

    async def write_all(s: SqlAuditStore) -> tuple[int, int, int]:
        count = first = last = 0
        async for record in s.iterate(after_seq=after_seq):
            # payloads are stored as their canonical JSON, UTF-8 kept: a C1 control (U+009B
            # is a one-character CSI) or a bidi override from an event would reach a terminal
            target.write(json_safe(record.to_json_line()))
            count += 1
            first = first or record.seq
            last = record.seq
        return count, first, last

    try:
        count, first, last = _with_store(url, write_all)
        target.flush()
    except BrokenPipeError:  # `| head`: the reader has all it wanted
        # Python would report the broken pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except OSError as exc:
        fail(f"{output or 'stdout'}: writing the export failed: {exc.strerror or exc}")
    finally:
        if target is not sys.stdout:
            target.close()
    where = f" to {output}" if output else ""
    span = f" (seq {first}..{last})" if count else ""
    make_console(stderr=True).print(
        line(f"exported {count} records{span}{where}"), highlight=False, soft_wrap=True
    )
