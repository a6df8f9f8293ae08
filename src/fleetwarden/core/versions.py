"""Kubernetes version strings ("v1.29.3-eks-ae9a62a", "1.29", "v1.30.0+k3s1")."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["KubeVersion", "matches", "minor_of", "parse_version"]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")

KubeVersion = tuple[int, int, int | None]


@lru_cache(maxsize=4096)
def parse_version(text: str) -> KubeVersion | None:
    """(major, minor, patch-or-None), or None when the text is not a version."""
    m = _VERSION.match(text.strip())
    if not m:
        return None
    patch = int(m.group(3)) if m.group(3) is not None else None
    return int(m.group(1)), int(m.group(2)), patch


def matches(expected: str, actual: str) -> bool | None:
    """Does ``actual`` satisfy ``expected``? The patch level counts only when expected names one.

    None when either side is not a version (nothing can be said).
    """
    e, a = parse_version(expected), parse_version(actual)
    if e is None or a is None:
        return None
    if e[:2] != a[:2]:
        return False
    return e[2] is None or e[2] == a[2]


def minor_of(text: str) -> str | None:
    v = parse_version(text)
    return None if v is None else f"{v[0]}.{v[1]}"
