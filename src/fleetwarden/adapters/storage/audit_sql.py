"""The SQL audit store: ``ports.audit.AuditStore`` on SQLAlchemy 2 (async).

URLs
    ``sqlite:///PATH`` (embedded default; ``sqlite://`` is in memory) and
    ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (several replicas).  Plain URLs are mapped
    to the async drivers (``sqlite+aiosqlite``, ``postgresql+asyncpg``); other databases are
    refused with a message.

One writer at a time
    ``append_many`` runs in one transaction that first locks the chain head: ``SELECT ... FOR
    UPDATE`` on the single ``audit_head`` row in PostgreSQL, ``BEGIN IMMEDIATE`` in SQLite
    (plus an ``asyncio.Lock`` per store object).  Two replicas appending at once therefore
    queue up: the chain never forks.  Inside the lock it reads the keys already stored (a
    re-appended event returns its stored record), seals the new drafts with
    ``core.audit.build_records`` (redaction included), inserts them with one executemany and
    moves the head.  SQLite runs in WAL mode with ``synchronous=FULL``: an append that
    returned survives a power loss.  On an SQLite file an append runs whole on the store's
    own thread, with the stdlib driver and one kept connection (``_appending_engine``): the
    same statements in one hop, where aiosqlite made each of them a hop of its own (~6x
    the CPU of a one-event append; ``benchmarks/audit_append.py``).  Reads and the guarded
    writes keep the async engine; SQLite's lock orders the two.

Exactly once
    The unique ``key`` of a record is the dedupe mark of the effect it records, and both are
    written by the same transaction: a worker that dies before the commit left neither, one
    that dies after it left both, and its replay finds the key and stores nothing.
    ``append_new`` also writes the event outbox rows of new event records in that transaction
    (migration 0003): a notification sink is due an event exactly when it was first stored.

Shared guard state
    ``guarded`` and its claims (``ports.guards``, migration 0004): see ``guarding.py``.

Reading
    ``iterate`` and ``verify`` read in keyset pages (``WHERE seq > last ORDER BY seq LIMIT
    n``), each page in its own short transaction: memory stays flat, nothing holds a
    snapshot or a lock for minutes, and appends go on meanwhile.  ``verify`` checks the chain
    up to and beyond the head it read first, and that the head's record is there with the
    head's hash (so records cut from the end are seen too).

Schema
    Alembic migrations in ``migrations/`` run when a store opens (under a PostgreSQL advisory
    lock, or SQLite's write lock, so replicas starting together do not race); a schema newer
    than this code is refused with ``AuditSchemaError``.  ``upgrade(url)`` runs them alone.

Every driver error leaves this module as ``AuditUnavailable`` (or ``AuditConflict`` for an
explicit id that is taken); the URL in messages never shows a password.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Self

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, exc
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from fleetwarden.adapters.storage import audit_rows, guarding
from fleetwarden.adapters.storage.audit_rows import COLUMNS as _COLUMNS
from fleetwarden.adapters.storage.audit_rows import head, outbox, records
from fleetwarden.adapters.storage.sealing import sealed
from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditKind, AuditRecord, VerifyResult
from fleetwarden.ports.audit import (
    AuditConflict,
    AuditSchemaError,
    AuditStoreError,
    AuditUnavailable,
)
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = [
    "MIGRATIONS",
    "PAGE_SIZE",
    "SqlAuditStore",
    "alembic_config",
    "open_audit_store",
    "relative_sqlite_note",
    "sqlite_file",
    "sqlite_path_problem",
    "store_url",
    "upgrade",
    "upgrade_async",
]

MIGRATIONS = Path(__file__).resolve().with_name("migrations")
PAGE_SIZE = 10_000  # rows per read page: ~10 MB of rows, tens of ms of SQL per page
_PARAMS_PER_STATEMENT = audit_rows.PARAMS_PER_STATEMENT
_MIGRATION_LOCK = 0x6677_6175  # pg_advisory_xact_lock id ("fwau")
_SQLITE_BUSY_TIMEOUT = 30.0  # seconds another writer may hold the SQLite write lock

_KEY_ARRAY = ARRAY(sa.String())
# a guarded write's news: the policy's history, and the outcomes that say a heal ended ok
_NEWS = [AuditKind.DECISION.value, AuditKind.NOTE.value, AuditKind.OUTCOME.value]


# --------------------------------------------------------------------------- URLs


def store_url(url: str | URL) -> URL:
    """The async-driver form of a store URL; AuditUnavailable for anything else."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except (exc.ArgumentError, ValueError):
        raise AuditUnavailable(
            f"not a database URL: {_safe(str(url))!r} "
            "(use sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE)"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres"):
        query = dict(parsed.query)
        if "sslmode" in query:  # libpq's spelling; asyncpg calls it ssl (same values)
            query["ssl"] = query.pop("sslmode")
        return parsed.set(drivername="postgresql+asyncpg", query=query)
    raise AuditUnavailable(
        f"unsupported audit store {backend!r} in {_display(parsed)}: "
        "use sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"
    )


def _safe(url: str | URL) -> str:
    if isinstance(url, URL):
        return _display(url)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (exc.ArgumentError, ValueError):
        return audit.scrub_text(url)


def _display(url: URL) -> str:
    return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)


def sqlite_file(url: str) -> Path | None:
    """The file of an SQLite store URL; None for an in-memory or a PostgreSQL store.
    Raises AuditUnavailable for a URL that is no store's."""
    parsed = store_url(url)
    return _sqlite_path(parsed) if parsed.get_backend_name() == "sqlite" else None


# Top-level directories a path starting with one of them was most likely meant under `/`.
_ROOT_DIRS = frozenset({"var", "srv", "opt", "etc", "tmp", "run", "home", "mnt", "usr", "data"})


def relative_sqlite_note(path: Path, *, why: str = "") -> str:
    """For a relative SQLite path: where it resolves (and ``why`` that is a problem), and how
    to write an absolute one — ``sqlite:///var/lib/fw.db`` is ``var/lib/fw.db`` under the
    working directory; the absolute ``/var/lib/fw.db`` takes four slashes. Empty for an
    absolute path."""
    if path.is_absolute():
        return ""
    return (
        f"sqlite:///{path} is the relative path {path}, here {Path.cwd() / path}{why}; for "
        f"the absolute path /{path} write sqlite:////{path} (four slashes)"
    )


def sqlite_path_problem(url: str) -> str | None:
    """Why an SQLite store URL is likely not the file meant, or None: a relative path whose
    directory does not exist, or one that starts with a top-level directory (``var/lib/``)
    that exists under ``/``. ``sqlite:///./var/lib/fw.db`` says a relative path is meant; in
    ``/`` (a container's usual working directory) both readings are the same file."""
    path = sqlite_file(url)
    if path is None or path.is_absolute() or Path.cwd() == Path("/"):
        return None
    first = path.parts[0] if path.parts else ""
    said_relative = (store_url(url).database or "").startswith("./")
    meant_absolute = not said_relative and first in _ROOT_DIRS and Path("/", first).is_dir()
    if path.parent.is_dir() and not meant_absolute:
        return None
    why = "" if path.parent.is_dir() else f" (directory {Path.cwd() / path.parent} does not exist)"
    return f"{relative_sqlite_note(path, why=why)}, for a relative one sqlite:///./{path}"


def _sqlite_path(url: URL) -> Path | None:
    """The file of an SQLite URL; None for an in-memory database."""
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def _create_engine(url: URL, *, connect_timeout: float) -> AsyncEngine:
    if url.get_backend_name() == "sqlite":
        options: dict[str, Any] = {"connect_args": {"timeout": _SQLITE_BUSY_TIMEOUT}}
        if _sqlite_path(url) is None:
            options["poolclass"] = StaticPool  # one shared in-memory database
        engine = create_async_engine(url, **options)
        _sqlite_transactions(engine.sync_engine)
        return engine
    return create_async_engine(
        url,
        pool_size=2,
        max_overflow=4,
        pool_pre_ping=True,
        connect_args={
            "timeout": connect_timeout,
            "server_settings": {"application_name": "fleetwarden-audit"},
        },
    )


def _appending_engine(url: URL) -> sa.Engine | None:
    """For an SQLite file, the engine appends use: the stdlib driver, driven from one thread
    of the store's own (``SqlAuditStore._append``). Through aiosqlite each statement of an
    append (begin, head, keys, insert, head, commit: ~19 calls) is a hop to its thread and
    back, ~4 ms of CPU for a one-event append; here the whole transaction is one hop."""
    if url.get_backend_name() != "sqlite" or _sqlite_path(url) is None:
        return None
    engine = sa.create_engine(
        url.set(drivername="sqlite"),
        connect_args={"timeout": _SQLITE_BUSY_TIMEOUT, "check_same_thread": False},
        pool_size=1,
        max_overflow=0,
    )
    _sqlite_transactions(engine)
    return engine


def _sqlite_transactions(engine: sa.Engine) -> None:
    """Let us say how an SQLite transaction begins: BEGIN IMMEDIATE takes the write lock at
    once, so the head read and the insert are one atomic step across processes."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver must not BEGIN on its own
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get('fw_begin', 'DEFERRED')}")


# --------------------------------------------------------------------------- migrations


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config built in code: script_location is the packaged migrations dir."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _migrate(connection: sa.Connection, *, apply: bool) -> None:
    cfg = alembic_config()
    script = ScriptDirectory.from_config(cfg)
    target = script.get_current_head()
    current = MigrationContext.configure(connection).get_current_revision()
    if current == target:
        return
    if current is not None and current not in {r.revision for r in script.walk_revisions()}:
        raise AuditSchemaError(
            f"the audit store's schema is at revision {current!r}, newer than this "
            f"fleetwarden knows (up to {target!r}): upgrade fleetwarden to use it"
        )
    if not apply:
        raise AuditSchemaError(
            f"the audit store's schema is at revision {current!r}, not {target!r}: "
            "open it once with migrations (fleetwarden serve, or audit_sql.upgrade(URL))"
        )
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


async def upgrade_async(url: str) -> None:
    """Create or upgrade the schema of the store at ``url`` (what opening a store does)."""
    store = await open_audit_store(url)
    await store.close()


def upgrade(url: str) -> None:
    """``upgrade_async`` for synchronous callers (not from inside a running event loop)."""
    asyncio.run(upgrade_async(url))


# --------------------------------------------------------------------------- the store


async def open_audit_store(
    url: str,
    *,
    create: bool = True,
    migrate: bool = True,
    clock: Clock = SYSTEM_CLOCK,
    page_size: int = PAGE_SIZE,
    connect_timeout: float = 10.0,
    lock_timeout: float = _SQLITE_BUSY_TIMEOUT,
) -> SqlAuditStore:
    """Connect, migrate (unless ``migrate=False``) and return a store.

    ``create=False`` refuses an SQLite file that does not exist yet (read-only commands must
    not leave an empty database behind a typo).  ``lock_timeout``: seconds a guarded write
    waits for the policy lock in PostgreSQL (SQLite waits its busy timeout, 30 s) before it
    fails with AuditUnavailable — a replica that hangs holding it stops no other for good.
    Raises AuditUnavailable / AuditSchemaError.
    """
    target = store_url(url)
    path = _sqlite_path(target) if target.get_backend_name() == "sqlite" else None
    if path is not None:
        note = f"; {relative_sqlite_note(path)}" if not path.is_absolute() else ""
        if not create and not path.is_file():
            raise AuditUnavailable(f"no audit store at {path} (sqlite file does not exist){note}")
        if not path.parent.is_dir():
            raise AuditUnavailable(
                f"cannot create the audit store {path}: directory {path.parent} does not "
                f"exist{note}"
            )
    engine = _create_engine(target, connect_timeout=connect_timeout)
    store = SqlAuditStore(
        engine,
        target,
        clock=clock,
        page_size=page_size,
        lock_timeout=lock_timeout,
        appending=_appending_engine(target),
    )
    try:
        await store._prepare(migrate=migrate)
    except BaseException:
        await store.close()
        raise
    return store


class SqlAuditStore:
    """Open with ``await open_audit_store(url)``; ``async with`` closes it."""

    def __init__(
        self,
        engine: AsyncEngine,
        url: URL,
        *,
        clock: Clock = SYSTEM_CLOCK,
        page_size: int = PAGE_SIZE,
        lock_timeout: float = _SQLITE_BUSY_TIMEOUT,
        appending: sa.Engine | None = None,
    ) -> None:
        self._engine = engine
        # an SQLite file: appends run whole on one thread of ours (``_appending_engine``)
        self._appending = appending
        self._appender = (
            ThreadPoolExecutor(1, thread_name_prefix="fw-audit-append") if appending else None
        )
        self._append_conn: sa.Connection | None = None  # the appending thread's own
        self._lock_timeout_ms = max(1, round(lock_timeout * 1000))
        self._url = url
        self._postgres = url.get_backend_name() == "postgresql"
        self._clock = clock
        self._page_size = page_size
        self._write_lock = asyncio.Lock()

    @property
    def url(self) -> str:
        """The store's URL as a person wrote it (no driver name), without its password."""
        return _display(self._url)

    @property
    def dialect(self) -> str:
        return "postgresql" if self._postgres else "sqlite"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._engine.dispose()
        if self._appender is not None and self._appending is not None:
            appending, self._appending = self._appending, None

            def dispose() -> None:
                self._close_append_conn()
                appending.dispose()

            await asyncio.get_running_loop().run_in_executor(self._appender, dispose)
            self._appender.shutdown(wait=False)

    # -- errors

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except AuditStoreError:
            raise
        except exc.IntegrityError as e:
            raise AuditConflict(f"{what} in {self.url}: {_reason(e)}") from None
        except (exc.SQLAlchemyError, OSError, TimeoutError) as e:
            raise AuditUnavailable(f"{what} in {self.url} failed: {_reason(e)}") from None

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that holds the chain's write lock (see the module docstring)."""
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(fw_begin="IMMEDIATE")
            async with conn.begin():
                yield conn

    async def _prepare(self, *, migrate: bool) -> None:
        with self._errors("opening the audit store"), _bad_options(self.url):
            async with self._write() as conn:
                if self._postgres:
                    await conn.execute(
                        sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK}
                    )
                await conn.run_sync(lambda sync: _migrate(sync, apply=migrate))

    # -- writing

    async def append(self, draft: AuditDraft) -> AuditRecord:
        return (await self.append_many([draft]))[0]

    async def append_many(self, drafts: Sequence[AuditDraft]) -> list[AuditRecord]:
        return (await self._append(drafts, ()))[0]

    async def append_new(
        self, drafts: Sequence[AuditDraft], *, deliver_to: Sequence[str] = ()
    ) -> list[bool]:
        return (await self._append(drafts, deliver_to))[1]

    async def _append(
        self, drafts: Sequence[AuditDraft], deliver_to: Sequence[str]
    ) -> tuple[list[AuditRecord], list[bool]]:
        if not drafts:
            return [], []
        with self._errors("appending audit records"):
            if self._appending is not None and self._appender is not None:
                now = self._clock.now()
                async with self._write_lock:
                    return await asyncio.get_running_loop().run_in_executor(
                        self._appender, self._append_sqlite, drafts, deliver_to, now
                    )
            async with self._write_lock, self._write() as conn:
                at = await self._lock_head(conn)
                result, fresh, _ = await self._insert(conn, at, drafts, deliver_to)
        return result, fresh

    def _append_sqlite(
        self, drafts: Sequence[AuditDraft], deliver_to: Sequence[str], now: datetime
    ) -> tuple[list[AuditRecord], list[bool]]:
        """``_lock_head`` + ``_insert`` in one SQLite transaction, on the appending thread:
        the same statements, in the same order, as the async path."""
        conn = self._append_conn
        if conn is None:  # opened on this thread, kept until close: no pool round per append
            assert self._appending is not None
            conn = self._appending.connect().execution_options(fw_begin="IMMEDIATE")
            self._append_conn = conn
        try:
            return audit_rows.append_in_one_transaction(conn, drafts, deliver_to, now)
        except BaseException:
            self._close_append_conn()  # a broken connection is not used again
            raise

    def _close_append_conn(self) -> None:
        conn, self._append_conn = self._append_conn, None
        if conn is not None:
            with contextlib.suppress(exc.SQLAlchemyError, OSError):
                conn.close()

    async def _lock_head(self, conn: AsyncConnection) -> tuple[int, str]:
        """The chain head ``(seq, hash)``, locked for this transaction."""
        row = (
            await conn.execute(
                sa.select(head.c.seq, head.c.hash)
                .where(head.c.id == 1)
                .with_for_update()  # rendered for PostgreSQL; SQLite: BEGIN IMMEDIATE
            )
        ).one()
        return int(row.seq), str(row.hash)

    async def _insert(
        self,
        conn: AsyncConnection,
        at: tuple[int, str],
        drafts: Sequence[AuditDraft],
        deliver_to: Sequence[str],
    ) -> tuple[list[AuditRecord], list[bool], tuple[int, str]]:
        """Store the drafts after the locked head ``at``; the records, which are new, and
        the new head."""
        keys = list(dict.fromkeys(d.key for d in drafts if d.key is not None))
        stored = await self._by_key(conn, keys)
        fresh, first = audit_rows.new_drafts(drafts, stored)
        new = await sealed([drafts[i] for i in fresh], at, self._clock.now())
        if new:
            await conn.execute(records.insert(), [audit_rows.row_of(r) for r in new])
            await conn.execute(
                head.update().where(head.c.id == 1).values(seq=new[-1].seq, hash=new[-1].hash)
            )
            at = (new[-1].seq, new[-1].hash)
        due = audit_rows.outbox_rows(new, deliver_to)
        if due:
            await conn.execute(outbox.insert(), due)
        result, is_new = audit_rows.results(drafts, fresh, new, stored, first)
        return result, is_new, at

    # -- shared guard state (ports.guards)

    async def head_seq(self) -> int:
        current = await self.last()
        return 0 if current is None else current[0]

    @contextlib.asynccontextmanager
    async def guarded(self, *, after_seq: int) -> AsyncIterator[guarding.SqlGuardedWrite]:
        """The policy lock is the chain head's: every append waits for it anyway, so the
        decisions read here are all there are until this transaction commits."""
        with self._errors("a guarded policy write"):
            async with self._write_lock, self._write() as conn:
                if self._postgres:  # a hung holder fails this write, not the replica
                    await conn.execute(sa.text(f"SET LOCAL lock_timeout = {self._lock_timeout_ms}"))
                at = await self._lock_head(conn)
                stmt = (
                    sa.select(*_COLUMNS)
                    .where(
                        records.c.seq > after_seq,
                        records.c.kind.in_(_NEWS),
                    )
                    .order_by(records.c.seq)
                )
                news = [self._readable(row) for row in (await conn.execute(stmt)).all()]
                yield guarding.SqlGuardedWrite(self, conn, at, news)

    # -- the event outbox

    async def fetch_due(self, sink: str, *, limit: int = 100) -> list[AuditRecord]:
        stmt = (
            sa.select(*_COLUMNS)
            .select_from(outbox.join(records, outbox.c.seq == records.c.seq))
            .where(outbox.c.sink == sink)
            .order_by(outbox.c.seq)
            .limit(max(0, limit))
        )
        with self._errors("reading the event outbox"):
            async with self._engine.connect() as conn:
                rows = (await conn.execute(stmt)).all()
        return [self._readable(row) for row in rows]

    @contextlib.asynccontextmanager
    async def sender_lock(self, sink: str) -> AsyncIterator[bool]:
        """Whether this process may send ``sink``'s due events now: one sender per sink among
        every process using the store, so two replicas never send the same batch. PostgreSQL:
        a session advisory lock, held on a connection for the block (a dead replica's goes
        with its connection); SQLite: an ``flock`` on a file beside the database."""
        if self._postgres:
            key = int.from_bytes(hashlib.sha256(f"fw-outbox:{sink}".encode()).digest()[:8], "big")
            key -= 1 << 63  # a signed bigint
            with self._errors("locking the event outbox"):
                conn = await self._engine.connect()
            try:
                with self._errors("locking the event outbox"):
                    got = bool(
                        await conn.scalar(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key})
                    )
                    await conn.commit()
                try:
                    yield got
                finally:
                    if got:
                        try:
                            await conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                            await conn.commit()
                        except (exc.SQLAlchemyError, OSError):
                            await conn.invalidate()  # never back to the pool holding the lock
            finally:
                await conn.close()
            return
        path = _sqlite_path(self._url)
        if path is None:  # in memory: this process is the only one
            yield True
            return
        name = hashlib.sha256(sink.encode()).hexdigest()[:16]
        with self._errors("locking the event outbox"):
            fh = path.with_name(f"{path.name}.outbox-{name}.lock").open("a")
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            fh.close()  # closing drops the flock

    async def mark_sent(self, sink: str, keys: Sequence[str]) -> None:
        if not keys:
            return
        stmt = outbox.delete().where(
            outbox.c.sink == sink, outbox.c.key.in_(sa.bindparam("keys", expanding=True))
        )
        step = _PARAMS_PER_STATEMENT
        with self._errors("updating the event outbox"):
            async with self._write() as conn:
                for i in range(0, len(keys), step):
                    await conn.execute(stmt, {"keys": list(keys[i : i + step])})

    async def _by_key(self, conn: AsyncConnection, keys: Sequence[str]) -> dict[str, AuditRecord]:
        found: dict[str, AuditRecord] = {}
        if self._postgres:
            # One array parameter: an IN list of 500 parameters costs PostgreSQL (and
            # asyncpg's statement cache) ten times more than = ANY($1).
            chunks: list[Sequence[str]] = [keys] if keys else []
            condition = records.c.key == sa.any_(sa.bindparam("keys", type_=_KEY_ARRAY))
        else:
            step = _PARAMS_PER_STATEMENT
            chunks = [keys[i : i + step] for i in range(0, len(keys), step)]
            condition = records.c.key.in_(sa.bindparam("keys", expanding=True))
        stmt = sa.select(*_COLUMNS).where(condition)
        for chunk in chunks:
            for row in await conn.execute(stmt, {"keys": list(chunk)}):
                rec = audit_rows.record_of(row)
                if rec.key is not None:
                    found[rec.key] = rec
        return found

    # -- reading

    async def last(self) -> tuple[int, str] | None:
        with self._errors("reading the audit chain head"):
            async with self._engine.connect() as conn:
                row = (
                    await conn.execute(sa.select(head.c.seq, head.c.hash).where(head.c.id == 1))
                ).one_or_none()
        if row is None or row.seq == 0:
            return None
        return int(row.seq), str(row.hash)

    async def query(
        self,
        *,
        cluster: str | None = None,
        pool: str | None = None,
        actor: str | None = None,
        kind: AuditKind | Sequence[AuditKind] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        ref: str | None = None,
        payload_contains: str | None = None,
        before_seq: int | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Newest first.  ``cluster``, ``pool`` and ``actor`` match exactly, or as a glob
        when they hold ``*`` (``--actor '*alice'`` finds an ARN ending in alice);
        ``payload_contains`` is a substring of the payload's canonical JSON (a coarse filter:
        callers check the parsed payload)."""
        stmt = sa.select(*_COLUMNS)
        for column, value in ((records.c.cluster, cluster), (records.c.pool, pool)):
            if value is not None:
                stmt = stmt.where(_matches(column, value))
        if actor is not None:
            stmt = stmt.where(_matches(records.c.actor, actor))
        if kind is not None:
            kinds = [kind] if isinstance(kind, str) else list(kind)
            stmt = stmt.where(records.c.kind.in_([AuditKind(k).value for k in kinds]))
        if since is not None:
            stmt = stmt.where(records.c.at >= audit.format_time(since))
        if until is not None:
            stmt = stmt.where(records.c.at < audit.format_time(until))
        if ref is not None:
            stmt = stmt.where(
                records.c.refs.like(f"%{_like_escape(json.dumps(ref))}%", escape="\\")
            )
        if payload_contains is not None:
            stmt = stmt.where(
                records.c.payload.like(f"%{_like_escape(payload_contains)}%", escape="\\")
            )
        if before_seq is not None:
            stmt = stmt.where(records.c.seq < before_seq)
        stmt = stmt.order_by(records.c.seq.desc()).limit(max(0, limit))
        with self._errors("querying audit records"):
            async with self._engine.connect() as conn:
                rows = (await conn.execute(stmt)).all()
        return [self._readable(row) for row in rows]

    async def iterate(
        self, *, after_seq: int = 0, until_seq: int | None = None
    ) -> AsyncIterator[AuditRecord]:
        async for rows in self._pages(after_seq, until_seq):
            for row in rows:
                yield self._readable(row)

    async def _pages(self, after_seq: int, until_seq: int | None) -> AsyncIterator[list[Any]]:
        last = after_seq
        while True:
            rows = await self._page(last, until_seq)
            if not rows:
                return
            yield rows
            if len(rows) < self._page_size:
                return
            last = rows[-1][0]

    async def _page(self, after_seq: int, until_seq: int | None = None) -> list[Any]:
        """One keyset page in its own short transaction."""
        stmt = sa.select(*_COLUMNS).where(records.c.seq > after_seq)
        if until_seq is not None:
            stmt = stmt.where(records.c.seq <= until_seq)
        stmt = stmt.order_by(records.c.seq).limit(self._page_size)
        with self._errors("reading audit records"):
            async with self._engine.connect() as conn:
                return list((await conn.execute(stmt)).all())

    def _readable(self, row: Any) -> AuditRecord:
        try:
            return audit_rows.record_of(row)
        except (ValueError, TypeError, KeyError) as e:
            raise AuditStoreError(
                f"audit record seq {row[0]} (id {row[1]}) in {self.url} cannot be read "
                f"({e}); run `fleetwarden audit verify`"
            ) from None

    async def verify(self, *, anchors: Mapping[int, str] | None = None) -> VerifyResult:
        """Re-hash every record in seq order; the chain-head row is an anchor too.

        The next page is fetched while this one is checked (the database, or aiosqlite's
        thread, works while Python hashes).
        """
        current = await self.last()
        all_anchors = dict(anchors or {})
        if current is not None:
            all_anchors.setdefault(current[0], current[1])
        verifier = audit.ChainVerifier(anchors=all_anchors)
        async with asyncio.TaskGroup() as tg:
            pending: asyncio.Task[list[Any]] | None = tg.create_task(self._page(0))
            while pending is not None:
                rows = await pending
                full = len(rows) == self._page_size
                pending = tg.create_task(self._page(rows[-1][0])) if full else None
                if not verifier.feed_rows(rows):
                    if pending is not None:
                        pending.cancel()
                    break
        return verifier.finish()


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _matches(column: sa.ColumnElement[Any], value: str) -> sa.ColumnElement[bool]:
    if "*" not in value:
        return column == value
    return column.like(_like_escape(value).replace("*", "%"), escape="\\")


@contextlib.contextmanager
def _bad_options(url: str) -> Iterator[None]:
    """A URL query option the driver does not take (asyncpg raises TypeError for those)."""
    try:
        yield
    except TypeError as e:
        raise AuditUnavailable(f"cannot connect to {url}: {e}") from None


def _reason(error: BaseException) -> str:
    """One line about a driver error, without SQL, parameters or a password."""
    original = getattr(error, "orig", None) or error
    text = str(original).strip().splitlines()
    line = text[0] if text else type(original).__name__
    return audit.scrub_text(f"{type(original).__name__}: {line}"[:300])
