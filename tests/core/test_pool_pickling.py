"""Desired pools cross process boundaries: a scan of several clusters with ``--jobs N`` sends
each worker its cluster's pools. Readers hand out read-only label maps
(``types.MappingProxyType``), which pickle refuses: ``scan --jobs 2`` over two clusters of
eksctl, Karpenter or Cluster API pools died with "cannot pickle 'mappingproxy' object"."""

from __future__ import annotations

import pickle
from pathlib import Path

from fleetwarden.formats.desired import SourceFile, read_desired
from tests.conftest import realdata_files

CORPUS = [
    p
    for folder in ("eksctl", "karpenter", "capi", "terraform")
    for p in realdata_files(folder, ".yaml", ".yml", ".tf")
]


def test_every_pool_of_the_corpus_survives_a_trip_to_a_worker_process(realdata: Path) -> None:
    pools = [
        spec
        for path in CORPUS
        for spec in read_desired([SourceFile(str(path), path.read_bytes())], cluster="c").pools
    ]
    assert len(pools) >= 100, len(pools)  # the corpus, not a vacuous pass
    for spec in pools:
        back = pickle.loads(pickle.dumps(spec))
        assert back == spec, spec.source
        assert dict(back.labels) == dict(spec.labels)
