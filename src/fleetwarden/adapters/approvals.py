"""``fleetwarden approve``'s one call: POST /api/decisions/ID/approve to a running service.

Through the environment's proxy as every client here takes it (``adapters.proxies``): never
for a service on localhost or a loopback address (the default ``serve``), which httpx's own
reading of ``HTTP_PROXY`` would hand, admin token and all, to the proxy."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from fleetwarden.adapters import proxies

__all__ = ["ApprovalError", "post_approval"]


class ApprovalError(Exception):
    """The service could not be asked, or said no for a reason other than a cancellation; the
    message names the server."""


def post_approval(server: str, decision_id: str, token: str) -> tuple[int, Any]:
    """The service's answer: 200 and the decision, or 409 and ``{"decision", "error"}`` for a
    request that was cancelled. Anything else is an ApprovalError."""
    url = f"{server}/api/decisions/{quote(decision_id, safe='')}/approve"  # one path segment
    try:
        resp = httpx.post(
            url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
            proxy=proxies.environment_proxy(url),
            trust_env=False,
        )
    except proxies.ProxyError as exc:
        raise ApprovalError(f"{server}: {exc}") from None
    except ImportError:  # httpx needs socksio for a socks5 proxy
        raise ApprovalError(
            f"{server}: the environment's proxy is a socks5 one, which needs the socksio "
            "package (httpx[socks])"
        ) from None
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
