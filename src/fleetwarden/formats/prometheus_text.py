"""The Prometheus text exposition format (version 0.0.4), read strictly: what ``/metrics`` says.

Grammar (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format):
a line is empty, a comment (``#`` ...; ``# HELP name docstring`` and ``# TYPE name type`` with
type one of counter, gauge, histogram, summary, untyped), or a sample::

    name [ "{" label_name "=" '"' label_value '"' { "," ... } [ "," ] "}" ] value [ timestamp ]

``metric_name`` matches ``[a-zA-Z_:][a-zA-Z0-9_:]*``, ``label_name`` ``[a-zA-Z_][a-zA-Z0-9_]*``;
in a label value ``\\\\``, ``\\"`` and ``\\n`` are the only escapes; ``value`` is a Go float
(``NaN``, ``+Inf``, ``-Inf`` too); ``timestamp`` an int64 of milliseconds. A label named twice,
an unknown escape, an unterminated value, a bad number, a ``# TYPE`` of an unknown type or a
second ``# TYPE`` for one name: ``FormatError`` with the line. Parsing only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from fleetwarden.formats.errors import FormatError

__all__ = ["Sample", "format_sample", "parse_metrics", "samples_named"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_SPECIAL = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]  # in the order written
    value: float
    timestamp: int | None = None

    def label(self, key: str) -> str:
        return next((v for k, v in self.labels if k == key), "")


def _value(text: str, path: str, line: int) -> float:
    if text in _SPECIAL:
        return _SPECIAL[text]
    if not _FLOAT.fullmatch(text):
        raise FormatError(path, f"not a number: {text!r}", line=line)
    return float(text)


def _labels(text: str, i: int, path: str, line: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """The label set starting after ``{`` at ``i``; the index after ``}``."""
    out: list[tuple[str, str]] = []
    while True:
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == "}":
            return tuple(out), i + 1
        m = _LABEL.match(text, i)
        if m is None:
            raise FormatError(path, f"expected a label name at column {i + 1}", line=line)
        key, i = m.group(), m.end()
        if any(k == key for k, _ in out):
            raise FormatError(path, f"label {key!r} given twice", line=line)
        while i < len(text) and text[i] in " \t":
            i += 1
        if text[i : i + 2] != '="':
            raise FormatError(path, f'expected =" after label {key!r}', line=line)
        i += 2
        chars: list[str] = []
        while True:
            if i >= len(text):
                raise FormatError(path, f"label {key!r}: unterminated value", line=line)
            c = text[i]
            if c == '"':
                i += 1
                break
            if c == "\\":
                esc = _ESCAPES.get(text[i + 1 : i + 2])
                if esc is None:
                    raise FormatError(path, f"label {key!r}: unknown escape", line=line)
                chars.append(esc)
                i += 2
                continue
            chars.append(c)
            i += 1
        out.append((key, "".join(chars)))
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
        elif i < len(text) and text[i] != "}":
            raise FormatError(path, f"expected , or }} after label {key!r}", line=line)


def _sample(text: str, path: str, line: int) -> Sample:
    m = _NAME.match(text)
    if m is None:
        raise FormatError(path, "expected a metric name", line=line)
    name, i = m.group(), m.end()
    labels: tuple[tuple[str, str], ...] = ()
    if i < len(text) and text[i] == "{":
        labels, i = _labels(text, i + 1, path, line)
    elif i < len(text) and text[i] not in " \t":
        raise FormatError(path, f"unexpected {text[i]!r} after the metric name", line=line)
    rest = text[i:].split()
    if not rest or len(rest) > 2:
        raise FormatError(path, "expected a value and an optional timestamp", line=line)
    value = _value(rest[0], path, line)
    stamp = None
    if len(rest) == 2:
        if not re.fullmatch(r"-?\d+", rest[1]) or not -(2**63) <= int(rest[1]) < 2**63:
            raise FormatError(path, f"not an int64 timestamp: {rest[1]!r}", line=line)
        stamp = int(rest[1])
    return Sample(name, labels, value, stamp)


def parse_metrics(text: str, *, path: str) -> Iterator[Sample]:
    """Every sample of an exposition, in order; FormatError at the first bad line."""
    typed: set[str] = set()
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip(" \t\r")
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].split(None, 3)
            if parts and parts[0] == "TYPE":
                if len(parts) != 3 or not _NAME.fullmatch(parts[1]) or parts[2] not in _TYPES:
                    raise FormatError(path, f"bad TYPE line: {line[:80]!r}", line=n)
                if parts[1] in typed:
                    raise FormatError(path, f"a second TYPE for {parts[1]}", line=n)
                typed.add(parts[1])
            elif parts and parts[0] == "HELP" and (len(parts) < 2 or not _NAME.fullmatch(parts[1])):
                raise FormatError(path, f"bad HELP line: {line[:80]!r}", line=n)
            continue
        yield _sample(line, path, n)


def samples_named(text: str, name: str, *, path: str) -> list[Sample]:
    """The samples of one metric (the whole text is still checked)."""
    return [s for s in parse_metrics(text, path=path) if s.name == name]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_sample(sample: Sample) -> str:
    """One sample line, as an exporter writes it (the inverse of the parser)."""
    labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sample.labels)
    value = (
        "NaN"
        if math.isnan(sample.value)
        else "+Inf"
        if sample.value == math.inf
        else "-Inf"
        if sample.value == -math.inf
        else repr(sample.value)
    )
    out = f"{sample.name}{{{labels}}} {value}" if sample.labels else f"{sample.name} {value}"
    return out if sample.timestamp is None else f"{out} {sample.timestamp}"
