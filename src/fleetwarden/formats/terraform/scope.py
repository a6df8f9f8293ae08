"""One directory (one Terraform module): what it defines, and the values of references."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hcl2.utils import process_escape_sequences

from fleetwarden.formats.terraform.hcl import Expr, blocks, first_unknown
from fleetwarden.formats.terraform.sources import eks_module_kind

__all__ = ["CLUSTER_TYPES", "Scope", "scope_of"]

_TEMPLATE_TOKEN = re.compile(r"\$\$\{|%%\{|%\{|\$\{~?\s*([A-Za-z_][\w.-]*)\s*~?\}|\$\{")
_LOCAL_REF = re.compile(r"local\.([A-Za-z_][\w-]*)")
_RESOURCE_REF = re.compile(r"([a-z][a-z0-9_]*)\.([A-Za-z_][\w-]*)\.(name|id)")
_MODULE_REF = re.compile(r"module\.([A-Za-z_][\w-]*)\.([a-z_]+)")
CLUSTER_TYPES = ("aws_eks_cluster", "azurerm_kubernetes_cluster", "google_container_cluster")
# module.M.<output> of terraform-aws-eks -> the inputs it echoes (v20+/v21 name first, then v19)
_EKS_OUTPUTS = {
    "cluster_name": ("name", "cluster_name"),
    "cluster_version": ("kubernetes_version", "cluster_version"),
}


@dataclass(slots=True)
class Scope:
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
        be known stays an ``Expr`` (the expression as written where it is used)."""
        if isinstance(value, Expr):
            return self._evaluated(value, seen)
        if isinstance(value, list):
            return [self.resolved(v, seen) for v in value]
        if isinstance(value, dict):
            return {self._key(k, seen): self.resolved(v, seen) for k, v in value.items()}
        return value

    def _key(self, key: Any, seen: frozenset[str]) -> Any:
        value = self.resolved(key, seen)
        return value if isinstance(value, str | int | float | bool | Expr) else key

    def cluster_of(self, expr: Any) -> dict[Any, Any] | None:
        """The cluster resource a ``T.N.name`` / ``T.N.id`` reference points at, if unique."""
        ref = _RESOURCE_REF.fullmatch(expr.text) if isinstance(expr, Expr) else None
        if ref is None or ref[1] not in CLUSTER_TYPES:
            return None
        return self.resource(ref[1], ref[2])

    def _evaluated(self, expr: Expr, seen: frozenset[str]) -> Any:
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
            if module is not None and eks_module_kind(module) == "cluster":
                for name in _EKS_OUTPUTS[ref[2]]:
                    if name in module:
                        return self._known_or(expr, module[name], seen)
        return expr

    def _known_or(self, expr: Expr, value: Any, seen: frozenset[str]) -> Any:
        value = self.resolved(value, seen)
        return expr if first_unknown(value) is not None else value

    def _template(self, expr: Expr, seen: frozenset[str]) -> Any:
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
            value = self._evaluated(Expr(token[1]), seen)
            if isinstance(value, bool):
                value = str(value).lower()
            if not isinstance(value, str | int | float):
                return expr
            parts.append(str(value))
        parts.append(process_escape_sequences(quoted[at:]))
        return "".join(parts)


def scope_of(group: Sequence[tuple[str, dict[Any, Any]]]) -> Scope:
    scope = Scope()
    for _path, body in group:
        for (block,) in blocks(body, "locals", 0):
            for name, value in block.items():
                if isinstance(name, str):
                    scope.locals[name].append(value)
        for kind, name, block in blocks(body, "resource", 2):
            scope.resources[(kind, name)].append(block)
        for name, block in blocks(body, "module", 1):
            scope.modules[name].append(block)
    return scope
