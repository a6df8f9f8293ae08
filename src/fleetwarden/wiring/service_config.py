"""``fleetwarden serve --config FILE``: the service's configuration, read with the audit store
adapter's SQLite checks bound in (``load_serve_config``: its secrets masked in the logs and its
exposure checked too, before anything else). The schema and the values are
``app/service_config.py``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetwarden import logs
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
from fleetwarden.formats.errors import FormatError

__all__ = [
    "STORE_CHECKS",
    "AppSource",
    "ServiceConfig",
    "default_store",
    "exposure_problem",
    "load_serve_config",
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


def load_serve_config(path: Path | None) -> ServiceConfig:
    """``serve``'s config: read, every secret of it registered with the log redaction before
    anything can log one, and refused (``FormatError`` naming the file) when it would expose
    the read side (``exposure_problem``) -- before anything is read or opened."""
    config = load_service_config(path)
    logs.add_secrets(secret_values(config))
    problem = exposure_problem(config)
    if problem is not None:
        raise FormatError(str(path), problem)
    return config


def service_config_from(
    raw: Mapping[str, Any], *, source: str, env: Mapping[str, str] | None = None
) -> ServiceConfig:
    """A validated ``ServiceConfig`` from an already parsed mapping (``source`` names it)."""
    return _config.service_config_from(raw, source=source, checks=STORE_CHECKS, env=env)
