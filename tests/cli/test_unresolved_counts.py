"""The scan table's two counts of unresolved values — the "fields: ... N unresolved" line and
the "N desired values unresolved (not checked)" line after it — count the same thing: the
unresolved entries of the pools' accounts, including a note a reader made on no attribute of
its own (a GKE per-zone count with no zones stated, a node class not in the tree)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from fleetwarden.core.fleet import assemble_report
from fleetwarden.core.pools import FieldAccount, FieldStatus, NodePoolSpec, Unresolved
from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.presenting.rendering import print_report
from tests.conftest import realdata_files

CORPUS = [
    p
    for folder in ("eksctl", "karpenter", "capi", "terraform")
    for p in realdata_files(folder, ".yaml", ".yml", ".tf")
]


def _table_counts(specs: list[NodePoolSpec]) -> tuple[int, int]:
    """(the fields line's unresolved, the desired-values line's count) as the table prints."""
    buf = io.StringIO()
    report = assemble_report([], specs=specs, compared=specs, skipped=[])
    print_report(Console(file=buf, width=400, color_system=None), report)
    text = buf.getvalue()
    fields = re.search(r"fields: .*?, (\d+) unresolved,", text)
    listed = re.search(r"(\d+) desired values? unresolved", text)
    assert fields is not None, text
    return int(fields[1]), int(listed[1]) if listed else 0


def test_both_unresolved_counts_agree_on_every_real_file(realdata: Path) -> None:
    compared, differ = 0, []
    for path in CORPUS:  # a file without a pool (a node class alone) has no counts
        specs = read_desired([SourceFile(str(path), path.read_bytes())], cluster="c").pools
        if specs:
            compared += 1
            fields, listed = _table_counts(specs)
            if fields != listed:
                differ.append((path.name, fields, listed))
    assert differ == []
    assert compared >= 80, compared  # the corpus's files with pools, not a vacuous pass


@pytest.mark.parametrize(
    ("name", "pool", "note"),
    [
        # GKE: min_count per zone, and the zones are not stated: a note on no attribute
        ("tf-gke-node-pool-main.tf", "pool-05", "minSize"),
        # Karpenter: the node class is not in the tree: disk size left open too
        ("karpenter-sigs-test-default-nodepool.yaml", "default", "diskSizeGiB"),
    ],
)
def test_a_note_without_an_attribute_is_counted_and_listed(
    realdata: Path, name: str, pool: str, note: str
) -> None:
    """The cases where the two lines differed: the note is an account entry too (explain
    lists it), so both lines count it."""
    folder = "terraform" if name.endswith(".tf") else "karpenter"
    path = realdata / folder / name
    specs = read_desired([SourceFile(str(path), path.read_bytes())], cluster="c").pools
    (spec,) = [s for s in specs if s.name == pool]
    assert any(a.status is FieldStatus.UNRESOLVED and a.fact == note for a in spec.account), (
        spec.account
    )
    report = assemble_report([], specs=[spec], compared=[spec], skipped=[])
    assert note in {u.field for u in report.unresolved}
    fields, listed = _table_counts([spec])
    assert fields == listed


_TEXT = st.text(alphabet="abc.-=${}", min_size=1, max_size=8)
_ENTRY = st.builds(
    FieldAccount,
    path=_TEXT,
    status=st.sampled_from(list(FieldStatus)),
    detail=_TEXT,
    fact=st.none() | _TEXT,
)


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(_ENTRY, max_size=6),
    notes=st.lists(st.builds(Unresolved, field=_TEXT | st.just("name"), expression=_TEXT)),
    prefix=st.none() | st.just("app-"),
)
def test_the_counts_agree_whatever_the_readers_noted(entries, notes, prefix) -> None:
    """However a reader split its notes between the account and the unresolved list, the
    fields count and the listed values are one set (a name matched by its prefix in neither)."""
    spec = NodePoolSpec(
        name="app",
        cluster="c",
        name_prefix=prefix,
        account=tuple(entries),
        unresolved=tuple(notes),
    )
    fields, listed = _table_counts([spec])
    assert fields == listed
    report = assemble_report([], specs=[spec], compared=[spec], skipped=[])
    assert report.fields["unresolved"] == len(report.unresolved)
    if prefix is not None:
        assert all(not (u.field == "name" and u.attribute is None) for u in report.unresolved)


def test_a_cluster_given_on_the_command_line_is_not_an_unresolved_value() -> None:
    """``-d prod=main.tf`` where the module's cluster_name is ``local.name`` (as in every
    terraform-aws-eks example): the cluster is known, so it is neither counted nor listed as a
    value not checked; read without ``prod=`` it stays unresolved."""
    text = (
        'locals { name = "ex-${basename(path.cwd)}" }\n'
        'module "eks" {\n  source  = "terraform-aws-modules/eks/aws"\n  version = "~> 18.31"\n'
        "  cluster_name = local.name\n  eks_managed_node_groups = { g = {} }\n}\n"
    )
    files = [SourceFile("infra/main.tf", text.encode())]
    (alone,) = read_desired(files).pools
    assert "cluster" in {
        u.field for u in assemble_report([], specs=[alone], compared=[alone], skipped=[]).unresolved
    }
    (given,) = read_desired(files, cluster="prod").pools
    report = assemble_report([], specs=[given], compared=[given], skipped=[])
    assert "cluster" not in {u.field for u in report.unresolved}
    (entry,) = [a for a in given.account if a.path == "module.eks: cluster_name"]
    assert entry.status is FieldStatus.IGNORED and "prod" in entry.detail
    assert _table_counts([given])[0] == _table_counts([given])[1]
