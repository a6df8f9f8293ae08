"""Which audit event wrote an object at a managedFields time (core.actors.match_audit): the same
object, a finished successful write whose request span holds the (whole-second) time; the
request's recorded field manager must be the manager's; the answer does not depend on the log's
order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core import actors
from fleetwarden.core.actors import ActorKind, AuditEvent, ChangedObject, Via

T0 = datetime(2026, 12, 1, 4, 40, 1, tzinfo=UTC)  # a managedFields time: whole seconds
OBJ = ChangedObject("c", "nodes", "n-1", T0)


def ev(id: str, *, at: datetime = T0 + timedelta(milliseconds=130), **kw: object) -> AuditEvent:
    base: dict[str, object] = dict(
        cluster="c", user="alice", verb="patch", resource="nodes", name="n-1", code=200,
        received_at=at - timedelta(milliseconds=7), user_agent="kubectl/v1.36.3",
        source_ips=("10.0.0.9",),
    )  # fmt: skip
    base.update(kw)
    return AuditEvent(id=id, at=at, **base)  # type: ignore[arg-type]


def test_the_write_within_the_second_of_the_managed_fields_time_is_it():
    assert actors.match_audit(OBJ, [ev("a")]) == ev("a")


def test_failed_unfinished_reads_and_other_objects_never_match():
    others = [
        ev("denied", code=403),
        ev("started", stage="RequestReceived"),
        ev("read", verb="get"),
        ev("kubelet", subresource="status", user="system:node:n-1"),
        ev("other", name="n-2"),
        ev("ns", namespace="kube-system"),
        ev("far", at=T0 + timedelta(minutes=5)),
    ]
    assert actors.match_audit(OBJ, others) is None


def test_a_nearer_write_by_another_client_is_never_the_managers():
    near = ev("ci", user="ci-bot", user_agent="Go-http-client/2.0")
    kubectl = ev("k", at=T0 + timedelta(seconds=2), field_manager="kubectl-label")
    assert actors.match_audit(OBJ, [near, kubectl], manager="kubectl-label") == kubectl
    assert actors.match_audit(OBJ, [near, kubectl], manager="Go-http-client") == near
    assert actors.match_audit(OBJ, [near, kubectl]) == near  # no manager: the nearest


def test_a_create_in_the_same_second_is_not_the_patch_whose_event_is_not_logged_yet():
    """The CI flake this came from: the watch delivered alice's ``kubectl label`` before its
    audit event was in the log, and the harness's create of the node a moment earlier (no
    ``?fieldManager=``, user agent ``fleetwarden/0.1``: recorded manager ``fleetwarden``) was
    taken for it. It is not a candidate; once alice's event is logged, it is the match."""
    create = ev("c", user="fw-admin", verb="create", user_agent="fleetwarden/0.1")
    assert actors.match_audit(OBJ, [create], manager="kubectl-label") is None
    alice = ev("a", at=T0 + timedelta(milliseconds=400), field_manager="kubectl-label")
    assert actors.match_audit(OBJ, [create, alice], manager="kubectl-label") == alice
    # a user agent without "/" is the manager whole; without a user agent it could be anyone
    bare = ev("b", user_agent="kubectl-label")
    assert actors.match_audit(OBJ, [create, bare], manager="kubectl-label") == bare
    unknown = ev("u", user_agent="", at=T0 + timedelta(milliseconds=1))
    assert actors.match_audit(OBJ, [unknown], manager="kubectl-label") == unknown
    assert actors.match_audit(OBJ, [unknown, alice], manager="kubectl-label") == alice


@given(st.text(max_size=300), st.one_of(st.none(), st.text(min_size=1, max_size=40)))
def test_the_recorded_manager_is_the_named_one_else_the_user_agents_prefix(agent, named):
    """As the API server derives it: the ``?fieldManager=`` named, else the user agent's
    characters before the first ``/``, unprintable ones dropped, at most 128 bytes."""
    got = actors.request_manager(ev("x", user_agent=agent, field_manager=named))
    if named:
        assert got == named
    elif not agent:
        assert got is None
    else:
        prefix = "".join(c for c in agent.split("/")[0] if c.isprintable())
        assert got is not None and prefix.startswith(got) and "/" not in got
        assert len(got.encode()) <= 128
        assert got == prefix or len((got + prefix[len(got)]).encode()) > 128


def test_resolve_names_the_user_and_keeps_the_manager_agent_and_ips_in_json():
    managed = actors.ActorDecision(
        actors.Actor("kubectl-label", ActorKind.HUMAN, Via.MANAGED_FIELDS), T0, (),
        manager="kubectl-label",
    )  # fmt: skip
    d = actors.resolve(OBJ, managed, audit=[ev("a", field_manager="kubectl-label")])
    assert d.to_json()["actor"] == {
        "name": "alice", "kind": "human", "via": "audit", "manager": "kubectl-label",
        "userAgent": "kubectl/v1.36.3", "sourceIPs": ["10.0.0.9"],
    }  # fmt: skip
    assert d.started_at == T0 and d.evidence == ("a",)


_offsets = st.integers(min_value=-20_000, max_value=20_000).map(
    lambda ms: timedelta(milliseconds=ms)
)


@given(
    st.lists(
        st.tuples(
            _offsets, st.sampled_from(["patch", "update", "get"]), st.sampled_from([200, 409, None])
        ),
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_the_match_is_a_successful_write_in_the_window_and_independent_of_order(raw, rnd):
    events = [
        ev(f"e{i}", at=T0 + off, verb=verb, code=code) for i, (off, verb, code) in enumerate(raw)
    ]
    window = timedelta(seconds=10)
    hit = actors.match_audit(OBJ, events, window=window)
    shuffled = list(events)
    rnd.shuffle(shuffled)
    again = actors.match_audit(OBJ, shuffled, window=window)
    ok = [e for e in events if e.verb != "get" and e.code != 409]
    in_window = [e for e in ok if actors._audit_gap(e, T0) <= window]
    if not in_window:
        assert hit is None and again is None
    else:
        assert hit is not None and hit in in_window
        best = min(actors._audit_gap(e, T0) for e in in_window)
        assert actors._audit_gap(hit, T0) == best
        assert again is not None and actors._audit_gap(again, T0) == best and again.at == hit.at


@given(st.permutations(["alice", "admin"]), st.integers(0, 999), st.integers(0, 999))
def test_a_request_that_named_its_field_manager_is_matched_to_that_manager_only(order, ms_a, ms_b):
    """Two writers within one managedFields second, neither user agent the manager:
    the request whose URI said ``?fieldManager=argocd-controller`` is the one, whatever the
    times and the log's order (the live flake this came from: alice's nearer patch won)."""
    by = {
        "alice": ev("a", at=T0 + timedelta(milliseconds=ms_a), field_manager="kubectl-label"),
        "admin": ev(
            "b", user="fw-admin", user_agent="python-httpx/0.28", field_manager="argocd-controller",
            at=T0 + timedelta(milliseconds=ms_b),
        ),
    }  # fmt: skip
    events = [by[name] for name in order]
    assert actors.match_audit(OBJ, events, manager="argocd-controller") == by["admin"]
    assert actors.match_audit(OBJ, events, manager="kubectl-label") == by["alice"]
    # a manager no request named: only the requests that named none could be it
    assert actors.match_audit(OBJ, events, manager="helm") is None
