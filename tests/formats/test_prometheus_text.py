"""The Prometheus text format read strictly: samples with labels (escapes included), special
values and timestamps; every malformed line refused with its line number; what an exporter
writes is what is read (property test)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.prometheus_text import Sample, format_sample, parse_metrics, samples_named

# as kube-apiserver 1.36 writes it (HELP/TYPE lines, label order, a trailing newline)
APISERVER = "\n".join(
    [
        "# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have "
        "been requested, broken out by API group, version, resource, subresource, and "
        "removed_release.",
        "# TYPE apiserver_requested_deprecated_apis gauge",
        'apiserver_requested_deprecated_apis{group="networking.k8s.io",removed_release="1.37",'
        'resource="ipaddresses",subresource="",version="v1beta1"} 1',
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests.",
        "# TYPE apiserver_request_total counter",
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",'
        'resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 12',
        "process_start_time_seconds 1.76456e+09",
        'go_gc_duration_seconds{quantile="0.5"} NaN',
        "",
    ]
)


def test_the_apiservers_gauge_is_read_with_its_labels():
    (s,) = samples_named(APISERVER, "apiserver_requested_deprecated_apis", path="m")
    assert (s.label("group"), s.label("version"), s.label("resource")) == (
        "networking.k8s.io", "v1beta1", "ipaddresses",
    )  # fmt: skip
    assert s.label("removed_release") == "1.37" and s.label("subresource") == "" and s.value == 1


def test_every_sample_is_read_special_values_too():
    samples = list(parse_metrics(APISERVER, path="m"))
    assert [s.name for s in samples][-2:] == [
        "process_start_time_seconds",
        "go_gc_duration_seconds",
    ]
    assert samples[-2].value == 1.76456e9 and math.isnan(samples[-1].value)


def test_escapes_timestamps_and_a_trailing_comma():
    (s,) = parse_metrics('m{a="x\\"y\\\\z\\n",b="",} -Inf 1700000000000\n', path="m")
    assert s.labels == (("a", 'x"y\\z\n'), ("b", "")) and s.value == -math.inf
    assert s.timestamp == 1_700_000_000_000


@pytest.mark.parametrize(
    "text",
    [
        "1metric 1",
        "m{a=1} 1",
        'm{a="x} 1',
        'm{a="x\\t"} 1',
        'm{a="x",a="y"} 1',
        'm{a="x" b="y"} 1',
        "m one",
        "m 1 2 3",
        "m 1 1.5",
        "m",
        "m{} 1e",
        "# TYPE m gauge\n# TYPE m counter\nm 1",
        "# TYPE m histo\nm 1",
        "# HELP\nm 1",
        "<html>not metrics</html>",
    ],
)
def test_a_malformed_line_is_refused_with_its_number(text):
    with pytest.raises(FormatError) as err:
        list(parse_metrics("ok 1\n" + text, path="c /metrics"))
    assert err.value.line is not None and err.value.line >= 2
    assert str(err.value).startswith("c /metrics:")


_name = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True)
_label = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True)
_value = st.floats(allow_nan=False) | st.sampled_from([math.inf, -math.inf])


@given(
    st.lists(
        st.builds(
            Sample,
            _name,
            st.dictionaries(_label, st.text(max_size=20), max_size=4).map(
                lambda d: tuple(d.items())
            ),
            _value,
            st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
        ),
        max_size=6,
    )
)
def test_what_an_exporter_writes_is_what_is_read(samples):
    text = "\n".join(format_sample(s) for s in samples) + "\n"
    assert list(parse_metrics(text, path="m")) == samples


@given(st.text(max_size=120))
def test_any_text_is_samples_or_a_format_error(text):
    try:
        list(parse_metrics(text, path="m"))
    except FormatError as exc:
        assert exc.line is not None
