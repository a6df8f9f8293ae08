"""``core.access.same_origin``: a login or logout form post is taken only from this site's own
page (``Sec-Fetch-Site`` first, else ``Origin`` against ``Host``); a client that says neither
is not a browser and needs the token anyway."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.access import same_origin


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"sec-fetch-site": "same-origin"}, True),
        ({"sec-fetch-site": "same-site", "origin": "http://127.0.0.1", "host": "127.0.0.1"}, False),
        ({"sec-fetch-site": "cross-site"}, False),
        ({"sec-fetch-site": "none"}, False),
        ({"origin": "http://127.0.0.1:8080", "host": "127.0.0.1:8080"}, True),
        ({"origin": "https://FleetWarden.example", "host": "fleetwarden.example"}, True),
        ({"origin": "http://evil.example", "host": "127.0.0.1:8080"}, False),
        ({"origin": "null", "host": "null"}, False),  # no scheme: an opaque origin
        ({"origin": "http://127.0.0.1:8080"}, False),  # no Host to match
        ({}, True),  # not a browser
    ],
)
def test_a_form_post_is_same_origin_only_when_the_browser_says_so(headers, allowed):
    assert same_origin(headers) is allowed


@given(st.text(min_size=1), st.text(min_size=1))
def test_sec_fetch_site_decides_whatever_origin_says(site, origin):
    headers = {"sec-fetch-site": site, "origin": origin, "host": origin}
    assert same_origin(headers) is (site == "same-origin")
