"""Kubernetes manifests as far as API deprecations care, and the deprecations table.

Manifests: multi-document YAML or JSON as written by people, ``helm template`` (``---``
separators, ``# Source:`` comments) or ``kubectl get -o yaml|json`` (a ``List`` is expanded);
only documents with both ``apiVersion`` and ``kind`` are API objects, the rest (values files,
Kustomize components without them) are ignored. An unrendered Helm template (``{{ }}`` that
does not parse) is refused with that reason. ``split_helm_output`` cuts ``helm template``'s
output into its templates by the ``# Source:`` comments. The table is
``data/deprecations.json``, made by ``scripts/convert-deprecations`` from k8s.io/api's
prerelease-lifecycle tags, Pluto's ``versions.yaml`` and kubent's rules (each row's ``origin``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

from fleetwarden.core.deprecations import DeprecatedApi, MinorVersion, parse_minor
from fleetwarden.formats import skimming
from fleetwarden.formats.documents import Document, SourceFile, decode_text, parse_yaml_documents
from fleetwarden.formats.errors import FormatError

__all__ = [
    "TABLE_RESOURCE",
    "ApiObject",
    "api_objects",
    "bundled_table",
    "load_table",
    "parse_manifests",
    "read_api_objects",
    "split_helm_output",
]

TABLE_RESOURCE = "deprecations.json"


class ApiObject(NamedTuple):
    path: str
    api_version: str
    kind: str
    name: str | None
    namespace: str | None


def parse_manifests(path: str, data: bytes) -> list[Document]:
    """Every mapping document of a YAML or JSON file; ``FormatError`` names the file/line
    (binary, not UTF-8, a syntax error, an unrendered Helm template)."""
    text = decode_text(SourceFile(path, data))
    try:
        return parse_yaml_documents(path, text)
    except FormatError as exc:
        if "{{" in text:
            raise FormatError(
                path,
                "an unrendered Helm template ({{ }}): scan `helm template` output, or the "
                f"chart with --helm-chart ({exc.reason})",
                line=exc.line,
            ) from None
        raise


_JSON_START = re.compile(r"\s*[{\[]")


def read_api_objects(path: str, data: bytes) -> list[ApiObject]:
    """``api_objects(parse_manifests(path, data))``, the same objects and the same errors, in
    a fraction of the time where the file allows: a JSON file is read as JSON, and in YAML only
    the lines holding ``apiVersion``, ``kind`` and ``metadata`` are read, once libyaml has
    checked the whole stream (``formats.skimming``); anything else is parsed fully."""
    text = decode_text(SourceFile(path, data))
    heads = skimming.skim_json(text) if _JSON_START.match(text) else skimming.skim_yaml(text)
    if heads is None:
        return api_objects(parse_manifests(path, data))
    out = []
    for h in heads:
        api_version, kind = h.api_version.strip(), h.kind.strip()
        if api_version and kind:
            out.append(ApiObject(path, api_version, kind, h.name, h.namespace))
    return out


# `# Source: CHART/templates/x.yaml` opens each template's documents in `helm template` output
_SOURCE = re.compile(r"^# Source: (?P<source>\S.*?)\s*$", re.MULTILINE)


def split_helm_output(text: str) -> list[tuple[str, str]]:
    """``helm template`` output as ``(source, text)`` per template, in order: the source is
    the path its ``# Source:`` comment gives (``CHART/templates/x.yaml``, a subchart's
    ``CHART/charts/SUB/templates/x.yaml``). Documents of one template stay together, a
    template rendered twice (hooks, tests) is one entry; text before the first comment is
    ``("", text)`` when it holds anything."""
    chunks: dict[str, list[str]] = {}
    marks = list(_SOURCE.finditer(text))
    head = text[: marks[0].start()] if marks else text
    if head.strip(" \t\r\n-"):
        chunks[""] = [head]
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        # the `---` that separates documents belongs to the next template: keep each chunk
        # a whole document stream of its own
        chunks.setdefault(mark.group("source"), []).append("---\n" + text[mark.end() : end])
    return [(source, "\n".join(parts)) for source, parts in chunks.items()]


def api_objects(docs: Sequence[Document]) -> list[ApiObject]:
    """The documents that are Kubernetes objects (string ``apiVersion`` and ``kind``)."""
    return [
        ApiObject(d.path, d.api_version.strip(), d.kind.strip(), d.name, d.namespace)
        for d in docs
        if d.api_version.strip() and d.kind.strip()
    ]


_KEYS = {
    "apiVersion",
    "kind",
    "deprecatedIn",
    "removedIn",
    "replacement",
    "replacementAvailableIn",
    "component",
    "origin",  # where the row comes from (scripts/convert-deprecations)
}


def load_table(text: str, *, path: str = TABLE_RESOURCE) -> list[DeprecatedApi]:
    """The rows of a deprecations data file (``{"source": {...}, "apis": [...]}``).

    Rows listed twice must agree (Pluto repeats ``audit.k8s.io/v1alpha1 Policy`` verbatim);
    conflicting duplicates are refused, since which one applies would be a guess.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    except RecursionError:
        raise FormatError(path, "invalid JSON: nested too deeply") from None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("apis"), list):
        raise FormatError(path, "expected an object with an 'apis' list", field="apis")
    if not isinstance(raw.get("source"), Mapping):
        raise FormatError(
            path, "expected an object saying where the table comes from", field="source"
        )
    rows: list[DeprecatedApi] = []
    seen: dict[tuple[str, str], DeprecatedApi] = {}
    for i, entry in enumerate(raw["apis"]):
        row = _row(path, f"apis[{i}]", entry)
        key = (row.api_version, row.kind)
        if key in seen and seen[key] != row:
            raise FormatError(
                path,
                f"{row.api_version} {row.kind or '(every kind)'} is listed twice, differently",
                field=f"apis[{i}]",
            )
        seen.setdefault(key, row)
        rows.append(row)
    return rows


def _row(path: str, where: str, entry: Any) -> DeprecatedApi:
    if not isinstance(entry, Mapping):
        raise FormatError(path, "expected an object", field=where)
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise FormatError(path, f"unknown keys: {', '.join(map(str, unknown))}", field=where)
    return DeprecatedApi(
        api_version=_string(path, where, entry, "apiVersion"),
        kind=_string(path, where, entry, "kind", empty_ok=True),  # "": every kind
        deprecated_in=_minor(path, where, entry, "deprecatedIn"),
        removed_in=_minor(path, where, entry, "removedIn"),
        replacement=(
            None if entry.get("replacement") is None else _string(path, where, entry, "replacement")
        ),
        replacement_available_in=_minor(path, where, entry, "replacementAvailableIn"),
        component=_string(path, where, entry, "component"),
        origin=_string(path, where, entry, "origin") if "origin" in entry else "",
    )


def _string(
    path: str, where: str, entry: Mapping[str, Any], key: str, *, empty_ok: bool = False
) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not (empty_ok or value.strip()):
        raise FormatError(
            path, f"expected a non-empty string, got {value!r:.40}", field=f"{where}.{key}"
        )
    return value.strip()


def _minor(path: str, where: str, entry: Mapping[str, Any], key: str) -> MinorVersion | None:
    """``None`` (JSON null) means "not": not deprecated, not removed."""
    if entry.get(key) is None:
        return None
    value = _string(path, where, entry, key)
    parsed = parse_minor(value)
    if parsed is None:
        raise FormatError(path, f"expected MAJOR.MINOR, got {value!r:.40}", field=f"{where}.{key}")
    return parsed


@cache
def bundled_table() -> tuple[DeprecatedApi, ...]:
    """The table shipped in the package (package data, like ``native.schema()``)."""
    text = resources.files("fleetwarden.data").joinpath(TABLE_RESOURCE).read_text("utf-8")
    return tuple(load_table(text, path=f"fleetwarden/data/{TABLE_RESOURCE}"))
