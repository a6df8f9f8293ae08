"""Orphaned applications when a cluster is removed: what the event names, when findings open
and clear (``core.orphans``), and the probe-failure path to removal (``core.lifecycle``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.applications import (
    Application,
    ApplicationSet,
    AppProject,
    AppSetRef,
    ClusterRef,
    Destination,
    GeneratorTarget,
)
from fleetwarden.core.findings import Layer, Severity
from fleetwarden.core.lifecycle import HealthTracker, LifecycleType, ProbeResult
from fleetwarden.core.orphans import OrphanBook, orphan_findings, orphans_of
from fleetwarden.core.tracking import FindingEventType

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
EU = ClusterRef("prod-eu", "https://eu.example:6443", (("env", "prod"),))
US = ClusterRef("prod-us", "https://us.example:6443")
SET = AppSetRef("argocd", "guestbook", "uid-1")


def app(name: str, dest: Destination, *, app_set: AppSetRef | None = SET) -> Application:
    return Application("argocd", name, "team", dest, "Synced", "Healthy", app_set)


APPS = [
    app("eu-by-server", Destination(server="https://eu.example:6443/", namespace="gb")),
    app("eu-by-name", Destination(name="prod-eu", namespace="gb"), app_set=None),
    app("us-by-server", Destination(server="https://us.example:6443")),
    app("us-by-name", Destination(name="prod-us")),
]


def test_orphans_are_the_apps_targeting_the_cluster_by_url_or_by_name():
    orphans = orphans_of(EU, APPS)
    assert [a.name for a in orphans.apps] == ["eu-by-name", "eu-by-server"]
    assert orphans.to_json()["orphanedApps"] == ["eu-by-name", "eu-by-server"]  # the contract
    assert orphans.to_json()["orphanedAppDetails"] == [
        {"name": "eu-by-name", "namespace": "argocd", "project": "team"},
        {"name": "eu-by-server", "namespace": "argocd", "project": "team", "appSet": "guestbook"},
    ]


def test_appsets_come_from_owner_references_and_generators_projects_from_exact_entries():
    list_set = ApplicationSet(
        "argocd", "by-list", targets=(GeneratorTarget("list", server="https://eu.example:6443"),)
    )
    label_set = ApplicationSet(
        "argocd",
        "by-label",
        targets=(GeneratorTarget("clusters", match_labels=(("env", "prod"),)),),
    )
    other_set = ApplicationSet(
        "argocd", "other", targets=(GeneratorTarget("list", name="prod-us"),)
    )
    projects = [
        AppProject("argocd", "team", (Destination(name="prod-eu", namespace="*"),)),
        AppProject("argocd", "everything", (Destination(server="*", name="*"),)),
        AppProject("argocd", "us", (Destination(server="https://us.example:6443"),)),
    ]
    orphans = orphans_of(EU, APPS, [list_set, label_set, other_set], projects)
    body = orphans.to_json()
    assert body["appSets"] == [
        {"name": "by-label", "namespace": "argocd", "via": ["clusters"]},
        {"name": "by-list", "namespace": "argocd", "via": ["list"]},
        {"name": "guestbook", "namespace": "argocd", "via": ["ownerReference"]},
    ]
    assert body["projects"] == [{"name": "team", "namespace": "argocd"}]
    assert body["server"] == "https://eu.example:6443"


def test_a_finding_per_orphan_opens_on_removal_and_clears_on_delete_and_retarget():
    book = OrphanBook()
    orphans, opened = book.remove(EU, APPS, now=NOW)
    assert [a.name for a in orphans.apps] == ["eu-by-name", "eu-by-server"]
    assert orphans.to_json()["orphanedApps"] == ["eu-by-name", "eu-by-server"]  # the contract
    assert {e.type for e in opened} == {FindingEventType.APPEARED}
    findings = {e.finding.extra["application"]["name"]: e.finding for e in opened}
    assert set(findings) == {"eu-by-name", "eu-by-server"}
    f = findings["eu-by-name"]
    assert (f.layer, f.severity, f.cluster, f.field) == (
        Layer.LIFECYCLE,
        Severity.HIGH,
        "prod-eu",
        "destination.name",
    )
    assert f.to_json()["subject"] == {"kind": "app", "cluster": "prod-eu", "name": "eu-by-name"}

    # nothing changed: nothing reported again
    assert book.update(APPS, now=NOW) == []
    # one deleted, one re-targeted to the cluster that remains
    retargeted = app("eu-by-server", Destination(server="https://us.example:6443"))
    later = NOW + timedelta(minutes=1)
    events = book.update([retargeted, *APPS[2:]], now=later)
    assert sorted((e.type, e.finding.extra["application"]["name"]) for e in events) == [
        (FindingEventType.CLEARED, "eu-by-name"),
        (FindingEventType.CLEARED, "eu-by-server"),
    ]
    assert book.tracker.current() == []


def test_an_app_pointed_at_a_removed_cluster_later_is_an_orphan_too_and_restoring_clears():
    book = OrphanBook()
    book.remove(EU, [], now=NOW)
    events = book.update(APPS[:1], now=NOW)
    assert [e.type for e in events] == [FindingEventType.APPEARED]
    cleared = book.restored("prod-eu", now=NOW)
    assert [e.type for e in cleared] == [FindingEventType.CLEARED]
    assert book.update(APPS, now=NOW) == []  # no longer removed: no findings


def test_probes_failing_gone_after_times_declare_the_cluster_removed_once():
    tracker = HealthTracker("prod-eu", failure_threshold=3, gone_after=5)
    removed = []
    for i in range(7):
        for event in tracker.observe(ProbeResult(ready=None, error="refused"), now=NOW):
            if event.type is LifecycleType.REMOVED:
                removed.append((i + 1, event.details))
    assert removed == [(5, {"reason": "no answer to 5 probes in a row", "declaredGone": True})]
    tracker.observe(ProbeResult(ready=True), now=NOW)  # back: a later outage counts afresh
    events = [tracker.observe(ProbeResult(ready=None), now=NOW) for _ in range(5)]
    assert sum(e.type is LifecycleType.REMOVED for batch in events for e in batch) == 1


def test_without_gone_after_probes_never_remove_a_cluster():
    tracker = HealthTracker("prod-eu")
    events = [e for _ in range(20) for e in tracker.observe(ProbeResult(ready=None), now=NOW)]
    assert LifecycleType.REMOVED not in {e.type for e in events}


# --- properties ---------------------------------------------------------------------------

names = st.sampled_from(["prod-eu", "prod-us", "dev", "in-cluster"])
servers = st.sampled_from(
    ["https://eu.example:6443", "https://eu.example:6443/", "https://us.example:6443", "https://d"]
)
destinations = st.one_of(
    st.builds(Destination, server=servers, namespace=st.none() | st.just("ns")),
    st.builds(Destination, name=names),
    st.builds(Destination),
)
applications = st.lists(
    st.builds(
        Application,
        namespace=st.sampled_from(["argocd", "team-a"]),
        name=st.sampled_from(["a", "b", "c", "d", "e"]),
        project=st.just("p"),
        destination=destinations,
        app_set=st.none() | st.builds(AppSetRef, st.just("argocd"), st.sampled_from(["s1", "s2"])),
    ),
    max_size=12,
    unique_by=lambda a: a.key,
)
clusters = st.builds(ClusterRef, name=names, server=servers)


@given(cluster=clusters, apps=applications)
def test_orphans_are_exactly_the_apps_whose_destination_names_the_cluster(cluster, apps):
    orphaned = {a.key for a in orphans_of(cluster, apps).apps}
    expected = {
        a.key
        for a in apps
        if (a.destination.server or "").rstrip("/") == cluster.server.rstrip("/")
        or a.destination.name == cluster.name
    }
    assert orphaned == expected
    assert {(f.pool or "").split("/", 1)[1] for f in orphan_findings(cluster, apps)} == {
        f"{ns}/{n}" for ns, n in expected
    }


@given(cluster=clusters, apps=applications)
def test_every_orphan_appset_owns_an_orphan_and_every_owner_is_named(cluster, apps):
    orphans = orphans_of(cluster, apps)
    owners = {(a.app_set.namespace, a.app_set.name) for a in orphans.apps if a.app_set}
    assert {(s.namespace, s.name) for s in orphans.app_sets} == owners


@given(cluster=clusters, before=applications, after=applications)
def test_findings_follow_the_inventory_whatever_the_path(cluster, before, after):
    """Any sequence of inventories ends with exactly the findings of the last one, and every
    event is a real transition (no clear of what was not open, no open of what is open)."""
    book = OrphanBook()
    _, opened = book.remove(cluster, before, now=NOW)
    open_ids = {e.finding.id for e in opened}
    for event in book.update(after, now=NOW):
        if event.type is FindingEventType.CLEARED:
            assert event.finding.id in open_ids
            open_ids.discard(event.finding.id)
        else:
            assert event.type is FindingEventType.APPEARED
            assert event.finding.id not in open_ids
            open_ids.add(event.finding.id)
    assert open_ids == {f.id for f in orphan_findings(cluster, after)}
    assert book.update(after, now=NOW) == []  # idempotent
