"""Desired state from a set of files: every supported format, one tree at a time.

YAML/JSON documents of the whole tree are offered to every YAML reader (so a Cluster API
MachineDeployment finds its AWSMachineTemplate in another file); ``.tf`` files go to the
Terraform reader. Files nobody recognises are skipped with the reason, never dropped silently.

One bad file does not hide the rest: a file found in a directory that cannot be read (a syntax
error, an unrendered template, a wrong type in a pool) is listed as a skipped *problem* with the
reason, and every other file is still read. A file named directly (``SourceFile.direct``) that
cannot be read raises ``FormatError``: the user asked for that very file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.skips import Skip
from fleetwarden.formats import capi, eksctl, karpenter, native
from fleetwarden.formats.documents import (
    YAML_SUFFIXES,
    Document,
    PoolsRead,
    SourceFile,
    decode_text,
    parse_yaml_documents,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed

if TYPE_CHECKING:
    from fleetwarden.formats import terraform

__all__ = ["YAML_SUFFIXES", "DesiredRead", "SourceFile", "decode_text", "read_desired"]


@dataclass(slots=True)
class DesiredRead:
    pools: list[NodePoolSpec] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    files: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # kinds of documents nobody read

    def extend(self, other: DesiredRead) -> None:
        self.pools.extend(other.pools)
        self.skipped.extend(other.skipped)
        self.files += other.files
        self.kinds.update(other.kinds)

    def nothing_found(self, paths: Sequence[str]) -> str:
        """Why no pool was found: the paths read, the kinds seen, the files that failed."""
        where = ", ".join(paths) or "--desired"
        seen = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(self.kinds.items()))
        problems = [s for s in self.skipped if s.problem]
        parts = [f"read {self.files} file{'' if self.files == 1 else 's'}"]
        if seen:
            parts.append(f"kinds seen: {seen}")
        if problems:
            first = problems[0]
            parts.append(f"{len(problems)} could not be read, e.g. {first.path}: {first.reason}")
        notes = [s for s in self.skipped if not s.problem]
        for note in notes[:3]:  # what each file defines instead, e.g. a ClusterConfig without nodes
            parts.append(f"{note.path}: {note.reason}")
        if len(notes) > 3:
            parts.append(f"{len(notes) - 3} more such files (-v lists them)")
        return f"no node-pool definition found in {where} ({'; '.join(parts)})"


def read_desired(
    files: Sequence[SourceFile], *, cluster: str | None = None, assume: Assumed | None = None
) -> DesiredRead:
    """All pools of a tree. ``cluster`` (from ``CLUSTER=PATH``) overrides what files say."""
    assume = assume or Assumed()
    out = DesiredRead(files=len(files))
    direct = {f.path for f in files if f.direct}
    docs_by_path: dict[str, list[Document]] = {}
    not_objects: dict[str, list[str]] = {}
    tf_files: list[terraform.TfFile] = []
    for f in files:
        try:
            text = decode_text(f)
            if f.path.endswith(".tf"):
                # the HCL parser (python-hcl2, lark) loads only for a tree with .tf files
                from fleetwarden.formats import terraform

                tf_files.append(terraform.TfFile(f.path, text))
                continue
            if not f.path.endswith(YAML_SUFFIXES):
                out.skipped.append(Skip(f.path, "not a YAML, JSON or Terraform file"))
                continue
            others: list[str] = []  # a JSON patch (a list), a bare value: no pool there
            docs_by_path[f.path] = parse_yaml_documents(f.path, text, others=others)
            if others:
                not_objects[f.path] = others
        except FormatError as exc:
            if f.direct:
                raise
            out.skipped.append(Skip(f.path, _problem(exc, f.data), problem=True))
    found = _read_all(docs_by_path, tf_files, assume, direct, out)
    for spec in found.pools:
        out.pools.append(spec.with_cluster(cluster) if cluster else spec)
    for path, remarks in found.unread.items():  # pools defined beside the ones read
        for remark in remarks:
            out.skipped.append(Skip(path, remark, pool=remark.partition(": ")[0]))
    with_pools = {p.source for p in found.pools}
    for path, parsed in docs_by_path.items():
        if path in with_pools:
            continue
        if path in found.notes:
            out.skipped.append(Skip(path, found.notes[path]))
            continue
        kinds = Counter(
            d.kind or "(no kind)" for d in parsed if (d.path, d.index) not in found.claimed
        )
        kinds.update(f"{what}, not an object" for what in not_objects.get(path, ()))
        out.kinds.update(kinds)
        what = ", ".join(sorted(kinds)) if kinds else "empty"
        out.skipped.append(Skip(path, f"no node-pool definition ({what})"))
    for tf in tf_files:
        if tf.path not in with_pools:
            out.skipped.append(Skip(tf.path, found.notes.get(tf.path, "no node-pool definition")))
    return out


def _read_all(
    docs_by_path: dict[str, list[Document]],
    tf_files: list[terraform.TfFile],
    assume: Assumed,
    direct: set[str],
    out: DesiredRead,
) -> PoolsRead:
    """Every reader over every document; a file a reader refuses is dropped (and listed as a
    problem) and the readers run again without it, since references cross files."""
    while True:
        docs = [d for parsed in docs_by_path.values() for d in parsed]
        found = PoolsRead()
        try:
            found.extend(native.read_pools(docs))
            found.extend(eksctl.read_pools(docs, assume=assume))
            found.extend(karpenter.read_pools(docs))
            found.extend(capi.read_pools(docs))
            if tf_files:
                from fleetwarden.formats import terraform

                found.extend(terraform.read_pools(tf_files, assume=assume))
            return found
        except FormatError as exc:
            bad = exc.path
            if bad in direct:
                raise
            if bad in docs_by_path:
                del docs_by_path[bad]
            elif any(tf.path == bad for tf in tf_files):
                tf_files[:] = [tf for tf in tf_files if tf.path != bad]
            else:
                raise  # not a file of this tree: nothing to drop, so say it
            out.skipped.append(Skip(bad, _problem(exc), problem=True))


def _problem(exc: FormatError, data: bytes | None = None) -> str:
    """The reason without the path (the skip names it), with a hint for templates."""
    where = f"line {exc.line}: " if exc.line is not None else ""
    field_ = f"{exc.field}: " if exc.field else ""
    reason = f"{where}{field_}{exc.reason}"
    if data is not None and (b"{{" in data and b"}}" in data):
        reason += " (an unrendered template? render it first, e.g. with helm template)"
    return reason
