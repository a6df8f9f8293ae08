"""An account of every attribute of a pool's source: compared, unresolved, ignored or unknown.

Silence must mean "no drift", so a reader may not drop a value without a trace. While it reads a
pool it notes, per attribute, the fact the value feeds (``compared``), the expression it could
not evaluate (``unresolved``) or why the attribute does not concern nodes (``ignored``); at the
end ``close`` walks the whole source object and lists every attribute nobody noted as
``unaccounted`` (a reader that does not know it — shown by ``fleetwarden explain``, and a test
over the real corpus keeps that list empty). Defaults the provisioner applies are noted too, with
where that default comes from, so every desired value has a provenance: ``file:line`` or
``default: <provisioner> <version> ...``.

Paths are tuples (label keys hold dots and slashes); a string is split on dots for convenience.
Ignore tables are keyed by the dotted path with ``[*]`` for list positions
(``instancesDistribution.maxPrice``, ``taints[*].effect``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleetwarden.core.pools import FieldAccount, FieldStatus

__all__ = ["Attr", "Ledger", "LineOf", "Path", "View", "dotted", "pattern"]

Path = tuple[str | int, ...]
Attr = Path | str
LineOf = Callable[[Path], int | None]  # absolute path in the document -> 1-based line


def _path(attr: Attr) -> Path:
    if isinstance(attr, tuple):
        return attr
    return tuple(attr.split(".")) if attr else ()


def dotted(path: Path) -> str:
    """``("taints", 0, "key")`` -> ``taints[0].key``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def pattern(path: Path) -> str:
    """The ignore-table key of a path: list positions become ``[*]``."""
    return dotted(tuple(-1 if isinstance(p, int) else p for p in path)).replace("[-1]", "[*]")


def show(value: Any) -> str:
    """A value as explain prints it (JSON for structures)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


class Ledger:
    """The account of one pool, gathered over the objects it is read from."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, ...], FieldAccount] = {}
        self.provenance: dict[str, str] = {}

    def view(
        self,
        source: str,
        *,
        base: Path = (),
        lines: LineOf | None = None,
        label: str = "",
    ) -> View:
        """Notes on the object at ``base`` of file ``source`` (``label`` names it in paths
        when a pool is read from several objects)."""
        return View(self, source, base, lines, label)

    def add(self, key: tuple[str, ...], entry: FieldAccount) -> None:
        old = self._entries.get(key)
        # a compared or unresolved note outranks an ignore or an unaccounted one
        if old is not None and _RANK[old.status] > _RANK[entry.status]:
            return
        self._entries[key] = entry

    def drop(self, key: tuple[str, ...]) -> None:
        """Forget one note (``View.superseded``: a value the node never gets after all)."""
        self._entries.pop(key, None)

    def default(self, fact: str, attr: str, value: Any, origin: str) -> None:
        """A value the provisioner applies because the source states none."""
        origin = origin if origin.startswith("default:") else f"default: {origin}"
        entry = FieldAccount(attr, FieldStatus.COMPARED, show(value), fact=fact, origin=origin)
        self._entries[("(default)", attr, fact)] = entry
        self.provenance[fact] = origin

    def unstated(self, fact: str, attr: str, reason: str) -> None:
        """A fact the source leaves open and no default fills: said, so silence is explained."""
        entry = FieldAccount(attr, FieldStatus.IGNORED, reason, fact=fact)
        self._entries[("(not stated)", attr, fact)] = entry

    def forget(self, fact: str) -> None:
        """A fact stated elsewhere after all: drop its default (and provenance)."""
        self.provenance.pop(fact, None)
        for key, entry in list(self._entries.items()):
            if entry.fact == fact and entry.is_default:
                del self._entries[key]

    def has(self, fact: str) -> bool:
        return fact in self.provenance

    def entries(self) -> tuple[FieldAccount, ...]:
        return tuple(self._entries.values())


_RANK = {
    FieldStatus.UNACCOUNTED: 0,
    FieldStatus.IGNORED: 1,
    FieldStatus.UNRESOLVED: 2,
    FieldStatus.COMPARED: 3,
}


class View:
    """Notes about one source object (see ``Ledger.view``)."""

    def __init__(
        self, ledger: Ledger, source: str, base: Path, lines: LineOf | None, label: str
    ) -> None:
        self.ledger, self.source, self.base, self.lines, self.label = (
            ledger,
            source,
            base,
            lines,
            label,
        )
        self._noted: list[Path] = []

    # -- notes ---------------------------------------------------------------------------------

    def origin(self, attr: Attr) -> str:
        """``file:line`` of an attribute (just the file when the line is not known)."""
        path = _path(attr)
        line = None
        if self.lines is not None:
            for cut in range(len(path), -1, -1):  # the nearest stated ancestor
                line = self.lines(self.base + path[:cut])
                if line is not None:
                    break
        return f"{self.source}:{line}" if line is not None else self.source

    def compared(self, attr: Attr, fact: str, value: Any = None) -> str:
        """``attr`` feeds ``fact``; returns its origin (also recorded as the fact's)."""
        path = _path(attr)
        origin = self.origin(path)
        detail = show(value) if value is not None else ""
        entry = FieldAccount(
            self._show(path), FieldStatus.COMPARED, detail, fact=fact, origin=origin
        )
        self._note(path, entry)
        if self.ledger.provenance.get(fact, "").startswith("default:"):
            self.ledger.forget(fact)
        self.ledger.provenance[fact] = origin
        return origin

    def unresolved(self, attr: Attr, expression: str, fact: str | None = None) -> None:
        path = _path(attr)
        self._note(
            path,
            FieldAccount(
                self._show(path),
                FieldStatus.UNRESOLVED,
                expression,
                fact=fact,
                origin=self.origin(path),
            ),
        )

    def ignored(self, attr: Attr, reason: str) -> None:
        path = _path(attr)
        self._note(
            path,
            FieldAccount(self._show(path), FieldStatus.IGNORED, reason, origin=self.origin(path)),
        )

    def superseded(self, attr: Attr, fact: str, reason: str) -> None:
        """``attr`` was compared as feeding ``fact``, but a later source replaces it on the node:
        its compared note becomes an ignored one, saying why."""
        path = _path(attr)
        self.ledger.drop((self.label, dotted(path), fact))
        self.ignored(path, reason)

    def default(self, fact: str, attr: Attr, value: Any, origin: str) -> None:
        """``Ledger.default`` for an attribute of this object (named with its label)."""
        self.ledger.default(fact, self._show(_path(attr)), value, origin)

    def unstated(self, fact: str, attr: Attr, reason: str) -> None:
        self.ledger.unstated(fact, self._show(_path(attr)), reason)

    def noted(self, attr: Attr) -> bool:
        """Whether a note covers ``attr`` already (it, or an ancestor of it)."""
        path = _path(attr)
        return any(path[: len(p)] == p for p in self._noted)

    def _note(self, path: Path, entry: FieldAccount) -> None:
        self._noted.append(path)
        # one attribute may feed several facts (a taint list, a replicas count)
        self.ledger.add((self.label, dotted(path), entry.fact or ""), entry)

    def _show(self, path: Path) -> str:
        return f"{self.label}: {dotted(path)}" if self.label else dotted(path)

    # -- closing -------------------------------------------------------------------------------

    def close(self, obj: Mapping[str, Any], reasons: Mapping[str, str], *, at: Attr = ()) -> None:
        """Account for every attribute of ``obj`` (the mapping at ``at`` below the view's
        base) that no note covers: ignored by ``reasons``, else unaccounted."""
        start = _path(at)
        prefixes = {p for p in self._noted}
        wanted = {pat for pat in reasons}
        for key, value in obj.items():
            self._walk(value, (*start, str(key)), prefixes, wanted, reasons)

    def _walk(
        self,
        value: Any,
        path: Path,
        noted: set[Path],
        wanted: set[str],
        reasons: Mapping[str, str],
    ) -> None:
        if any(path[: len(p)] == p for p in noted):
            return  # this attribute or an ancestor was read
        pat = pattern(path)
        if pat in reasons:
            self.ignored(path, reasons[pat])
            return
        below = any(p[: len(path)] == path and len(p) > len(path) for p in noted) or any(
            w.startswith((pat + ".", pat + "[")) for w in wanted
        )
        if below and isinstance(value, Mapping):
            for key, item in value.items():
                self._walk(item, (*path, str(key)), noted, wanted, reasons)
            return
        if below and isinstance(value, list):
            for i, item in enumerate(value):
                self._walk(item, (*path, i), noted, wanted, reasons)
            return
        if value is None or value == {} or value == [] or value == "":
            self.ignored(path, "empty: states nothing")
            return
        self._note(
            path,
            FieldAccount(
                self._show(path),
                FieldStatus.UNACCOUNTED,
                "not known to fleetwarden: not compared",
                origin=self.origin(path),
            ),
        )


def ignore_all(view: View, obj: Mapping[str, Any], keys: Sequence[str], reason: str) -> None:
    """Note several attributes of ``obj`` as ignored for the same reason (those present)."""
    for key in keys:
        if key in obj:
            view.ignored((key,), reason)
