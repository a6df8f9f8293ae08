"""Deprecated/removed API rules, the table's parsing, and the table against its real source.

Every row is checked through a manifest at its own versions; every row of Pluto's own
``versions.yaml`` (the corpus, not our JSON) is in the table with Pluto's values, or, where
Kubernetes' sources have the API, with theirs and the difference in docs/deprecation-table.md;
the committed table is what the script makes (with the Go toolchain and the module proxy).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import (
    DeprecatedApi,
    DeprecationTable,
    Status,
    check,
    parse_minor,
)
from fleetwarden.formats import manifests
from fleetwarden.formats.errors import FormatError
from tests.conftest import ROOT, realdata_files

SCRIPT = ROOT / "scripts" / "convert-deprecations"
DATA = ROOT / "src" / "fleetwarden" / "data" / "deprecations.json"
ALL = DeprecationTable(manifests.bundled_table())  # every component: istio, cert-manager too


def _pluto_file() -> Path | None:
    found = [p for p in realdata_files("deprecations") if p.name == "pluto-versions.yaml"]
    return found[0] if found else None


def _pluto_entries() -> list[dict[str, Any]]:
    path = _pluto_file()
    if path is None:
        return []
    entries: list[dict[str, Any]] = yaml.safe_load(path.read_text())["deprecated-versions"]
    return entries


def _entry_id(entry: dict[str, Any]) -> str:
    return f"{entry['version']}:{entry['kind'] or '*'}"


def _pluto_minor(text: str | None) -> tuple[int, int] | None:
    """Pluto writes "v1.16.0"; "" means not deprecated / not removed."""
    if not text:
        return None
    m = re.fullmatch(r"v(\d+)\.(\d+)\.0", text)
    assert m, f"unexpected version in Pluto's table: {text!r}"
    return int(m.group(1)), int(m.group(2))


def _converter() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("convert_deprecations", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# --- every row of the real table, through a manifest ---------------------------------------


def _check_manifest(entry: dict[str, Any], target: tuple[int, int]):
    kind = entry["kind"] or "Policy"  # "" in Pluto: every kind of the apiVersion
    text = f"apiVersion: {entry['version']}\nkind: {kind}\nmetadata: {{name: probe}}\n"
    [obj] = manifests.api_objects(manifests.parse_manifests("probe.yaml", text.encode()))
    assert (obj.api_version, obj.kind, obj.name) == (entry["version"], kind, "probe")
    return check(obj.api_version, obj.kind, target, ALL)


REPORT = ROOT / "docs" / "deprecation-table.md"
_FIELDS = {
    "deprecatedIn": "deprecated-in",
    "removedIn": "removed-in",
    "replacement": "replacement-api",
}


def _row(api_version: str, kind: str) -> DeprecatedApi:
    (row,) = [a for a in ALL if (a.api_version, a.kind) == (api_version, kind)]
    return row


def _shown(value: tuple[int, int] | str | None) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else f"{value[0]}.{value[1]}"


@pytest.mark.realdata
@pytest.mark.parametrize("entry", _pluto_entries(), ids=_entry_id)
def test_every_pluto_row_is_in_the_table_with_its_values_or_a_reported_difference(realdata, entry):
    """Pluto's row is the table's when only Pluto has the API; where Kubernetes' sources have
    it, theirs is the row and docs/deprecation-table.md lists every field Pluto differs on."""
    row = _row(entry["version"], entry["kind"])
    assert row.component == entry["component"]
    pluto = {
        "deprecatedIn": _pluto_minor(entry["deprecated-in"]),
        "removedIn": _pluto_minor(entry["removed-in"]),
        "replacement": entry["replacement-api"] or None,
    }
    ours = {
        "deprecatedIn": row.deprecated_in,
        "removedIn": row.removed_in,
        "replacement": row.replacement,
    }
    if row.origin.startswith("pluto "):
        assert ours == pluto
        return
    assert row.origin.startswith("k8s.io/api@v0.")
    report = REPORT.read_text()
    for field, value in pluto.items():
        if value != ours[field]:
            line = (
                f"| {entry['version']} | {entry['kind'] or '(all)'} | {field} | {_shown(value)} |"
            )
            assert line in report, f"{line} missing from {REPORT.name}"


def _row_id(api: DeprecatedApi) -> str:
    return f"{api.api_version}:{api.kind or '*'}"


def _check_row(api: DeprecatedApi, target: tuple[int, int]):
    return _check_manifest({"version": api.api_version, "kind": api.kind}, target)


@pytest.mark.parametrize("api", list(ALL), ids=_row_id)
def test_every_row_is_removed_at_its_removal_and_deprecated_at_its_deprecation(api):
    if api.removed_in is not None:
        hit = _check_row(api, api.removed_in)
        assert hit is not None and hit.removed and hit.api.replacement == api.replacement
    else:  # never removed: still only deprecated at any later version
        hit = _check_row(api, (99, 99))
        assert hit is not None and hit.status is Status.DEPRECATED
    if api.deprecated_in is not None:
        hit = _check_row(api, api.deprecated_in)
        assert hit is not None
        assert hit.removed == (api.removed_in is not None and api.removed_in <= api.deprecated_in)


@pytest.mark.parametrize("api", list(ALL), ids=_row_id)
def test_every_row_is_fine_one_minor_before_it_changes(api):
    first = min(v for v in (api.deprecated_in, api.removed_in) if v)
    assert first[1] > 0, "no earlier minor to check"
    assert _check_row(api, (first[0], first[1] - 1)) is None


def test_every_row_records_its_origin():
    raw = json.loads(DATA.read_text())
    versions = raw["source"]["kubernetes"]["versions"]
    for row in raw["apis"]:
        origin = row["origin"]
        m = re.match(
            r"k8s\.io/api@(v0\.\d+\.\d+) (\S+/zz_generated\.prerelease-lifecycle\.go)", origin
        )
        if m:
            assert m.group(1) in versions
        else:
            assert re.match(r"(pluto versions\.yaml|kubent pkg/rules/rego)@[0-9a-f]{12}", origin), (
                origin
            )
    assert sum(r["origin"].startswith("k8s.io/api@") for r in raw["apis"]) > 100
    # through 1.37: the newest module read is a 1.37 one
    assert versions[-1].startswith("v0.37.")


@pytest.mark.realdata
def test_data_file_equals_what_the_script_makes_from_kubernetes_sources_and_pluto(realdata):
    """The committed table is exactly what scripts/convert-deprecations makes now from the
    k8s.io/api versions it records (Go module proxy) and Pluto's file."""
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain (go) on PATH: k8s.io/api cannot be fetched")
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=900
    )
    if r.returncode == 2 and "go mod download" in r.stderr:
        pytest.skip(f"the Go module proxy is not reachable: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr


@pytest.mark.realdata
def test_recorded_source_matches_the_corpus_provenance(realdata):
    stored = json.loads(DATA.read_text())["source"]
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
        for line in (realdata / "SOURCES.md").read_text().splitlines()
        if line.startswith("| pluto-versions.yaml |") or line.startswith("| kubent-fixture-cronjob")
    }
    _, repo, path, commit, license_ = rows["pluto-versions.yaml"]
    pluto = stored["pluto"]
    assert (pluto["repository"], pluto["path"], pluto["commit"], pluto["license"]) == (
        repo,
        path,
        commit,
        license_,
    )
    _, repo, _, commit, license_ = rows["kubent-fixture-cronjob-v1beta1.yaml"]
    kubent = stored["kubent"]
    assert (kubent["repository"], kubent["commit"], kubent["license"]) == (repo, commit, license_)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", stored["converted"])


def test_the_script_reads_a_prerelease_lifecycle_file():
    """The shape `prerelease-lifecycle-gen` writes (k8s.io/api networking/v1beta1)."""
    text = """
func (in *IPAddress) APILifecycleIntroduced() (major, minor int) {
	return 1, 31
}

func (in *IPAddress) APILifecycleDeprecated() (major, minor int) {
	return 1, 34
}

func (in *IPAddress) APILifecycleReplacement() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IPAddress"}
}

func (in *IPAddress) APILifecycleRemoved() (major, minor int) {
	return 1, 37
}

func (in *IPAddressList) APILifecycleDeprecated() (major, minor int) {
	return 1, 34
}

func (in *Other) APILifecycleIntroduced() (major, minor int) {
	return 1, 36
}
"""
    rows = _converter().lifecycle_rows(text, "networking.k8s.io", "v1beta1", "origin")
    assert [
        (r["apiVersion"], r["kind"], r["deprecatedIn"], r["removedIn"], r["replacement"])
        for r in rows
    ] == [("networking.k8s.io/v1beta1", "IPAddress", "1.34", "1.37", "networking.k8s.io/v1")]


def test_converter_refuses_patch_versions_and_keeps_empty_as_null():
    conv = _converter()
    row = {
        "version": "a/v1",
        "kind": "K",
        "deprecated-in": "",
        "removed-in": "v1.16.0",
        "replacement-api": "",
        "component": "k8s",
    }
    out = conv.convert({"deprecated-versions": [row]}, converted="2024-01-01")
    assert out["apis"] == [
        {
            "apiVersion": "a/v1",
            "kind": "K",
            "deprecatedIn": None,
            "removedIn": "1.16",
            "replacement": None,
            "replacementAvailableIn": None,
            "component": "k8s",
        }
    ]
    with pytest.raises(conv.ConversionError, match="patch"):
        conv.convert({"deprecated-versions": [{**row, "removed-in": "v1.16.2"}]}, converted="x")


# --- the rules -----------------------------------------------------------------------------

ROW = DeprecatedApi("batch/v1beta1", "CronJob", (1, 21), (1, 25), "batch/v1")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ((1, 20), None),
        ((1, 21), Status.DEPRECATED),
        ((1, 24), Status.DEPRECATED),
        ((1, 25), Status.REMOVED),
        ((1, 30), Status.REMOVED),
        ((2, 0), Status.REMOVED),
        ((0, 99), None),
    ],
)
def test_status_by_major_minor(target, expected):
    hit = check("batch/v1beta1", "CronJob", target, [ROW])
    assert (hit and hit.status) == expected
    if hit:
        assert hit.removed is (expected is Status.REMOVED) and hit.target == target


def test_unknown_or_other_kind_is_no_finding():
    table = DeprecationTable([ROW])
    assert check("batch/v1", "CronJob", (1, 30), table) is None
    assert check("batch/v1beta1", "Job", (1, 30), table) is None
    assert check("batch/v1beta1", "cronjob", (1, 30), table) is None  # kinds are case-sensitive


def test_never_removed_row_stays_deprecated_and_never_deprecated_row_jumps_to_removed():
    vac = DeprecatedApi("storage.k8s.io/v1beta1", "VolumeAttributesClass", (1, 34), None)
    rs = DeprecatedApi("apps/v1beta2", "ReplicaSet", None, (1, 16))
    assert check(vac.api_version, vac.kind, (1, 99), [vac]).status is Status.DEPRECATED
    assert check(rs.api_version, rs.kind, (1, 15), [rs]) is None
    assert check(rs.api_version, rs.kind, (1, 16), [rs]).removed


def test_empty_kind_covers_every_kind_but_an_exact_row_wins():
    wild = DeprecatedApi("authentication.istio.io/v1alpha1", "", (1, 5), (1, 6))
    exact = DeprecatedApi("authentication.istio.io/v1alpha1", "Policy", (1, 2), None)
    table = DeprecationTable([wild, exact])
    assert table.lookup("authentication.istio.io/v1alpha1", "MeshPolicy") is wild
    assert table.lookup("authentication.istio.io/v1alpha1", "Policy") is exact


def test_first_of_duplicate_rows_wins_and_components_filter():
    a = DeprecatedApi("x/v1", "K", (1, 1), None, component="k8s")
    b = DeprecatedApi("x/v1", "K", (1, 9), None, component="istio")
    table = DeprecationTable([a, b])
    assert table.lookup("x/v1", "K") is a and len(table) == 2
    assert table.components() == {"k8s", "istio"}
    assert table.only(["istio"]).lookup("x/v1", "K") is b
    assert table.only([]).lookup("x/v1", "K") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.25", (1, 25)),
        ("v1.25", (1, 25)),
        (" v1.25.0 ", (1, 25)),
        ("1.25.7", (1, 25)),
        ("1", None),
        ("abc", None),
        ("1.25x", None),
        ("1.25.0-eks", None),
        ("", None),
        ("1.2.3.4", None),
    ],
)
def test_parse_minor_accepts_only_whole_versions(text, expected):
    assert parse_minor(text) == expected


def test_bundled_table_counts():
    comps = [a.component for a in ALL]
    assert len(ALL) >= 100
    assert {"k8s", "istio", "cert-manager"} <= set(comps)


# --- the data file's parser ----------------------------------------------------------------

GOOD = {
    "apiVersion": "a/v1",
    "kind": "K",
    "deprecatedIn": "1.9",
    "removedIn": None,
    "replacement": None,
    "replacementAvailableIn": None,
    "component": "k8s",
}


def _table(*rows: Any) -> str:
    return json.dumps({"source": {"repository": "r"}, "apis": list(rows)})


def test_load_table_reads_nulls_as_not():
    [row] = manifests.load_table(_table(GOOD))
    assert row == DeprecatedApi("a/v1", "K", (1, 9), None, None, None, "k8s")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{", "invalid JSON"),
        ("[]", "'apis' list"),
        (json.dumps({"apis": []}), "where the table comes from"),
        (_table("x"), r"apis\[0\]: expected an object"),
        (_table({**GOOD, "removedIn": "soon"}), r"apis\[0\]\.removedIn: expected MAJOR.MINOR"),
        (_table({**GOOD, "removedIn": 1.16}), r"apis\[0\]\.removedIn: expected a non-empty"),
        (_table({**GOOD, "apiVersion": ""}), r"apis\[0\]\.apiVersion"),
        (_table({**GOOD, "component": None}), r"apis\[0\]\.component"),
        (_table({**GOOD, "extra": 1}), "unknown keys: extra"),
        (_table(GOOD, {**GOOD, "removedIn": "1.20"}), r"apis\[1\]: a/v1 K is listed twice"),
    ],
)
def test_load_table_rejects_bad_data_naming_the_field(text, match):
    with pytest.raises(FormatError, match=match):
        manifests.load_table(text, path="t.json")


def test_load_table_accepts_identical_duplicates():
    assert len(manifests.load_table(_table(GOOD, GOOD))) == 2


# --- reading manifests ---------------------------------------------------------------------

HELM = b"""\
---
# Source: app/templates/serviceaccount.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
  namespace: web
---
# Source: app/templates/empty.yaml
---
# Source: app/templates/ingress.yaml
apiVersion: extensions/v1beta1
kind: Ingress
metadata: {name: app}
---
replicaCount: 1
"""


def test_helm_template_output_yields_only_api_objects():
    objs = manifests.api_objects(manifests.parse_manifests("out.yaml", HELM))
    assert objs == [
        manifests.ApiObject("out.yaml", "v1", "ServiceAccount", "app", "web"),
        manifests.ApiObject("out.yaml", "extensions/v1beta1", "Ingress", "app", None),
    ]


def test_json_list_is_expanded():
    data = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "policy/v1beta1",
                    "kind": "PodSecurityPolicy",
                    "metadata": {"name": "p"},
                },
                {"apiVersion": "v1", "metadata": {"name": "no-kind"}},
            ],
        }
    ).encode()
    assert [
        (o.kind, o.name) for o in manifests.api_objects(manifests.parse_manifests("l.json", data))
    ] == [("PodSecurityPolicy", "p")]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"apiVersion: v1\nkind: [unclosed\n", r"bad\.yaml:\d+: YAML syntax error"),
        (b"\xff\xfe\x00garbage", "binary data"),
        (b"kind: \xe9t\xe9\n", "not UTF-8"),
        (b"- a\n- b\n", "not a mapping"),
    ],
)
def test_unreadable_manifests_raise_naming_the_file(data, match):
    with pytest.raises(FormatError, match=match):
        manifests.parse_manifests("bad.yaml", data)


# --- properties ----------------------------------------------------------------------------

targets = st.tuples(st.integers(0, 10**6), st.integers(0, 10**6))


@settings(max_examples=300, deadline=None)
@given(api_version=st.text(max_size=60), kind=st.text(max_size=40), target=targets)
def test_check_never_crashes_on_any_strings(api_version, kind, target):
    hit = check(api_version, kind, target, ALL)
    assert hit is None or hit.status in (Status.DEPRECATED, Status.REMOVED)


@settings(max_examples=300, deadline=None)
@given(api=st.sampled_from(list(ALL)), x=targets, y=targets)
def test_removed_at_x_means_removed_at_every_later_y(api, x, y):
    """Status never goes back as the target rises: deprecated never turns back into fine."""
    lo, hi = min(x, y), max(x, y)
    assert api.status_at(hi).rank >= api.status_at(lo).rank
    hit_lo = check(api.api_version, api.kind, lo, ALL)
    if hit_lo is not None and hit_lo.removed:
        hit_hi = check(api.api_version, api.kind, hi, ALL)
        assert hit_hi is not None and hit_hi.removed


def test_every_row_stays_removed_long_after_removed_in():
    for api in ALL:
        if api.removed_in is None or ALL.lookup(api.api_version, api.kind) is not api:
            continue  # never removed, or a duplicate shadowed by an identical first row
        major, minor = api.removed_in
        for later in [(major, minor), (major, minor + 1), (major, minor + 40), (major + 1, 0)]:
            hit = check(api.api_version, api.kind, later, ALL)
            assert hit is not None and hit.removed, (api, later)


minors = st.none() | st.tuples(st.integers(0, 3), st.integers(0, 40))


@settings(max_examples=300, deadline=None)
@given(deprecated=minors, removed=minors, x=targets, y=targets)
def test_monotonic_for_any_row_even_inconsistent_ones(deprecated, removed, x, y):
    api = DeprecatedApi("g/v1", "K", deprecated, removed)
    lo, hi = min(x, y), max(x, y)
    assert api.status_at(hi).rank >= api.status_at(lo).rank


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_parse_minor_never_crashes(text):
    got = parse_minor(text)
    assert got is None or deprecations.format_minor(got).count(".") == 1
