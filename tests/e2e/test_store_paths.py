"""`sqlite:///var/lib/fw.db` is the *relative* path var/lib/fw.db (SQLAlchemy's rule: three
slashes, then the path). A new user meant /var/lib/fw.db: `serve` says where the path resolves
and how to write the absolute one instead of quietly creating ./var/lib/, and so do the
commands that read a store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.audit import AuditUnavailable
from fleetwarden.wiring.service_config import service_config_from


def _store(url: str) -> str:
    return service_config_from({"store": url}, source="svc.yaml", env={}).store


def test_serve_refuses_a_relative_store_whose_directory_is_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FormatError) as err:
        _store("sqlite:///var/lib/fw.db")
    text = str(err.value)
    assert "svc.yaml" in text and "store" in text
    assert "the relative path var/lib/fw.db" in text
    assert str(tmp_path / "var" / "lib" / "fw.db") in text  # the resolved path
    assert "sqlite:////var/lib/fw.db" in text  # how to say the absolute one
    assert not (tmp_path / "var").exists()  # nothing created behind the user's back


@pytest.mark.skipif(not Path("/var").is_dir(), reason="needs a /var directory")
def test_a_relative_path_under_a_root_directory_name_is_refused_even_when_it_exists(
    tmp_path, monkeypatch
):
    """./var/lib left behind by an earlier run does not make var/lib/fw.db what was meant;
    sqlite:///./var/lib/fw.db says a relative path is meant and is taken."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "var" / "lib").mkdir(parents=True)
    with pytest.raises(FormatError, match=r"sqlite:////var/lib/fw\.db"):
        _store("sqlite:///var/lib/fw.db")
    assert _store("sqlite:///./var/lib/fw.db") == "sqlite:///./var/lib/fw.db"


def test_plain_relative_and_absolute_stores_are_taken(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _store("sqlite:///fleetwarden.db") == "sqlite:///fleetwarden.db"
    absolute = f"sqlite:///{tmp_path}/fw.db"
    assert _store(absolute) == absolute


def test_reading_a_missing_relative_store_names_the_resolved_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AuditUnavailable) as err:
        asyncio.run(open_audit_store("sqlite:///var/lib/fw.db", create=False))
    text = str(err.value)
    assert str(tmp_path / "var" / "lib" / "fw.db") in text
    assert "sqlite:////var/lib/fw.db" in text
