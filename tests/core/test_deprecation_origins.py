"""Each row of the deprecation table says where it comes from (issue #14 item 8): its recorded
origin text, as ``scripts/convert-deprecations`` writes it, read into a ``RowOrigin``
(source, what was read at which version, the file) for ``deprecations -o json``; and the
table is found by a live API's resource name (``--live`` reads resources, not kinds) through
the API server's default kind -> resource rule."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.deprecations import (
    DeprecatedApi,
    DeprecationTable,
    guess_resource,
    row_origin,
)
from fleetwarden.core.live_deprecations import ApiRef, collect
from fleetwarden.formats import manifests

BUNDLED = manifests.bundled_table()


def row(origin: str, api_version: str = "x.io/v1", kind: str = "Thing") -> DeprecatedApi:
    return DeprecatedApi(api_version, kind, (1, 20), (1, 22), origin=origin)


@pytest.mark.parametrize(
    ("text", "source", "ref", "file", "replacement_ref"),
    [
        (
            "k8s.io/api@v0.37.2 admission/v1beta1/zz_generated.prerelease-lifecycle.go",
            "kubernetes",
            "k8s.io/api@v0.37.2",
            "admission/v1beta1/zz_generated.prerelease-lifecycle.go",
            None,
        ),
        (
            "k8s.io/api@v0.37.2 node/v1beta1/zz_generated.prerelease-lifecycle.go; "
            "replacement: pluto versions.yaml@dd5ec8cccce5",
            "kubernetes",
            "k8s.io/api@v0.37.2",
            "node/v1beta1/zz_generated.prerelease-lifecycle.go",
            "pluto@dd5ec8cccce5",
        ),
        (
            "pluto versions.yaml@dd5ec8cccce5 (not in k8s.io/api)",
            "pluto",
            "pluto@dd5ec8cccce5",
            "versions.yaml",
            None,
        ),
        (
            "kubent pkg/rules/rego@2366d92156c0 deprecated-future.rego "
            "(not in k8s.io/api nor Pluto)",
            "kubent",
            "kubent@2366d92156c0",
            "pkg/rules/rego/deprecated-future.rego",
            None,
        ),
        ("my team's list, 2026-11", "other", "my team's list, 2026-11", None, None),
    ],
)
def test_the_converters_origin_forms_are_read_into_source_ref_and_file(
    text, source, ref, file, replacement_ref
):
    origin = row_origin(row(text))
    assert origin is not None
    assert (origin.source, origin.ref, origin.file, origin.replacement_ref) == (
        source,
        ref,
        file,
        replacement_ref,
    )
    assert origin.to_json() == {
        "source": source,
        "ref": ref,
        "file": file,
        "replacementRef": replacement_ref,
        "text": text,
    }


def test_a_row_without_an_origin_has_none():
    assert row_origin(row("")) is None


def test_every_bundled_row_has_an_origin_in_one_of_the_converters_forms():
    """The parser and the converter agree: no row of the shipped table reads as ``other``."""
    sources = {row_origin(api).source for api in BUNDLED}  # type: ignore[union-attr]
    assert sources == {"kubernetes", "pluto", "kubent"}


@given(st.text(max_size=200))
def test_any_origin_text_is_read_without_error_and_kept_whole(text):
    origin = row_origin(row(text))
    assert (origin is None) is (text == "")
    if origin is not None:
        assert origin.text == text and origin.source in {"kubernetes", "pluto", "kubent", "other"}


@given(
    st.from_regex(r"v0\.[0-9]{1,2}\.[0-9]{1,2}", fullmatch=True),
    st.from_regex(r"[a-z]{2,12}/v[0-9](beta[0-9])?", fullmatch=True),
)
def test_a_kubernetes_origin_names_its_module_version_and_package_file(version, package):
    path = f"{package}/zz_generated.prerelease-lifecycle.go"
    origin = row_origin(row(f"k8s.io/api@{version} {path}"))
    assert origin is not None
    assert (origin.source, origin.ref, origin.file) == ("kubernetes", f"k8s.io/api@{version}", path)


@pytest.mark.parametrize(
    ("kind", "resource"),
    [
        ("FlowSchema", "flowschemas"),
        ("Ingress", "ingresses"),
        ("PodSecurityPolicy", "podsecuritypolicies"),
        ("CronJob", "cronjobs"),
        ("IPAddress", "ipaddresses"),
        ("HorizontalPodAutoscaler", "horizontalpodautoscalers"),
    ],
)
def test_a_kinds_resource_is_the_api_servers_default_plural(kind, resource):
    assert guess_resource(kind) == resource


def test_a_live_use_finds_its_table_row_by_resource_and_carries_its_origin():
    table = DeprecationTable(BUNDLED)
    ingress = table.lookup_resource("extensions/v1beta1", "ingresses")
    assert ingress is not None and ingress.kind == "Ingress"
    assert table.lookup_resource("extensions/v1beta1", "ingress") is None  # not a resource
    assert table.lookup_resource("nothing.example/v1", "things") is None
    (use,) = collect("c1", [(ApiRef("extensions", "v1beta1", "ingresses"), "1.22")], [], (1, 25))
    assert use.to_json()["origin"] is None  # no row matched yet
    matched = dataclasses.replace(use, row=ingress)
    assert matched.to_json()["origin"] == row_origin(ingress).to_json()  # type: ignore[union-attr]
    assert matched.to_json()["origin"]["source"] == "kubernetes"
