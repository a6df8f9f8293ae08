"""Which files Argo CD or Flux renders with changes: paths resolved from the repository root
(Argo CD's util/app/path.Path, Flux's securejoin), ApplicationSet git directories expanded with
Go's path.Match, and refusals (not compared) wherever the tree does not say."""

from __future__ import annotations

import posixpath
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.formats.desired import SourceFile
from fleetwarden.formats.gitops_renders import gitops_rewrites, go_path_match

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


def test_flux2_kustomize_helm_example_external_artifact_configs_are_refused(realdata):
    """fluxcd/flux2-kustomize-helm-example: infra-configs patches ./configs of the
    ExternalArtifact built from infrastructure/, whose root is not the repository's: resolved
    from the checkout's root, infrastructure/configs was missed."""
    text = (realdata / "flux" / "flux-example-kustomization-infrastructure.yaml").read_bytes()
    files = [
        SourceFile("repo/clusters/production/infrastructure.yaml", text),
        *_files({"repo/infrastructure/configs/issuer.yaml": _DEPLOY}),
        *_files({"repo/infrastructure/controllers/d.yaml": _DEPLOY}),
    ]
    got = gitops_rewrites(files, checkouts={"repo": ""})
    assert list(got) == ["repo/infrastructure/configs/issuer.yaml"]
    reason = got["repo/infrastructure/configs/issuer.yaml"].reason
    assert "Flux Kustomization flux-system/infra-configs" in reason
    assert "ExternalArtifact infrastructure" in reason


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


# --------------------------------------------------------------------------- Go's path.Match

# (pattern, name, path.Match's answer; None: ErrBadPattern), from Go 1.26's path.Match over
# random patterns, and the shapes ApplicationSet directories take
_GO_MATCH = [
    ("apps/*", "apps/web", True),
    ("apps/*", "apps/web/base", False),
    ("apps/**", "apps/web/base", False),  # no globstar: ** is * twice
    ("apps/*", "apps", False),
    ("apps/[^.]*", "apps/.hidden", False),
    ("*/web", "team-b/apps/web", False),
    ("/ab\\", "c^", None),
    ("[", "-...", None),
    ("*[", "]b", None),
    ("*b\\", "^^", None),
    ("[*", "\\", None),
    ("[b[", "ab", None),
    ("[ab][", "[.", None),
    ("?[b", "]", None),
    ("-[\\b", "/ab", None),
    ("\\[[^a][", "[", None),
    ("*/[ab*/", "\\.\\", None),
    ("?[^a]", ".-", True),
    ("[a-c]", "a", True),
    ("/", "/", True),
    ("?", "-", True),
    ("*?", "]b", True),
    ("*?b", "aab", True),
    ("*a[^a]", "ab]a.", True),
    ("[a-c]*/", "ab/", True),
    ("/*", "/-a", True),
    ("[a-c]*", "c^\\b", True),
    ("[^a]", "[", True),
    ("[^a]*/", ".-", False),
    ("][^a]ab", "-b", False),
    ("]*", "/\\", False),
    (".", "a/", False),
    ("?", "^bc.", False),
    ("[^a][^a]", "a", False),
    ("a[^a]", "a", False),
    ("[^a]a]", "-\\", False),
]


@pytest.mark.parametrize(("pattern", "name", "expected"), _GO_MATCH)
def test_directory_patterns_match_as_gos_path_match(pattern, name, expected):
    assert go_path_match(pattern, name) is expected


@given(name=st.text(alphabet="ab/.-", max_size=8), literal=st.text(alphabet="ab/.-", max_size=8))
def test_a_star_never_crosses_a_slash_and_a_literal_matches_only_itself(name, literal):
    assert go_path_match("*", name) is ("/" not in name)
    assert go_path_match(literal, name) is (literal == name)


# --------------------------------------------------------------------------- ApplicationSets


def _app_set(
    generators: list[Any], path: str, *, go: bool = False, **source: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "generators": generators,
        "template": {
            "metadata": {"name": "{{.path.basename}}" if go else "{{path.basename}}"},
            "spec": {
                "project": "default",
                "source": {"repoURL": "https://git.example.com/fleet.git", "path": path, **source},
                "destination": {"server": "https://kubernetes.default.svc"},
            },
        },
    }
    if go:
        spec["goTemplate"] = True
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ApplicationSet",
        "metadata": {"name": "addons", "namespace": "argocd"},
        "spec": spec,
    }


def _git(*directories: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "git": {
            "repoURL": "https://git.example.com/fleet.git",
            "revision": "HEAD",
            "directories": list(directories),
            **extra,
        }
    }


_REPO = {
    "repo/apps/a/d.yaml": _DEPLOY,
    "repo/apps/a/base/d.yaml": _DEPLOY,
    "repo/apps/b/d.yaml": _DEPLOY,
    "repo/apps/legacy/d.yaml": _DEPLOY,
    "repo/team-b/apps/c/d.yaml": _DEPLOY,
    "repo/envs/b/d.yaml": _DEPLOY,
    "repo/other/d.yaml": _DEPLOY,
}


def _rewrites(app_set: dict[str, Any], *, checkouts: dict[str, str] | None = None) -> set[str]:
    tree = {"repo/argocd/addons.yaml": app_set, **_REPO}
    return set(
        gitops_rewrites(_files(tree), checkouts={"repo": ""} if checkouts is None else checkouts)
    )


def test_a_git_directories_generator_renders_each_directory_it_includes():
    """The argo-cd git-generator-directory example with a kustomize override: apps/* but the
    excluded apps/legacy; not apps/a/base (path.Match: no globstar), nor team-b/apps/c."""
    app_set = _app_set(
        [_git({"path": "apps/*"}, {"path": "apps/legacy", "exclude": True})],
        "{{path}}",
        kustomize=_IMAGES,
    )
    tree = {"repo/argocd/addons.yaml": app_set, **_REPO}
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    assert set(got) == {"repo/apps/a/d.yaml", "repo/apps/a/base/d.yaml", "repo/apps/b/d.yaml"}
    reason = got["repo/apps/b/d.yaml"].reason
    assert "Argo CD ApplicationSet argocd/addons" in reason and " as apps/b " in reason
    assert "kustomize.images" in reason


def test_argo_cds_git_directory_example_with_an_override_renders_its_addons(realdata):
    """argo-cd's applicationset git-generator-directory example (goTemplate, {{.path.path}})
    with an image override added to its template."""
    (app_set,) = yaml.safe_load_all(
        (realdata / "argocd" / "argocd-appset-git-directories.yaml").read_text()
    )
    app_set["spec"]["template"]["spec"]["source"]["kustomize"] = _IMAGES
    base = "repo/applicationset/examples/git-generator-directory"
    tree = {
        "repo/appset.yaml": app_set,
        f"{base}/cluster-addons/argo-workflows/d.yaml": _DEPLOY,
        f"{base}/cluster-addons/prometheus-operator/base/d.yaml": _DEPLOY,
        f"{base}/excludes/cluster-addons/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    assert sorted(got) == [
        f"{base}/cluster-addons/argo-workflows/d.yaml",
        f"{base}/cluster-addons/prometheus-operator/base/d.yaml",
    ]


def test_go_template_parameters_render_the_path():
    app_set = _app_set(
        [_git({"path": "apps/*"})],
        "envs/{{ .path.basename }}",
        go=True,
        helm={"valueFiles": ["v.yaml"]},
    )
    assert _rewrites(app_set) == {"repo/envs/b/d.yaml"}


def test_a_path_param_prefix_and_segments_render_the_path():
    app_set = _app_set(
        [_git({"path": "apps/*"}, pathParamPrefix="app")], "envs/{{app.path[1]}}", kustomize=_IMAGES
    )
    assert _rewrites(app_set) == {"repo/envs/b/d.yaml"}


def test_list_elements_render_the_path():
    app_set = _app_set(
        [{"list": {"elements": [{"app": "b"}, {"app": "zzz"}]}}], "apps/{{app}}", kustomize=_IMAGES
    )
    assert _rewrites(app_set) == {"repo/apps/b/d.yaml"}


def test_a_matrix_path_from_its_git_child_resolves_whatever_the_clusters_are():
    matrix = {"matrix": {"generators": [{"clusters": {}}, _git({"path": "apps/b"})]}}
    app_set = _app_set([matrix], "{{path}}", kustomize=_IMAGES)
    assert _rewrites(app_set) == {"repo/apps/b/d.yaml"}


def test_a_path_from_cluster_parameters_is_unresolved_and_refuses_all_it_could_be():
    """The cluster generator's values are Argo CD's: apps/{{name}} could be any directory
    under apps, so none of them is compared as written, and the reason says so."""
    app_set = _app_set([{"clusters": {}}], "apps/{{name}}", kustomize=_IMAGES)
    tree = {"repo/argocd/addons.yaml": app_set, **_REPO}
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    assert set(got) == {p for p in _REPO if p.startswith("repo/apps/")}
    reason = got["repo/apps/a/d.yaml"].reason
    assert "apps/{{name}} is not resolved here" in reason
    assert "spec.generators[0].clusters" in reason


@pytest.mark.parametrize(
    ("generators", "path", "why"),
    [
        ([_git({"path": "apps/*"})], "{{.path.path | lower}}", "more than plain parameters"),
        ([{"git": {"repoURL": "x", "files": [{"path": "c/*.json"}]}}], "{{path}}", "git files"),
        ([{"list": {"elementsYaml": "{{ .x }}"}}], "{{app}}", "list"),
        ([{"plugin": {"configMapRef": {"name": "p"}}}], "{{.x}}", "plugin"),
    ],
)
def test_a_path_not_resolved_refuses_every_directory(generators, path, why):
    app_set = _app_set(generators, path, go="{{." in path, kustomize=_IMAGES)
    tree = {"repo/argocd/addons.yaml": app_set, **_REPO}
    got = gitops_rewrites(_files(tree), checkouts={"repo": ""})
    assert set(got) == set(_REPO)
    assert why in got["repo/other/d.yaml"].reason


def test_a_template_patch_refuses_every_directory():
    app_set = _app_set([_git({"path": "apps/*"})], "{{path}}")
    app_set["spec"]["templatePatch"] = "spec:\n  source:\n    helm:\n      valueFiles: [v.yaml]\n"
    assert _rewrites(app_set) == set(_REPO)


def test_a_template_that_changes_nothing_refuses_nothing():
    app_set = _app_set([{"clusters": {}}], "apps/{{name}}", directory={"recurse": True})
    assert _rewrites(app_set) == set()


def test_a_generators_own_template_source_is_merged_over():
    git = _git({"path": "apps/*"})
    git["git"]["template"] = {"spec": {"source": {"kustomize": _IMAGES}}}
    app_set = _app_set([git, {"list": {"elements": [{"x": "1"}]}}], "{{path}}")
    assert _rewrites(app_set) == {
        "repo/apps/a/d.yaml",
        "repo/apps/a/base/d.yaml",
        "repo/apps/b/d.yaml",
        "repo/apps/legacy/d.yaml",
    }


def test_without_a_known_root_directories_are_matched_from_any_root():
    """No work tree: the root may be repo/team-b too, so team-b/apps/c is apps/c there."""
    app_set = _app_set([_git({"path": "apps/*"})], "{{path}}", kustomize=_IMAGES)
    tree = {"repo/argocd/addons.yaml": app_set, **_REPO}
    got = gitops_rewrites(_files(tree))
    assert set(got) == {p for p in _REPO if "/apps/" in p}
    assert "repository root not known here" in got["repo/team-b/apps/c/d.yaml"].reason


_SEG = st.sampled_from(["a", "b", ".h", "ab"])
_GLOB = st.lists(st.sampled_from(["a", "b", "*", "?", "[ab]", "a*", ".h"]), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    dirs=st.lists(st.lists(_SEG, min_size=1, max_size=3), min_size=1, max_size=6),
    entries=st.lists(st.tuples(_GLOB, st.booleans()), min_size=1, max_size=3),
)
def test_the_directories_generator_refuses_exactly_what_argo_cd_generates(dirs, entries):
    """Property: a file is refused iff it is under a directory of the repository that is not
    its root nor hidden, that an include entry matches (path.Match) and no exclude entry does
    (filterApps)."""
    generator = _git(*({"path": "/".join(g), "exclude": ex} for g, ex in entries))
    tree: dict[str, Any] = {"r/addons.yaml": _app_set([generator], "{{path}}", kustomize=_IMAGES)}
    for i, segments in enumerate(dirs):
        tree[posixpath.join("r", *segments, f"d{i}.yaml")] = _DEPLOY
    got = gitops_rewrites(_files(tree), checkouts={"r": ""})
    generated = set()
    for file in tree:
        parts = posixpath.dirname(file).split("/")[1:]
        for n in range(1, len(parts) + 1):
            directory = "/".join(parts[:n])
            if any(p.startswith(".") for p in parts[:n]):
                continue
            hits = [(go_path_match("/".join(g), directory), ex) for g, ex in entries]
            if any(m for m, ex in hits if not ex) and not any(m for m, ex in hits if ex):
                generated.add(directory)
    expected = {
        f
        for f in tree
        if f != "r/addons.yaml"
        and any(
            posixpath.dirname(f)[2:] == d or posixpath.dirname(f)[2:].startswith(d + "/")
            for d in generated
        )
    }
    assert set(got) == expected


_UNDER_APPS = {"apps", "apps/a", "apps/a/b", "apps/web", "apps/a/web", "apps/a/b/web"}
_DIRS = ["", *sorted(_UNDER_APPS), "apps-x", "a-web", "x/a-web", "z"]


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("apps/{{name}}", _UNDER_APPS),  # an empty value renders apps itself; not apps-x
        ("./apps/{{name}}/web/", {"apps/web", "apps/a/web", "apps/a/b/web"}),
        ("{{name}}-web", {"a-web", "x/a-web"}),  # a value may hold a slash
        ("apps/../{{name}}", set(_DIRS)),
    ],
)
def test_an_unresolved_template_path_refuses_every_directory_it_could_render_to(path, refused):
    tree: dict[str, Any] = {
        "r/.argocd/set.yaml": _app_set([{"clusters": {}}], path, helm={"values": "a: 1"})
    }
    for d in _DIRS:
        tree[posixpath.join("r", d, "d.yaml")] = _DEPLOY
    got = gitops_rewrites(_files(tree), checkouts={"r": ""})
    assert {posixpath.dirname(p)[2:] for p in got} == refused
