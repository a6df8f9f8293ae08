"""A followed application's desired files (``serve`` / ``watch --follow``): a file that is
not desired state as written fails the load, so the app keeps its last good state and says
why, instead of being compared without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleetwarden.adapters import files
from fleetwarden.adapters.workload_sources import app_from_files
from fleetwarden.formats.errors import FormatError

DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}},
}


def _tree(tmp_path: Path, extra: dict[str, str]) -> Path:
    (tmp_path / "deploy.yaml").write_text(yaml.safe_dump(DEPLOY))
    for name, text in extra.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_rendered_tree_loads(tmp_path):
    app, _ = app_from_files("web", [files.parse_path_arg(str(_tree(tmp_path, {})))])
    assert [o.key.name for objs in app.objects.values() for o in objs] == ["web"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            {
                "kustomization.yaml": "resources: [deploy.yaml]\n"
                "images: [{name: nginx, newTag: '1.27'}]\n"
            },
            "rewritten by",
        ),
        (
            {"t.yaml": "kind: Deployment\nmetadata:\n  name: {{ .Values.x }}\n  a: {{ .b }}\n"},
            "Helm",
        ),
    ],
)
def test_a_file_that_is_not_desired_state_as_written_fails_the_load(tmp_path, extra, said):
    with pytest.raises(FormatError) as exc:
        app_from_files("web", [files.parse_path_arg(str(_tree(tmp_path, extra)))])
    assert said in str(exc.value)
