"""Real services for end-to-end tests, started by the project's own scripts, stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import k8s_env


@pytest.fixture(scope="session")
def k8s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two throw-away clusters (etcd + kube-apiserver on 127.0.0.1) for the whole session."""
    state_dir = tmp_path_factory.mktemp("k8s")
    k8s_env.start_clusters(2, state_dir)
    try:
        state = k8s_env.load_state(state_dir)
        state["state_dir"] = Path(state_dir)
        yield state
    finally:
        k8s_env.stop_clusters(state_dir)
