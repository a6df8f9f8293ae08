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

from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.adapters.output import OutputError, ReaderGone, writing
from fleetwarden.app.auditing import export_records, parse_anchors, parse_times
from fleetwarden.cli.common import FormatOpt, OutputFormat, WideOpt, config_option, failing
from fleetwarden.core.audit import AuditKind
from fleetwarden.ports.audit import AuditStoreError
from fleetwarden.presenting.auditing import print_export, print_records, print_verify
from fleetwarden.presenting.json_text import emit
from fleetwarden.presenting.rendering import json_safe, make_console
from fleetwarden.wiring.auditing import store_url, with_store

__all__ = ["audit_app", "register"]

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
    config_option("fleetwarden serve's YAML config: its `store` key names the store."),
]


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
    with failing(ValueError, AuditStoreError):  # the URL, an --expect, the store
        url = store_url(store, config)
        anchors = parse_anchors(expect or ())
        result = with_store(url, lambda s: s.verify(anchors=anchors))
    emit(output is OutputFormat.json, result.to_json, partial(print_verify, result=result))
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
    with failing(ValueError, AuditStoreError):  # the URL, a time, the store
        url = store_url(store, config)
        start, end = parse_times(since, until, now=datetime.now(UTC))
        found = with_store(
            url,
            lambda s: s.query(
                cluster=cluster, pool=pool, actor=actor, kind=kind or None, since=start,
                until=end, ref=ref, limit=limit,
            ),
        )  # fmt: skip
    show = partial(print_records, found=found, wide=wide)
    emit(output is OutputFormat.json, lambda: [r.to_json() for r in found], show, wide=wide)


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
    with failing(ValueError):
        url = store_url(store, config)

    try:
        with failing(OutputError, AuditStoreError), writing(output, "the export") as write:
            # payloads are stored as their canonical JSON, UTF-8 kept: a C1 control (U+009B is
            # a one-character CSI) or a bidi override from an event would reach a terminal
            count, first, last = with_store(
                url, lambda s: export_records(s, lambda t: write(json_safe(t)), after_seq=after_seq)
            )
    except ReaderGone:  # `| head`: the reader has all it wanted
        raise typer.Exit(0) from None
    print_export(make_console(stderr=True), count, first, last, str(output or ""))
