"""On an upgrade event, the cluster's desired manifests are scanned at the new version."""

from __future__ import annotations

import asyncio
import shutil

from fleetwarden.adapters.files import list_manifests, read_manifest
from fleetwarden.app.deprecating import upgrade_hook
from fleetwarden.core.lifecycle import LifecycleType


def test_upgrade_to_1_25_reports_the_removed_apis_of_that_cluster(realdata, tmp_path):
    src = realdata / "deprecations"
    for name in (
        "kubent-fixture-podsecuritypolicy-v1beta1.yaml",
        "kubent-fixture-autoscaler-v2beta2.yaml",
    ):
        shutil.copy(src / name, tmp_path / name)
    other = tmp_path.parent / (tmp_path.name + "-other")
    other.mkdir()
    shutil.copy(src / "kubent-fixture-ingress-v1beta1.yaml", other)
    events = []
    hook = upgrade_hook(
        [("prod", tmp_path), ("dev", other)],
        events.append,
        list_files=list_manifests,
        read=read_manifest,
    )
    asyncio.run(hook("prod", "v1.25.3"))
    (ev,) = events
    assert ev.type is LifecycleType.DEPRECATIONS and ev.cluster == "prod"
    found = {(f["kind"], f["apiVersion"], f["removed"]) for f in ev.details["findings"]}
    assert found == {
        ("PodSecurityPolicy", "policy/v1beta1", True),
        ("HorizontalPodAutoscaler", "autoscaling/v2beta2", False),
    }
    assert ev.to_json()["target"] == "1.25"
    asyncio.run(hook("staging", "v1.30.0"))  # no manifests for that cluster: nothing to say
    assert len(events) == 1


def test_no_manifests_means_no_hook():
    assert upgrade_hook([], print, list_files=list_manifests, read=read_manifest) is None
