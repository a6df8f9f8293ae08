"""Reading one pool: typed reads of its source objects, each noted in the pool's account.

A pool is read from one or more source objects (a resource block; a terraform-aws-eks group map
and the module's ``*_node_group_defaults``; a GKE module pool and the module's per-pool maps).
Each is an ``Obj``: its plain body, where it is in the file (for ``file:line``) and a ``View`` of
the pool's ``Ledger``. Every read notes what became of the attribute: compared (the fact it
feeds), unresolved (the expression), or ignored (the reason); ``Reader.spec`` then closes every
object, so an attribute no reader knows is listed as unaccounted, never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.integers import ascii_int
from fleetwarden.core.pools import (
    NodePoolSpec,
    Provisioner,
    Taint,
    Unresolved,
    normalise_effect,
)
from fleetwarden.formats.accounting import Ledger, View, dotted
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed
from fleetwarden.formats.terraform.hcl import Expr, blocks, first_unknown, source_text
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.scope import Scope

__all__ = ["FORMAT", "META_IGNORED", "Aside", "Context", "Obj", "Reader", "module_enabled"]

FORMAT = "terraform"
_CLUSTER_IN_ID = re.compile(r"^.*/(clusters|managedClusters)/", re.I)
_META = "Terraform meta-argument"
# attributes every resource / module block may carry: about Terraform, not the nodes
META_IGNORED: dict[str, str] = {
    "depends_on": f"{_META}: ordering",
    "lifecycle": f"{_META}: how Terraform plans changes, not what the nodes look like",
    "provider": f"{_META}: which provider configuration",
    "providers": f"{_META}: which provider configurations",
    "timeouts": "Terraform timeouts: not visible on a Node",
    "source": f"{_META}: where the module comes from (its version is read)",
    "version": f"{_META}: the module version (read to pick its defaults)",
}


@dataclass(frozen=True, slots=True)
class Context:
    """What every pool of one file is read with."""

    path: str
    scope: Scope
    lines: Mapping[Path, int]
    assume: Assumed
    # directory (normalised) -> the variables its files declare, for every directory read
    variables: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity
class Obj:
    """One source object a pool is read from: its body, its view, its address for errors."""

    body: Mapping[Any, Any]
    view: View
    where: str

    def raw(self, attr: Path | str) -> Any:
        """The value at ``attr`` (a key, or a path into nested maps and lists); None if absent."""
        value: Any = self.body
        for part in (attr,) if isinstance(attr, str) else attr:
            in_list = isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value)
            if not in_list and not (isinstance(value, Mapping) and part in value):
                return None
            value = value[part]
        return value

    def has(self, attr: Path | str) -> bool:
        return self.raw(attr) is not None


def _attr(attr: Path | str) -> Path:
    return (attr,) if isinstance(attr, str) else attr


class Reader:
    """Reads one pool: its facts, where each came from, and the account of its attributes.

    ``attr`` arguments are attribute paths within an ``Obj``; ``fact`` arguments are the spec's
    facts as provenance names them (``instanceTypes``, ``minSize``, ``labels.<key>`` ...).
    """

    def __init__(self, ctx: Context, where: str) -> None:
        self.ctx, self.where, self.scope = ctx, where, ctx.scope
        self.ledger = Ledger()
        self.unresolved: list[Unresolved] = []
        self.name_prefix: str | None = None  # the real name is this + a generated suffix
        self.startup_taints: list[Taint] = []  # taints the provider may add: tolerated
        self._objects: list[tuple[Obj, Mapping[str, str]]] = []

    # -- objects -------------------------------------------------------------------------------

    def obj(
        self,
        body: Mapping[Any, Any],
        base: Path,
        reasons: Mapping[str, str],
        *,
        where: str | None = None,
        label: str = "",
        close: bool = True,
    ) -> Obj:
        """A source object of this pool at ``base`` in the file; closed with ``reasons``
        (attribute pattern -> why it is ignored) when the spec is made, unless ``close`` is
        false (an object only some attributes of which concern the pool, like a module's
        cluster inputs)."""
        view = self.ledger.view(self.ctx.path, base=base, lines=self.ctx.lines.get, label=label)
        found = Obj(body, view, where or self.where)
        if close:
            self._objects.append((found, reasons))
        return found

    # -- account -------------------------------------------------------------------------------

    def error(self, obj: Obj, attr: Path | str, reason: str) -> FormatError:
        return FormatError(self.ctx.path, reason, field=f"{obj.where}.{dotted(_attr(attr))}")

    def note(self, fact: str, expression: str) -> None:
        """A fact left open by something the reader cannot evaluate."""
        item = Unresolved(fact, expression)
        if item not in self.unresolved:
            self.unresolved.append(item)

    def unresolve(self, obj: Obj, attr: Path | str, fact: str, expression: str) -> None:
        obj.view.unresolved(_attr(attr), expression, fact)
        self.note(fact, expression)

    def compared(self, obj: Obj, attr: Path | str, fact: str, value: Any = None) -> str:
        return obj.view.compared(_attr(attr), fact, value)

    def ignore(self, obj: Obj, attr: Path | str, reason: str) -> None:
        if obj.has(attr):
            obj.view.ignored(_attr(attr), reason)

    def default(self, fact: str, attr: str, value: Any, origin: str) -> None:
        self.ledger.default(fact, attr, value, origin)

    def unstated(self, fact: str, attr: str, reason: str) -> None:
        self.ledger.unstated(fact, attr, reason)

    def origin(self, obj: Obj, attr: Path | str) -> str:
        return obj.view.origin(_attr(attr))

    # -- typed reads ---------------------------------------------------------------------------

    def known(self, obj: Obj, attr: Path | str, fact: str) -> Any:
        """The attribute's value; None when absent, or when any part of it is unknown (then
        noted as unresolved with the expression)."""
        raw = obj.raw(attr)
        if raw is None:
            return None
        value = self.scope.resolved(raw)
        unknown = first_unknown(value)
        if unknown is not None:
            self.unresolve(obj, attr, fact, unknown.text)
            return None
        return value

    def text(self, obj: Obj, attr: Path | str, fact: str, *, note: bool = True) -> str | None:
        value = self._as_text(obj, self.known(obj, attr, fact), attr)
        if value is not None and note:
            self.compared(obj, attr, fact, value)
        return value

    def flag(self, obj: Obj, attr: Path | str, fact: str, *, note: bool = True) -> bool | None:
        value = self.known(obj, attr, fact)
        if isinstance(value, str) and value in ("true", "false"):
            value = value == "true"  # Terraform converts "true" to a bool
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.error(obj, attr, f"expected true or false, got {source_text(value):.40}")
        if note:
            self.compared(obj, attr, fact, value)
        return value

    def count(self, obj: Obj, attr: Path | str, fact: str, *, note: bool = True) -> int | None:
        value = self.known(obj, attr, fact)
        if isinstance(value, str) and (number := ascii_int(value.strip(), signed=True)) is not None:
            value = number  # Terraform converts "2" to a number
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(obj, attr, f"expected a whole number, got {source_text(value):.40}")
        if value < 0:
            raise self.error(obj, attr, f"must not be negative, got {value}")
        if note:
            self.compared(obj, attr, fact, value)
        return value

    def texts(
        self, obj: Obj, attr: Path | str, fact: str, *, note: bool = True
    ) -> tuple[str, ...] | None:
        """A list of strings (deduplicated, in order); None when absent or unknown."""
        value = self.known(obj, attr, fact)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(obj, attr, f"expected a list of strings, got {source_text(value):.40}")
        found = (self._as_text(obj, v, (*_attr(attr), i)) for i, v in enumerate(value))
        out = tuple(dict.fromkeys(t for t in found if t is not None))
        if note and out:
            self.compared(obj, attr, fact, list(out))
        return out

    def labels(self, obj: Obj, attr: Path | str) -> dict[str, str] | None:
        """A label map, each label noted as compared; None when absent or unknown."""
        value = self.known(obj, attr, "labels")
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(obj, attr, f"expected a map, got {source_text(value):.40}")
        out: dict[str, str] = {}
        for key, item in value.items():
            text = self._as_text(obj, item, (*_attr(attr), str(key)))
            if text is not None:
                out[str(key)] = text
                self.compared(obj, (*_attr(attr), str(key)), f"labels.{key}", text)
        if not value:
            obj.view.ignored(_attr(attr), "empty: states nothing")
        return out

    def taints(self, obj: Obj, attr: Path | str) -> tuple[Taint, ...] | None:
        """Taints from blocks, objects (a list, or a map of them) or ``key=value:Effect``
        strings; None when absent or unknown (as a whole if any part is)."""
        value = self.known(obj, attr, "taints")
        if value is None:
            return None
        if not isinstance(value, dict | list):
            raise self.error(obj, attr, f"expected a list of taints, got {source_text(value):.40}")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        found = [self._taint(obj, item, (*_attr(attr), key)) for key, item in items]
        out = tuple(sorted(set(found)))
        for taint in out:
            shown = f"{taint.key}={taint.value or ''}:{taint.effect}"
            self.compared(obj, attr, taint.field_name, shown)
        if not out:
            obj.view.ignored(_attr(attr), "empty: states nothing")
        return out

    def os_family(self, obj: Obj, attr: Path | str, *, note: bool = True) -> str | None:
        """The OS family an image setting names; an unknown setting is ignored, said so."""
        setting = self.text(obj, attr, "osImage", note=False)
        if setting is None:
            return None
        family = osfamilies.family_of_setting(setting)
        if family is None:
            obj.view.ignored(_attr(attr), f"unknown image setting {setting!r}: not compared")
        elif note:
            self.compared(obj, attr, "osImage", setting)
        return family

    def cluster(self, obj: Obj, attr: str) -> str | None:
        """The cluster a pool belongs to: a literal, or a reference to a cluster resource."""
        raw = obj.raw(attr)
        if raw is None:
            self.note("cluster", f"{attr} not set")
            return None
        target = self.scope.cluster_of(raw)
        if target is not None and isinstance(raw, Expr) and raw.text.endswith(".id"):
            name = self.scope.resolved(target.get("name"))
            if isinstance(name, str):
                self.compared(obj, attr, "cluster", name)
                return name
            self.unresolve(obj, attr, "cluster", raw.text)
            return None
        cluster = self.text(obj, attr, "cluster")
        if cluster is not None and "/" in cluster:  # a literal id: .../clusters/<name>
            cluster = _CLUSTER_IN_ID.sub("", cluster)
        return cluster

    def name(self, obj: Obj, attr: str, stand_in: str, *, prefix: str | None = None) -> str:
        """The pool's name, else ``stand_in`` (a spec always has a name). With ``prefix`` the
        name is optional and Terraform generates one when it is missing: that is noted."""
        if obj.has(attr):
            return self.text(obj, attr, "name") or stand_in
        if prefix is None:
            return stand_in
        if obj.has(prefix):
            start = self.text(obj, prefix, "name")
            if start is None:
                return stand_in
            self.note("name", f"{prefix} = {json.dumps(start)}: Terraform appends a suffix")
            self.name_prefix = start
            return start
        self.note("name", f"{attr} not set: Terraform generates the name")
        return stand_in

    @property
    def name_known(self) -> bool:
        """False once the pool's name was noted unknown (an expression, or generated)."""
        return all(u.field != "name" for u in self.unresolved)

    def exists(self, obj: Obj) -> bool:
        """False when ``count`` is 0; a ``count`` or ``for_each`` that may repeat is noted."""
        if obj.has("for_each"):
            self.unresolve(
                obj, "for_each", "count", f"for_each = {source_text(obj.raw('for_each'))}"
            )
        if not obj.has("count"):
            return True
        count = self.count(obj, "count", "count")
        if count is not None and count > 1:
            self.note("count", f"count = {count}")
        return count != 0

    def dynamic(self, obj: Obj, block: str, fact: str, *, at: Path = ()) -> None:
        """A ``dynamic "<block>"`` makes the fact it would state unknown."""
        body = obj.raw(at) if at else obj.body
        if not isinstance(body, Mapping):
            return
        for i, (label, _content) in enumerate(blocks(body, "dynamic", 1)):
            if label == block:
                self.unresolve(obj, (*at, "dynamic", i, label), fact, f'dynamic "{block}"')
        for i, (label, _content) in enumerate(blocks(body, "dynamic", 1)):
            if label != block:
                obj.view.ignored(
                    (*at, "dynamic", i, label), f'dynamic "{label}": not a node fact read here'
                )

    def yields(self, at: Path, dyn: Mapping[Any, Any], block: str, *, most: int | None) -> bool:
        """Whether a ``dynamic "<block>"`` (at ``at``) whose content is read as a pool makes
        it: False for an empty literal ``for_each``; an expression leaves the count unresolved,
        a literal of more than one notes it (an error above ``most``, as Terraform refuses)."""
        reasons = {"content": f"read: the {block} block", "iterator": "the iteration variable"}
        obj = self.obj(dyn, at, reasons, label=f'dynamic "{block}"')
        if not obj.has("for_each"):
            raise self.error(obj, "for_each", "a dynamic block needs for_each")
        each = self.known(obj, "for_each", "count")
        if each is None:
            return True  # noted as unresolved by ``known``
        if not isinstance(each, list | dict):
            raise self.error(
                obj, "for_each", f"expected a list or a map, got {source_text(each):.40}"
            )
        size = len(each)
        if most is not None and size > most:
            raise self.error(obj, "for_each", f"at most {most} {block} block, got {size}")
        self.compared(obj, "for_each", "count", size)
        if size > 1:
            self.note("count", f'dynamic "{block}": for_each gives {size}')
        return size > 0

    # -- the spec ------------------------------------------------------------------------------

    def spec(self, provider: Provisioner, **facts: Any) -> NodePoolSpec:
        for obj, reasons in self._objects:
            obj.view.close(obj.body, reasons)
        return NodePoolSpec(
            provider=provider,
            source=self.ctx.path,
            source_format=FORMAT,
            unresolved=tuple(self.unresolved),
            name_prefix=self.name_prefix,
            startup_taints=tuple(sorted(set(self.startup_taints))),
            provenance=dict(self.ledger.provenance),
            account=self.ledger.entries(),
            **facts,
        )

    # -- helpers -------------------------------------------------------------------------------

    def _as_text(self, obj: Obj, value: Any, attr: Path | str) -> str | None:
        if value is None:
            return None
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str | int | float):
            return str(value)
        raise self.error(obj, attr, f"expected a string, got {source_text(value):.40}")

    def _taint(self, obj: Obj, item: Any, attr: Path) -> Taint:
        if isinstance(item, str):  # AKS: "key=value:Effect"
            pair, _, effect = item.rpartition(":")
            key, has_value, value = pair.partition("=")
            if not key:
                raise self.error(obj, attr, f"expected key=value:Effect, got {item!r:.40}")
            return Taint(key, value if has_value else None, self._effect(obj, effect, attr))
        if not isinstance(item, dict):
            raise self.error(obj, attr, f"expected a taint, got {source_text(item):.40}")
        stated_key = self._as_text(obj, item.get("key"), (*attr, "key"))
        stated_effect = self._as_text(obj, item.get("effect"), (*attr, "effect"))
        if not stated_key or not stated_effect:
            raise self.error(obj, attr, "a taint needs a key and an effect")
        stated_value = self._as_text(obj, item.get("value"), (*attr, "value"))
        return Taint(stated_key, stated_value, self._effect(obj, stated_effect, attr))

    def _effect(self, obj: Obj, text: str, attr: Path) -> str:
        try:
            return normalise_effect(text)
        except ValueError as exc:
            raise self.error(obj, (*attr, "effect"), str(exc)) from None


class Aside(str):
    """A remark on a file that leaves no desired pool uncompared (a definition switched off
    on purpose, ``create = false``, ``count = 0``; Auto Mode without pools). Any other remark
    names pools that exist but are not read: said always, even beside the file's other pools."""

    __slots__ = ()


def module_enabled(where: str, module: Mapping[Any, Any], scope: Scope, remarks: list[str]) -> bool:
    """False for ``create = false``, ``count = 0`` (both common ways to switch a module off)."""
    value = scope.resolved(module.get("create", True))
    count = scope.resolved(module.get("count", 1))
    if value is False or count == 0:
        remarks.append(Aside(f"{where}: {'create = false' if value is False else 'count = 0'}"))
        return False
    return True
