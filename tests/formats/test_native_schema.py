"""The NodePools schema's fast path (``native.accepted_fast``, the schema compiled by
fastjsonschema) never accepts a document jsonschema refuses: over drawn documents -- a valid
one with values replaced, keys dropped and keys added anywhere -- an acceptance by the fast
path is an acceptance by jsonschema. (A refusal only sends the document to jsonschema, whose
verdict and messages are the ones given.)"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fleetwarden.formats import native

BASE: dict[str, Any] = {
    "apiVersion": "fleetwarden.io/v1alpha1",
    "kind": "NodePools",
    "metadata": {"name": "x"},
    "pools": {
        "general": {
            "provider": "aws",
            "instanceTypes": ["m5.large"],
            "diskSizeGiB": 80,
            "diskType": "gp3",
            "minSize": 1,
            "maxSize": 5,
            "desiredSize": 2,
            "labels": {"team": "a"},
            "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            "kubernetesVersion": "1.30",
            "osImage": "AmazonLinux2023",
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": 29},
        },
        "gpu": {"labels": {}, "taints": [{"key": "g", "effect": "NoExecute", "value": None}]},
    },
    "clusters": {
        "prod": {"pools": ["general"], "overrides": {"general": {"maxSize": 9}}},
        "dev": None,
    },
}

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, 1.0, 1.5, -1.0, 1e3])
    | st.sampled_from(["", "x", "1.30", "v1.29.3", "1Gi", "1.5", "2e3", "NoSchedule", "aws"])
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@st.composite
def documents(draw: st.DrawFn) -> Any:
    doc: Any = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(0, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths or not isinstance(doc, dict):
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        how = draw(st.sampled_from(["replace", "drop", "add"]))
        if how == "replace":
            parent[path[-1]] = draw(JSON)
        elif how == "drop":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "labels", "taints", "cluster", "x"]))] = draw(
                JSON
            )
        elif isinstance(parent, list):
            parent.append(draw(JSON))
    return doc


def test_the_valid_document_is_accepted_by_both():
    assert native.accepted_fast(BASE)
    assert not list(native._validator().iter_errors(BASE))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_what_the_fast_path_accepts_jsonschema_accepts(doc):
    fast = native.accepted_fast(doc)
    slow = not list(native._validator().iter_errors(doc))
    event(f"fast={fast} jsonschema={slow}")
    if fast:
        assert slow


def test_the_committed_validator_is_the_schemas_and_is_the_one_used():
    """scripts/gen-native-validator made formats/native_validator.py from today's schema (run
    it again after editing the schema), and the fast path uses it: fastjsonschema is not
    imported to compile the schema at run time."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    check = [sys.executable, str(root / "scripts" / "gen-native-validator"), "--check"]
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    probe = (
        "import sys; from fleetwarden.formats import native; "
        f"assert native.accepted_fast({BASE!r}); "
        "assert not native.accepted_fast({'kind': 'NodePools'}); "
        "assert 'fastjsonschema' not in sys.modules, 'compiled at run time'"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
