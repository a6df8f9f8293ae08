"""Who owns a changed object in Argo CD's eyes, and how refreshes are spaced (core.argo_refresh).

Real objects where they exist: the Helm child Application (its tracking-id annotation, set by
the app-of-apps that owns it), gitops-engine's live guestbook Deployment (instance label) and
the GKE application's resources (its tree). Hypothesis for the parser and the two rules that
must hold for any input: the order of trust, and the scheduler's spacing bounds.
"""

from __future__ import annotations

import itertools
import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.argo_refresh import (
    AppTracking,
    Basis,
    OwnershipIndex,
    RefreshMode,
    RefreshScheduler,
    ResourceKey,
    TouchedObject,
    TrackingMethod,
    owners_of,
    parse_tracking_id,
    touched_by_event,
    tracking_from_tree,
)

HELM_CHILD = "argocd/argocd-application-helm-child-live.yaml"
GKE_APP = "argocd/argocd-application-with-status-gke.yaml"
GUESTBOOK_LIVE = "manifests/drift-gitops-engine-deployment-live.json"


def _yaml(realdata, name):
    return next(d for d in yaml.safe_load_all((realdata / name).read_text()) if d)


# --- real objects ----------------------------------------------------------------------------


@pytest.mark.realdata
def test_real_tracking_id_names_the_app_of_apps(realdata):
    """The Helm child Application's tracking-id makes app-of-apps its owner (annotation)."""
    child = TouchedObject.from_object("mgmt", _yaml(realdata, HELM_CHILD))
    assert child is not None
    assert child.key == ResourceKey("argoproj.io", "Application", "argocd", "argo-workflows")
    apps = [AppTracking("app-of-apps", cluster="mgmt"), AppTracking("other", cluster="mgmt")]
    owned = owners_of(child, apps)
    assert [(c.app.name, c.basis) for c in owned.claims] == [("app-of-apps", Basis.TRACKING_ID)]
    # the same annotation means nothing to an app tracked by label
    label_only = [AppTracking("app-of-apps", cluster="mgmt", method=TrackingMethod.LABEL)]
    assert owners_of(child, label_only).claims == ()


@pytest.mark.realdata
def test_real_instance_label_counts_only_for_label_tracking(realdata):
    """gitops-engine's live Deployment carries app.kubernetes.io/instance=guestbook."""
    obj = json.loads((realdata / GUESTBOOK_LIVE).read_text())
    touched = TouchedObject.from_object("c1", obj)
    assert touched is not None and touched.key.group == "apps"
    by_label = AppTracking("guestbook", cluster="c1", method=TrackingMethod.LABEL)
    assert owners_of(touched, [by_label]).claims[0].basis is Basis.INSTANCE_LABEL
    informational = AppTracking("guestbook", cluster="c1", method=TrackingMethod.ANNOTATION_LABEL)
    owned = owners_of(touched, [informational])
    assert owned.claims == ()
    assert any("label-tracked" in r for r in owned.reasons)


@pytest.mark.realdata
def test_real_tree_wins_over_labels(realdata):
    """The GKE app's resources as its tree: its Deployment belongs to it even when a label
    names another app (tree membership is checked first)."""
    app = _yaml(realdata, GKE_APP)
    tracking = tracking_from_tree(
        AppTracking(app["metadata"]["name"], cluster="gke", method=TrackingMethod.LABEL),
        app["status"]["resources"],
    )
    assert ResourceKey("apps", "Deployment", "test-lla", "test-lla") in tracking.resources
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "test-lla",
            "namespace": "test-lla",
            "labels": {"app.kubernetes.io/instance": "intruder"},
        },
    }
    touched = TouchedObject.from_object("gke", deployment)
    intruder = AppTracking("intruder", cluster="gke", method=TrackingMethod.LABEL)
    owned = owners_of(touched, [intruder, tracking])
    assert [(c.app.name, c.basis) for c in owned.claims] == [(tracking.name, Basis.TREE)]
    # the same object in another cluster is not in this tree
    elsewhere = TouchedObject.from_object("other", deployment)
    assert [c.app.name for c in owners_of(elsewhere, [intruder, tracking]).claims] == []


def test_copied_tracking_id_claims_nothing():
    """An annotation naming another object (copied) is not trusted, as in Argo CD."""
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "copy",
            "namespace": "shop",
            "annotations": {
                "argocd.argoproj.io/tracking-id": "shop:apps/Deployment:shop/web",
            },
        },
    }
    owned = owners_of(TouchedObject.from_object("c", obj), [AppTracking("shop")])
    assert owned.claims == ()
    assert any("copied" in r for r in owned.reasons)


def test_apps_outside_the_control_namespace_are_tracked_with_their_namespace():
    app = AppTracking("web", namespace="team-a")
    assert app.tracked_name == "team-a_web"
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "cfg",
            "namespace": "shop",
            "annotations": {"argocd.argoproj.io/tracking-id": "team-a_web:/ConfigMap:shop/cfg"},
        },
    }
    touched = TouchedObject.from_object("c", obj)
    assert [c.app.ref for c in owners_of(touched, [app, AppTracking("web")]).claims] == [
        "team-a/web"
    ]


# --- properties ------------------------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)
groups = st.sampled_from(["", "apps", "batch", "karpenter.sh", "argoproj.io"])
kinds = st.sampled_from(["Deployment", "ConfigMap", "NodePool", "Application", "Service"])
keys = st.builds(ResourceKey, groups, kinds, st.one_of(st.just(""), names), names)


@given(names, keys)
def test_tracking_id_round_trips(app, key):
    text = f"{app}:{key.group}/{key.kind}:{key.namespace}/{key.name}"
    assert parse_tracking_id(text) == (app, key)


@given(st.text(max_size=40))
def test_tracking_id_parser_never_raises(text):
    parsed = parse_tracking_id(text)
    assert parsed is None or (parsed[0] and parsed[1].kind and parsed[1].name)


methods = st.sampled_from(list(TrackingMethod))
apps_st = st.lists(
    st.builds(
        AppTracking,
        names,
        st.sampled_from(["argocd", "team"]),
        st.sampled_from(["c1", "c2", None]),
        st.frozensets(keys, max_size=3),
        methods,
    ),
    max_size=5,
)


@given(keys, apps_st, st.sampled_from(["c1", "c2"]), st.data())
def test_owners_follow_the_order_of_trust(key, apps, cluster, data):
    """Tree members always win; otherwise every claim is justified by the object's own
    annotation (annotation methods) or label (label method), never both kinds at once."""
    tracked = [a.tracked_name for a in apps] or ["x"]
    annotations = {}
    if data.draw(st.booleans()):
        annotations["argocd.argoproj.io/tracking-id"] = (
            f"{data.draw(st.sampled_from(tracked))}:{key.group}/{key.kind}:"
            f"{key.namespace}/{key.name}"
        )
    labels = {"app.kubernetes.io/instance": data.draw(st.sampled_from(tracked))}
    touched = TouchedObject(cluster, key, labels, annotations)
    owned = owners_of(touched, apps)
    in_tree = [a for a in apps if a.cluster == cluster and key in a.resources]
    bases = {c.basis for c in owned.claims}
    assert len(bases) <= 1
    if in_tree:
        assert list(owned.apps) == in_tree
        return
    for claim in owned.claims:
        assert claim.app.cluster in (None, cluster)
        if claim.basis is Basis.TRACKING_ID:
            assert claim.app.method is not TrackingMethod.LABEL
            assert annotations["argocd.argoproj.io/tracking-id"].startswith(
                claim.app.tracked_name + ":"
            )
        else:
            assert claim.basis is Basis.INSTANCE_LABEL
            assert claim.app.method is TrackingMethod.LABEL
            assert labels["app.kubernetes.io/instance"] == claim.app.tracked_name
    assert owned.reasons


# --- the scheduler ---------------------------------------------------------------------------


def test_first_refresh_goes_at_once_and_a_burst_folds_into_one_trailing_refresh():
    s = RefreshScheduler(debounce=2.0, rate=100, burst=100)
    s.request("a", 0.0)
    assert s.due(0.0) == [("a", RefreshMode.NORMAL)]
    for t in (0.1, 0.5, 1.0):
        s.request("a", t)
        assert s.due(t) == []
    s.request("a", 1.5, RefreshMode.HARD)  # hard wins over the waiting normal one
    assert s.next_at(1.5) == 2.0
    assert s.due(1.99) == []
    assert s.due(2.0) == [("a", RefreshMode.HARD)]
    assert s.next_at(2.0) is None


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.floats(0, 30, allow_nan=False), st.sampled_from("abcde"), st.booleans()),
        max_size=60,
    ),
    st.floats(0.0, 3.0),
    st.floats(0.5, 20.0),
    st.integers(1, 5),
)
def test_scheduler_spacing_and_liveness(requests, debounce, rate, burst):
    """Any requests: an app is never refreshed twice within ``debounce``; no window of w
    seconds holds more than burst + rate*w refreshes; every request is served eventually,
    and not before it was made."""
    s = RefreshScheduler(debounce=debounce, rate=rate, burst=burst)
    sent: list[tuple[float, str]] = []
    now = 0.0
    pending_since: dict[str, float] = {}
    for t, app, hard in sorted(requests):
        while (nxt := s.next_at(now)) is not None and nxt <= t:
            now = nxt
            sent += [(now, a) for a, _ in s.due(now)]
        now = t
        s.request(app, t, RefreshMode.HARD if hard else RefreshMode.NORMAL)
        pending_since.setdefault(app, t)
        sent += [(now, a) for a, _ in s.due(now)]
        for _, a in sent:
            pending_since.pop(a, None)
    for _ in range(1000):
        nxt = s.next_at(now)
        if nxt is None:
            break
        now = max(now, nxt)
        sent += [(now, a) for a, _ in s.due(now)]
    assert s.pending == {}
    served = {a for _, a in sent}
    assert {app for _, app, _ in requests} == served
    by_app: dict[str, list[float]] = {}
    for t, a in sent:
        by_app.setdefault(a, []).append(t)
    for times in by_app.values():
        assert all(b - a >= debounce - 1e-9 for a, b in itertools.pairwise(times))
    times = sorted(t for t, _ in sent)
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= burst + rate * (times[j] - start) + 1e-6


# --- change events ---------------------------------------------------------------------------


def _event(**kw):
    from fleetwarden.core.events import ChangeEvent, EventSource, Operation

    base = {"id": "e1", "source": "flux", "type": "t", "provider": EventSource.FLUX}
    return ChangeEvent(**(base | {"operation": Operation.UPDATE} | kw))


def test_a_pool_event_touches_its_nodepool_and_only_tree_members_claim_it():
    """A node-pool change names the Karpenter NodePool; the app whose tree holds it owns it."""
    (touched,) = touched_by_event(_event(cluster="c1", pool="general"))
    assert touched.key == ResourceKey("karpenter.sh", "NodePool", "", "general")
    pools = AppTracking(
        "pools", cluster="c1", resources=frozenset({touched.key}), method=TrackingMethod.LABEL
    )
    other = AppTracking("other", cluster="c1")
    assert [c.app.name for c in owners_of(touched, [other, pools]).claims] == ["pools"]
    assert touched_by_event(_event(pool="general")) == ()  # no cluster: nothing to match


def test_an_event_object_without_its_group_matches_the_tree_by_kind_and_name():
    """Flux events name their involved object without an API group."""
    detail = {"kind": "HelmRelease", "namespace": "flux-system", "name": "podinfo"}
    (touched,) = touched_by_event(_event(cluster="c1", detail=detail))
    assert not touched.group_known
    tree = frozenset(
        {ResourceKey("helm.toolkit.fluxcd.io", "HelmRelease", "flux-system", "podinfo")}
    )
    app = AppTracking("infra", cluster="c1", resources=tree)
    assert [c.basis for c in owners_of(touched, [app]).claims] == [Basis.TREE]
    # a known kind keeps its group: a Deployment is not an apps-less "Deployment"
    (dep,) = touched_by_event(
        _event(cluster="c1", detail={"kind": "Deployment", "namespace": "s", "name": "w"})
    )
    assert dep.group_known and dep.key.group == "apps"


@settings(max_examples=300)
@given(keys, apps_st, apps_st, st.sampled_from(["c1", "c2"]), st.booleans(), st.data())
def test_the_index_answers_like_a_scan_of_every_app(key, apps, replaced, cluster, known, data):
    """Whatever was filed, replaced and removed, the index's owners equal owners_of over
    every application still filed, claims in the same order."""
    index = OwnershipIndex()
    for app in apps + replaced:  # same names again: replaced in place (order kept)
        index[app.name] = app
    for name in data.draw(st.lists(st.sampled_from([a.name for a in apps] or ["x"]))):
        index.pop(name)
    # often an object some tree holds: the tree step must be exercised too
    key = data.draw(st.sampled_from([key, *(k for a in apps + replaced for k in a.resources)]))
    tracked = [a.tracked_name for a in apps + replaced] or ["x"]
    annotations = {
        "argocd.argoproj.io/tracking-id": f"{data.draw(st.sampled_from(tracked))}:"
        f"{key.group}/{key.kind}:{key.namespace}/{key.name}"
    }
    labels = {"app.kubernetes.io/instance": data.draw(st.sampled_from(tracked))}
    touched = TouchedObject(cluster, key, labels, annotations, group_known=known)
    expected = owners_of(touched, list(index.values()))
    got = index.owners(touched)
    assert [(c.app, c.basis) for c in got.claims] == [(c.app, c.basis) for c in expected.claims]
    assert got.reasons == expected.reasons


def test_a_touched_secret_keeps_only_the_tracking_annotation():
    """last-applied-configuration of a Secret holds its data: it is not carried along."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "db",
            "namespace": "shop",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"pw":"c2VjcmV0"}}',
                "argocd.argoproj.io/tracking-id": "shop:/Secret:shop/db",
            },
        },
        "data": {"pw": "c2VjcmV0"},
    }
    touched = TouchedObject.from_object("c1", secret)
    assert dict(touched.annotations) == {"argocd.argoproj.io/tracking-id": "shop:/Secret:shop/db"}
    assert owners_of(touched, [AppTracking("shop")]).claims[0].basis is Basis.TRACKING_ID


def test_an_application_filed_again_keeps_its_place():
    """Found by the property test above: ``b`` filed, ``a`` filed, ``b`` filed again -- the
    index's candidates (in filing order) and its values must agree, so an object in both
    trees is claimed by ``b`` first either way."""
    key = ResourceKey("", "Deployment", "", "a")
    b = AppTracking("b", cluster="c1", resources=frozenset())
    a = AppTracking("a", cluster="c1", resources=frozenset({key}))
    index = OwnershipIndex()
    index["b"], index["a"] = b, a
    index["b"] = AppTracking("b", cluster="c1", resources=frozenset({key}))
    assert list(index) == ["b", "a"]
    touched = TouchedObject("c1", key, {}, {}, group_known=True)
    got = [c.app.name for c in index.owners(touched).claims]
    assert got == [c.app.name for c in owners_of(touched, list(index.values())).claims]
    assert got == ["b", "a"]
