"""Shared fixtures. The real-data corpus lives beside the checkout in ../shared/realdata.

A user's fresh clone has no ../shared: tests that need it skip with a one-line notice.
CI (``.ci/run`` sets FW_REQUIRE_REALDATA=1) makes its absence a failure instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REALDATA = Path(os.environ.get("FW_REALDATA", ROOT.parent / "shared" / "realdata"))
REQUIRE_REALDATA = os.environ.get("FW_REQUIRE_REALDATA") == "1"


def pytest_report_header(config: pytest.Config) -> str:
    if REALDATA.is_dir():
        return f"realdata: {REALDATA}"
    if REQUIRE_REALDATA:
        return f"realdata: MISSING at {REALDATA} (required: FW_REQUIRE_REALDATA=1)"
    return f"realdata: not found at {REALDATA}; tests that need it are skipped"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REQUIRE_REALDATA and not REALDATA.is_dir():
        raise pytest.UsageError(f"the real-data corpus is required but missing: {REALDATA}")


@pytest.fixture(scope="session")
def realdata() -> Path:
    """The corpus root; skips (or, in CI, fails) when it is absent."""
    if not REALDATA.is_dir():
        if REQUIRE_REALDATA:
            pytest.fail(f"real-data corpus missing: {REALDATA}")
        pytest.skip(f"no real-data corpus at {REALDATA} (only in the project workspace)")
    return REALDATA


def realdata_files(folder: str, *suffixes: str) -> list[Path]:
    """Files of one corpus folder, for parametrising at collection time ([] when absent)."""
    base = REALDATA / folder
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if not suffixes or p.suffix in suffixes)


@pytest.fixture(scope="session", autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """serve's default store lives in a state directory (~/.local/state/fleetwarden): the
    suite, and the serve processes it starts, keep theirs in a temporary one."""
    os.environ["FLEETWARDEN_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
