"""Deprecated and removed Kubernetes APIs: is this apiVersion/kind still served at a version?

The table comes from Kubernetes' own sources (k8s.io/api's prerelease-lifecycle tags), with
Pluto's and kubent's rows for what those do not have (``data/deprecations.json``, made by
``scripts/convert-deprecations``; each row records its origin).
Versions are compared by (major, minor) only: Kubernetes adds and removes APIs in minor
releases, never in patches. An entry's ``kind`` of ``""`` stands for every kind of its
apiVersion (Pluto lists ``authentication.istio.io/v1alpha1`` that way: the whole group version
went away).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "ANY_KIND",
    "DeprecatedApi",
    "DeprecationFinding",
    "DeprecationTable",
    "MinorVersion",
    "Status",
    "check",
    "format_minor",
    "parse_minor",
]

MinorVersion = tuple[int, int]
ANY_KIND = ""

# Whole-string match, unlike versions.parse_version (a prefix match for kubelet strings such
# as "v1.29.3-eks-ae9a62a"): a target of "1.25x" is a typo, not 1.25.
_MINOR = re.compile(r"v?(\d{1,9})\.(\d{1,9})(?:\.\d{1,9})?")


def parse_minor(text: str) -> MinorVersion | None:
    """``"1.25"``, ``"v1.25"``, ``"v1.25.0"`` -> (1, 25); None for anything else."""
    m = _MINOR.fullmatch(text.strip())
    return None if m is None else (int(m.group(1)), int(m.group(2)))


def format_minor(version: MinorVersion) -> str:
    return f"{version[0]}.{version[1]}"


class Status(StrEnum):
    OK = "ok"
    DEPRECATED = "deprecated"
    REMOVED = "removed"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {s: i for i, s in enumerate(Status)}


@dataclass(frozen=True, slots=True)
class DeprecatedApi:
    """One row of the table. ``None`` for ``deprecated_in``/``removed_in`` means "not (yet)"."""

    api_version: str
    kind: str
    deprecated_in: MinorVersion | None
    removed_in: MinorVersion | None
    replacement: str | None = None
    replacement_available_in: MinorVersion | None = None
    component: str = "k8s"
    # where the row comes from: "k8s.io/api@v0.37.2 <package>/zz_generated...", Pluto, kubent
    origin: str = field(default="", compare=False)

    def status_at(self, target: MinorVersion) -> Status:
        if self.removed_in is not None and target >= self.removed_in:
            return Status.REMOVED
        if self.deprecated_in is not None and target >= self.deprecated_in:
            return Status.DEPRECATED
        return Status.OK


@dataclass(frozen=True, slots=True)
class DeprecationFinding:
    """An API that is deprecated or removed at ``target`` (never built for ``Status.OK``)."""

    api: DeprecatedApi
    status: Status
    target: MinorVersion

    @property
    def removed(self) -> bool:
        return self.status is Status.REMOVED


class DeprecationTable:
    """The table indexed by (apiVersion, kind); the first of duplicate rows wins."""

    __slots__ = ("_index", "_rows")

    def __init__(self, apis: Iterable[DeprecatedApi]) -> None:
        self._rows = tuple(apis)
        self._index: dict[tuple[str, str], DeprecatedApi] = {}
        for api in self._rows:
            self._index.setdefault((api.api_version, api.kind), api)

    def __iter__(self) -> Iterator[DeprecatedApi]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(self, api_version: str, kind: str) -> DeprecatedApi | None:
        """The row for this exact kind, else a row for every kind of the apiVersion."""
        return self._index.get((api_version, kind)) or self._index.get((api_version, ANY_KIND))

    def components(self) -> frozenset[str]:
        return frozenset(api.component for api in self._rows)

    def only(self, components: Iterable[str]) -> DeprecationTable:
        """The rows of these components (``k8s``, ``istio``, ``cert-manager`` ...)."""
        wanted = frozenset(components)
        return DeprecationTable(api for api in self._rows if api.component in wanted)


def check(
    api_version: str,
    kind: str,
    target: MinorVersion,
    table: DeprecationTable | Sequence[DeprecatedApi],
) -> DeprecationFinding | None:
    """Removed when ``target >= removed_in``; deprecated when ``deprecated_in <= target`` (and
    not removed); otherwise None, as for an apiVersion/kind the table does not list.

    Pass a ``DeprecationTable`` when checking many objects: a plain sequence is indexed anew on
    every call.
    """
    index = table if isinstance(table, DeprecationTable) else DeprecationTable(table)
    api = index.lookup(api_version, kind)
    if api is None:
        return None
    status = api.status_at(target)
    if status is Status.OK:
        return None
    return DeprecationFinding(api, status, target)
