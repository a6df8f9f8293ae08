"""``fleetwarden approve``'s one call: POST /api/decisions/ID/approve to a running service."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["ApprovalError", "post_approval"]


class ApprovalError(Exception):
    """The service could not be asked, or said no for a reason other than a cancellation; the
    message names the server."""


def post_approval(server: str, decision_id: str, token: str) -> tuple[int, Any]:
    """The service's answer: 200 and the decision, or 409 and ``{"decision", "error"}`` for a
    request that was cancelled. Anything else is an ApprovalError."""
    try:
        resp = httpx.post(
            # the id is one path segment, whatever it holds
            f"{server}/api/decisions/{quote(decision_id, safe='')}/approve",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
    except httpx.InvalidURL as exc:
        raise ApprovalError(f"--server {server}: not a usable URL ({exc})") from None
    except httpx.HTTPError as exc:
        raise ApprovalError(f"{server}: cannot reach the service ({type(exc).__name__})") from None
    if resp.status_code in (200, 409):
        return resp.status_code, resp.json()
    try:
        message = resp.json().get("error", resp.text)
    except ValueError:
        message = resp.text
    raise ApprovalError(f"{server}: HTTP {resp.status_code}: {message}")
