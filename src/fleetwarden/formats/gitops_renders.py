"""Which files of a desired-state tree Argo CD or Flux renders with changes. Parsing only.

An Argo CD ``Application`` whose source sets
``kustomize``, ``helm``, ``plugin`` or ``directory.jsonnet``, or a Flux ``Kustomization`` with
``images``, ``patches``, ``postBuild``... renders the files under its path with changes on the
way to the cluster: they are not desired state as written (``gitops_rewrites``).

Paths are resolved from the repository root, as the controllers do:

* Argo CD (``util/app/path.Path``): ``source.path`` joined to the root of the checkout; an
  absolute path or one leaving the root is an error there (the Application renders nothing);
  ``""`` and ``.`` are the root. A source with ``chart`` (a Helm repository) has no path here;
  a multi-source ``ref`` source without a path only lends values files.
* Flux kustomize-controller: ``securejoin.SecureJoin(artifact, spec.path)`` -- a leading ``/``
  and ``..`` stay inside the artifact; no ``spec.path`` is its root. The artifact of a
  ``GitRepository`` is the repository; that of an ``OCIRepository``, ``Bucket`` or
  ``ExternalArtifact`` is some directory this tree does not name.

Where the tree does not say what a path resolves to, files are taken as rendered rather than
compared, and the reason says why: the repository root is not known (no Git work tree around
the tree: every directory ending in the path is taken for it), or a Flux source's artifact root
is not known (likewise).

The repository of ``repoURL`` / ``sourceRef`` is not matched to a checkout: a path is resolved
in every checkout of the tree.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwarden.core.skips import Skip
from fleetwarden.formats.documents import Document, SourceFile, decode_text, parse_yaml_documents
from fleetwarden.formats.errors import FormatError

__all__ = ["gitops_rewrites"]

# what an Argo CD Application's source may change on the way to the cluster (the
# ApplicationSource of argoproj/argo-cd pkg/apis/application/v1alpha1/types.go), and what a
# Flux Kustomization may (kustomize.toolkit.fluxcd.io/v1 KustomizationSpec)
_ARGO_TOOLS = ("kustomize", "helm", "plugin", "directory")
_FLUX_CHANGES = frozenset(
    {
        "images",
        "patches",
        "patchesStrategicMerge",
        "patchesJson6902",
        "namePrefix",
        "nameSuffix",
        "targetNamespace",
        "commonMetadata",
        "postBuild",
        "components",
    }
)
# ApplicationSetGenerator's fields (applicationset_types.go)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# =========================================================================== where files are


def _segments(path: str) -> list[str]:
    path = path.strip("/")
    return [] if path in ("", ".") else path.split("/")


def _dir_of(path: str) -> str:
    return posixpath.dirname(path) or "."


def _under(directory: str, top: str) -> bool:
    if top == ".":
        return not directory.startswith(("/", "../")) and directory != ".."
    return directory == top or directory.startswith(top.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class _Tree:
    """The files of a tree indexed by the directories they may be under in their repository.

    ``anchored``: directory inside a known checkout (ancestors of a file's own, its root ``""``
    included) -> files. ``loose``: every directory a file may be under when the repository root
    is unknown (any run of the segments of an ancestor of its directory) -> files, with the
    files whose root is unknown in ``unlocated``."""

    anchored: Mapping[str, frozenset[str]]
    loose: Mapping[str, frozenset[str]]
    unlocated: frozenset[str]
    directories: frozenset[tuple[str, bool]]  # (repository directory, anchored)


def _tree(paths: Sequence[str], checkouts: Mapping[str, str]) -> _Tree:
    anchored: dict[str, set[str]] = {}
    loose: dict[str, set[str]] = {}
    unlocated: set[str] = set()
    directories: set[tuple[str, bool]] = set()
    tops = sorted(checkouts, key=len, reverse=True)
    for path in paths:
        directory = _dir_of(path)
        top = next((t for t in tops if _under(directory, t)), None)
        if top is None:
            unlocated.add(path)
            parts = _segments(directory)
        else:
            inside = "" if top == "." else directory[len(top) :]
            parts = _segments(checkouts[top]) + _segments(inside)
            for n in range(len(parts) + 1):
                anchored.setdefault("/".join(parts[:n]), set()).add(path)
                if n and not any(p.startswith(".") for p in parts[:n]):
                    directories.add(("/".join(parts[:n]), True))
        for start in range(len(parts) + 1):
            for end in range(start, len(parts) + 1):
                run = "/".join(parts[start:end])
                loose.setdefault(run, set()).add(path)
                if top is None and run and not any(p.startswith(".") for p in parts[start:end]):
                    directories.add((run, False))
    return _Tree(
        {k: frozenset(v) for k, v in anchored.items()},
        {k: frozenset(v) for k, v in loose.items()},
        frozenset(unlocated),
        frozenset(directories),
    )


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a render's files are: a path inside the repository (``""``: its root), or a
    pattern over such paths for a template path that is not resolved. ``anchored``: relative
    to the repository root (else to a directory of it that is not known)."""

    path: str | None
    pattern: re.Pattern[str] | None = None
    anchored: bool = True
    note: str = ""

    def files(self, tree: _Tree) -> set[str]:
        out: set[str] = set()
        if self.pattern is None:
            assert self.path is not None
            if self.anchored:
                out |= tree.anchored.get(self.path, frozenset())
                out |= tree.loose.get(self.path, frozenset()) & tree.unlocated
            else:
                out |= tree.loose.get(self.path, frozenset())
            return out
        for key, found in tree.anchored.items():
            if self.anchored and self.pattern.fullmatch(key):
                out |= found
        for key, found in tree.loose.items():
            if self.pattern.fullmatch(key):
                out |= found if not self.anchored else found & tree.unlocated
        return out

    def why(self, tree: _Tree, path: str) -> str:
        """What to add to the reason for ``path``: how it was matched, when not exactly."""
        if self.note:
            return f"; {self.note}"
        if path in tree.unlocated:
            return (
                f"; its path is relative to a repository root not known here (no Git work "
                f"tree around {path}): every directory ending in {self.path or '.'} is taken "
                "for it"
            )
        return ""


def _argo_target(raw: str) -> str | None:
    """``source.path`` inside the repository (``""``: its root), or None where Argo CD refuses
    it (absolute, or leaving the root)."""
    if posixpath.isabs(raw):
        return None
    joined = posixpath.normpath(raw or ".")
    if joined == ".." or joined.startswith("../"):
        return None
    return "" if joined == "." else joined


def _flux_target(raw: str | None) -> str:
    """``spec.path`` inside the artifact, as ``securejoin`` keeps it there."""
    return posixpath.normpath("/" + (raw or "")).lstrip("/")


# =========================================================================== who renders what


def _argo_changes(source: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for tool in _ARGO_TOOLS:
        settings = source.get(tool)
        if not isinstance(settings, Mapping) or not settings:
            continue
        keys = [str(k) for k in settings if settings[k] not in (None, "", [], {}, False)]
        if tool == "directory":  # recurse/include/exclude choose files; jsonnet renders them
            keys = [k for k in keys if k == "jsonnet"]
        out.extend(f"{tool}.{k}" for k in sorted(keys))
    return out


def _source_path(source: Mapping[str, Any]) -> str | None:
    """The path a source renders, as written; None when it renders no path of a repository
    (a Helm repository chart, a ``ref`` source that only lends values files)."""
    if source.get("chart"):
        return None
    path = source.get("path")
    if path is None:
        return None if source.get("ref") else ""
    return path if isinstance(path, str) else None


def _sources(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = [spec.get("source"), *(spec.get("sources") or [])]
    return [s for s in found if isinstance(s, Mapping)]


@dataclass(frozen=True, slots=True)
class _Render:
    who: str
    changes: tuple[str, ...]
    give: str
    target: _Target
    shown_path: str = ""  # the rendered path, for an ApplicationSet's


def _who(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = _mapping(body.get("metadata"))
    name = str(meta.get("name") or "?")
    return name, f"{meta.get('namespace')}/{name}" if meta.get("namespace") else name


def _application(doc: Document) -> list[_Render]:
    name, who = _who(doc.body)
    spec = _mapping(doc.body.get("spec"))
    out = []
    for source in _sources(spec):
        raw, changes = _source_path(source), _argo_changes(source)
        target = _argo_target(raw) if raw is not None else None
        if changes and target is not None:
            give = f"what Argo CD renders for it (--argocd-app {name})"
            out.append(_Render(f"Argo CD Application {who}", tuple(changes), give, _Target(target)))
    return out


def _flux_kustomization(doc: Document) -> list[_Render]:
    name, who = _who(doc.body)
    spec = _mapping(doc.body.get("spec"))
    changes = sorted(str(k) for k in spec if k in _FLUX_CHANGES and spec[k])
    raw = spec.get("path")
    if not changes or not (raw is None or isinstance(raw, str)):
        return []
    ref = _mapping(spec.get("sourceRef"))
    kind = str(ref.get("kind") or "GitRepository")
    target = _Target(_flux_target(raw))
    if kind != "GitRepository":
        shown = f"{kind} {ref.get('name') or '?'}"
        target = _Target(
            target.path,
            anchored=False,
            note=(
                f"its path is relative to the root of the artifact of {shown}, which is not "
                f"known here: every directory ending in {target.path or '.'} is taken for it"
            ),
        )
    give = f"`flux build kustomization {name} --path DIR` output"
    return [_Render(f"Flux Kustomization {who}", tuple(changes), give, target)]


# =========================================================================== the tree


def _renders(doc: Document, tree: _Tree) -> list[_Render]:
    if doc.api_version.startswith("argoproj.io/"):
        if doc.kind == "Application":
            return _application(doc)
    elif doc.kind == "Kustomization" and doc.api_version.startswith("kustomize.toolkit.fluxcd.io/"):
        return _flux_kustomization(doc)
    return []


def gitops_rewrites(
    files: Sequence[SourceFile], *, checkouts: Mapping[str, str] | None = None
) -> dict[str, Skip]:
    """The files of a tree that an Argo CD Application or a Flux
    Kustomization of the same tree renders with changes (kustomize images, Helm values, a
    plugin, Flux's images, patches, postBuild substitutions...): not desired state as written.

    ``checkouts``: each directory of the tree (spelled as the files' paths spell it) that is in
    a Git work tree, with its path inside that work tree (``""`` at the top); a file under none
    has a repository root that is not known. See the module docstring for how paths resolve."""
    paths = [f.path for f in files]
    tree = _tree(paths, checkouts or {})
    out: dict[str, Skip] = {}
    for f in files:
        if b"argoproj.io" not in f.data and b"kustomize.toolkit.fluxcd.io" not in f.data:
            continue
        try:
            docs = parse_yaml_documents(f.path, decode_text(f))
        except FormatError:
            continue
        for doc in docs:
            for render in _renders(doc, tree):
                shown = ", ".join(render.changes[:4]) + (", ..." if len(render.changes) > 4 else "")
                as_ = f" as {render.shown_path}" if render.shown_path else ""
                reason = (
                    f"rendered by {render.who} ({f.path}){as_} with {shown}: give {render.give}"
                )
                for path in sorted(render.target.files(tree) - {f.path}):
                    why = render.target.why(tree, path)
                    out.setdefault(path, Skip(path, reason + why, problem=True))
    return out
