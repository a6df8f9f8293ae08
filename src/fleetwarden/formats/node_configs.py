"""nodeadm ``NodeConfig`` documents, read as nodeadm decodes them (awslabs/amazon-eks-ami,
``nodeadm/internal/configprovider`` and ``internal/api/bridge``): the first YAML document of a
part (or of a plain user data), which must be a ``NodeConfig`` of ``node.eks.aws/v1alpha1``
with fields of the NodeConfig type's types; nodeadm fails on anything else, applies no
NodeConfig of the user data and the node does not join (``NotNodeConfigError``,
``NodeConfigYAMLError``). A text nodeadm may not read (no declared type) is only taken for a
NodeConfig where it is one. What the documents set is ``formats.bootstrap``'s to read. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwarden.formats.kubelet_values import KubeletFlagError

__all__ = ["Found", "NodeConfigYAMLError", "NotNodeConfigError", "as_unmarshalled", "read"]


class NotNodeConfigError(KubeletFlagError):
    """A text nodeadm decodes as one NodeConfig (an ``application/node.eks.aws`` part, eksctl's
    AL2023 ``overrideBootstrapCommand``) whose first YAML document is none: nodeadm's decoder
    (api/bridge/decode.go) fails, it applies no NodeConfig of the user data and the node does not
    join. ``problem`` says what the document is; ``decodes``: it still unmarshals into the
    NodeConfig type (a mapping, its fields of their types, only ``kind`` / ``apiVersion`` wrong),
    which eksctl accepts and hands nodeadm; else eksctl refuses it too."""

    def __init__(self, message: str, problem: str, *, decodes: bool) -> None:
        super().__init__(message)
        self.problem = problem
        self.decodes = decodes


class NodeConfigYAMLError(KubeletFlagError):
    """A NodeConfig nodeadm reads that is not YAML: nodeadm refuses the user data and the node
    does not join. ``problem`` says what and where, for a reader whose tool refuses it first."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


@dataclass(slots=True)
class Found:
    """What a text holds for nodeadm: its NodeConfig (none or one), the documents it holds that
    nodeadm does not read (``ignored``), and why what it sets cannot be told (``unreadable``)."""

    configs: list[Mapping[str, Any]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    unreadable: str | None = None


# a text laid out as a NodeConfig document: it starts as YAML or JSON does (a top-level key,
# "---", "{"), and "kind: NodeConfig" is a top-level key -- not a script that writes one
_YAML_START = re.compile(r"""(?:---|\{|["']?[A-Za-z_][\w.-]*["']?:(?:\s|$))""")
_NODECONFIG_KIND = re.compile(
    r"""^kind:[ \t]*(["']?)NodeConfig\1[ \t]*(?:#.*)?$"""  # YAML
    r'|"kind"\s*:\s*"NodeConfig"',  # JSON
    re.M,
)


def _laid_out(body: str) -> bool:
    lines = (line for line in body.splitlines() if line.strip() and not line.startswith("#"))
    first = next(lines, "")
    return _YAML_START.match(first) is not None and _NODECONFIG_KIND.search(body) is not None


# what every YAML parser refuses (nodeadm's sigs.k8s.io/yaml too): the text is no YAML. A
# ConstructorError (an unknown tag, a complex key), a ValueError (a date PyYAML reads and Go
# leaves a string) or a RecursionError is PyYAML's own limit, not known to be nodeadm's.
_NOT_YAML = (yaml.reader.ReaderError, yaml.scanner.ScannerError, yaml.parser.ParserError)


def read(
    body: str, *, nodeadm: bool, declared: bool = False, where: str = "", go_json: bool = False
) -> Found:
    """The NodeConfig a part's body holds for nodeadm: its first YAML document, the only one
    nodeadm decodes (sigs.k8s.io/yaml's YAMLToJSON reads one document: go-yaml v2 Unmarshal);
    later ones are listed as ignored (``Found.ignored``). ``nodeadm``: the part is one nodeadm
    decodes (``application/node.eks.aws``, or a text the caller knows nodeadm reads): one not
    YAML is a ``NodeConfigYAMLError``, one whose first document is no NodeConfig a
    ``NotNodeConfigError`` (``_check_node_config``; ``declared``: an empty one too, where a
    part of that type or eksctl says it is one). nodeadm returns the decoding error,
    tolerates it only by dropping every NodeConfig of the user data (ParseMultipart stops at the
    first part that fails: the provisioner's own part goes too), then finds none ("no config
    in chain") and does not start the node (nodeadm/internal/configprovider mime.go, chain.go;
    cli.ResolveConfig). A body nodeadm may not read (no declared type) that is laid out as a
    NodeConfig and does not parse, or one PyYAML alone cannot read, leaves labels, taints and
    max-pods unresolved, saying why (``Found.unreadable``): never "sets nothing". ``go_json``:
    the text is unmarshalled into the NodeConfig type and marshalled again before nodeadm reads
    it (eksctl), so its field names are matched as Go's encoding/json matches them
    (``as_unmarshalled``)."""
    out = Found()
    shown = f"nodeadm NodeConfig{' in ' + where if where else ''}"
    if not nodeadm and not _laid_out(body):
        if "NodeConfig" not in body:
            return out
        try:  # a script may mention a NodeConfig: only a YAML text holds one
            first, later = _documents(body)
        except (yaml.YAMLError, ValueError, TypeError, RecursionError):
            return out
        return _first_node_config(out, first, later, shown)
    try:
        first, later = _documents(body)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        problem = _yaml_problem(exc)
        if nodeadm and isinstance(exc, _NOT_YAML):
            raise NodeConfigYAMLError(
                f"{shown}: not YAML ({problem}): nodeadm refuses the user data, applies no "
                "NodeConfig and the node does not join",
                problem,
            ) from None
        what = (
            f"not YAML ({problem})"
            if isinstance(exc, _NOT_YAML)
            else f"not read by fleetwarden's YAML parser ({problem})"
        )
        why = (
            f"{shown}: {what}"
            if nodeadm
            else f"a text laid out as a NodeConfig, {what}: nodeadm, if it reads it, does not "
            "start the node; taken for a script, it sets nothing"
        )
        out.unreadable = why
        return out
    if not nodeadm:
        return _first_node_config(out, first, later, shown)
    if first is None and not declared:
        return out
    if go_json:
        first = as_unmarshalled(first)
    _check_node_config(first, shown)
    _later_documents(out, later, shown)
    out.configs.append(first)
    return out


def _documents(body: str) -> tuple[Any, list[Any] | None]:
    """A text's first YAML document and its later ones (None: they do not parse; nodeadm never
    reads them, so that is no error)."""
    documents = yaml.safe_load_all(body)
    first = next(documents, None)
    try:
        return first, list(documents)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return first, None


def _first_node_config(out: Found, first: Any, later: list[Any] | None, shown: str) -> Found:
    """A text nodeadm may read (no declared type): its first document if that is a NodeConfig."""
    if not _is_node_config(first):
        if any(_is_node_config(d) for d in later or ()):
            _later_documents(out, later, shown)
        return out
    _later_documents(out, later, shown)
    out.configs.append(first)
    return out


def _is_node_config(document: Any) -> bool:
    return isinstance(document, Mapping) and document.get("kind") == "NodeConfig"


def _later_documents(out: Found, later: list[Any] | None, shown: str) -> None:
    if later is None or any(d is not None for d in later):
        out.ignored.append(
            f"{shown}: the YAML documents after the first (nodeadm decodes only the first "
            "document of a part or user data)"
        )


# the NodeConfig type's JSON field names down to what is read here: a dict is a struct
# (its fields merge when named twice), "map" a map (its keys merge), None any other value
_FIELDS: dict[str, Any] = {
    "kind": None,
    "apiVersion": None,
    "metadata": None,
    "spec": {
        "cluster": None,
        "containerd": None,
        "instance": None,
        "featureGates": "map",
        "kubelet": {"config": "map", "flags": None},
    },
}


_NULLABLE = frozenset({"featureGates", "config", "flags"})  # maps and slices


def as_unmarshalled(document: Any, fields: Any = None) -> Any:
    """A NodeConfig document as the NodeConfig type holds it after sigs.k8s.io/yaml's Unmarshal
    (eksctl's stringToNodeConfig) and Marshal: a key names a field exactly or, failing that,
    case-insensitively (Go's encoding/json; ``_go_fold``), else it is dropped (no such field).
    Keys are decoded in sorted order (YAMLToJSON goes through a map, which json.Marshal sorts);
    a field named twice takes the later value, a struct or map merging into the earlier one.
    A value not a mapping where the type wants a struct is left for the type check."""
    fields = _FIELDS if fields is None else fields
    if not isinstance(document, Mapping):
        return document
    if fields == "map":
        return dict(document)
    out: dict[str, Any] = {}
    for key in sorted(document, key=str):
        name = _field(str(key), fields)
        if name is None:
            continue
        if document[key] is None and name not in _NULLABLE:
            continue  # null into a struct or a string: no effect (a map or slice: nil)
        value = as_unmarshalled(document[key], fields[name]) if fields[name] else document[key]
        out[name] = _merged(out.get(name), value, fields[name])
    return out


def _merged(earlier: Any, value: Any, fields: Any) -> Any:
    """A field named twice: Go decodes the later value into the earlier one -- a struct's
    fields and a map's keys merge (json.Unmarshal reuses them), anything else is replaced."""
    if not (fields and isinstance(earlier, Mapping) and isinstance(value, Mapping)):
        return value
    if fields == "map":
        return {**earlier, **value}
    out = dict(earlier)
    for name, item in value.items():
        out[name] = _merged(out.get(name), item, fields[name])
    return out


def _field(key: str, fields: Mapping[str, Any]) -> str | None:
    if key in fields:
        return key
    folded = _go_fold(key)
    return next((f for f in fields if _go_fold(f) == folded), None)


def _go_fold(name: str) -> str:
    """Go's encoding/json name folding (fold.go foldName): ASCII letters upper-cased, another
    rune r as unicode.ToUpper(unicode.ToLower(r)) -- so the Kelvin sign is K and long s is S."""
    out = []
    for char in name:
        if char.isascii():
            out.append(char.upper())
            continue
        lower = char.lower()
        lower = lower if len(lower) == 1 else char
        upper = lower.upper()
        out.append(upper if len(upper) == 1 else lower)
    return "".join(out)


_NODEADM_VERSION = "node.eks.aws/v1alpha1"  # the only one nodeadm's scheme knows (bridge/scheme.go)
# the NodeConfig fields fleetwarden reads, and the JSON types Go's decoder needs in them
_SHAPES = (("metadata",), ("spec",), ("spec", "kubelet"), ("spec", "kubelet", "config"))


def _check_node_config(document: Any, shown: str) -> None:
    """``NotNodeConfigError`` for a first document nodeadm cannot decode as a NodeConfig: not a
    mapping, or a field read here of another type than the NodeConfig type's (json.Unmarshal
    refuses it: so does eksctl, which unmarshals its overrideBootstrapCommand likewise), or
    ``kind`` / ``apiVersion`` not ``NodeConfig`` / ``node.eks.aws/v1alpha1`` (missing: "Object
    'Kind' is missing"; another: not registered in nodeadm's scheme)."""
    problem = ""
    if not isinstance(document, Mapping):
        what = "empty" if document is None else f"a {_YAML_TYPES.get(type(document), 'value')}"
        problem = f"its first YAML document is {what}, not a NodeConfig"
    else:
        for path in _SHAPES:
            value: Any = document
            for key in path:
                value = value.get(key) if isinstance(value, Mapping) else None
            if value is not None and not isinstance(value, Mapping):
                problem = f"{'.'.join(path)} is not a mapping"
        flags = document.get("spec")
        for key in ("kubelet", "flags"):
            flags = flags.get(key) if isinstance(flags, Mapping) else None
        if flags is not None and (
            not isinstance(flags, list) or any(not isinstance(f, str | None) for f in flags)
        ):
            problem = "spec.kubelet.flags is not a list of strings"
    if problem:
        decodes = document is None  # null unmarshals into the type: it is the empty NodeConfig
    else:
        decodes = True
        kind, version = document.get("kind"), document.get("apiVersion")
        if kind == "NodeConfig" and version == _NODEADM_VERSION:
            return
        problem = (
            f"kind {kind!r}, apiVersion {version!r}: not a NodeConfig of {_NODEADM_VERSION} "
            "(the only kind and version nodeadm decodes)"
        )
    raise NotNodeConfigError(
        f"{shown}: {problem}: nodeadm refuses it (it decodes no NodeConfig from it), applies no "
        "NodeConfig of the user data and the node does not join",
        problem,
        decodes=decodes,
    )


_YAML_TYPES = {str: "string", list: "list", int: "number", float: "number", bool: "boolean"}


def _yaml_problem(exc: BaseException) -> str:
    """A YAML error, briefly: what and where (lines of the part's body, from 1)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem or exc.context}{at}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
