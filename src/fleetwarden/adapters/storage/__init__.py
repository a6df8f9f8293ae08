"""SQL storage: the audit store (``audit_sql``) and its Alembic migrations (``migrations/``).

SQLAlchemy 2 async engines over SQLite (aiosqlite, the embedded default) or PostgreSQL
(asyncpg, for several replicas).  Records are stored and read here, never interpreted: the
hash chain, redaction and verification rules live in ``core.audit``.  ``migrations/`` is
plain data for Alembic (no ``__init__``): it is found by path, never imported as a package.
"""

from __future__ import annotations

__all__: list[str] = []
