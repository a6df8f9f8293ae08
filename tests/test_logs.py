"""``fleetwarden.logs``: one configuration, JSON lines on the given stream, bound context, and
the redaction processor that masks credentials by key, by pattern and by registered value."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from fleetwarden import logs


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    quiet = {name: logging.getLogger(name).level for name in logs.QUIET}
    logs.configure("json", "debug", stream=out)
    try:
        yield out
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
        for name, was in quiet.items():
            logging.getLogger(name).setLevel(was)


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_is_json_with_timestamp_level_event_logger_and_the_bound_context(stream):
    log = logs.get_logger("fleetwarden.test")
    with structlog.contextvars.bound_contextvars(request_id="r-1", event_key="k-1"):
        log.info("pool inspected", cluster="c", pool="p")
    log.debug("after")
    first, second = _lines(stream)
    assert first["event"] == "pool inspected" and first["level"] == "info"
    assert first["logger"] == "fleetwarden.test" and first["timestamp"].endswith("Z")
    assert (first["request_id"], first["event_key"], first["cluster"]) == ("r-1", "k-1", "c")
    assert "request_id" not in second, "the context ends with its block"


def test_secrets_are_masked_by_key_by_pattern_and_by_registered_value(stream):
    logs.add_secrets(["registered-secret-value-1"])
    log = logs.get_logger("fleetwarden.test")
    log.warning(
        "call failed with registered-secret-value-1 inside",
        token="tok-123456",
        hmac_secret="s3cr3t-abcdef",
        headers={"Authorization": "Bearer abcdefghijk", "Cookie": "fw_session=1.abc"},
        url="postgresql://fw:pg-password-9@db:5432/fw",
        hook="https://hooks.example/x?token=qwertyuiop&x=1",
        note="sent Authorization: Bearer zyxwvutsrq to the sink",
        nested=["registered-secret-value-1"],
    )
    text = stream.getvalue()
    for secret in (
        "registered-secret-value-1",
        "tok-123456",
        "s3cr3t-abcdef",
        "abcdefghijk",
        "1.abc",
        "pg-password-9",
        "qwertyuiop",
        "zyxwvutsrq",
    ):
        assert secret not in text, secret
    (line,) = _lines(stream)
    assert line["url"] == f"postgresql://fw:{logs.MASK}@db:5432/fw"
    assert line["event"] == f"call failed with {logs.MASK} inside"
    assert line["hook"] == f"https://hooks.example/x?token={logs.MASK}&x=1"


def test_chatty_libraries_show_warnings_but_not_their_routine_info():
    out = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    quiet = {name: logging.getLogger(name).level for name in logs.QUIET}
    try:
        logs.configure("json", "info", stream=out)
        logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
        logging.getLogger("httpx").warning("connection reset")
        logs.get_logger("fleetwarden.test").info("serving")
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
        for name, was in quiet.items():
            logging.getLogger(name).setLevel(was)
    assert [line["event"] for line in _lines(out)] == ["connection reset", "serving"]


def test_third_party_records_and_tracebacks_are_masked_too(stream):
    logs.add_secrets(["foreign-secret-value-2"])
    logging.getLogger("uvicorn.error").warning("peer sent %s", "foreign-secret-value-2")
    try:
        raise RuntimeError("cannot connect with foreign-secret-value-2")
    except RuntimeError:
        logs.get_logger("fleetwarden.test").exception("store failed")
    text = stream.getvalue()
    assert "foreign-secret-value-2" not in text
    foreign, failed = _lines(stream)
    assert foreign["logger"] == "uvicorn.error" and foreign["event"] == f"peer sent {logs.MASK}"
    assert "RuntimeError" in str(failed["exception"])


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("req-1", True),
        ("4bf92f3577b34da6a3ce929d0e0e4736", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("", False),
        ("has space", False),
        ('quote"d', False),
        ("new\nline", False),
        (None, False),
    ],
)
def test_a_request_id_is_the_clients_when_sane_else_a_fresh_one(given, kept):
    rid = logs.request_id(given)
    assert (rid == given) is kept
    assert 1 <= len(rid) <= 128
