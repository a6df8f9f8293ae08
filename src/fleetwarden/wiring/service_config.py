"""``fleetwarden serve --config FILE``: the service's configuration, read with the audit store
adapter's SQLite checks bound in. The schema and the values are ``app/service_config.py``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetwarden.adapters.storage.audit_sql import sqlite_file, sqlite_path_problem
from fleetwarden.app import service_config as _config
from fleetwarden.app.service_config import (
    AppSource,
    ServiceConfig,
    default_store,
    exposure_problem,
    secret_values,
    without_credentials,
)

__all__ = [
    "STORE_CHECKS",
    "AppSource",
    "ServiceConfig",
    "default_store",
    "exposure_problem",
    "load_service_config",
    "secret_values",
    "service_config_from",
    "without_credentials",
]

STORE_CHECKS = _config.StoreChecks(sqlite_file=sqlite_file, sqlite_path_problem=sqlite_path_problem)


def load_service_config(
    path: Path | None, *, env: Mapping[str, str] | None = None
) -> ServiceConfig:
    return _config.load_service_config(path, checks=STORE_CHECKS, env=env)


def service_config_from(
    raw: Mapping[str, Any], *, source: str, env: Mapping[str, str] | None = None
) -> ServiceConfig:
    """A validated ``ServiceConfig`` from an already parsed mapping (``source`` names it)."""
    return _config.service_config_from(raw, source=source, checks=STORE_CHECKS, env=env)
