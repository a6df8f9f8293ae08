"""Where a desired-state tree sits in Git (``files.locate_checkouts``), so that an Argo CD or
Flux path resolves from the repository root in every reader of workload trees (``fleet``,
``gate``, followed applications)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from fleetwarden.adapters import files
from fleetwarden.adapters.workload_files import load_desired_state
from fleetwarden.adapters.workload_sources import app_from_files
from fleetwarden.formats.errors import FormatError

DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}},
}
APP = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Application",
    "metadata": {"name": "web", "namespace": "argocd"},
    "spec": {
        "source": {
            "repoURL": "https://git.example.com/fleet.git",
            "path": "apps/web",
            "kustomize": {"images": ["nginx:1.27"]},
        }
    },
}


@pytest.fixture(autouse=True)
def _no_work_tree_around_tmp(tmp_path):
    for d in (tmp_path, *tmp_path.parents):
        if (d / ".git").exists():
            pytest.skip(f"{d} is in a Git work tree: the unknown-root cases cannot be set up")


def _write(root: Path, tree: dict[str, object]) -> None:
    for name, body in tree.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(body))


def _paths(root: Path) -> list[str]:
    return [str(p) for p in files.iter_tree(root)]


def test_the_work_tree_top_is_found_above_the_directory_read(tmp_path):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"apps/web/d.yaml": DEPLOY})
    given = tmp_path / "apps"
    assert files.locate_checkouts(given, _paths(given)) == {str(given): "apps"}
    assert files.locate_checkouts(tmp_path, _paths(tmp_path)) == {str(tmp_path): ""}


def test_a_file_read_directly_is_located_by_its_directory(tmp_path):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"apps/web/d.yaml": DEPLOY})
    named = tmp_path / "apps" / "web" / "d.yaml"
    assert files.locate_checkouts(named, [str(named)]) == {str(named.parent): "apps/web"}


def test_a_nested_checkout_or_submodule_is_its_own_root(tmp_path):
    """A submodule's ``.git`` is a file; either kind tops a work tree."""
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"a/d.yaml": DEPLOY, "vendor/lib/apps/d.yaml": DEPLOY})
    (tmp_path / "vendor" / "lib" / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    got = files.locate_checkouts(tmp_path, _paths(tmp_path))
    assert got == {str(tmp_path): "", str(tmp_path / "vendor" / "lib"): ""}


def test_no_work_tree_means_no_root(tmp_path):
    _write(tmp_path, {"a/d.yaml": DEPLOY})
    assert files.locate_checkouts(tmp_path, _paths(tmp_path)) == {}


def test_a_relative_tree_is_spelled_as_its_files_are(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"apps/web/d.yaml": DEPLOY})
    monkeypatch.chdir(tmp_path / "apps" / "web")
    assert files.locate_checkouts(Path("."), _paths(Path("."))) == {".": "apps/web"}
    monkeypatch.chdir(tmp_path)
    assert files.locate_checkouts(Path("apps"), _paths(Path("apps"))) == {"apps": "apps"}


def _checkout(tmp_path: Path) -> Path:
    """An Application overriding apps/web's image, and team-b's own apps/web beside it."""
    (tmp_path / ".git").mkdir()
    _write(
        tmp_path,
        {
            "argocd/web.yaml": APP,
            "apps/web/deploy.yaml": DEPLOY,
            "team-b/apps/web/deploy.yaml": {**DEPLOY, "metadata": {"name": "team-b-web"}},
        },
    )
    return tmp_path


def test_fleet_reads_resolve_the_path_from_the_root(tmp_path):
    root = _checkout(tmp_path)
    state = load_desired_state([files.parse_path_arg(str(root))], app_label=None)
    assert [o.key.name for o in state.objects[None]] == ["team-b-web"]
    assert [Path(s.path).relative_to(root).as_posix() for s in state.unreadable] == [
        "apps/web/deploy.yaml"
    ]


def test_the_gate_resolves_the_path_from_the_root(tmp_path):
    root = _checkout(tmp_path)
    with pytest.raises(FormatError) as exc:
        load_desired_state([files.parse_path_arg(str(root))], app_label=None, with_pools=True)
    assert exc.value.path == str(root / "apps" / "web" / "deploy.yaml")
    os.remove(root / "apps" / "web" / "deploy.yaml")
    state = load_desired_state([files.parse_path_arg(str(root))], app_label=None, with_pools=True)
    assert [o.key.name for o in state.objects[None]] == ["team-b-web"]


def test_a_followed_app_read_from_inside_the_path_still_fails_the_load(tmp_path, monkeypatch):
    root = _checkout(tmp_path)
    (root / "apps" / "web" / "app.yaml").write_text(yaml.safe_dump(APP))
    monkeypatch.chdir(root / "apps" / "web")
    with pytest.raises(FormatError) as exc:
        app_from_files("web", [files.parse_path_arg(".")])
    assert exc.value.path == "deploy.yaml" and "Argo CD Application argocd/web" in str(exc.value)
