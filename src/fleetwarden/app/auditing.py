"""The audit commands' inputs: where the store is (``--store``/``--config``, ``env:``/``file:``
indirections), times given as RFC 3339, dates or ages, and chain anchors (``--expect``).

Every refusal is a ValueError whose message names the option, file or variable; the command
line prints it and exits 2. Opening the store is the caller's (an adapter).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from fleetwarden.core.events import parse_time
from fleetwarden.core.integers import ascii_int
from fleetwarden.ports.audit import AuditStore

__all__ = ["export_records", "parse_anchors", "parse_since", "parse_times", "resolve_store_url"]


def resolve_store_url(
    store: str | None, config: Path | None, *, default_store: Callable[[], str]
) -> str:
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


def parse_times(
    since: str | None, until: str | None, *, now: datetime
) -> tuple[datetime | None, datetime | None]:
    """``--since`` and ``--until`` (``parse_since``'s forms; None when not given)."""
    start = None if since is None else parse_since(since, now=now, option="--since")
    return start, None if until is None else parse_since(until, now=now, option="--until")


def parse_anchors(values: Sequence[str]) -> dict[int, str]:
    """``--expect SEQ:HASH`` values as {seq: hash}; ValueError names the bad one."""
    anchors: dict[int, str] = {}
    for value in values:
        text, sep, digest = value.partition(":")
        seq = ascii_int(text.strip())
        if not sep or seq is None or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(
                f"--expect {value!r}: expected SEQ:HASH (a seq and its 64-hex-digit hash)"
            )
        anchors[seq] = digest
    return anchors


async def export_records(
    store: AuditStore, write: Callable[[str], object], *, after_seq: int = 0
) -> tuple[int, int, int]:
    """Every record after ``after_seq``, in seq order, as JSON lines given to ``write``;
    returns how many, and the first and last seq (0 when none)."""
    count = first = last = 0
    async for record in store.iterate(after_seq=after_seq):
        write(record.to_json_line())
        count += 1
        first = first or record.seq
        last = record.seq
    return count, first, last
