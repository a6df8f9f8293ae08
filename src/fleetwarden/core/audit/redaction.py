"""Secrets out of audit records before they are hashed: values under secret-looking keys
masked, credentials in free text (bearer/basic, JWTs, AWS keys, private keys, URL
passwords, ``password=...`` pairs) masked wherever they appear. Pure, stdlib only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from functools import lru_cache
from typing import Any, Final

from fleetwarden.core.audit.hashing import canonical_json, format_time

__all__ = ["REDACTED", "redact", "redacted_json", "scrub_text"]

REDACTED: Final = "[REDACTED]"


# --------------------------------------------------------------------------- redaction

# A key is secret-looking when, lowercased with everything but a-z and 0-9 removed (so
# "api_key", "API-Key" and "apiKey" are all "apikey"), it contains one of these words, or
# when, lowercased, it is one of the short names below ("key" is not one: taints have keys).
_SECRET_KEY_WORDS: Final = (
    "token",
    "secret",
    "passw",
    "passphrase",
    "pwd",
    "authori",
    "bearer",
    "apikey",
    "private",
    "credential",
    "signature",
    "cookie",
    "accesskey",
    "sessionkey",
    "hmac",
    "connectionstring",
    "clientassertion",
    "jwt",
)
_SECRET_KEY_EXACT: Final = frozenset({"auth", "pin", "sig", "otp"})
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def _mask_scheme(match: re.Match[str]) -> str:
    scheme, cred = match["scheme"], match["cred"]
    if scheme.lower() != "bearer":
        # "Basic checks passed" is prose: a credential has a digit, a capital or a symbol
        # (base64), and a "token" credential is long.
        prose = not any(c.isdigit() or c.isupper() or c in "+/=_-.~" for c in cred)
        if prose or (scheme.lower() == "token" and len(cred) < 16):
            return match.group(0)
    return f"{scheme}{match['space']}{REDACTED}"


def _mask_aws_secret(match: re.Match[str]) -> str:
    # 40 base64 characters are an AWS secret access key when they mix upper case, lower
    # case and digits: a git commit id (lowercase hex) or a path of words is left alone.
    text = match.group(0)
    mixed = (
        any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
    )
    return REDACTED if mixed else text


_SECRET_NAME = re.compile(
    r"token|secret|passw(?:or)?d|pwd|api[-_]?key|signature|credential|authorization"
    r"|private[-_]?key|access[-_]?key",
    re.I | re.A,
)


def _mask_pair(match: re.Match[str]) -> str:
    # The name is matched as a whole word and tested here: a pattern with the keywords
    # inside [\w.-]* backtracks at every word of every string.
    if _SECRET_NAME.search(match.group(1)) is None:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


_TOKEN_CHARS = r"[A-Za-z0-9\-._~+/]"
_Replacement = str | Callable[[re.Match[str]], str]
_VALUE_PATTERNS: Final[tuple[tuple[re.Pattern[str], _Replacement], ...]] = (
    # PEM private keys, whole block (or to the end of a truncated one)
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    # Authorization header values: "Bearer <token>", "Basic <b64>", "token <gh token>"
    (
        re.compile(
            rf"\b(?P<scheme>(?i:bearer)|Basic|Digest|Negotiate|(?i:token))(?P<space>\s+)"
            # a scheme word is not a credential: "token Bearer <secret>" masks the secret
            r"(?!(?i:bearer|basic|digest|negotiate|token)(?:\s|$))"
            rf"(?P<cred>{_TOKEN_CHARS}{{6,}}=*)",
            re.A,  # ASCII only, here and below: the pre-checks rely on it
        ),
        _mask_scheme,
    ),
    # JWTs (Kubernetes service-account tokens, OIDC id tokens)
    (
        re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        REDACTED,
    ),
    # AWS access key ids (long-lived AKIA, temporary ASIA)
    (re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"), REDACTED),
    # provider tokens with a recognisable prefix
    (
        re.compile(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"
            r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}"
            r"|AIza[0-9A-Za-z_-]{35}|sk_live_[0-9A-Za-z]{16,}|sk-[A-Za-z0-9_-]{32,})",
            re.A,
        ),
        REDACTED,
    ),
    # passwords in URLs: scheme://user:PASSWORD@host
    (
        re.compile(r"\b([a-z][a-z0-9+.-]*://[^/\s:@]*):([^/\s@]+)@", re.I | re.A),
        r"\1:" + REDACTED + "@",
    ),
    # name=value / name: value pairs whose name looks secret (query strings, env, log lines)
    (
        re.compile(r"(?<![\w.-])([\w.-]+)(\"?\s*[=:]\s*\"?)(?!\[REDACTED\])([^\s&,;\"'<>]+)", re.A),
        _mask_pair,
    ),
    # Azure SAS signature in a query string
    (re.compile(r"([?&]sig=)[^&\s\"']+", re.I | re.A), r"\1" + REDACTED),
    # AWS secret access keys: 40 base64 characters standing alone (see _mask_aws_secret)
    (re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), _mask_aws_secret),
)

# Pre-checks.  Every pattern above needs one of these hints in the text lowercased (ASCII
# only), or a secret-looking key name, or a run of 40 base64 characters: most text has none
# and is passed by a few substring tests on bytes instead of nine regular expressions.
_TEXT_HINTS: Final = (
    "://",
    "sk-",
    "sk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "aiza",
    "eyj",
    "akia",
    "asia",
    "basic",
    "digest",
    "negotiate",
    "sig=",
    "private key",
)
# In serialised JSON, whitespace other than a space is escaped (and any escape sends the text
# the slow way), and an exact key name is quoted and followed by a colon.
_JSON_HINTS: Final = (
    "\\",
    *(h for h in _TEXT_HINTS if h not in ("basic", "digest", "negotiate")),
    "basic ",
    "digest ",
    "negotiate ",
    *(f'"{k}":' for k in sorted(_SECRET_KEY_EXACT)),
)
_NOT_ALNUM_BYTES: Final = bytes(c for c in range(256) if not (48 <= c <= 57 or 97 <= c <= 122))
_BASE64_MARKS: Final = bytes(
    65 if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c in b"+/") else 46
    for c in range(256)
)
_BASE64_RUN: Final = b"A" * 40
_SHORTEST_SECRET = 6  # shorter text cannot hold any of the patterns above


def _maybe_secret(text: str, hints: tuple[str, ...]) -> bool:
    """False only when no pattern can match and no key in it can be secret-looking.

    Substring tests on str (bytes' ``in`` costs five times more on short text); bytes only
    for the two translations.  str.lower() first, as the slow path does: dropping non-ASCII
    characters afterwards can only join text into more hints, never hide one.
    """
    lowered = text.lower()
    for hint in hints:
        if hint in lowered:
            return True
    ascii_text = lowered.encode("ascii", "ignore")
    letters = ascii_text.translate(None, _NOT_ALNUM_BYTES).decode("ascii")
    for word in _SECRET_KEY_WORDS:  # key names, and the names of name=value pairs
        if word in letters:
            return True
    return _BASE64_RUN in ascii_text.translate(_BASE64_MARKS)


def scrub_text(text: str) -> str:
    """Mask every secret-looking substring of free text (see the module docstring)."""
    if len(text) < _SHORTEST_SECRET or not _maybe_secret(text, _TEXT_HINTS):
        return text
    for pattern, replacement in _VALUE_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@lru_cache(maxsize=4096)  # payloads repeat the same few hundred key names
def _secret_key(key: str) -> bool:
    lowered = key.lower()
    if lowered in _SECRET_KEY_EXACT:
        return True
    norm = _NOT_ALNUM.sub("", lowered)
    return any(word in norm for word in _SECRET_KEY_WORDS)


def redact(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe copy of ``payload`` with nothing secret-looking left in it.

    Values under secret-looking keys (token, secret, password, authorization, apiKey,
    private..., credential...) become ``REDACTED`` unless they are booleans or null (a flag
    like ``endpointPrivateAccess: true`` is not a secret); every other string is scrubbed
    with ``scrub_text``.  Tuples and sets become lists, datetimes ``format_time`` text,
    enums their values, non-finite floats strings; NUL characters and lone surrogates are
    replaced.  Raises TypeError for other types.
    """
    out = _json_value(payload)
    assert isinstance(out, dict)  # a Mapping stays a mapping
    return out


def redacted_json(payload: Mapping[str, Any]) -> str:
    """``canonical_json(redact(payload))``, fast for the common payload without secrets.

    The payload is serialised first; only when that text holds a hint of a secret (in a
    value, or a key name once normalised), an escape, or a value JSON cannot take as it is,
    the full ``redact`` walk runs.  A test pins that both ways give the same text.
    """
    try:
        text = _RAW_ENCODER.encode(payload)
        text.encode()  # lone surrogates: the walk replaces them
    except (TypeError, ValueError):
        return canonical_json(redact(payload))
    # Without escapes, every key and string of the payload is a substring of the text.
    if _maybe_secret(text, _JSON_HINTS):
        return canonical_json(redact(payload))
    return text


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=canonical_json)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"audit payload value of type {type(value).__name__} has no JSON form")


_RAW_ENCODER: Final = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_json_default,
)


def _json_value(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return scrub_text(_clean(value))
    if kind is dict or isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = scrub_text(_clean(_key_text(k)))
            if _secret_key(name) and not (v is None or isinstance(v, bool)):
                out[name] = REDACTED
            else:
                out[name] = _json_value(v)
        return out
    if value is None or kind is bool or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else str(value)
    if kind is list or kind is tuple:
        return [_json_value(v) for v in value]
    if isinstance(value, Enum):
        return _json_value(value.value)
    if isinstance(value, str):
        return _json_value(str(value))
    if isinstance(value, bool | int):
        return int(value) if not isinstance(value, bool) else bool(value)
    if isinstance(value, float):
        return _json_value(float(value))
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_json_value(v) for v in value), key=canonical_json)
    if isinstance(value, datetime):
        return format_time(value)
    raise TypeError(f"audit payload value of type {type(value).__name__} has no JSON form")


def _key_text(key: Any) -> str:
    """A key as JSON writes it (json.dumps turns True into "true", None into "null")."""
    if isinstance(key, str):
        return key.value if isinstance(key, Enum) else str(key)
    if key is True or key is False or key is None:
        return json.dumps(key)
    if isinstance(key, Enum):
        return _key_text(key.value)
    if isinstance(key, int | float):
        return json.dumps(key)
    raise TypeError(f"audit payload key of type {type(key).__name__} has no JSON form")


def _clean(text: str) -> str:
    """Text every store accepts: no NUL (PostgreSQL refuses it), no lone surrogates."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode(errors="replace").decode()
    return text
