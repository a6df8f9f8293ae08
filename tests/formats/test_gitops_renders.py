"""Which files Argo CD or Flux renders with changes: paths resolved from the repository root
(Argo CD's util/app/path.Path, Flux's securejoin), and refusals (not compared) wherever the
tree does not say."""

from __future__ import annotations

import posixpath
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.formats.desired import SourceFile
from fleetwarden.formats.gitops_renders import gitops_rewrites

_DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:1"}]}}},
}
_IMAGES = {"images": ["web=web:2"]}


def _files(tree: dict[str, Any]) -> list[SourceFile]:
    return [SourceFile(path, yaml.safe_dump(body).encode()) for path, body in tree.items()]


def _application(path: str | None, **source: Any) -> dict[str, Any]:
    src: dict[str, Any] = {"repoURL": "https://git.example.com/fleet.git", **source}
    if path is not None:
        src["path"] = path
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {"project": "default", "destination": {"namespace": "web"}, "source": src},
    }


def _flux(path: str | None, *, source: str = "GitRepository", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"sourceRef": {"kind": source, "name": "fleet"}, **spec}
    if path is not None:
        body["path"] = path
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "web", "namespace": "flux-system"},
        "spec": body,
    }


# --------------------------------------------------------------------------- repository root


def test_an_application_path_is_the_directory_at_the_repository_root_not_any_that_ends_so():
    """apps/web at the root is rendered; team-b/apps/web (another team's copy) is compared:
    matched by suffix, it was refused too."""
    tree = {
        "repo/argocd/web.yaml": _application("apps/web", kustomize=_IMAGES),
        "repo/apps/web/d.yaml": _DEPLOY,
        "repo/apps/web/base/d.yaml": _DEPLOY,
        "repo/team-b/apps/web/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    assert sorted(got) == ["repo/apps/web/base/d.yaml", "repo/apps/web/d.yaml"]
    assert "not known" not in got["repo/apps/web/d.yaml"].reason


def test_a_tree_read_from_inside_the_path_is_still_under_it():
    """`-d .` run in apps/web of the checkout: the files' paths hold nothing of apps/web, so
    suffix matching missed them and a stale cluster passed."""
    tree = {"web.yaml": _application("./apps/web/", kustomize=_IMAGES), "d.yaml": _DEPLOY}
    got = gitops_rewrites(_files(tree), checkouts={".": "apps/web"})
    assert list(got) == ["d.yaml"]
    assert "Argo CD Application argocd/web" in got["d.yaml"].reason


def test_the_repository_root_renders_every_directory_of_the_checkout():
    tree = {
        "repo/web.yaml": _application(".", helm={"valuesObject": {"replicas": 3}}),
        "repo/a/d.yaml": _DEPLOY,
        "repo/b/c/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    assert sorted(got) == ["repo/a/d.yaml", "repo/b/c/d.yaml"]


@pytest.mark.parametrize("path", ["/apps/web", "../apps/web", "apps/../../web"])
def test_a_path_argo_cd_refuses_renders_nothing(path):
    """util/app/path.Path: an absolute path, or one leaving the root, is an error; the
    Application renders (and syncs) nothing."""
    tree = {"repo/web.yaml": _application(path, kustomize=_IMAGES), "repo/apps/web/d.yaml": _DEPLOY}
    assert gitops_rewrites(_files(tree), checkouts={"repo": ""}) == {}


def test_a_helm_repository_chart_or_a_values_ref_renders_no_path_of_the_tree():
    app = _application(None, chart="podinfo", helm={"valuesObject": {"a": 1}})
    app["spec"]["sources"] = [{"repoURL": "https://git", "ref": "values"}]
    tree = {"repo/web.yaml": app, "repo/d.yaml": _DEPLOY}
    assert gitops_rewrites(_files(tree), checkouts={"repo": ""}) == {}


def test_a_git_source_without_a_path_renders_the_repository_root():
    tree = {"repo/web.yaml": _application(None, kustomize=_IMAGES), "repo/x/d.yaml": _DEPLOY}
    assert list(gitops_rewrites(_files(tree), checkouts={"repo": ""})) == ["repo/x/d.yaml"]


@pytest.mark.parametrize(
    ("path", "rendered"),
    [
        ("./apps/prod", "apps/prod"),
        ("/apps/prod", "apps/prod"),  # securejoin: inside the artifact
        ("../../apps/prod", "apps/prod"),  # ... and so is what leaves it
        ("apps/x/../prod", "apps/prod"),
        (None, ""),  # no spec.path: the artifact's root
    ],
)
def test_a_flux_path_is_joined_inside_its_git_source(path, rendered):
    tree = {
        "repo/clusters/prod/web.yaml": _flux(path, images=[{"name": "web", "newTag": "2"}]),
        "repo/apps/prod/d.yaml": _DEPLOY,
        "repo/apps/staging/d.yaml": _DEPLOY,
        "repo/team/apps/prod/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    expected = {
        p
        for p in tree
        if p.endswith("/d.yaml") and (not rendered or p.startswith(f"repo/{rendered}/"))
    }
    assert set(got) == expected


def test_a_flux_path_in_an_oci_artifact_is_taken_for_every_directory_ending_so():
    """The root of an OCIRepository's artifact is whatever was pushed: not this checkout's."""
    tree = {
        "repo/clusters/web.yaml": _flux("./prod", source="OCIRepository", postBuild={"a": 1}),
        "repo/deploy/prod/d.yaml": _DEPLOY,
        "repo/prod/d.yaml": _DEPLOY,
        "repo/staging/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    assert sorted(got) == ["repo/deploy/prod/d.yaml", "repo/prod/d.yaml"]
    assert "OCIRepository fleet" in got["repo/prod/d.yaml"].reason


def test_without_a_known_root_every_directory_ending_in_the_path_is_refused_saying_why():
    """No Git work tree around the tree: team-b/apps/web could be the one (the root could be
    team-b), so it is not compared either, and the reason says why."""
    tree = {
        "t/web.yaml": _application("apps/web", kustomize=_IMAGES),
        "t/apps/web/d.yaml": _DEPLOY,
        "t/team-b/apps/web/d.yaml": _DEPLOY,
        "t/apps/other/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree))
    assert sorted(got) == ["t/apps/web/d.yaml", "t/team-b/apps/web/d.yaml"]
    assert "repository root not known here" in got["t/team-b/apps/web/d.yaml"].reason


def test_a_path_is_resolved_in_each_checkout_of_the_tree():
    """Two checkouts side by side (repoURL is not matched to either): both apps/web."""
    tree = {
        "w/a/web.yaml": _application("apps/web", kustomize=_IMAGES),
        "w/a/apps/web/d.yaml": _DEPLOY,
        "w/b/apps/web/d.yaml": _DEPLOY,
        "w/b/x/apps/web/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree), checkouts={"w/a": "", "w/b": ""})
    assert sorted(got) == ["w/a/apps/web/d.yaml", "w/b/apps/web/d.yaml"]


_SEGMENTS = st.sampled_from(["apps", "web", "prod", "team-b", "base"])


@settings(max_examples=200, deadline=None)
@given(
    dirs=st.lists(st.lists(_SEGMENTS, max_size=3), min_size=1, max_size=6),
    target=st.lists(_SEGMENTS, max_size=3),
    spelling=st.sampled_from(["{}", "./{}", "{}/", "./{}/", "{}/."]),
    given_at=st.lists(_SEGMENTS, max_size=2),
)
def test_files_are_refused_exactly_when_under_the_path_from_the_root(
    dirs, target, spelling, given_at
):
    """Property: with the tree read from any directory of the checkout, a file is refused iff
    its directory, relative to the repository root, is the Application's path or below it."""
    top = "/".join(given_at)  # where the tree was read from, inside the work tree
    path = spelling.format("/".join(target)) if target else "."
    tree: dict[str, Any] = {"given/app.yaml": _application(path, kustomize=_IMAGES)}
    for i, segments in enumerate(dirs):
        tree[posixpath.join("given", *segments, f"d{i}.yaml")] = _DEPLOY
    got = gitops_rewrites(_files(tree), checkouts={"given": top})
    want = posixpath.normpath(posixpath.join(*target)) if target else ""
    expected = set()
    for file in tree:
        if file == "given/app.yaml":
            continue
        inside = posixpath.normpath(
            posixpath.join(top, posixpath.dirname(file)[len("given/") :] or ".")
        )
        inside = "" if inside == "." else inside
        if not want or inside == want or inside.startswith(want + "/"):
            expected.add(file)
    assert set(got) == expected
