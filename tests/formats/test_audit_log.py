"""Reading API-server audit logs (audit.k8s.io/v1 Event JSON lines): the fields that name the
actor and the object, unknown fields ignored, every bad line refused with its line and field,
and a file of mixed lines read past its bad ones."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.formats.audit_log import parse_line, read_lines
from fleetwarden.formats.errors import FormatError

# the shape kube-apiserver 1.36 writes at the Metadata level (fields as in
# k8s.io/apiserver/pkg/apis/audit/v1/types.go), plus a field this reader does not know
EVENT = {
    "kind": "Event",
    "apiVersion": "audit.k8s.io/v1",
    "level": "Metadata",
    "auditID": "5b2a3c1e-0d0f-4a4e-9d55-0c3f5e0e2d11",
    "stage": "ResponseComplete",
    "requestURI": "/api/v1/nodes/n-1?fieldManager=kubectl-label",
    "verb": "patch",
    "user": {"username": "alice", "groups": ["system:masters", "system:authenticated"]},
    "sourceIPs": ["127.0.0.1"],
    "userAgent": "kubectl/v1.36.3 (linux/amd64) kubernetes/abc1234",
    "objectRef": {"resource": "nodes", "name": "n-1", "apiVersion": "v1"},
    "responseStatus": {"metadata": {}, "code": 200},
    "requestReceivedTimestamp": "2026-12-01T04:40:01.123456Z",
    "stageTimestamp": "2026-12-01T04:40:01.130001Z",
    "annotations": {"authorization.k8s.io/decision": "allow"},
    "someFutureField": {"x": 1},
}


def line(**changes: object) -> str:
    return json.dumps({**EVENT, **changes})


def test_a_metadata_level_event_gives_user_agent_ips_object_and_times():
    e = parse_line(line(), cluster="c", path="audit.log", line=1)
    assert e is not None
    assert (e.id, e.cluster, e.user, e.verb, e.resource, e.name, e.namespace) == (
        EVENT["auditID"], "c", "alice", "patch", "nodes", "n-1", None,
    )  # fmt: skip
    assert e.user_agent.startswith("kubectl/") and e.source_ips == ("127.0.0.1",)
    assert e.at == datetime(2026, 12, 1, 4, 40, 1, 130001, tzinfo=UTC)
    assert e.received_at == datetime(2026, 12, 1, 4, 40, 1, 123456, tzinfo=UTC)
    assert (e.stage, e.code, e.api_version) == ("ResponseComplete", 200, "v1")
    assert e.annotation("authorization.k8s.io/decision") == "allow"


@pytest.mark.parametrize(
    ("uri", "manager"),
    [
        ("/api/v1/nodes/n-1?fieldManager=kubectl-label", "kubectl-label"),
        ("/api/v1/nodes/n-1?dryRun=All&fieldManager=argocd-controller", "argocd-controller"),
        ("/api/v1/nodes/n-1?fieldManager=a&fieldManager=b", "b"),
        ("/api/v1/nodes/n-1", None),
        ("/api/v1/nodes/n-1?fieldManager=", None),
    ],
)
def test_the_field_manager_a_request_named_is_read_from_its_uri(uri, manager):
    e = parse_line(line(requestURI=uri), cluster="c", path="a", line=1)
    assert e is not None and e.field_manager == manager


def test_an_impersonated_request_is_the_impersonated_users():
    e = parse_line(line(impersonatedUser={"username": "bob"}), cluster="c", path="a", line=1)
    assert e is not None and e.user == "bob"


def test_deprecation_annotations_are_kept():
    notes = {"k8s.io/deprecated": "true", "k8s.io/removed-release": "1.37"}
    e = parse_line(line(annotations=notes), cluster="c", path="a", line=1)
    assert e is not None and e.annotation("k8s.io/removed-release") == "1.37"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{not json", None),
        ("[1, 2]", None),
        (line(auditID=None), "auditID"),
        (line(verb=7), "verb"),
        (line(stage="Halfway"), "stage"),
        (line(stageTimestamp="yesterday", requestReceivedTimestamp=None), "stageTimestamp"),
        (line(user="alice"), "user"),
        (line(sourceIPs="127.0.0.1"), "sourceIPs"),
        (line(objectRef={"resource": 1}), "objectRef.resource"),
        (line(responseStatus={"code": "200"}), "responseStatus.code"),
        (line(apiVersion="audit.k8s.io/v1beta1"), "apiVersion"),
    ],
)
def test_a_bad_line_is_refused_naming_the_line_and_field(text, field):
    with pytest.raises(FormatError) as err:
        parse_line(text, cluster="c", path="audit.log", line=7)
    assert err.value.line == 7 and err.value.field == field
    assert str(err.value).startswith("audit.log:7: ")


def test_blank_lines_and_other_kinds_are_not_events():
    assert parse_line("  ", cluster="c", path="a", line=1) is None
    assert parse_line(json.dumps({"kind": "Policy"}), cluster="c", path="a", line=1) is None


def test_a_file_of_mixed_lines_gives_its_events_and_counts_the_bad_ones():
    got = read_lines([line(), "{torn", "", line(auditID="two"), "42"], cluster="c", path="f")
    assert [e.id for e in got.events] == [EVENT["auditID"], "two"]
    assert got.bad == 2 and [e.line for e in got.errors] == [2, 5]


@given(st.text(max_size=200))
def test_any_text_is_an_event_nothing_or_a_format_error_never_a_crash(text):
    with contextlib.suppress(FormatError):
        parse_line(text, cluster="c", path="a", line=1)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(sorted(EVENT)), _json, max_size=6))
def test_any_field_replaced_by_any_json_value_parses_or_is_refused_by_field(changes):
    lines = [json.dumps({**EVENT, **changes}), line()]
    got = read_lines(lines, cluster="c", path="a")
    assert got.bad + len(got.events) <= 2 and got.events[-1].id == EVENT["auditID"]


@given(
    user=st.text(min_size=1, max_size=20),
    agent=st.text(max_size=40),
    ips=st.lists(st.ip_addresses().map(str), max_size=3),
    name=st.text(min_size=1, max_size=30),
)
def test_what_is_written_is_what_is_read(user, agent, ips, name):
    text = line(
        user={"username": user},
        userAgent=agent,
        sourceIPs=ips,
        objectRef={"resource": "nodes", "name": name},
    )
    e = parse_line(text, cluster="c", path="a", line=1)
    assert e is not None
    assert (e.user, e.user_agent, e.source_ips, e.name) == (user, agent, tuple(ips), name)
