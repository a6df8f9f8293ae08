"""The desired and observed workloads of ``fleet`` and ``gate`` from files.

Desired: rendered manifests (plain YAML, ``kustomize build`` / ``helm template`` output, a
saved Argo CD /manifests response) and, for the gate, the desired node pools of the same tree.
Observed: ``kubectl get ... -o json`` dumps, one cluster per ``CLUSTER=`` or file stem.

Unreadable files: a file found in a directory that cannot be read or parsed is listed (the
caller shows it) and the rest is used; a cluster whose dump was skipped is left out, not
compared on half its objects. A path named on the command line must read and parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from fleetwarden.adapters import files
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import DesiredState
from fleetwarden.core.skips import Skip
from fleetwarden.formats.desired import YAML_SUFFIXES, SourceFile, read_desired
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.workloads import (
    DesiredWorkloads,
    desired_rewrites,
    parse_workload_dump,
    read_desired_workloads,
)

__all__ = ["load_desired_state", "load_observed", "workload_sources"]


def _read_workload_files(
    root: Path, *, app_label: str | None, limit: int, unreadable: list[Skip]
) -> DesiredWorkloads:
    """``read_desired_workloads`` file by file: a file found in the directory that cannot be
    read or parsed goes to ``unreadable``; ``root`` named as a file must parse. The tree is
    read first, so that a kustomization's rewrites of the files it lists are known, and where
    it sits in Git, so that an Argo CD or Flux path resolves from the repository root."""
    out = DesiredWorkloads()
    tree = list(files.read_tree(root, YAML_SUFFIXES, limit=limit, skipped=unreadable))
    sources = [SourceFile(str(f.path), data) for f, data in tree]
    checkouts = files.locate_checkouts(root, [s.path for s in sources])
    rewritten = desired_rewrites(sources, checkouts=checkouts)
    for f, data in tree:
        try:
            got = read_desired_workloads(
                [SourceFile(str(f.path), data)], app_label=app_label, rewritten=rewritten
            )
        except FormatError as exc:
            if f.named:
                raise
            unreadable.append(files.skip_of(exc))
            continue
        out.objects.extend(got.objects)
        out.skipped.extend(got.skipped)
        out.unparsed.extend(got.unparsed)
        out.files += got.files
    return out


def load_desired_state(
    args: Sequence[files.PathArg],
    *,
    app_label: str | None,
    with_pools: bool = False,
    limit: int = files.DEFAULT_DESIRED_LIMIT,
) -> DesiredState:
    """The desired objects (and, ``with_pools``, node pools) of every ``--desired`` path.
    Without pools, files that do not parse are skipped (``unreadable``); with pools (the
    gate) every file must read and parse."""
    out = DesiredState()
    for arg in args:
        if with_pools:
            sources = [
                SourceFile(str(p), files.read_limited(p, limit))
                for p in files.iter_tree(arg.path, (*YAML_SUFFIXES, ".tf"))
            ]
            checkouts = files.locate_checkouts(arg.path, [s.path for s in sources])
            got = read_desired_workloads(sources, app_label=app_label, checkouts=checkouts)
            if got.unparsed:  # the gate stays strict: no sync goes through past such a file
                first = got.unparsed[0]
                raise FormatError(first.path, first.reason)
        else:
            got = _read_workload_files(
                arg.path, app_label=app_label, limit=limit, unreadable=out.unreadable
            )
            out.unreadable.extend(got.unparsed)
        out.objects.setdefault(arg.cluster, []).extend(got.objects)
        skipped = {s.path: s for s in got.skipped}
        if with_pools:
            pools = read_desired(sources, cluster=arg.cluster)
            out.pools.extend(pools.pools)
            has_pools = {p.source for p in pools.pools}
            skipped = {p: s for p, s in skipped.items() if p not in has_pools}
            if skipped:
                pool_notes = {s.path: s.reason for s in pools.skipped}
                skipped = {
                    p: Skip(p, f"{s.reason}; {pool_notes[p]}") if p in pool_notes else s
                    for p, s in skipped.items()
                }
        out.skipped.extend(skipped.values())
    return out


def workload_sources(
    args: Sequence[files.PathArg], *, skipped: list[Skip] | None = None
) -> dict[str, list[files.TreeFile]]:
    """Dump files per cluster; the cluster is ``CLUSTER=`` or the file's stem. With
    ``skipped``, what cannot be listed below a directory is skipped, else it raises."""
    out: dict[str, list[files.TreeFile]] = {}
    for arg in args:
        for f in files.walk_tree(arg.path, YAML_SUFFIXES, skipped=skipped):
            out.setdefault(arg.cluster or f.path.stem, []).append(f)
    return out


def load_observed(
    sources: Mapping[str, Sequence[files.TreeFile]],
    *,
    app: str,
    desired_names: set[tuple[str, str]],
    app_label: str | None,
    limit: int = files.DEFAULT_NODES_LIMIT,
    aliases: Iterable[str] = (),
    skipped: list[Skip] | None = None,
) -> dict[str, wl.ObjectIndex]:
    """Each cluster's objects that concern ``app``: labelled for it (or for one of its
    ``aliases``), named like a desired object, or an HPA (it may own a desired workload's
    replicas).

    With ``skipped``, a dump found in a directory that cannot be read or parsed is skipped
    and its cluster is left out (half a cluster's objects would show the rest as missing);
    a dump named directly must parse. Without it, every dump must."""
    names = {app, *aliases}

    def want(key: wl.ObjectKey, obj_app: str | None) -> bool:
        return (
            obj_app in names
            or (key.kind, key.name) in desired_names
            or key.kind == wl.AUTOSCALER_KIND
        )

    out: dict[str, wl.ObjectIndex] = {}
    for cluster, dumps_ in sources.items():
        index = wl.ObjectIndex(app_label=app_label)
        lost: list[Skip] = []
        for f in dumps_:
            try:
                data = files.read_limited(f.path, limit)
                found = parse_workload_dump(str(f.path), data, app_label=app_label, want=want)
            except FormatError as exc:
                if skipped is None or f.named:
                    raise
                lost.append(files.skip_of(exc))
                continue
            for obj in found:
                index.put(obj)
        if lost and skipped is not None:
            note = f"cluster {cluster} not compared"
            skipped.extend(Skip(s.path, f"{s.reason} ({note})") for s in lost)
            continue
        out[cluster] = index
    return out
