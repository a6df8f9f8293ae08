"""Rendering a Helm chart with the ``helm`` binary (``helm template``), for the commands that
scan manifests.

``find_helm`` looks on PATH, then in ``~/.cache/fleetwarden/bin`` (where
``scripts/helm-ensure`` builds a pinned release). Nothing is downloaded here, and no chart
repository is contacted: a chart whose dependencies are not vendored under ``charts/`` fails
with helm's own message (run ``helm dependency build`` first). Every failure is a
``FormatError`` naming the chart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from fleetwarden.formats.errors import FormatError

__all__ = ["HELM_CACHE", "find_helm", "render_chart", "require_helm"]

HELM_CACHE = Path("~/.cache/fleetwarden/bin")  # scripts/helm-ensure installs helm there
RENDER_TIMEOUT = 120.0  # seconds; local charts render in well under a second


def find_helm() -> str | None:
    """The ``helm`` to run: on PATH, else the one ``scripts/helm-ensure`` installed."""
    found = shutil.which("helm")
    if found:
        return found
    cached = HELM_CACHE.expanduser() / "helm"
    return str(cached) if os.access(cached, os.X_OK) and cached.is_file() else None


def require_helm() -> str:
    """``find_helm``'s helm; a ``ValueError`` saying how to install one when there is none."""
    found = find_helm()
    if found is None:
        raise ValueError(
            "--helm-chart needs helm, and none was found on PATH or in "
            f"{HELM_CACHE}: install helm (https://helm.sh/docs/intro/install/), "
            "or run scripts/helm-ensure from a fleetwarden checkout"
        )
    return found


def render_chart(
    chart: Path,
    *,
    helm: str,
    kube_version: str | None = None,
    timeout: float = RENDER_TIMEOUT,
) -> str:
    """``helm template`` of a local chart (its default values, CRDs included), as rendered
    for ``kube_version`` (``MAJOR.MINOR``) when given: charts that pick an apiVersion by
    ``.Capabilities.KubeVersion`` render as they would on that version."""
    if not chart.exists():
        raise FormatError(str(chart), "no such file or directory")
    argv = [helm, "template", str(chart), "--include-crds"]
    if kube_version:
        argv += ["--kube-version", f"v{kube_version}.0"]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FormatError(str(chart), f"helm template did not finish in {timeout:.0f} s") from None
    except OSError as exc:
        raise FormatError(str(chart), f"cannot run {helm}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
        raise FormatError(str(chart), f"helm template failed: {said[:2000]}")
    return proc.stdout
