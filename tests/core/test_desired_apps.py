"""DesiredApps (which apps a change concerns, shared indexes) and last_writer."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import (
    AppDesired,
    DesiredApps,
    Writer,
    last_writer,
    merge_aliases,
    merge_apps,
    merge_objects,
    overlay_index,
)


def obj(kind: str, name: str, *, app: str | None = None, ns: str | None = None) -> Any:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    if app:
        meta["labels"] = {wl.INSTANCE_LABEL: app}
    body = {"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"k": name}}
    wrapped = wl.ObjectIndex.wrap(body, source="git")
    assert wrapped is not None
    return wrapped


def test_clusters_without_an_overlay_share_one_index_and_overlays_replace_objects():
    base = [obj("ConfigMap", "a"), obj("ConfigMap", "b")]
    over = [obj("ConfigMap", "b"), obj("ConfigMap", "c")]
    app = AppDesired("shop", {None: base, "eu": over})
    assert app.index_for("us") is app.index_for("ap")  # models built once for the fleet
    assert app.index_for("eu") is not app.index_for("us")
    assert sorted(k.name for k in app.index_for("eu").objects) == ["a", "b", "c"]
    assert sorted(k.name for k in app.index_for("us").objects) == ["a", "b"]
    assert len(app) == 4


def test_objects_of_another_application_are_left_to_it():
    app = AppDesired("shop", {None: [obj("ConfigMap", "a"), obj("ConfigMap", "x", app="billing")]})
    assert [k.name for k in app.index_for("c").objects] == ["a"]


def test_a_change_concerns_its_apps_and_the_apps_that_hold_its_name():
    apps = DesiredApps(
        [
            AppDesired("shop", {None: [obj("ConfigMap", "shared"), obj("ConfigMap", "cart")]}),
            AppDesired("billing", {None: [obj("ConfigMap", "shared")]}),
        ]
    )
    key = wl.ObjectKey("ConfigMap", "prod", "shared")
    assert apps.concerned(key) == {"shop", "billing"}
    assert apps.concerned(wl.ObjectKey("ConfigMap", "prod", "cart")) == {"shop"}
    # labelled for a followed app (before or after the change), unknown apps ignored
    other = wl.ObjectKey("ConfigMap", "prod", "other")
    assert apps.concerned(other, "billing", "ghost", None) == {"billing"}
    assert apps.concerned(other) == set()
    assert not DesiredApps() and apps


def entry(manager: str, time: str | None, *, sub: str | None = None, op: str = "Update") -> Any:
    e: dict[str, Any] = {"manager": manager, "operation": op, "fieldsType": "FieldsV1"}
    if time is not None:
        e["time"] = time
    if sub:
        e["subresource"] = sub
    return e


def test_last_writer_is_the_latest_spec_write():
    managed = [
        entry("argocd-controller", "2026-11-29T10:00:00Z", op="Apply"),
        entry("kube-controller-manager", "2026-11-29T12:00:00Z", sub="status"),
        entry("kubectl-set", "2026-11-29T11:00:00Z"),
    ]
    writer = last_writer({"metadata": {"managedFields": managed}})
    assert writer == Writer("kubectl-set", "Update", "2026-11-29T11:00:00Z")
    assert writer.to_json()["manager"] == "kubectl-set"
    assert last_writer({"metadata": {}}) is None
    assert last_writer({"metadata": {"managedFields": "junk"}}) is None
    assert last_writer({"metadata": {"managedFields": [None, {"manager": 3}]}}) is None


_times = st.one_of(
    st.none(),
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")),
)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "kubectl-edit", ""]),
            _times,
            st.sampled_from([None, "status", "scale"]),
        ),
        max_size=8,
    )
)
def test_last_writer_never_picks_a_subresource_or_an_older_write(entries):
    managed = [entry(m, t, sub=s) for m, t, s in entries]
    writer = last_writer({"metadata": {"managedFields": managed}})
    candidates = [(t or "", m) for m, t, s in entries if not s and m]
    if not candidates:
        assert writer is None
        return
    assert writer is not None
    assert (writer.time or "") == max(t for t, _ in candidates)
    assert writer.manager in {m for t, m in candidates if t == (writer.time or "")}


def test_an_alias_makes_another_applications_objects_the_apps_in_one_cluster():
    """An ApplicationSet deploys `shop` to prod-eu-1 as the Argo CD application
    `shop-prod-eu-1`: there, objects tracked as that one are shop's (pairing and extras)."""
    git = wl.ObjectIndex([obj("ConfigMap", "cart", ns="shop")])
    live = wl.ObjectIndex(
        [
            obj("ConfigMap", "cart", app="shop-prod-eu-1", ns="shop"),
            obj("ConfigMap", "debug", app="shop-prod-eu-1", ns="shop"),  # not in Git
        ]
    )
    without = wl.diff_app("prod-eu-1", "shop", git, live)
    assert [f.field for f in without.findings] == []  # the extra object goes unseen
    live.set_aliases("shop", ["shop-prod-eu-1"])
    with_alias = wl.diff_app("prod-eu-1", "shop", git, live)
    assert [(f.field, f.expected) for f in with_alias.findings] == [("config.debug", None)]
    live.set_aliases("shop", [])
    assert live.app_keys("shop") == set()

    apps = DesiredApps([AppDesired("shop", {None: []}, aliases={"prod-eu-1": ("shop-prod-eu-1",)})])
    assert apps.concerned(wl.ObjectKey("ConfigMap", "shop", "x"), "shop-prod-eu-1") == {"shop"}


def test_parts_merge_per_cluster_in_order_with_their_aliases_and_sources():
    files = AppDesired("shop", {None: [obj("ConfigMap", "a")]}, sources=("git/",))
    argo = AppDesired(
        "shop",
        {None: [obj("ConfigMap", "b")], "eu": [obj("ConfigMap", "c")]},
        sources=("argocd:shop", "argocd:shop-eu"),
        aliases={"eu": ("shop-eu",)},
    )
    more = AppDesired("shop", {"eu": [obj("ConfigMap", "d")]}, aliases={"eu": ("shop-eu-2",)})
    merged = merge_apps("shop", [files, argo, more])
    assert [o.key.name for o in merged.objects[None]] == ["a", "b"]
    assert [o.key.name for o in merged.objects["eu"]] == ["c", "d"]
    assert merged.aliases == {"eu": ("shop-eu", "shop-eu-2")}
    assert merged.sources == ("git/", "argocd:shop", "argocd:shop-eu")
    assert merge_apps("shop", []).objects == {}


def test_an_overlay_index_replaces_same_keyed_objects_and_leaves_the_parts_alone():
    base = [obj("ConfigMap", "a"), obj("ConfigMap", "b")]
    changed = obj("ConfigMap", "b", ns=None)
    objects = merge_objects([{None: base}, {"eu": [changed, obj("ConfigMap", "c")]}])
    eu = overlay_index(objects, "eu")
    assert sorted(k.name for k in eu.objects) == ["a", "b", "c"]
    assert eu.objects[changed.key] is changed
    assert sorted(k.name for k in overlay_index(objects, None).objects) == ["a", "b"]
    assert sorted(k.name for k in overlay_index(objects, "us").objects) == ["a", "b"]
    assert [o.key.name for o in objects[None]] == ["a", "b"]  # no part was changed
    assert merge_aliases([{"eu": ("x",)}, {"eu": ("y",), "us": ("z",)}]) == {
        "eu": ("x", "y"),
        "us": ("z",),
    }
