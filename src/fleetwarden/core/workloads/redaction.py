"""Redaction at the edge: status, volatile metadata and the last-applied annotation dropped,
every Secret value replaced by its SHA-256 digest, before anything can log, store or diff
it (step 1 of the workload pipeline). Pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.workloads.objects import LAST_APPLIED, _is_map

__all__ = ["redact"]

_VOLATILE_META = frozenset(
    {
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)

_DIGEST_PREFIX = "sha256:"  # ':' is not in the base64 alphabet: a redacted value is unmistakable
_SECRETISH = re.compile(
    r"(?i)(passw(or)?d|passwd|secret|token|api[_-]?key|private[_-]?key|credential|auth)"
)


def _digest(data: bytes) -> str:
    return _DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def _secret_value_digest(value: Any) -> str:
    if isinstance(value, str):
        if value.startswith(_DIGEST_PREFIX):
            return value
        try:
            return _digest(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            return _digest(value.encode())  # not base64: the API server would refuse it
    return _digest(str(value).encode())


def _redact_secret(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "stringData"}
    data: dict[str, str] = {}
    raw = obj.get("data")
    if isinstance(raw, Mapping):
        data.update({str(k): _secret_value_digest(v) for k, v in raw.items()})
    string_data = obj.get("stringData")
    if isinstance(string_data, Mapping):  # merged into data by the API server; it wins
        data.update(
            {
                str(k): v
                if isinstance(v, str) and v.startswith(_DIGEST_PREFIX)
                # a digest string is itself a valid stringData value only in theory
                else _digest(str(v).encode())
                for k, v in string_data.items()
            }
        )
    if data or "data" in obj:
        out["data"] = data
    return out


_MANAGED_KEEP = ("manager", "operation", "subresource", "fieldsV1")


def redact(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without status, volatile metadata and secret content (see module doc).

    ``managedFields`` stay, reduced to manager and FieldsV1, for ``managedFieldsManagers``.
    Shallow: only the maps it changes are copied (the top level, ``metadata``, the
    annotations when they hold the last-applied configuration, managedFields entries);
    ``spec`` and the rest are shared with ``obj``, whose ``status`` is left out uncopied.
    """
    out = dict(obj)
    out.pop("status", None)
    meta = out.get("metadata")
    if type(meta) is dict or isinstance(meta, Mapping):
        m = dict(meta)
        for k in _VOLATILE_META:
            m.pop(k, None)
        annotations = m.get("annotations")
        if _is_map(annotations) and LAST_APPLIED in annotations:
            annotations = m["annotations"] = dict(annotations)
            del annotations[LAST_APPLIED]
        managed = m.get("managedFields")
        if isinstance(managed, list):
            reduced = []
            for e in managed:  # loops: comprehensions here cost twice as much
                if type(e) is dict or isinstance(e, Mapping):
                    entry = {}
                    for k in _MANAGED_KEEP:
                        if k in e:
                            entry[k] = e[k]
                    reduced.append(entry)
            m["managedFields"] = reduced
        out["metadata"] = m
    if out.get("kind") == "Secret":
        out = _redact_secret(out)
    return out
