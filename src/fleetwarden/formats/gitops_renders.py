"""Which files of a desired-state tree Argo CD or Flux renders with changes. Parsing only.

An Argo CD ``Application`` (or an ``ApplicationSet``'s template) whose source sets
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
* ApplicationSet: the git ``directories`` generator lists every directory of the repository
  but its root and hidden ones (``reposerver GetGitDirectories``) and keeps those a
  ``path.Match`` pattern includes and no ``exclude: true`` one matches (``filterApps``); the
  template's path is rendered with each directory's parameters (``path``, ``path.basename``,
  ``path[N]``; ``.path.path``, ``.path.basename`` under ``goTemplate``). ``list`` elements are
  parameters too; ``matrix`` combines its children's. Any other generator's parameters (cluster,
  SCM, pull request, plugin, git files...) are known only to Argo CD.

Where the tree does not say what a path resolves to, files are taken as rendered rather than
compared, and the reason says why: the repository root is not known (no Git work tree around
the tree: every directory ending in the path is taken for it), a Flux source's artifact root is
not known (likewise), or an ApplicationSet's template path is not resolved (every directory it
could render to is taken for it).

The repository of ``repoURL`` / ``sourceRef`` is not matched to a checkout: a path is resolved
in every checkout of the tree.
"""

from __future__ import annotations

import functools
import itertools
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwarden.core.skips import Skip
from fleetwarden.formats.argocd_apps import GENERATORS as _GENERATORS  # the generator kinds
from fleetwarden.formats.documents import Document, SourceFile, decode_text, parse_yaml_documents
from fleetwarden.formats.errors import FormatError

__all__ = ["gitops_rewrites", "go_path_match"]

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
_ACTION = re.compile(r"\{\{(.*?)\}\}", re.S)
_GO_FIELD = re.compile(r"\s*\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*")
_MAX_PARAMS = 10_000  # a matrix beyond this is not expanded: its paths are not resolved


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# =========================================================================== Go's path.Match


def _class_end(pattern: str, i: int) -> tuple[str, int] | None:
    """The regex of the character class opening at ``pattern[i]`` (``[``) and the index after
    it, or None when it is malformed (Go: ``ErrBadPattern``)."""
    i += 1
    negated = i < len(pattern) and pattern[i] == "^"
    i += negated
    ranges: list[str] = []

    def char(j: int) -> tuple[str, int] | None:  # Go's getEsc
        if j >= len(pattern) or pattern[j] in "-]":
            return None
        if pattern[j] == "\\":
            j += 1
            if j >= len(pattern):
                return None
        if j + 1 >= len(pattern):
            return None  # nothing may end a pattern inside a class
        return pattern[j], j + 1

    count = 0
    while True:
        if i < len(pattern) and pattern[i] == "]" and count:
            break
        got = char(i)
        if got is None:
            return None
        lo, i = got
        hi = lo
        if pattern[i] == "-":
            got = char(i + 1)
            if got is None:
                return None
            hi, i = got
        count += 1
        if lo <= hi:  # Go's z-a holds no character; a regex would refuse to compile it
            ranges.append(re.escape(lo) if lo == hi else f"{re.escape(lo)}-{re.escape(hi)}")
    body = "".join(ranges)
    if negated:
        return (f"[^{body}]" if body else "(?s:.)"), i + 1
    return (f"[{body}]" if body else "(?!)"), i + 1


@functools.lru_cache(maxsize=256)
def _go_pattern(pattern: str) -> re.Pattern[str] | None:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            got = _class_end(pattern, i)
            if got is None:
                return None
            regex, i = got
            out.append(regex)
            continue
        elif c == "\\":
            i += 1
            if i >= len(pattern):
                return None
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.S)


def go_path_match(pattern: str, name: str) -> bool | None:
    """Go's ``path.Match(pattern, name)``: ``*`` is any run of characters but ``/``, ``?``
    one character but ``/``, ``[a-z]`` / ``[^a-z]`` a class, ``\\`` escapes; there is no ``**``.
    None for a malformed pattern (Go's ``ErrBadPattern``: Argo CD logs it and matches
    nothing)."""
    regex = _go_pattern(pattern)
    if regex is None:
        return None
    return regex.fullmatch(name) is not None


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
        if path not in tree.unlocated and self.anchored:
            return ""
        around = f" (no Git work tree around {path})" if path in tree.unlocated else ""
        return (
            f"; its path is relative to a repository root not known here{around}: every "
            f"directory ending in {self.path or '.'} is taken for it"
        )


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


# --------------------------------------------------------------------------- ApplicationSets

# parameter sets, each with whether its paths are relative to a known repository root
_Params = list[tuple[dict[str, Any], bool]]


@dataclass(frozen=True, slots=True)
class _Generated:
    """A generator's parameter sets; ``unknown`` names the generators whose values only Argo
    CD knows (each stands in as one set with no keys: a path that uses none of them still
    renders)."""

    params: _Params
    unknown: tuple[str, ...] = ()


def _lookup(params: Mapping[str, Any], tag: str, *, go: bool) -> Any:
    if not go:  # fasttemplate: flat keys, string values only
        flat = params.get(tag.strip())
        return flat if isinstance(flat, str) else None
    field = _GO_FIELD.fullmatch(tag)
    if field is None:
        return None  # a function, a pipeline, an action: not guessed at
    value: Any = params
    for part in field.group(1).split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def _render(template: str, params: Mapping[str, Any], *, go: bool) -> str | None:
    """``template`` filled from ``params``; None if any placeholder is not a plain parameter
    that is there."""
    failed = False

    def fill(match: re.Match[str]) -> str:
        nonlocal failed
        value = _lookup(params, match.group(1), go=go)
        if value is None:
            failed = True
            return ""
        return str(value)

    rendered = _ACTION.sub(fill, template)
    return None if failed else rendered


def _could_render(template: str) -> re.Pattern[str]:
    """Every repository path a template path may render to: each action any text."""
    parts = _ACTION.split(template)
    literals = parts[::2]
    if any(".." in lit or (lit.startswith("/") and i == 0) for i, lit in enumerate(literals)):
        return re.compile(".*", re.S)
    out = []
    opened = False  # an empty value after a "/" joins the segments around it
    for i, part in enumerate(parts):
        if i % 2:
            out.append(".*)?" if opened else ".*")
            continue
        part = re.sub("/+", "/", part).replace("/./", "/")
        if i == 0:
            part = part.removeprefix("./")
        if i == len(parts) - 1:
            part = part.rstrip("/")
        opened = i < len(parts) - 1 and part.endswith("/")
        out.append(re.escape(part[:-1]) + "(?:/" if opened else re.escape(part))
    return re.compile("".join(out), re.S)


def _git_directories(body: Mapping[str, Any], at: str, tree: _Tree, *, go: bool) -> _Generated:
    entries = body.get("directories")
    if not isinstance(entries, list) or body.get("files"):
        return _Generated([({}, True)], (f"{at} (git files)",))
    patterns = [
        (str(e.get("path") or ""), e.get("exclude") is True)
        for e in entries
        if isinstance(e, Mapping)
    ]
    if any("{{" in p for p, _ in patterns):
        return _Generated([({}, True)], (f"{at} (templated directories)",))
    prefix = body.get("pathParamPrefix")
    prefix = prefix if isinstance(prefix, str) and prefix else ""
    params: _Params = []
    for directory, anchored in sorted(tree.directories):
        matched = [(go_path_match(p, directory), excluded) for p, excluded in patterns]
        if not any(m for m, ex in matched if not ex) or any(m for m, ex in matched if ex):
            continue
        base = posixpath.basename(directory)
        segments = directory.split("/")
        if go:
            found: dict[str, Any] = {
                "path": {"path": directory, "basename": base, "segments": segments}
            }
            if prefix:
                found = {prefix: found}
        else:
            name = f"{prefix}.path" if prefix else "path"
            found = {name: directory, f"{name}.basename": base}
            found.update({f"{name}[{k}]": v for k, v in enumerate(segments) if v})
        values = body.get("values")
        if isinstance(values, Mapping):
            rendered = {
                str(k): _render(v, found, go=go) if isinstance(v, str) else None
                for k, v in values.items()
            }
            kept = {k: v for k, v in rendered.items() if v is not None}
            if go:
                found["values"] = kept
            else:
                found.update({f"values.{k}": v for k, v in kept.items()})
        params.append((found, anchored))
    return _Generated(params)


def _product(left: _Params, right: _Params) -> _Params:
    return [({**a, **b}, x and y) for (a, x), (b, y) in itertools.product(left, right)]


def _generated(generator: Mapping[str, Any], at: str, tree: _Tree, *, go: bool) -> _Generated:
    params: _Params = [({}, True)]
    unknown: list[str] = []
    for kind in (k for k in _GENERATORS if k in generator):
        body = _mapping(generator[kind])
        where = f"{at}.{kind}"
        got: _Generated
        if kind == "list" and not body.get("elementsYaml"):
            elements = body.get("elements") or []
            got = _Generated(
                [(dict(e), True) for e in elements if isinstance(e, Mapping)]
                if isinstance(elements, list)
                else []
            )
        elif kind == "git":
            got = _git_directories(body, where, tree, go=go)
        elif kind == "matrix":
            got = _Generated([({}, True)])
            children = _list(body.get("generators"))
            for i, child in enumerate(children):
                if not isinstance(child, Mapping):
                    continue
                part = _generated(child, f"{where}.generators[{i}]", tree, go=go)
                got = _Generated(_product(got.params, part.params), got.unknown + part.unknown)
                if len(got.params) > _MAX_PARAMS:
                    unknown_ = (*got.unknown, f"{where} (too many combinations)")
                    got = _Generated([({}, True)], unknown_)
        else:
            got = _Generated([({}, True)], (where,))
        params = _product(params, got.params)
        unknown.extend(got.unknown)
    return _Generated(params, tuple(unknown))


def _template_sources(
    template: Mapping[str, Any], own: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """The template's sources with a generator's own template merged over them."""
    spec = _mapping(template.get("spec"))
    own_spec = _mapping(own.get("spec"))
    if isinstance(own_spec.get("sources"), list):
        return _sources({"sources": own_spec["sources"]})
    base = spec.get("source") if isinstance(spec.get("source"), Mapping) else None
    over = own_spec.get("source") if isinstance(own_spec.get("source"), Mapping) else None
    if base is not None or over is not None:
        merged = {**(base or {}), **(over or {})}
        return [merged, *_sources({"sources": spec.get("sources") or []})]
    return _sources(spec)


def _application_set(doc: Document, tree: Callable[[], _Tree]) -> list[_Render]:
    _, who_ = _who(doc.body)
    who = f"Argo CD ApplicationSet {who_}"
    give = "what Argo CD renders for its Applications (--argocd-app NAME)"
    spec = _mapping(doc.body.get("spec"))
    go = spec.get("goTemplate") is True
    template = _mapping(spec.get("template"))
    generators = _list(spec.get("generators"))
    out: list[_Render] = []
    if spec.get("templatePatch"):
        # a patch may set any source field, the path and the tools included
        note = (
            "its spec.templatePatch may change any source's path and tools: every directory "
            "is taken for its Applications"
        )
        target = _Target(None, re.compile(".*", re.S), note=note)
        return [_Render(who, ("templatePatch",), give, target)]
    for i, generator in enumerate(generators):
        if not isinstance(generator, Mapping):
            continue
        at = f"spec.generators[{i}]"
        kind = next((k for k in _GENERATORS if k in generator), None)
        own = _mapping(generator.get(kind)).get("template") if kind else None
        sources = _template_sources(template, _mapping(own))
        if not any(_argo_changes(s) and _source_path(s) is not None for s in sources):
            continue
        generated = _generated(generator, at, tree(), go=go)
        for source in sources:
            raw, changes = _source_path(source), _argo_changes(source)
            if not changes or raw is None:
                continue
            out.extend(_app_set_targets(who, tuple(changes), give, raw, generated, go=go))
    return out


def _app_set_targets(
    who: str, changes: tuple[str, ...], give: str, raw: str, generated: _Generated, *, go: bool
) -> list[_Render]:
    out: list[_Render] = []
    unresolved = False
    for params, anchored in generated.params:
        rendered = _render(raw, params, go=go)
        if rendered is None:
            unresolved = True
            continue
        target = _argo_target(rendered)
        if target is not None:
            out.append(_Render(who, changes, give, _Target(target, anchored=anchored), rendered))
    if unresolved:
        why = (
            f"the parameters of {', '.join(generated.unknown)} are known only to Argo CD"
            if generated.unknown
            else "it uses more than plain parameters"
        )
        note = (
            f"its template path {raw} is not resolved here ({why}): every directory it "
            "could render to is taken for it"
        )
        out.append(_Render(who, changes, give, _Target(None, _could_render(raw), note=note)))
    return out


# =========================================================================== the tree


def _renders(doc: Document, tree: Callable[[], _Tree]) -> list[_Render]:
    if doc.api_version.startswith("argoproj.io/"):
        if doc.kind == "Application":
            return _application(doc)
        if doc.kind == "ApplicationSet":
            return _application_set(doc, tree)
    elif doc.kind == "Kustomization" and doc.api_version.startswith("kustomize.toolkit.fluxcd.io/"):
        return _flux_kustomization(doc)
    return []


def gitops_rewrites(
    files: Sequence[SourceFile], *, checkouts: Mapping[str, str] | None = None
) -> dict[str, Skip]:
    """The files of a tree that an Argo CD Application or ApplicationSet or a Flux
    Kustomization of the same tree renders with changes (kustomize images, Helm values, a
    plugin, Flux's images, patches, postBuild substitutions...): not desired state as written.

    ``checkouts``: each directory of the tree (spelled as the files' paths spell it) that is in
    a Git work tree, with its path inside that work tree (``""`` at the top); a file under none
    has a repository root that is not known. See the module docstring for how paths resolve."""
    found: list[tuple[SourceFile, Document]] = []
    for f in files:
        if b"argoproj.io" not in f.data and b"kustomize.toolkit.fluxcd.io" not in f.data:
            continue
        try:
            found.extend((f, doc) for doc in parse_yaml_documents(f.path, decode_text(f)))
        except FormatError:
            continue
    out: dict[str, Skip] = {}
    # the index of the tree, built only for a tree that renders something
    tree = functools.cache(lambda: _tree([f.path for f in files], checkouts or {}))
    for f, doc in found:
        for render in _renders(doc, tree):
            shown = ", ".join(render.changes[:4]) + (", ..." if len(render.changes) > 4 else "")
            as_ = f" as {render.shown_path}" if render.shown_path else ""
            reason = f"rendered by {render.who} ({f.path}){as_} with {shown}: give {render.give}"
            for path in sorted(render.target.files(tree()) - {f.path}):
                why = render.target.why(tree(), path)
                out.setdefault(path, Skip(path, reason + why, problem=True))
    return out
