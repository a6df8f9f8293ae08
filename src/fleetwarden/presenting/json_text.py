"""JSON for machines, safe to show on a terminal. No rich: commands that print JSON only load
this, not the table renderer."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["dumps", "json_safe"]

# what json.dumps leaves as is (it escapes C0 itself): C1 controls and bidi overrides, as JSON
# \u escapes
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def dumps(value: Any) -> str:
    """Indented JSON, UTF-8 kept, but C1 controls and bidi overrides as ``\\u`` escapes (the
    same JSON value; a terminal showing it is not driven by it)."""
    return json_safe(json.dumps(value, indent=2, ensure_ascii=False))


def json_safe(text: str) -> str:
    """JSON text made by another encoder (C0 escaped, UTF-8 kept) with its C1 controls and
    bidi overrides as ``\\u`` escapes: they can only be inside strings, so it is the same
    JSON value, and a terminal showing it is not driven by it."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
