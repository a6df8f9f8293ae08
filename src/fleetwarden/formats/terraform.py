"""Terraform HCL: desired node pools of EKS, AKS and GKE, read without running Terraform.

What is read (each pool becomes one ``NodePoolSpec``):

- ``resource "aws_eks_node_group"``;
- ``resource "azurerm_kubernetes_cluster_node_pool"`` and the ``default_node_pool`` block of
  ``resource "azurerm_kubernetes_cluster"``;
- ``resource "google_container_node_pool"``, and the ``node_pool`` blocks (or else the implicit
  ``default-pool``) of ``resource "google_container_cluster"``;
- the terraform-aws-eks module (``eks_managed_node_groups`` / ``self_managed_node_groups``, with
  their ``*_defaults`` merged under each group) and its two node-group sub-modules;
- the terraform-google-modules kubernetes-engine module (``node_pools``, ``windows_node_pools``).

How values are known. Terraform is not run, so only what the text pins down is read: literals
as written; ``local.X`` when that local is itself known; ``T.N.name`` of a cluster resource
(and ``.id`` where a cluster is expected) and ``module.M.cluster_name`` / ``cluster_version``
of a terraform-aws-eks module, followed to what that block states; templates made only of
those. ``var.X`` is never resolved (tfvars and ``-var`` override defaults), nor is anything
else (functions, conditionals, data sources, ``each`` / ``count``). An unknown fact is ``None``
(or empty) on the spec and listed in ``spec.unresolved`` with the expression as written.

One directory is one Terraform module: references resolve only among the files of the same
directory (``os.path.dirname`` of the path; no file is opened). A local, resource or module
defined more than once in a directory is ambiguous and treated as unknown, never guessed.

Limits: no ``.tf.json``, tfvars or module defaults (a default is not stated, so it is not
checked); ``dynamic`` blocks are not expanded (their facts are listed as unresolved); launch
templates and user data are not followed (user data that sets taints makes taints unresolved).
GKE counts are per zone and are multiplied by the number of zones only when that is stated.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import hcl2
from hcl2.utils import process_escape_sequences
from lark.exceptions import LarkError, UnexpectedInput

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import NodePoolSpec, Provider, Taint, Unresolved, normalise_effect
from fleetwarden.formats.documents import PoolsRead
from fleetwarden.formats.errors import FormatError

__all__ = ["TfFile", "read_pools"]

_FORMAT = "terraform"
# Real .tf files are kilobytes. hcl2 reads about 50-100 kB a second, so the limit keeps a
# hostile file from holding the reader for more than a few seconds.
_MAX_CHARS = 256 * 1024
_META_KEYS = frozenset(
    {"__is_block__", "__comments__", "__inline_comments__", "__start_line__", "__end_line__"}
)
_INTERPOLATION = re.compile(r"(?<!\$)\$\{|(?<!%)%\{")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_HEREDOC = re.compile(r"<<(-?)([A-Za-z_][\w.-]*)\r?\n(.*?)\r?\n?[ \t]*\2\Z", re.S)
_TEMPLATE_TOKEN = re.compile(r"\$\$\{|%%\{|%\{|\$\{~?\s*([A-Za-z_][\w.-]*)\s*~?\}|\$\{")
_LOCAL_REF = re.compile(r"local\.([A-Za-z_][\w-]*)")
_RESOURCE_REF = re.compile(r"([a-z][a-z0-9_]*)\.([A-Za-z_][\w-]*)\.(name|id)")
_MODULE_REF = re.compile(r"module\.([A-Za-z_][\w-]*)\.([a-z_]+)")
_CLUSTER_IN_ID = re.compile(r"^.*/(clusters|managedClusters)/", re.I)
_ZONE = re.compile(r"[a-z]+-[a-z]+\d+-[a-z]")
_REGION = re.compile(r"[a-z]+-[a-z]+\d+")

# google_container_cluster attributes that describe its implicit default-pool
_GKE_DEFAULT_POOL = (
    ("node_config", "node_config"),
    ("initial_node_count", "initial_node_count"),
    ("version", "node_version"),
)
_CLUSTER_TYPES = ("aws_eks_cluster", "azurerm_kubernetes_cluster", "google_container_cluster")
# module.M.<output> of terraform-aws-eks -> the inputs it echoes (v20+/v21 name first, then v19)
_EKS_OUTPUTS = {
    "cluster_name": ("name", "cluster_name"),
    "cluster_version": ("kubernetes_version", "cluster_version"),
}
# user data / bootstrap arguments that register taints the reader cannot see
_TAINTS_IN_USER_DATA = re.compile(r"node-taints|register-with-taints")
_USER_DATA_KEYS = (
    "bootstrap_extra_args",
    "pre_bootstrap_user_data",
    "post_bootstrap_user_data",
    "cloudinit_pre_nodeadm",
    "cloudinit_post_nodeadm",
)


@dataclass(frozen=True, slots=True)
class TfFile:
    path: str
    text: str


@dataclass(frozen=True, slots=True)
class _Expr:
    """An expression Terraform would have to evaluate, kept as written."""

    text: str


def read_pools(files: Sequence[TfFile]) -> PoolsRead:
    """Every node pool the ``.tf`` files define; a file with none gets a note saying so.

    Raises ``FormatError`` (naming the file and line) when a file is not valid HCL.
    """
    parsed = [(f.path, _body_of(f)) for f in files if f.path.endswith(".tf")]
    by_directory: dict[str, list[tuple[str, dict[Any, Any]]]] = defaultdict(list)
    for path, body in parsed:
        by_directory[os.path.dirname(path)].append((path, body))
    out = PoolsRead()
    for group in by_directory.values():
        scope = _scope_of(group)
        for path, body in group:
            out.claimed.add((path, 0))
            try:
                pools, remarks = _pools_of(path, body, scope)
            except RecursionError:  # values nested (or locals chained) thousands deep
                raise FormatError(path, "nested too deeply to read") from None
            out.pools.extend(pools)
            if not pools:
                out.notes[path] = _note_of(body, remarks)
    return out


# -- parsing ----------------------------------------------------------------------------------


def _body_of(file: TfFile) -> dict[Any, Any]:
    """The file's top-level body as plain values; ``FormatError`` for anything not HCL."""
    path, text = file.path, file.text
    if len(text) > _MAX_CHARS:
        raise FormatError(path, f"file too large for a Terraform file ({len(text)} characters)")
    if "\x00" in text:
        raise FormatError(path, "binary data, not a Terraform file")
    try:
        body = _plain(hcl2.loads(text))
    except UnexpectedInput as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        line = exc.line if isinstance(exc.line, int) and exc.line > 0 else None
        raise FormatError(path, f"HCL syntax error: {message}", line=line) from None
    except LarkError as exc:  # a VisitError from hcl2's transformer wraps the real cause
        cause = getattr(exc, "orig_exc", exc)
        raise FormatError(path, f"HCL error: {cause}") from None
    except RecursionError:
        raise FormatError(path, "nested too deeply to read") from None
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError) as exc:
        raise FormatError(path, f"cannot read HCL: {exc}") from None
    if not isinstance(body, dict):
        raise FormatError(path, "not a Terraform file (no top-level body)")
    return body


def _plain(raw: Any) -> Any:
    """hcl2's output as plain values.

    hcl2 keeps the source form: strings and block labels keep their quotes and escapes,
    heredocs their markers, expressions come as ``${...}``, blocks carry ``__is_block__`` and
    comments ``__comments__``. Here literal strings become their value, numbers stay numbers,
    anything Terraform would evaluate becomes an ``_Expr`` with its text, and metadata goes.
    """
    if isinstance(raw, dict):
        return {_plain(k): _plain(v) for k, v in raw.items() if k not in _META_KEYS}
    if isinstance(raw, list):
        return [_plain(v) for v in raw]
    if not isinstance(raw, str):
        return raw  # int, float, bool, None
    if raw.startswith("${") and raw.endswith("}"):
        inner = raw[2:-1].strip()
        if _NUMBER.fullmatch(inner):
            number = float(inner)
            return int(number) if number.is_integer() and "." not in inner else number
        return _Expr(inner)
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        quoted = raw[1:-1]
        if _INTERPOLATION.search(quoted):
            return _Expr(raw)
        heredoc = _HEREDOC.match(quoted)
        if heredoc:  # heredocs keep backslashes: HCL does not process escapes in them
            text = textwrap.dedent(heredoc[3]) if heredoc[1] else heredoc[3]
        else:
            text = process_escape_sequences(quoted)
        return text.replace("$${", "${").replace("%%{", "%{")
    return raw


def _first_unknown(value: Any) -> _Expr | None:
    """The first expression left anywhere in a (resolved) value, or None when fully known."""
    if isinstance(value, _Expr):
        return value
    items: Iterator[Any] = iter(())
    if isinstance(value, dict):
        items = (x for kv in value.items() for x in kv)
    elif isinstance(value, list):
        items = iter(value)
    for item in items:
        found = _first_unknown(item)
        if found is not None:
            return found
    return None


def _source_text(value: Any) -> str:
    if isinstance(value, _Expr):
        return value.text
    return json.dumps(value, default=str, ensure_ascii=False)


def _blocks(body: Mapping[Any, Any], kind: str, labels: int) -> Iterator[tuple[Any, ...]]:
    """(label, ..., block body) for every ``kind`` block with that many labels."""
    entries = body.get(kind)
    for entry in entries if isinstance(entries, list) else ():
        yield from _labelled(entry, labels, ())


def _labelled(entry: Any, labels: int, seen: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
    if not isinstance(entry, dict):
        return
    if labels == 0:
        yield (*seen, entry)
        return
    for label, inner in entry.items():
        if isinstance(label, str):
            yield from _labelled(inner, labels - 1, (*seen, label))


def _block(body: Mapping[Any, Any], name: str) -> dict[Any, Any]:
    """The first ``name`` block (or object attribute) of a body; {} when there is none."""
    value = body.get(name)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return value[0]
    return value if isinstance(value, dict) else {}


# -- one directory: what it defines, and the values of references -----------------------------


@dataclass(slots=True)
class _Scope:
    """What one directory (one Terraform module) defines: every definition of every name."""

    locals: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    resources: dict[tuple[str, str], list[dict[Any, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    modules: dict[str, list[dict[Any, Any]]] = field(default_factory=lambda: defaultdict(list))

    def resource(self, kind: str, name: str) -> dict[Any, Any] | None:
        found = self.resources.get((kind, name), [])
        return found[0] if len(found) == 1 else None

    def module(self, name: str) -> dict[Any, Any] | None:
        found = self.modules.get(name, [])
        return found[0] if len(found) == 1 else None

    def resolved(self, value: Any, seen: frozenset[str] = frozenset()) -> Any:
        """``value`` with every reference that can be known replaced by its value; what cannot
        be known stays an ``_Expr`` (the expression as written where it is used)."""
        if isinstance(value, _Expr):
            return self._evaluated(value, seen)
        if isinstance(value, list):
            return [self.resolved(v, seen) for v in value]
        if isinstance(value, dict):
            return {self._key(k, seen): self.resolved(v, seen) for k, v in value.items()}
        return value

    def _key(self, key: Any, seen: frozenset[str]) -> Any:
        value = self.resolved(key, seen)
        return value if isinstance(value, str | int | float | bool | _Expr) else key

    def cluster_of(self, expr: Any) -> dict[Any, Any] | None:
        """The cluster resource a ``T.N.name`` / ``T.N.id`` reference points at, if unique."""
        ref = _RESOURCE_REF.fullmatch(expr.text) if isinstance(expr, _Expr) else None
        if ref is None or ref[1] not in _CLUSTER_TYPES:
            return None
        return self.resource(ref[1], ref[2])

    def _evaluated(self, expr: _Expr, seen: frozenset[str]) -> Any:
        text = expr.text
        if text.startswith('"'):
            return self._template(expr, seen)
        if local := _LOCAL_REF.fullmatch(text):
            found = self.locals.get(local[1], [])
            if local[1] in seen or len(found) != 1:
                return expr
            return self._known_or(expr, found[0], seen | {local[1]})
        if (ref := _RESOURCE_REF.fullmatch(text)) and ref[3] == "name":
            cluster = self.cluster_of(expr)
            if cluster is not None and "name" in cluster:
                return self._known_or(expr, cluster["name"], seen)
            return expr
        if (ref := _MODULE_REF.fullmatch(text)) and ref[2] in _EKS_OUTPUTS:
            module = self.module(ref[1])
            if module is not None and _eks_module_kind(module) == "cluster":
                for name in _EKS_OUTPUTS[ref[2]]:
                    if name in module:
                        return self._known_or(expr, module[name], seen)
        return expr

    def _known_or(self, expr: _Expr, value: Any, seen: frozenset[str]) -> Any:
        value = self.resolved(value, seen)
        return expr if _first_unknown(value) is not None else value

    def _template(self, expr: _Expr, seen: frozenset[str]) -> Any:
        """A quoted template whose interpolations are all known references, as a string."""
        quoted, parts, at = expr.text[1:-1], [], 0
        for token in _TEMPLATE_TOKEN.finditer(quoted):
            parts.append(process_escape_sequences(quoted[at : token.start()]))
            at = token.end()
            if token[0] in ("$${", "%%{"):
                parts.append(token[0][1:])
                continue
            if token[1] is None:  # a directive, or an interpolation that is not a reference
                return expr
            value = self._evaluated(_Expr(token[1]), seen)
            if isinstance(value, bool):
                value = str(value).lower()
            if not isinstance(value, str | int | float):
                return expr
            parts.append(str(value))
        parts.append(process_escape_sequences(quoted[at:]))
        return "".join(parts)


def _scope_of(group: Sequence[tuple[str, dict[Any, Any]]]) -> _Scope:
    scope = _Scope()
    for _path, body in group:
        for (block,) in _blocks(body, "locals", 0):
            for name, value in block.items():
                if isinstance(name, str):
                    scope.locals[name].append(value)
        for kind, name, block in _blocks(body, "resource", 2):
            scope.resources[(kind, name)].append(block)
        for name, block in _blocks(body, "module", 1):
            scope.modules[name].append(block)
    return scope


# -- reading the facts of one pool ------------------------------------------------------------


class _Reader:
    """Reads one pool definition's facts, collecting those only Terraform could know.

    ``attr`` arguments are Terraform attribute paths (for errors); ``fact`` arguments are the
    spec's field names as the native format spells them (for ``Unresolved``).
    """

    def __init__(self, path: str, where: str, scope: _Scope) -> None:
        self.path, self.where, self.scope = path, where, scope
        self.unresolved: list[Unresolved] = []
        self.name_prefix: str | None = None  # the real name is this + a generated suffix

    def error(self, attr: str, reason: str) -> FormatError:
        return FormatError(self.path, reason, field=f"{self.where}.{attr}")

    def note(self, fact: str, expression: str) -> None:
        item = Unresolved(fact, expression)
        if item not in self.unresolved:
            self.unresolved.append(item)

    def known(self, raw: Any, fact: str) -> Any:
        """``raw`` resolved; None (and an ``Unresolved``) when any part of it is unknown."""
        value = self.scope.resolved(raw)
        unknown = _first_unknown(value)
        if unknown is not None:
            self.note(fact, unknown.text)
            return None
        return value

    def text(self, raw: Any, attr: str, fact: str) -> str | None:
        return self._as_text(self.known(raw, fact), attr)

    def count(self, raw: Any, attr: str, fact: str) -> int | None:
        value = self.known(raw, fact)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)  # Terraform converts "2" to a number
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            if value is not None and value < 0:
                raise self.error(attr, f"must not be negative, got {value}")
            return value
        raise self.error(attr, f"expected a whole number, got {_source_text(value):.40}")

    def texts(self, raw: Any, attr: str, fact: str) -> tuple[str, ...]:
        value = self.known(raw, fact)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(attr, f"expected a list of strings, got {_source_text(value):.40}")
        found = (self._as_text(v, f"{attr}[{i}]") for i, v in enumerate(value))
        return tuple(dict.fromkeys(t for t in found if t is not None))

    def labels(self, *raws: tuple[Any, str]) -> dict[str, str]:
        """Label maps (``(raw, attr)`` pairs) merged in order; unknown as a whole if any is."""
        merged: dict[str, str] = {}
        for raw, attr in raws:
            value = self.known(raw, "labels")
            if value is None:
                if raw is not None:
                    return {}
                continue
            if not isinstance(value, dict):
                raise self.error(attr, f"expected a map, got {_source_text(value):.40}")
            for key, item in value.items():
                text = self._as_text(item, f"{attr}.{key}")
                if text is not None:
                    merged[str(key)] = text
        return merged

    def taints(self, *raws: tuple[Any, str]) -> tuple[Taint, ...]:
        """Taints from blocks, objects (a list, or a map of them) or ``key=value:Effect``
        strings; unknown as a whole (and so empty) if any part is."""
        found: list[Taint] = []
        for raw, attr in raws:
            value = self.known(raw, "taints")
            if value is None:
                if raw is not None:
                    return ()
                continue
            if not isinstance(value, dict | list):
                raise self.error(attr, f"expected a list of taints, got {_source_text(value):.40}")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            found.extend(self._taint(item, f"{attr}[{key}]") for key, item in items)
        return tuple(sorted(set(found)))

    def os_family(self, raw: Any, attr: str) -> str | None:
        setting = self.text(raw, attr, "osImage")
        return osfamilies.family_of_setting(setting) if setting else None

    def cluster(self, raw: Any, attr: str) -> str | None:
        """The cluster a pool belongs to: a literal, or a reference to a cluster resource."""
        if raw is None:
            self.note("cluster", f"{attr} not set")
            return None
        target = self.scope.cluster_of(raw)
        if target is not None and isinstance(raw, _Expr) and raw.text.endswith(".id"):
            name = self.scope.resolved(target.get("name"))
            if isinstance(name, str):
                return name
            self.note("cluster", raw.text)
            return None
        cluster = self.text(raw, attr, "cluster")
        if cluster is not None and "/" in cluster:  # a literal id: .../clusters/<name>
            cluster = _CLUSTER_IN_ID.sub("", cluster)
        return cluster

    def name(
        self, body: Mapping[Any, Any], attr: str, stand_in: str, *, prefix: str | None = None
    ) -> str:
        """The pool's name, else ``stand_in`` (a spec always has a name). With ``prefix`` the
        name is optional and Terraform generates one when it is missing: that is noted."""
        if attr in body:
            return self.text(body[attr], attr, "name") or stand_in
        if prefix is None:
            return stand_in
        if prefix in body:
            start = self.text(body[prefix], prefix, "name")
            if start is None:
                return stand_in
            self.note("name", f"{prefix} = {json.dumps(start)}: Terraform appends a suffix")
            self.name_prefix = start
            return start
        self.note("name", f"{attr} not set: Terraform generates the name")
        return stand_in

    def exists(self, body: Mapping[Any, Any]) -> bool:
        """False when ``count`` is 0; a ``count`` or ``for_each`` that may repeat is noted."""
        if "for_each" in body:
            self.note("count", f"for_each = {_source_text(body['for_each'])}")
        if "count" not in body:
            return True
        count = self.count(body["count"], "count", "count")
        if count is not None and count > 1:
            self.note("count", f"count = {count}")
        return count != 0

    def dynamic(self, body: Mapping[Any, Any], block: str, fact: str) -> None:
        """A ``dynamic "<block>"`` makes the fact it would state unknown."""
        for label, _content in _blocks(body, "dynamic", 1):
            if label == block:
                self.note(fact, f'dynamic "{block}"')

    def spec(self, provider: Provider, **facts: Any) -> NodePoolSpec:
        return NodePoolSpec(
            provider=provider,
            source=self.path,
            source_format=_FORMAT,
            unresolved=tuple(self.unresolved),
            name_prefix=self.name_prefix,
            **facts,
        )

    def _as_text(self, value: Any, attr: str) -> str | None:
        if value is None:
            return None
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str | int | float):
            return str(value)
        raise self.error(attr, f"expected a string, got {_source_text(value):.40}")

    def _taint(self, item: Any, attr: str) -> Taint:
        if isinstance(item, str):  # AKS: "key=value:Effect"
            pair, _, effect = item.rpartition(":")
            key, has_value, value = pair.partition("=")
            if not key:
                raise self.error(attr, f"expected key=value:Effect, got {item!r:.40}")
            return Taint(key, value if has_value else None, self._effect(effect, attr))
        if not isinstance(item, dict):
            raise self.error(attr, f"expected a taint, got {_source_text(item):.40}")
        stated_key = self._as_text(item.get("key"), f"{attr}.key")
        stated_effect = self._as_text(item.get("effect"), f"{attr}.effect")
        if not stated_key or not stated_effect:
            raise self.error(attr, "a taint needs a key and an effect")
        stated_value = self._as_text(item.get("value"), f"{attr}.value")
        return Taint(stated_key, stated_value, self._effect(stated_effect, attr))

    def _effect(self, text: str, attr: str) -> str:
        try:
            return normalise_effect(text)
        except ValueError as exc:
            raise self.error(f"{attr}.effect", str(exc)) from None


# -- the pools of one file --------------------------------------------------------------------


def _pools_of(
    path: str, body: Mapping[Any, Any], scope: _Scope
) -> tuple[list[NodePoolSpec], list[str]]:
    """The pools one file defines, and remarks on definitions that yield none."""
    pools: list[NodePoolSpec] = []
    remarks: list[str] = []
    for kind, label, block in _blocks(body, "resource", 2):
        if kind == "aws_eks_node_group":
            pools.extend(_eks_node_group(path, label, block, scope))
        elif kind == "azurerm_kubernetes_cluster_node_pool":
            pools.extend(_aks_node_pool(path, label, block, scope))
        elif kind == "azurerm_kubernetes_cluster":
            pools.extend(_aks_default_pool(path, label, block, scope))
        elif kind == "google_container_node_pool":
            pools.extend(_gke_node_pool(path, label, block, scope))
        elif kind == "google_container_cluster":
            pools.extend(_gke_cluster_pools(path, label, block, scope))
    for label, block in _blocks(body, "module", 1):
        if _eks_module_kind(block) is not None:
            pools.extend(_eks_module_pools(path, label, block, scope, remarks))
        elif _is_gke_module(block):
            pools.extend(_gke_module_pools(path, label, block, scope, remarks))
    return pools, remarks


def _note_of(body: Mapping[Any, Any], remarks: Sequence[str]) -> str:
    """Why a file has no pool: what it defines instead."""
    kinds = [kind for kind, _label, _body in _blocks(body, "resource", 2)]
    kinds += [f"module {label}" for label, _body in _blocks(body, "module", 1)]
    had = f"only {', '.join(dict.fromkeys(kinds))}" if kinds else "no resources or modules"
    return f"no node-pool definition (Terraform: {'; '.join([had, *remarks])})"


# AWS ----------------------------------------------------------------------------------------


def _eks_node_group(
    path: str, label: str, body: dict[Any, Any], scope: _Scope
) -> list[NodePoolSpec]:
    r = _Reader(path, f"aws_eks_node_group.{label}", scope)
    if not r.exists(body):
        return []
    scaling = _block(body, "scaling_config")
    r.dynamic(body, "taint", "taints")
    return [
        r.spec(
            Provider.AWS,
            name=r.name(body, "node_group_name", label, prefix="node_group_name_prefix"),
            cluster=r.cluster(body.get("cluster_name"), "cluster_name"),
            instance_types=r.texts(body.get("instance_types"), "instance_types", "instanceTypes"),
            disk_size_gib=r.count(body.get("disk_size"), "disk_size", "diskSizeGiB"),
            min_size=r.count(scaling.get("min_size"), "scaling_config.min_size", "minSize"),
            max_size=r.count(scaling.get("max_size"), "scaling_config.max_size", "maxSize"),
            desired_size=r.count(
                scaling.get("desired_size"), "scaling_config.desired_size", "desiredSize"
            ),
            labels=r.labels((body.get("labels"), "labels")),
            taints=r.taints((body.get("taint"), "taint")),
            kubernetes_version=r.text(body.get("version"), "version", "kubernetesVersion"),
            os_family=r.os_family(body.get("ami_type"), "ami_type"),
        )
    ]


def _eks_module_kind(module: Mapping[Any, Any]) -> str | None:
    """Which part of terraform-aws-eks a module block calls: the cluster module ("cluster") or
    a node-group sub-module ("managed", "self-managed"); None for any other module. The
    module's own examples call it as ``../..``, so a local path counts when it has groups."""
    source = module.get("source")
    if not isinstance(source, str):
        return None
    source = source.split("?", 1)[0].rstrip("/")  # git sources: drop ?ref=...
    local = source.startswith(("./", "../"))
    ours = local or "terraform-aws-modules/eks/aws" in source or "terraform-aws-eks" in source
    if not ours:
        return None
    if source.endswith("modules/eks-managed-node-group"):
        return "managed"
    if source.endswith("modules/self-managed-node-group"):
        return "self-managed"
    if "//" in source.split("://")[-1] and not local:  # another sub-module of the registry
        return None
    groups = ("eks_managed_node_groups", "self_managed_node_groups")
    if local and not any(g in module for g in groups):
        return None
    return "cluster"


def _eks_module_pools(
    path: str, label: str, module: dict[Any, Any], scope: _Scope, remarks: list[str]
) -> list[NodePoolSpec]:
    kind = _eks_module_kind(module)
    where = f"module.{label}"
    if not _module_enabled(where, module, scope, remarks):
        return []
    if kind != "cluster":  # a node-group sub-module is itself one group
        r = _Reader(path, where, scope)
        r.exists(module)
        cluster = r.cluster(module.get("cluster_name"), "cluster_name")
        return _eks_module_group(r, module, label, cluster, None, managed=kind == "managed")
    cluster_attr = "name" if "name" in module else "cluster_name"
    version_attr = "kubernetes_version" if "kubernetes_version" in module else "cluster_version"
    pools: list[NodePoolSpec] = []
    for section, managed in (
        ("eks_managed_node_groups", True),
        ("self_managed_node_groups", False),
    ):
        if section not in module:
            continue
        defaults_attr = section.replace("_groups", "_group_defaults")
        groups = scope.resolved(module[section])
        defaults = scope.resolved(module.get(defaults_attr, {}))
        if not isinstance(groups, dict) or not isinstance(defaults, dict):
            unknown = groups if not isinstance(groups, dict) else defaults
            remarks.append(f"{where}.{section}: {_source_text(unknown)} cannot be read")
            continue
        for key, group in groups.items():
            if not isinstance(group, dict):
                remarks.append(f"{where}.{section}.{key}: {_source_text(group)} cannot be read")
                continue
            merged = {**defaults, **group}
            if merged.get("create") is False:
                remarks.append(f"{where}.{section}.{key}: create = false")
                continue
            r = _Reader(path, f"{where}.{section}.{key}", scope)
            r.exists(module)
            cluster = r.cluster(module.get(cluster_attr), cluster_attr)
            version = r.text(module.get(version_attr), version_attr, "kubernetesVersion")
            pools.extend(_eks_module_group(r, merged, str(key), cluster, version, managed=managed))
    return pools


def _eks_module_group(
    r: _Reader,
    group: Mapping[Any, Any],
    stand_in: str,
    cluster: str | None,
    cluster_version: str | None,
    *,
    managed: bool,
) -> list[NodePoolSpec]:
    """One terraform-aws-eks node group (from the cluster module or a sub-module)."""
    name = r.name(group, "name", stand_in)
    if group.get("use_name_prefix", True) is not False:  # the module's default is true
        r.note("name", f'"{name}-" + a suffix Terraform generates (use_name_prefix)')
        r.name_prefix = f"{name}-"
    if managed:
        types = r.texts(group.get("instance_types"), "instance_types", "instanceTypes")
    else:
        single = r.text(group.get("instance_type"), "instance_type", "instanceTypes")
        types = (single,) if single else ()
    disk_size, disk_type = _eks_module_disk(r, group, managed=managed)
    user_data = " ".join(str(group.get(k, "")) for k in _USER_DATA_KEYS)
    if _TAINTS_IN_USER_DATA.search(user_data):
        r.note("taints", "taints set in user data / bootstrap arguments")
    version_attr = "kubernetes_version" if "kubernetes_version" in group else "cluster_version"
    version = r.text(group.get(version_attr), version_attr, "kubernetesVersion")
    # v19 names the OS in ``platform``, later versions in ``ami_type`` (also with a custom AMI)
    family = r.os_family(group.get("platform"), "platform")
    family = family or r.os_family(group.get("ami_type"), "ami_type")
    return [
        r.spec(
            Provider.AWS,
            name=name,
            cluster=cluster,
            instance_types=types,
            disk_size_gib=disk_size,
            disk_type=disk_type,
            min_size=r.count(group.get("min_size"), "min_size", "minSize"),
            max_size=r.count(group.get("max_size"), "max_size", "maxSize"),
            desired_size=r.count(group.get("desired_size"), "desired_size", "desiredSize"),
            labels=r.labels((group.get("labels"), "labels")) if managed else {},
            taints=r.taints((group.get("taints"), "taints")) if managed else (),
            kubernetes_version=version or cluster_version,
            os_family=family,
        )
    ]


def _eks_module_disk(
    r: _Reader, group: Mapping[Any, Any], *, managed: bool
) -> tuple[int | None, str | None]:
    """Disk size and type: from the one block device mapping, or ``disk_size`` (which the
    module only applies when it does not make its own launch template)."""
    if "block_device_mappings" in group:
        mappings = r.scope.resolved(group["block_device_mappings"])
        devices = list(mappings.values()) if isinstance(mappings, dict) else mappings
        if not isinstance(devices, list) or len(devices) != 1:
            if isinstance(devices, _Expr):
                r.note("diskSizeGiB", devices.text)
            elif devices:
                r.note("diskSizeGiB", f"block_device_mappings with {len(devices)} devices")
            return None, None
        ebs = _block(devices[0], "ebs") if isinstance(devices[0], dict) else {}
        attr = "block_device_mappings.ebs"
        return (
            r.count(ebs.get("volume_size"), f"{attr}.volume_size", "diskSizeGiB"),
            r.text(ebs.get("volume_type"), f"{attr}.volume_type", "diskType"),
        )
    if managed and group.get("use_custom_launch_template") is False:
        return r.count(group.get("disk_size"), "disk_size", "diskSizeGiB"), None
    return None, None


def _module_enabled(
    where: str, module: Mapping[Any, Any], scope: _Scope, remarks: list[str]
) -> bool:
    """False for ``create = false``, ``count = 0`` (both common ways to switch a module off)."""
    value = scope.resolved(module.get("create", True))
    count = scope.resolved(module.get("count", 1))
    if value is False or count == 0:
        remarks.append(f"{where}: {'create = false' if value is False else 'count = 0'}")
        return False
    return True


# Azure --------------------------------------------------------------------------------------


def _aks_node_pool(
    path: str, label: str, body: dict[Any, Any], scope: _Scope
) -> list[NodePoolSpec]:
    r = _Reader(path, f"azurerm_kubernetes_cluster_node_pool.{label}", scope)
    if not r.exists(body):
        return []
    cluster = r.cluster(body.get("kubernetes_cluster_id"), "kubernetes_cluster_id")
    return [_aks_pool(r, body, "", label, cluster, None)]


def _aks_default_pool(
    path: str, label: str, body: dict[Any, Any], scope: _Scope
) -> list[NodePoolSpec]:
    pool = _block(body, "default_node_pool")
    r = _Reader(path, f"azurerm_kubernetes_cluster.{label}", scope)
    if not pool or not r.exists(body):
        return []
    cluster = r.text(body.get("name"), "name", "cluster")
    version = r.text(body.get("kubernetes_version"), "kubernetes_version", "kubernetesVersion")
    return [_aks_pool(r, pool, "default_node_pool.", "default", cluster, version)]


def _aks_pool(
    r: _Reader,
    pool: Mapping[Any, Any],
    at: str,
    stand_in: str,
    cluster: str | None,
    cluster_version: str | None,
) -> NodePoolSpec:
    vm_size = r.text(pool.get("vm_size"), f"{at}vm_size", "instanceTypes")
    taints = r.taints((pool.get("node_taints"), f"{at}node_taints"))
    if pool.get("only_critical_addons_enabled") is True:  # AKS adds this taint itself
        taints = (*taints, Taint("CriticalAddonsOnly", "true", "NoSchedule"))
    family_attr = "os_sku" if "os_sku" in pool else "os_type"
    version = r.text(
        pool.get("orchestrator_version"), f"{at}orchestrator_version", "kubernetesVersion"
    )
    return r.spec(
        Provider.AZURE,
        name=r.name(pool, "name", stand_in),
        cluster=cluster,
        instance_types=(vm_size,) if vm_size else (),
        disk_size_gib=r.count(pool.get("os_disk_size_gb"), f"{at}os_disk_size_gb", "diskSizeGiB"),
        disk_type=r.text(pool.get("os_disk_type"), f"{at}os_disk_type", "diskType"),
        min_size=r.count(pool.get("min_count"), f"{at}min_count", "minSize"),
        max_size=r.count(pool.get("max_count"), f"{at}max_count", "maxSize"),
        desired_size=r.count(pool.get("node_count"), f"{at}node_count", "desiredSize"),
        labels=r.labels((pool.get("node_labels"), f"{at}node_labels")),
        taints=tuple(sorted(set(taints))),
        kubernetes_version=version or cluster_version,
        os_family=r.os_family(pool.get(family_attr), f"{at}{family_attr}"),
    )


# Google -------------------------------------------------------------------------------------


def _gke_node_pool(
    path: str, label: str, body: dict[Any, Any], scope: _Scope
) -> list[NodePoolSpec]:
    r = _Reader(path, f"google_container_node_pool.{label}", scope)
    if not r.exists(body):
        return []
    cluster = r.cluster(body.get("cluster"), "cluster")
    zones = _gke_zones(r, body, scope.cluster_of(body.get("cluster")))
    return [_gke_pool(r, body, "", label, cluster, zones)]


def _gke_cluster_pools(
    path: str, label: str, body: dict[Any, Any], scope: _Scope
) -> list[NodePoolSpec]:
    """The cluster's ``node_pool`` blocks; without any, GKE's own ``default-pool`` unless the
    cluster removes it."""
    where = f"google_container_cluster.{label}"
    if not _Reader(path, where, scope).exists(body) or body.get("enable_autopilot") is True:
        return []
    blocks = body.get("node_pool")
    pools: list[NodePoolSpec] = []
    for i, pool in enumerate(blocks if isinstance(blocks, list) else ()):
        if isinstance(pool, dict):
            r = _Reader(path, where, scope)
            cluster = r.text(body.get("name"), "name", "cluster")
            zones = _gke_zones(r, pool, body)
            pools.append(_gke_pool(r, pool, f"node_pool[{i}].", f"node_pool-{i}", cluster, zones))
    dynamic = any(label == "node_pool" for label, _content in _blocks(body, "dynamic", 1))
    if pools or dynamic or scope.resolved(body.get("remove_default_node_pool")) is True:
        return pools
    r = _Reader(path, where, scope)
    if isinstance(body.get("remove_default_node_pool"), _Expr):
        r.note("count", f"remove_default_node_pool = {body['remove_default_node_pool'].text}")
    cluster = r.text(body.get("name"), "name", "cluster")
    default: dict[Any, Any] = {"name": "default-pool"}
    for pool_attr, cluster_attr in _GKE_DEFAULT_POOL:
        if cluster_attr in body:
            default[pool_attr] = body[cluster_attr]
    return [_gke_pool(r, default, "", "default-pool", cluster, _gke_zones(r, {}, body))]


def _gke_pool(
    r: _Reader,
    pool: Mapping[Any, Any],
    at: str,
    stand_in: str,
    cluster: str | None,
    zones: int | None,
) -> NodePoolSpec:
    """A GKE pool (resource or ``node_pool`` block): counts are per zone unless total_*."""
    config = _block(pool, "node_config")
    scaling = _block(pool, "autoscaling")
    r.dynamic(config, "taint", "taints")
    per_zone = _PerZone(r, zones)
    scaled = f"{at}autoscaling"
    lo = r.count(scaling.get("total_min_node_count"), f"{scaled}.total_min_node_count", "minSize")
    if lo is None:
        lo = per_zone.total(scaling.get("min_node_count"), f"{scaled}.min_node_count", "minSize")
    hi = r.count(scaling.get("total_max_node_count"), f"{scaled}.total_max_node_count", "maxSize")
    if hi is None:
        hi = per_zone.total(scaling.get("max_node_count"), f"{scaled}.max_node_count", "maxSize")
    count_attr = "node_count" if "node_count" in pool else "initial_node_count"
    machine = r.text(config.get("machine_type"), f"{at}node_config.machine_type", "instanceTypes")
    return r.spec(
        Provider.GCP,
        name=r.name(pool, "name", stand_in, prefix="name_prefix"),
        cluster=cluster,
        instance_types=(machine,) if machine else (),
        disk_size_gib=r.count(
            config.get("disk_size_gb"), f"{at}node_config.disk_size_gb", "diskSizeGiB"
        ),
        disk_type=r.text(config.get("disk_type"), f"{at}node_config.disk_type", "diskType"),
        min_size=lo,
        max_size=hi,
        desired_size=per_zone.total(pool.get(count_attr), f"{at}{count_attr}", "desiredSize"),
        labels=r.labels((config.get("labels"), f"{at}node_config.labels")),
        taints=r.taints((config.get("taint"), f"{at}node_config.taint")),
        kubernetes_version=r.text(pool.get("version"), f"{at}version", "kubernetesVersion"),
        os_family=r.os_family(config.get("image_type"), f"{at}node_config.image_type"),
    )


@dataclass(frozen=True, slots=True)
class _PerZone:
    """GKE counts are per zone: a total needs the number of zones, else it is unresolved."""

    reader: _Reader
    zones: int | None

    def total(self, raw: Any, attr: str, fact: str) -> int | None:
        count = self.reader.count(raw, attr, fact)
        if count is None:
            return None
        if self.zones is None:
            name = attr.rsplit(".", 1)[-1]
            self.reader.note(fact, f"{name} = {count} per zone; the number of zones is not stated")
            return None
        return count * self.zones


def _gke_zones(
    r: _Reader, pool: Mapping[Any, Any], cluster: Mapping[Any, Any] | None
) -> int | None:
    """How many zones a pool spans, when the text states it: the pool's ``node_locations``,
    else the cluster's zone plus its ``node_locations``, else one for a zonal cluster."""
    zones = r.scope.resolved(pool.get("node_locations"))
    if isinstance(zones, list) and zones and _first_unknown(zones) is None:
        return len(set(map(str, zones)))
    cluster = cluster or {}
    location = r.scope.resolved(cluster.get("location", pool.get("location")))
    extra = r.scope.resolved(cluster.get("node_locations"))
    stated = isinstance(extra, list) and extra and _first_unknown(extra) is None
    if isinstance(location, str) and _ZONE.fullmatch(location):
        return len({location, *map(str, extra)}) if stated else 1
    if isinstance(location, str) and _REGION.fullmatch(location) and stated:
        return len(set(map(str, extra)))
    return None


def _is_gke_module(module: Mapping[Any, Any]) -> bool:
    source = module.get("source")
    return isinstance(source, str) and (
        "terraform-google-modules/kubernetes-engine/google" in source
        or "terraform-google-kubernetes-engine" in source
    )


def _gke_module_pools(
    path: str, label: str, module: dict[Any, Any], scope: _Scope, remarks: list[str]
) -> list[NodePoolSpec]:
    """terraform-google-modules/kubernetes-engine: ``node_pools`` and ``windows_node_pools``
    lists, with the per-pool maps (``node_pools_labels`` ...) keyed by pool name or ``all``."""
    where = f"module.{label}"
    if not _module_enabled(where, module, scope, remarks):
        return []
    labels = scope.resolved(module.get("node_pools_labels", {}))
    taints = scope.resolved(module.get("node_pools_taints", {}))
    pools: list[NodePoolSpec] = []
    for section in ("node_pools", "windows_node_pools"):
        listed = scope.resolved(module.get(section, []))
        if not isinstance(listed, list):
            remarks.append(f"{where}.{section}: {_source_text(listed)} cannot be read")
            continue
        for i, pool in enumerate(listed):
            if not isinstance(pool, dict):
                remarks.append(f"{where}.{section}[{i}]: {_source_text(pool)} cannot be read")
                continue
            r = _Reader(path, f"{where}.{section}[{i}]", scope)
            r.exists(module)
            pools.append(_gke_module_pool(r, module, pool, labels, taints))
    return pools


def _gke_module_pool(
    r: _Reader, module: Mapping[Any, Any], pool: Mapping[Any, Any], labels: Any, taints: Any
) -> NodePoolSpec:
    name = r.name(pool, "name", "pool")
    autoscaling = pool.get("autoscaling", True) is not False  # the module's default is true
    per_zone = _PerZone(r, _gke_module_zones(r, module, pool))

    def per_pool(maps: Any, attr: str) -> list[tuple[Any, str]]:
        if not isinstance(maps, dict):
            return [(maps, attr)]
        return [(maps.get(key), f"{attr}.{key}") for key in ("all", name)]

    lo = r.count(pool.get("total_min_count"), "total_min_count", "minSize")
    if lo is None and autoscaling:
        lo = per_zone.total(pool.get("min_count"), "min_count", "minSize")
    hi = r.count(pool.get("total_max_count"), "total_max_count", "maxSize")
    if hi is None and autoscaling:
        hi = per_zone.total(pool.get("max_count"), "max_count", "maxSize")
    count_attr = "node_count" if not autoscaling else "initial_node_count"
    machine = r.text(pool.get("machine_type"), "machine_type", "instanceTypes")
    return r.spec(
        Provider.GCP,
        name=name,
        cluster=r.cluster(module.get("name"), "name"),
        instance_types=(machine,) if machine else (),
        disk_size_gib=r.count(pool.get("disk_size_gb"), "disk_size_gb", "diskSizeGiB"),
        disk_type=r.text(pool.get("disk_type"), "disk_type", "diskType"),
        min_size=lo,
        max_size=hi,
        desired_size=per_zone.total(pool.get(count_attr), count_attr, "desiredSize"),
        labels=r.labels(*per_pool(labels, "node_pools_labels")),
        taints=r.taints(*per_pool(taints, "node_pools_taints")),
        kubernetes_version=r.text(pool.get("version"), "version", "kubernetesVersion"),
        os_family=r.os_family(pool.get("image_type"), "image_type"),
    )


def _gke_module_zones(r: _Reader, module: Mapping[Any, Any], pool: Mapping[Any, Any]) -> int | None:
    """The pool's ``node_locations`` ("a,b"), else the module's ``zones`` when listed."""
    locations = r.scope.resolved(pool.get("node_locations"))
    if isinstance(locations, str) and locations.strip():
        return len({z.strip() for z in locations.split(",") if z.strip()})
    zones = r.scope.resolved(module.get("zones"))
    if isinstance(zones, list) and zones and _first_unknown(zones) is None:
        return len(set(map(str, zones)))
    return None
