"""Webhook authentication decisions (pure): HMAC signatures with a replay window, bearer tokens.

Header format (for sources that cannot sign natively)::

    X-Fleetwarden-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>

Several ``v1=`` values may be present (secret rotation). Comparisons are constant-time.
A header is data from anyone: a timestamp that is not 1 to 12 ASCII digits, or a ``v1=``
that is not 64 hex digits, is refused with a reason (never an exception).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["AuthResult", "check_basic", "check_bearer", "check_signature", "sign"]

DEFAULT_WINDOW = 300.0
_MAX_TIMESTAMP_DIGITS = 12  # unix seconds until the year 33658: enough, and never overflows
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class AuthResult:
    ok: bool
    reason: str = ""


def sign(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def check_signature(
    header: str | None,
    body: bytes,
    secrets: Iterable[str],
    *,
    now: float,
    window: float = DEFAULT_WINDOW,
) -> AuthResult:
    if not header:
        return AuthResult(False, "missing X-Fleetwarden-Signature")
    timestamp: int | None = None
    given: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            value = value.strip()
            # ASCII digits only: int() also takes "+1", "1_0" and other scripts' digits
            if not (value.isascii() and value.isdigit()) or len(value) > _MAX_TIMESTAMP_DIGITS:
                return AuthResult(False, "signature timestamp is not an integer (unix seconds)")
            timestamp = int(value)
        elif key == "v1" and value:
            digest = value.strip().lower()
            if len(digest) == 64 and _HEX.issuperset(digest):
                given.append(digest)  # anything else cannot match: compare_digest wants ASCII
    if timestamp is None or not given:
        return AuthResult(False, "signature must have t= and v1= (64 hex digits)")
    if abs(now - timestamp) > window:
        skew = int(timestamp - now)
        where = f"{skew} s ahead of" if skew > 0 else f"{-skew} s behind"
        return AuthResult(
            False,
            f"signature timestamp t={timestamp} is {where} this server's clock (allowed: "
            f"±{int(window)} s): check the sender's clock (NTP), or this is a replay",
        )
    prefix = f"{timestamp}.".encode()
    for secret in secrets:
        want = hmac.new(secret.encode(), prefix + body, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(want, g) for g in given):
            return AuthResult(True)
    return AuthResult(False, "signature does not match")


def check_bearer(header: str | None, tokens: Iterable[str]) -> AuthResult:
    if not header:
        return AuthResult(False, "missing Authorization")
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value:
        return AuthResult(False, "Authorization is not a bearer token")
    value = value.strip()
    if any(hmac.compare_digest(value.encode(), t.encode()) for t in tokens):
        return AuthResult(True)
    return AuthResult(False, "bearer token does not match")


def check_basic(header: str | None, tokens: Iterable[str]) -> AuthResult:
    """HTTP Basic whose password is a configured token (SNS cannot send other headers; its
    HTTPS endpoint URL can carry user:password)."""
    if not header:
        return AuthResult(False, "missing Authorization")
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return AuthResult(False, "Authorization is not Basic")
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return AuthResult(False, "Basic credentials are not valid base64")
    _, _, password = decoded.partition(":")
    if any(hmac.compare_digest(password.encode(), t.encode()) for t in tokens):
        return AuthResult(True)
    return AuthResult(False, "Basic password does not match")
