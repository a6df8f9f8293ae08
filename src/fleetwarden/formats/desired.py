"""Desired state from a set of files: every supported format, one tree at a time.

YAML/JSON documents of the whole tree are offered to every YAML reader (so a Cluster API
MachineDeployment finds its AWSMachineTemplate in another file); ``.tf`` files go to the
Terraform reader. Files nobody recognises are skipped with the reason, never dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from fleetwarden.core.fleet import Skip
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats import capi, eksctl, karpenter, native, terraform
from fleetwarden.formats.documents import Document, PoolsRead, parse_yaml_documents
from fleetwarden.formats.errors import FormatError

__all__ = ["YAML_SUFFIXES", "DesiredRead", "SourceFile", "decode_text", "read_desired"]

YAML_SUFFIXES = (".yaml", ".yml", ".json")
_READERS = (native.read_pools, eksctl.read_pools, karpenter.read_pools, capi.read_pools)


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    data: bytes


@dataclass(slots=True)
class DesiredRead:
    pools: list[NodePoolSpec] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    files: int = 0


def read_desired(files: Sequence[SourceFile], *, cluster: str | None = None) -> DesiredRead:
    """All pools of a tree. ``cluster`` (from ``CLUSTER=PATH``) overrides what files say."""
    out = DesiredRead(files=len(files))
    docs: list[Document] = []
    docs_by_path: dict[str, list[Document]] = {}
    tf_files: list[terraform.TfFile] = []
    for f in files:
        text = decode_text(f)
        if f.path.endswith(".tf"):
            tf_files.append(terraform.TfFile(f.path, text))
            continue
        if not f.path.endswith(YAML_SUFFIXES):
            out.skipped.append(Skip(f.path, "not a YAML, JSON or Terraform file"))
            continue
        parsed = parse_yaml_documents(f.path, text)
        docs.extend(parsed)
        docs_by_path[f.path] = parsed
    found = PoolsRead()
    for reader in _READERS:
        found.extend(reader(docs))
    if tf_files:
        found.extend(terraform.read_pools(tf_files))
    for spec in found.pools:
        out.pools.append(spec.with_cluster(cluster) if cluster else spec)
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
        what = ", ".join(sorted(kinds)) if kinds else "empty"
        out.skipped.append(Skip(path, f"no node-pool definition ({what})"))
    for tf in tf_files:
        if tf.path not in with_pools:
            out.skipped.append(Skip(tf.path, found.notes.get(tf.path, "no node-pool definition")))
    return out


def decode_text(f: SourceFile) -> str:
    """The file as text; binary or non-UTF-8 data is a FormatError naming the file."""
    if b"\x00" in f.data[:8192]:
        raise FormatError(f.path, "binary data, not a text file")
    try:
        return f.data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f.path, f"not UTF-8 text (invalid byte at offset {exc.start})") from None
