"""Manifests for the deprecations scan: ``helm template`` output cut by its ``# Source:``
comments, and the reasons a file that does not parse is refused with."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.formats import manifests
from fleetwarden.formats.errors import FormatError

# the shape `helm template` prints: `---`, the Source comment, the document; a template that
# renders two documents repeats its comment; NOTES.txt is not printed
RENDERED = """\
---
# Source: web/templates/svc.yaml
apiVersion: v1
kind: Service
metadata:
  name: release-name-web
---
# Source: web/charts/db/templates/psp.yaml
apiVersion: policy/v1beta1
kind: PodSecurityPolicy
metadata:
  name: release-name-db
---
# Source: web/templates/svc.yaml
apiVersion: v1
kind: Service
metadata:
  name: release-name-web-headless
  annotations:
    note: "# Source: not/a/comment.yaml"
"""


def test_helm_output_is_cut_by_source_and_documents_of_a_template_stay_together():
    parts = manifests.split_helm_output(RENDERED)
    assert [source for source, _ in parts] == [
        "web/templates/svc.yaml",
        "web/charts/db/templates/psp.yaml",
    ]
    svc = manifests.parse_manifests("svc", parts[0][1].encode())
    assert [d.name for d in svc] == ["release-name-web", "release-name-web-headless"]
    psp = manifests.api_objects(manifests.parse_manifests("psp", parts[1][1].encode()))
    assert [(o.api_version, o.kind) for o in psp] == [("policy/v1beta1", "PodSecurityPolicy")]


def test_text_before_the_first_source_is_kept_and_empty_output_is_nothing():
    assert manifests.split_helm_output("") == []
    assert manifests.split_helm_output("---\n\n") == []
    [(source, text)] = manifests.split_helm_output("apiVersion: v1\nkind: ConfigMap\n")
    assert source == "" and "ConfigMap" in text


@given(st.lists(st.sampled_from(["a/templates/x.yaml", "a/crds/c.yaml", "a/charts/b/t.yaml"])))
def test_every_rendered_document_lands_in_its_templates_part(sources):
    rendered = "".join(
        f"---\n# Source: {s}\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: n{i}}}\n"
        for i, s in enumerate(sources)
    )
    parts = manifests.split_helm_output(rendered)
    assert [s for s, _ in parts] == list(dict.fromkeys(sources))
    names = {
        source: [d.name for d in manifests.parse_manifests(source, text.encode())]
        for source, text in parts
    }
    for i, source in enumerate(sources):
        assert f"n{i}" in names[source]


@pytest.mark.parametrize(
    ("data", "reason", "line"),
    [
        (b"kind: ConfigMap\nmetadata:\n  name: {{ .Values.x }}\n", "unrendered Helm template", 3),
        (b"kind: [\n", "YAML syntax error", 2),
        (b"\x00\x01\x02", "binary data", None),
        (b"kind: caf\xe9\n", "not UTF-8", None),
    ],
)
def test_a_file_that_does_not_parse_is_refused_with_its_reason_and_line(data, reason, line):
    with pytest.raises(FormatError) as exc:
        manifests.parse_manifests("f.yaml", data)
    assert reason in exc.value.reason and exc.value.line == line and exc.value.path == "f.yaml"


def test_a_template_that_happens_to_parse_is_scanned():
    """`{{ }}` inside a quoted value is valid YAML: its apiVersion and kind are real."""
    docs = manifests.parse_manifests(
        "t.yaml", b'apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: "{{ x }}"}\n'
    )
    assert [(o.api_version, o.kind) for o in manifests.api_objects(docs)] == [
        ("extensions/v1beta1", "Ingress")
    ]
