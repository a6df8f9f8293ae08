"""`fleetwarden audit verify | query | export` run as pipelines run it: the installed console
script in a subprocess, against SQLite and a real PostgreSQL (scripts/pg-test-env).

Exit codes pinned: verify 0 intact / 1 broken (naming the first bad record) / 2 could not run
(with a message, never a traceback).  Tampering is raw SQL with the append-only triggers
switched off, as a database owner could do it.

Until ``audit_cmd.register`` is wired into ``cli.py``, FW_AUDIT_CLI_SHIM=1 runs the same
commands through a minimal Typer app holding only the ``audit`` group.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from fleetwarden.adapters.storage.audit_sql import open_audit_store, store_url
from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditKind, AuditRecord
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from tests.support import pg_env

EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"
SHIM = """
import typer
from fleetwarden.entrypoints import audit_cmd
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
@app.callback()
def main() -> None: ...
audit_cmd.register(app)
app(prog_name="fleetwarden")
"""
_dbs = itertools.count(1)


def command() -> list[str]:
    if os.environ.get("FW_AUDIT_CLI_SHIM") == "1":
        return [sys.executable, "-c", SHIM]
    return [EXE]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [*command(), "audit", *args], capture_output=True, text=True, timeout=120, env=full_env
    )


@pytest.fixture(scope="session")
def cli() -> None:
    """Fail once, clearly, when the command group is not wired into the CLI."""
    r = run("--help")
    if r.returncode != 0 or "verify" not in r.stdout:
        pytest.fail(
            "`fleetwarden audit` is not available: wire "
            "fleetwarden.entrypoints.audit_cmd.register(app) into entrypoints/cli.py "
            f"(or set FW_AUDIT_CLI_SHIM=1).\n{r.stdout}{r.stderr}"
        )


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg-cli")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.live)])
def store(request: pytest.FixtureRequest, tmp_path: Path, cli: None) -> str:
    """The URL of a store holding 4 incidents (20 records, linked event -> outcome)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audit.db"
    else:
        url = pg_env.create_database(request.getfixturevalue("pg_server"), f"cli_{next(_dbs)}")
    asyncio.run(seed(url))
    return url


def incident(i: int, cluster: str) -> list[AuditDraft]:
    ev = ChangeEvent(
        id=f"evt-{i}",
        source="aws.eks",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.UPDATE,
        cluster=cluster,
        pool="general",
        actor=f"arn:aws:sts::123456789012:assumed-role/oncall/{'alice' if i % 2 else 'bob'}",
    )
    ids = [audit.record_id(AuditKind.EVENT, ev.key)]
    drafts = [audit.event_draft(ev)]
    for n, kind in enumerate((AuditKind.FINDING, AuditKind.DECISION, AuditKind.ACTION,
                              AuditKind.OUTCOME)):  # fmt: skip
        key = f"{ev.key}:{n}"
        drafts.append(
            AuditDraft(kind, f"{kind.value} {i}", cluster=cluster, pool="general",
                       actor="fleetwarden", refs=(ids[-1],), key=key,
                       payload={"n": n, "apiToken": "tok-SECRET-1234"})
        )  # fmt: skip
        ids.append(audit.record_id(kind, key))
    return drafts


async def seed(url: str) -> None:
    store = await open_audit_store(url)
    try:
        for i in range(4):
            await store.append_many(incident(i, "prod-eu-1" if i < 3 else "prod-us-1"))
    finally:
        await store.close()


def tamper(url: str, *statements: str) -> None:
    async def main() -> None:
        engine = create_async_engine(store_url(url))
        try:
            async with engine.begin() as conn:
                if engine.dialect.name == "postgresql":
                    await conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
                else:
                    await conn.execute(sa.text("DROP TRIGGER audit_records_no_update"))
                    await conn.execute(sa.text("DROP TRIGGER audit_records_no_delete"))
                for statement in statements:
                    await conn.execute(sa.text(statement))
        finally:
            await engine.dispose()

    asyncio.run(main())


def record_id(url: str, seq: int) -> str:
    async def main() -> str:
        s = await open_audit_store(url)
        try:
            return (await s.query(before_seq=seq + 1, limit=1))[0].id
        finally:
            await s.close()

    return asyncio.run(main())


# --------------------------------------------------------------------------- verify


def test_verify_of_an_intact_chain_exits_0_with_a_summary(store: str):
    r = run("verify", "--store", store)
    assert r.returncode == 0, r.stderr
    assert "audit chain intact: 20 records, seq 1..20" in r.stdout
    r = run("verify", "--store", store, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True


def test_verify_names_an_edited_record_and_exits_1(store: str):
    target = record_id(store, 7)
    tamper(
        store, "UPDATE audit_records SET payload = replace(payload, 'REDACTED', 'x') WHERE seq = 7"
    )
    r = run("verify", "--store", store)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"seq 7 (id {target}): edited" in r.stdout
    assert "6 records verified before it" in r.stdout
    out = json.loads(run("verify", "--store", store, "--format", "json").stdout)
    assert out["ok"] is False
    assert out["breach"] | {"detail": None} == {"seq": 7, "id": target, "problem": "edited",
                                                "detail": None}  # fmt: skip


def test_verify_names_a_deleted_record_and_a_reordered_one(store: str):
    tamper(store, "DELETE FROM audit_records WHERE seq = 12")
    r = run("verify", "--store", store)
    assert r.returncode == 1 and "seq 12: deleted" in r.stdout, r.stdout


def test_verify_names_two_rows_whose_seqs_were_swapped(store: str):
    moved = record_id(store, 4)
    tamper(
        store,
        "UPDATE audit_records SET seq = -1 WHERE seq = 3",
        "UPDATE audit_records SET seq = 3 WHERE seq = 4",
        "UPDATE audit_records SET seq = 4 WHERE seq = -1",
    )
    r = run("verify", "--store", store)
    assert r.returncode == 1 and f"seq 3 (id {moved}): reordered" in r.stdout, r.stdout


def test_verify_against_a_head_noted_earlier(store: str):
    head = json.loads(run("verify", "--store", store, "--format", "json").stdout)
    assert run("verify", "--store", store, "--expect", f"20:{head['lastHash']}").returncode == 0
    r = run("verify", "--store", store, "--expect", f"20:{'0' * 64}")
    assert r.returncode == 1 and "seq 20" in r.stdout
    r = run("verify", "--store", store, "--expect", "twenty:abc")
    assert r.returncode == 2 and "SEQ:HASH" in r.stderr


# --------------------------------------------------------------------------- query / export


def test_query_filters_by_cluster_actor_kind_time_and_ref(store: str):
    def seqs(*args: str) -> list[int]:
        r = run("query", "--store", store, "--format", "json", *args)
        assert r.returncode == 0, r.stderr
        return [rec["seq"] for rec in json.loads(r.stdout)]

    assert seqs("--cluster", "prod-us-1") == [20, 19, 18, 17, 16]
    assert seqs("--kind", "event") == [16, 11, 6, 1]
    assert seqs("--kind", "event", "--actor", "*alice") == [16, 6]
    assert seqs("--kind", "action", "--kind", "outcome", "--limit", "3") == [20, 19, 15]
    assert seqs("--since", "2000-01-01", "--until", "1h", "--limit", "2") == []
    assert seqs("--since", "1h", "--limit", "2") == [20, 19]
    assert seqs("--ref", record_id(store, 2)) == [3]
    records = json.loads(run("query", "--store", store, "--format", "json").stdout)
    assert all("tok-SECRET" not in json.dumps(rec) for rec in records)
    assert records[0]["payload"]["apiToken"] == audit.REDACTED
    table = run("query", "--store", store, "--cluster", "prod-us-1", "--kind", "outcome")
    assert table.returncode == 0 and "outcome 3" in table.stdout


def test_export_writes_jsonl_that_verifies_elsewhere(store: str, tmp_path: Path):
    out = tmp_path / "audit.jsonl"
    r = run("export", "--store", store, "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert "exported 20 records (seq 1..20)" in r.stderr
    lines = out.read_text().splitlines()
    records = [AuditRecord.from_json(json.loads(line)) for line in lines]
    assert [rec.seq for rec in records] == list(range(1, 21))
    assert audit.verify_chain(records).ok
    stdout = run("export", "--store", store, "--after-seq", "18")
    assert [json.loads(x)["seq"] for x in stdout.stdout.splitlines()] == [19, 20]


def test_the_store_can_come_from_a_config_file_or_a_variable(store: str, tmp_path: Path):
    config = tmp_path / "fleetwarden.yaml"
    config.write_text(f"listen: 127.0.0.1:8080\nstore: {store}\nqueue: sqlite\n")
    assert run("verify", "--config", str(config)).returncode == 0
    config.write_text("store: env:FW_TEST_AUDIT_STORE\n")
    r = run("verify", "--config", str(config), env={"FW_TEST_AUDIT_STORE": store})
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------- exit 2


def test_unreachable_store_exits_2_with_a_message_and_no_traceback(cli: None):
    r = run("verify", "--store", "postgresql://fw:hunter2@127.0.0.1:1/audit")
    assert r.returncode == 2
    assert "postgresql://fw:***@127.0.0.1:1/audit" in r.stderr
    assert "hunter2" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", "--store", "mysql://x@y/z"], "unsupported audit store 'mysql'"),
        (["verify", "--store", "::nonsense::"], "not a database URL"),
        (["verify", "--store", "sqlite:////nonexistent/dir/a.db"], "no audit store at"),
        (["verify"], "no audit store given"),
        (["verify", "--store", "sqlite:///a.db", "--config", "x.yaml"], "not both"),
        (["verify", "--config", "/nonexistent/fleetwarden.yaml"], "cannot read the config"),
        (["query", "--store", "sqlite:///a.db", "--since", "yesterday"], "--since 'yesterday'"),
        (["verify", "--store", "env:FW_TEST_UNSET_VAR"], "FW_TEST_UNSET_VAR is not set"),
    ],
)
def test_bad_arguments_exit_2_and_say_what_is_wrong(args, message, cli: None, tmp_path: Path):
    r = subprocess.run(
        [*command(), "audit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "300", "NO_COLOR": "1"},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in " ".join(r.stderr.split()), r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "a.db").exists()  # readers never create a store
