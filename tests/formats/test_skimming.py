"""Skimming manifests gives exactly what the full parse gives, or steps aside.

``manifests.read_api_objects`` must equal ``api_objects(parse_manifests(...))`` for every input:
the same objects in the same order, and the same ``FormatError`` for a file that does not parse.
Hypothesis builds YAML from fragments chosen to hit every hazard the skim must notice (quoted
scalars running over lines at column 0, block scalars holding ``kind:`` lines, anchors, tags,
flow collections as keys, ``=``, impossible dates, tabs, CRLF, ``List``...), and random
character soup for the error paths; the corpus is checked file by file.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.formats import manifests, skimming
from fleetwarden.formats.documents import Document
from fleetwarden.formats.errors import FormatError
from tests.conftest import realdata_files


def _full(data: bytes, path: str = "m.yaml") -> object:
    try:
        return manifests.api_objects(manifests.parse_manifests(path, data))
    except FormatError as exc:
        return ("error", str(exc))


def _fast(data: bytes, path: str = "m.yaml") -> object:
    try:
        return manifests.read_api_objects(path, data)
    except FormatError as exc:
        return ("error", str(exc))


TOP = [
    "apiVersion: v1",
    "apiVersion: apps/v1beta1",
    "apiVersion: 'extensions/v1beta1'",
    'apiVersion: "batch/v1beta1"  # old',
    "apiVersion: 1.5",
    "apiVersion:",
    "apiVersion: v1 # c",
    "kind: Deployment",
    "kind: CronJob",
    "kind: 'It''s'",
    'kind: "Ingress"',
    'kind: "Ing\\x72ess"',
    "kind: List",
    "kind: true",
    "kind: ~",
    "kind: =",
    "kind: Deploy\n  ment",
    "kind:\n  Deployment",
    "kind: &k Deployment",
    "kind: *k",
    "kind: !!str Deployment",
    "kind: 2001-02-30",
    "kind: 2001-02-03",
    "kind: 0b_",
    "kind: [a, b]",
    "kind: {a: b}",
    "kind: Foo\tBar",
    '"kind": Deployment',
    "? kind\n: Deployment",
    "metadata:\n  name: web\n  namespace: prod",
    "metadata:\n    name: 'web'\n    labels:\n      name: not-this",
    "metadata:\n  labels:\n    name: deep\n  name: top",
    "metadata:\n  annotations:\n    x: |\n      name: in-a-block\n  name: real",
    'metadata:\n  annotations:\n    d: "a long\n  name: fake"\n  name: real',
    "metadata:\n  name: a\n# comment\n  namespace: b",
    "metadata:\n  name: 12",
    "metadata:\n  name: x\n   y",
    "metadata:\n  - name: seq",
    "metadata:\n- name: seq",
    "metadata: {name: flow}",
    "metadata:",
    "metadata: null",
    "metadata: {}  # empty",
    "metadata: ~",
    "metadata: {name: x}",
    "metadata: '#x'",
    "metadata: # c\n  name: after-comment",
    "metadata:\n  finalizers:\n  - a\n  name: after-seq",
    'metadata:\n  "name": quoted',
    "metadata:\n\tname: tab",
    'description: "open\nkind: Fake"',
    "description: 'open\nkind: Fake'",
    "data:\n  script: |\n    kind: Fake\n    apiVersion: v9",
    "data: >-\n  folded\n  text",
    "x'y: '''z\nkind: Fake'",
    "x'y: ''''z\nkind: Fake'",
    'a"b: "c\nkind: Fake"',
    'a: "x\\" "y\nkind: Fake"',
    "a: it's 'open\nkind: Fake'",
    "spec:\n  replicas: 3\n  template: {metadata: {labels: {a: b}}}",
    "spec:\n  args: [\"--a\", 'b', c]",
    "spec:\n  args: [a,\nb]",
    "spec:\n  image: {{ .Values.image }}",
    "spec:\n  x: {[a]: b}",
    "spec:\n  x: [=]",
    "spec:\n  when: 2024-13-01",
    "spec:\n  <<: {a: 1}",
    "spec:\n  ? complex\n  : key",
    "spec: !custom x",
    "spec:\n  a: &anchor 1\n  b: *anchor",
    "spec:\n  port: 0x_",
    "items:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p",
    "items: []",
    "# a comment",
    "",
    "just a scalar",
    "- a list",
    "{apiVersion: v1, kind: Pod}",
    "  apiVersion: v1\n  kind: Pod",
    "%YAML 1.1",
    "...",
    "bad: [unclosed",
    "bad: 'unclosed",
    "bad: : colon",
    "x: {{ unrendered }}",
]
SEPARATORS = ["\n---\n", "\n--- # doc\n", "\n---\n\n", "\n--- x\n", "\n...\n---\n", "\n"]


@st.composite
def manifest_texts(draw: st.DrawFn) -> str:
    docs = draw(
        st.lists(st.lists(st.sampled_from(TOP), min_size=0, max_size=6), min_size=1, max_size=4)
    )
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(docs), max_size=len(docs)))
    text = "".join(sep + "\n".join(doc) for sep, doc in zip(seps, docs, strict=True))
    if draw(st.booleans()):
        text = text.lstrip("\n-")
    if draw(st.integers(0, 9)) == 0:
        text = text.replace("\n", "\r\n")
    if draw(st.integers(0, 9)) == 0:
        text = "\ufeff" + text
    return text


@settings(
    max_examples=int(os.environ.get("FW_SKIM_EXAMPLES", "600")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(manifest_texts())
def test_skimming_equals_the_full_parse_on_manifest_shaped_text(text):
    data = text.encode()
    assert _fast(data) == _full(data)


SOUP = st.text(alphabet=" \n\t:-#'\"[]{}&*!|>?=,akmnev01/.\\", max_size=80)


@settings(max_examples=600, deadline=None)
@given(SOUP)
def test_skimming_equals_the_full_parse_on_character_soup(text):
    data = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n" + text).encode()
    assert _fast(data) == _full(data)
    assert _fast(text.encode()) == _full(text.encode())


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["apiVersion", "kind", "metadata", "items", "spec"]),
        st.one_of(
            st.text(max_size=8),
            st.integers(),
            st.none(),
            st.dictionaries(st.sampled_from(["name", "namespace"]), st.text(max_size=5)),
            st.lists(st.dictionaries(st.sampled_from(["apiVersion", "kind"]), st.text(max_size=5))),
        ),
    )
)
def test_json_is_read_as_the_full_parse_reads_it(body):
    """Where PyYAML reads the JSON, the same objects. JSON it refuses (a surrogate pair
    escape, a key over 1,024 characters) is read as the JSON it is, as Pluto reads it, when
    the values read are strings; else (YAML 1.1 would read 1e5 as a string) the full parse's
    error stands."""
    data = json.dumps(body).encode()
    expected = _full(data)
    items = body.get("items")
    docs = items if body.get("kind") == "List" and isinstance(items, list) else [body]
    if isinstance(expected, tuple) and all(_strings(d) for d in docs):
        expected = manifests.api_objects([Document("m.yaml", i, d) for i, d in enumerate(docs)])
    assert _fast(data) == expected


def _strings(doc: dict[str, Any]) -> bool:
    meta = doc.get("metadata")
    values = [doc.get("apiVersion"), doc.get("kind")]
    values += [meta.get("name"), meta.get("namespace")] if isinstance(meta, dict) else []
    return all(v is None or isinstance(v, str) for v in values)


CORPUS = [
    p
    for folder in (
        *("argocd", "capi", "crds", "deprecations", "eksctl", "events", "flux"),
        *("karpenter", "manifests", "nodes"),
    )
    for p in realdata_files(folder, ".yaml", ".yml", ".json")
]


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_file_skims_to_what_the_full_parse_finds(realdata, path):
    data = path.read_bytes()
    assert _fast(data, str(path)) == _full(data, str(path))


KUBECTL_STYLE = """\
# a comment
apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    description: "it's [not] {flow}: here"
  labels:
    app: web
  name: web
  namespace: prod
spec:
  replicas: 3
  template:
    spec:
      containers:
      - args: ["--port", "8080"]
        image: nginx:1.25
        command:
        - sh
        - -c
        - |
          echo "kind: Fake" && test "$A" = x
---
apiVersion: batch/v1beta1
kind: CronJob
metadata: {}
"""


def test_ordinary_manifests_are_skimmed_not_parsed():
    """The fast path is taken for the usual shapes (else it would never pay)."""
    heads = skimming.skim_yaml(KUBECTL_STYLE)
    assert heads == [
        skimming.Head("apps/v1", "Deployment", "web", "prod"),
        skimming.Head("batch/v1beta1", "CronJob", None, None),
    ]
    assert manifests.read_api_objects("m.yaml", KUBECTL_STYLE.encode()) == _full(
        KUBECTL_STYLE.encode()
    )


@pytest.mark.parametrize(
    "text",
    [
        'a: "open\nkind: Fake"\n',  # a quoted scalar going on at column 0
        "kind: Pod\nspec: {{ .Values.x }}\n",  # an unrendered template: an unhashable key
        "kind: Pod\nwhen: 2001-02-30\n",  # a date the constructor refuses
        "kind: Pod\nx: =\n",  # the YAML 1.1 value tag, unknown to the safe loader
        "kind: Pod\na: &x 1\nb: *x\n",
        "kind: Pod\nbroken: [\n",
    ],
)
def test_what_the_skim_cannot_be_sure_of_goes_to_the_full_parse(text):
    assert skimming.skim_yaml(text) is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["7", "_", "a", " ", "\n"]), st.integers(0, 9000)),
        max_size=6,
    )
)
def test_the_long_integer_check_finds_exactly_the_runs_the_pattern_finds(parts):
    """``_long_int`` looks only around every 2,150th character; a run of 4,300 digits
    anywhere (at the start, the end, across those points) is found all the same."""
    text = "".join(c * n for c, n in parts)
    assert skimming._long_int(text) == bool(skimming._LONG_INT.search(text))


@pytest.mark.parametrize("start", [0, 1, 2149, 2150, 2151, 4299, 4300, 6449])
@pytest.mark.parametrize("length", [4299, 4300, 4301])
def test_a_digit_run_is_found_wherever_it_starts(start, length):
    text = "x" * start + "1" * length + "y" * 3
    assert skimming._long_int(text) is (length >= 4300)
