"""The dashboard's packaged files (``fleetwarden/data/ui``: the page, its plain JavaScript
modules, the stylesheet, the login form) read and answered over HTTP with the headers that keep
a browser to them: a Content-Security-Policy that allows only this origin's own script and
style (the login form: no script, a form posting to this origin only), ``nosniff``, no
referrer, no caching of a stale page.

Limits: only the files listed here are served (any other name is a 404, never a path on
disk); which route answers with which file, and when, is ``entrypoints/``'s (the dashboard and
the door).
"""

from __future__ import annotations

from importlib import resources

from starlette.responses import Response

__all__ = ["SECURITY_HEADERS", "asset_response", "login_page", "login_response"]

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_LOGIN_HEADERS = {
    # the login page has a form and no script: it may post to this origin, nothing else
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    **{
        f"{name}.js": "text/javascript; charset=utf-8"
        for name in ("app", "api", "dom", "views", "heatmap", "charts", "decisions")
    },
}


def _read(name: str) -> bytes:
    return resources.files("fleetwarden.data.ui").joinpath(name).read_bytes()


def asset_response(name: str) -> Response:
    """The dashboard's file ``name`` (a 404 for a name that is not one of them)."""
    if name not in _FILES:
        return Response("not found", status_code=404, headers=SECURITY_HEADERS)
    return Response(_read(name), media_type=_FILES[name], headers=SECURITY_HEADERS)


def login_page(*, failed: bool = False) -> bytes:
    """The login form; ``failed``: with its "wrong token" line shown."""
    page = _read("login.html")
    if failed:  # the page is static; only this marker changes (nothing from the request)
        page = page.replace(b'<p id="error" hidden>', b'<p id="error">')
    return page


def login_response(status: int, *, failed: bool = False) -> Response:
    """The login form answered with ``status`` (401: with its ``WWW-Authenticate``)."""
    return Response(
        login_page(failed=failed),
        status_code=status,
        media_type="text/html; charset=utf-8",
        headers={**_LOGIN_HEADERS, "WWW-Authenticate": 'Bearer realm="fleetwarden"'}
        if status == 401
        else _LOGIN_HEADERS,
    )
