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
from functools import lru_cache
from typing import Any

__all__ = [
    "ANY_KIND",
    "DeprecatedApi",
    "DeprecationFinding",
    "DeprecationTable",
    "MinorVersion",
    "RowOrigin",
    "Status",
    "check",
    "format_minor",
    "guess_resource",
    "parse_minor",
    "row_origin",
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


# the origin texts scripts/convert-deprecations writes (docs/deprecation-table.md)
_K8S_ORIGIN = re.compile(
    r"(k8s\.io/api)@(\S+) (\S+)(?:; replacement: (pluto) \S+@([0-9a-f]{7,40}))?"
)
_TOOL_ORIGIN = re.compile(r"(pluto|kubent) (\S+)@([0-9a-f]{7,40})(?: (\S+\.rego))?(?: \(.*\))?")


@dataclass(frozen=True, slots=True)
class RowOrigin:
    """Where a table row comes from: ``source`` (``kubernetes``, ``pluto``, ``kubent``, or
    ``other`` for a text not in the converter's forms), ``ref`` (what was read, at which
    version: ``k8s.io/api@v0.37.2``, ``pluto@dd5ec8cccce5``), ``file`` (in it, when named),
    ``replacement_ref`` (a replacement Kubernetes' tags do not name, taken from Pluto) and
    ``text``, the row's origin as recorded."""

    source: str
    ref: str
    file: str | None
    text: str
    replacement_ref: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ref": self.ref,
            "file": self.file,
            "replacementRef": self.replacement_ref,
            "text": self.text,
        }


@lru_cache(maxsize=512)
def _origin(text: str) -> RowOrigin:
    if m := _K8S_ORIGIN.fullmatch(text):
        replacement = f"{m[4]}@{m[5][:12]}" if m[4] else None
        return RowOrigin("kubernetes", f"{m[1]}@{m[2]}", m[3], text, replacement)
    if m := _TOOL_ORIGIN.fullmatch(text):
        file = f"{m[2]}/{m[4]}" if m[4] else m[2]
        return RowOrigin(m[1], f"{m[1]}@{m[3][:12]}", file, text)
    return RowOrigin("other", text, None, text)


def row_origin(api: DeprecatedApi) -> RowOrigin | None:
    """The row's origin read from its recorded text; None for a row that records none."""
    return _origin(api.origin) if api.origin else None


def guess_resource(kind: str) -> str:
    """The resource name the API server derives from a kind by default (lower case, then
    ``s`` -> ``ses``, ``y`` -> ``ies``, else ``+s``: apimachinery's
    ``UnsafeGuessKindToResource``): ``FlowSchema`` -> ``flowschemas``, ``Ingress`` ->
    ``ingresses``, ``PodSecurityPolicy`` -> ``podsecuritypolicies``."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s" if lower else lower


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

    __slots__ = ("_by_resource", "_index", "_rows")

    def __init__(self, apis: Iterable[DeprecatedApi]) -> None:
        self._rows = tuple(apis)
        self._index: dict[tuple[str, str], DeprecatedApi] = {}
        for api in self._rows:
            self._index.setdefault((api.api_version, api.kind), api)
        self._by_resource: dict[tuple[str, str], DeprecatedApi] | None = None  # built on use

    def __iter__(self) -> Iterator[DeprecatedApi]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(self, api_version: str, kind: str) -> DeprecatedApi | None:
        """The row for this exact kind, else a row for every kind of the apiVersion."""
        return self._index.get((api_version, kind)) or self._index.get((api_version, ANY_KIND))

    def lookup_resource(self, api_version: str, resource: str) -> DeprecatedApi | None:
        """The row of the kind whose default resource name is ``resource`` (what
        ``--live`` reads: the API server names resources, not kinds), else a row for every
        kind of the apiVersion. Indexed on the first call only."""
        if self._by_resource is None:
            self._by_resource = {}
            for api in self._rows:
                key = (api.api_version, guess_resource(api.kind))
                self._by_resource.setdefault(key, api)
        found = self._by_resource.get((api_version, resource))
        return found or self._index.get((api_version, ANY_KIND))

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
