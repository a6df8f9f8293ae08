"""Alembic environment of fleetwarden's SQL storage.

fleetwarden runs it in code (``audit_sql.upgrade(url)``, and every store open), handing
over an open connection in ``config.attributes["connection"]`` inside a transaction that
holds the migration lock: no ``alembic.ini`` is needed.  Alembic's own command line works
with a config whose ``script_location`` is this directory and ``-x url=SQLALCHEMY_URL``.
Migrations are written by hand (``target_metadata`` is None): each one is
a frozen snapshot, never generated from the current tables.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_url(url: str) -> None:
    from fleetwarden.adapters.storage.audit_sql import store_url

    engine = create_async_engine(store_url(url))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


def _main() -> None:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=None, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    elif url:
        asyncio.run(_run_from_url(url))
    else:
        raise RuntimeError("no connection and no sqlalchemy.url / -x url=... for migrations")


_main()
