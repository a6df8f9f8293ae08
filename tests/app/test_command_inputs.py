"""What commands take from their options before any I/O: ``approve``'s service URL and admin
token (``--server``/``--token`` over the service config over the default), and ``audit
query``'s ``--since``/``--until`` window, each bad value refused naming its option."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetwarden.app.approving import approval_target
from fleetwarden.app.auditing import parse_times
from fleetwarden.wiring.service_config import service_config_from

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def _config(**raw: object):
    return service_config_from(raw, source="svc.yaml", env={})


def test_approve_takes_the_options_first_then_the_config_then_the_default():
    config = _config(listen="127.0.0.1:9000", auth={"admin": {"bearerToken": "from-config"}})
    assert approval_target(config, None, None) == ("http://127.0.0.1:9000", "from-config")
    given = approval_target(config, "https://fw.example/", "given")
    assert given == ("https://fw.example", "given")  # the trailing slash dropped
    assert approval_target(None, None, "t") == ("http://127.0.0.1:8080", "t")


@pytest.mark.parametrize("token", [None, ""])
def test_approve_without_any_admin_token_says_where_one_can_come_from(token):
    with pytest.raises(ValueError, match=r"^no admin token: give --token, FW_ADMIN_TOKEN or a"):
        approval_target(_config(listen="127.0.0.1:9000"), None, token)


def test_query_times_are_ages_dates_or_rfc3339_and_a_bad_one_names_its_option():
    assert parse_times(None, None, now=NOW) == (None, None)
    start, end = parse_times("24h", "2026-12-01T07:00:00Z", now=NOW)
    assert start == NOW - timedelta(hours=24)
    assert end == datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="--until"):
        parse_times("1h", "yesterday-ish", now=NOW)
    with pytest.raises(ValueError, match="--since"):
        parse_times("soon", None, now=NOW)
