"""The service's front door over HTTP: what every request passes before a route sees it.

The decisions (the Host check, the read side's credentials, the session cookie's value) are
``core/access.py``; the gateway asks ``access.check`` for every request and answers a refusal
with ``refusal_response``. Here: the login form (``GET``/``POST /ui/login``, ``POST
/ui/logout``), which turns a valid token into the cookie ``fw_session`` -- HttpOnly (no script
reads it), SameSite=Strict (no other site's page sends it), Path=/, 12 hours; the token itself
is never stored in the browser. ``Secure`` is added when the request came over https. The
form's page and headers are ``adapters/ui_files.py``'s.

What this module does not do: rate-limit guesses (tokens are meant to be long and random),
terminate TLS, or know users -- one token is one identity.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from fleetwarden.adapters.asgi import problem, read_form
from fleetwarden.adapters.ui_files import login_response
from fleetwarden.core.access import (
    COOKIE,
    SESSION_SECONDS,
    DoorConfig,
    Refusal,
    credentials_ok,
    same_origin,
    session_value,
)
from fleetwarden.core.signatures import check_bearer
from fleetwarden.ports.sources import Clock

__all__ = ["refusal_response", "routes"]

_FORM_LIMIT = 4096  # the login form's body


def refusal_response(refusal: Refusal, path: str, method: str) -> Response:
    """401 on the dashboard's page itself is the login form (a browser shows it); the rest
    is JSON naming what is missing."""
    if refusal.status == 401 and method in ("GET", "HEAD") and path in ("/ui", "/ui/"):
        return login_response(401)
    return problem(refusal.status, refusal.message, dict(refusal.headers))


def routes(config: DoorConfig, *, clock: Clock) -> list[Route]:
    """The login form and its two actions (sessions expire by ``clock``)."""

    async def login_form(request: Request) -> Response:
        if not config.read.required or credentials_ok(request.headers, config, now=clock.time()):
            return RedirectResponse("/ui/", status_code=303)
        return login_response(200)

    async def login(request: Request) -> Response:
        if not same_origin(request.headers):
            return problem(403, "a login from another site's page")
        form = await read_form(request, _FORM_LIMIT)
        if form is None:
            return problem(413, "login form over 4 KiB")
        token = form.get("token", "").strip()
        if not config.read.required:
            return RedirectResponse("/ui/", status_code=303)
        if not token or not check_bearer(f"Bearer {token}", config.read_tokens).ok:
            return login_response(401, failed=True)
        expiry = int(clock.time()) + SESSION_SECONDS
        resp = RedirectResponse("/ui/", status_code=303)
        resp.set_cookie(
            COOKIE,
            session_value(token, expiry),
            max_age=SESSION_SECONDS,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return resp

    async def logout(request: Request) -> Response:
        if not same_origin(request.headers):
            return problem(403, "a logout from another site's page")
        resp = RedirectResponse("/ui/login", status_code=303)
        resp.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return resp

    return [
        Route("/ui/login", login_form, methods=["GET"]),
        Route("/ui/login", login, methods=["POST"]),
        Route("/ui/logout", logout, methods=["POST"]),
    ]
