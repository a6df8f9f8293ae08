"""Reading the facts of one pool, collecting those only Terraform could know."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import NodePoolSpec, Provider, Taint, Unresolved, normalise_effect
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.terraform.hcl import Expr, blocks, first_unknown, source_text
from fleetwarden.formats.terraform.scope import Scope

__all__ = ["FORMAT", "Reader", "module_enabled"]

FORMAT = "terraform"
_CLUSTER_IN_ID = re.compile(r"^.*/(clusters|managedClusters)/", re.I)


class Reader:
    """Reads one pool definition's facts, collecting those only Terraform could know.

    ``attr`` arguments are Terraform attribute paths (for errors); ``fact`` arguments are the
    spec's field names as the native format spells them (for ``Unresolved``).
    """

    def __init__(self, path: str, where: str, scope: Scope) -> None:
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
        unknown = first_unknown(value)
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
        raise self.error(attr, f"expected a whole number, got {source_text(value):.40}")

    def texts(self, raw: Any, attr: str, fact: str) -> tuple[str, ...]:
        value = self.known(raw, fact)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(attr, f"expected a list of strings, got {source_text(value):.40}")
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
                raise self.error(attr, f"expected a map, got {source_text(value):.40}")
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
                raise self.error(attr, f"expected a list of taints, got {source_text(value):.40}")
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
        if target is not None and isinstance(raw, Expr) and raw.text.endswith(".id"):
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
            self.note("count", f"for_each = {source_text(body['for_each'])}")
        if "count" not in body:
            return True
        count = self.count(body["count"], "count", "count")
        if count is not None and count > 1:
            self.note("count", f"count = {count}")
        return count != 0

    def dynamic(self, body: Mapping[Any, Any], block: str, fact: str) -> None:
        """A ``dynamic "<block>"`` makes the fact it would state unknown."""
        for label, _content in blocks(body, "dynamic", 1):
            if label == block:
                self.note(fact, f'dynamic "{block}"')

    def spec(self, provider: Provider, **facts: Any) -> NodePoolSpec:
        return NodePoolSpec(
            provider=provider,
            source=self.path,
            source_format=FORMAT,
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
        raise self.error(attr, f"expected a string, got {source_text(value):.40}")

    def _taint(self, item: Any, attr: str) -> Taint:
        if isinstance(item, str):  # AKS: "key=value:Effect"
            pair, _, effect = item.rpartition(":")
            key, has_value, value = pair.partition("=")
            if not key:
                raise self.error(attr, f"expected key=value:Effect, got {item!r:.40}")
            return Taint(key, value if has_value else None, self._effect(effect, attr))
        if not isinstance(item, dict):
            raise self.error(attr, f"expected a taint, got {source_text(item):.40}")
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


def module_enabled(where: str, module: Mapping[Any, Any], scope: Scope, remarks: list[str]) -> bool:
    """False for ``create = false``, ``count = 0`` (both common ways to switch a module off)."""
    value = scope.resolved(module.get("create", True))
    count = scope.resolved(module.get("count", 1))
    if value is False or count == 0:
        remarks.append(f"{where}: {'create = false' if value is False else 'count = 0'}")
        return False
    return True
