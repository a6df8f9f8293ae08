"""A remediation on a cluster this replica does not watch (an approval carried out on a
cluster another shard owns, issue #13) goes out over a client opened from the cluster's
endpoint for that one call and closed after it, failing or not; a cluster with no endpoint is
still refused with a message naming it. The real API server path is
tests/e2e/test_serve_shardheal_live.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from fleetwarden.app.borrowing import OneCallRestorer


class Client:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def aclose(self) -> None:
        self.log.append("closed")


class Restorer:
    def __init__(self, client: Client, *, fail: bool) -> None:
        self.client, self.fail = client, fail

    async def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        self.client.log.append(f"patch {node}")
        if self.fail:
            raise RuntimeError("the API server said no")
        return {"node": node}


@pytest.mark.parametrize("fail", [False, True])
async def test_each_call_opens_its_own_client_and_closes_it_after(fail):
    log: list[str] = []
    opened: list[Client] = []

    def open_client() -> Client:
        opened.append(Client(log))
        log.append("opened")
        return opened[-1]

    port = OneCallRestorer(open_client, lambda c: Restorer(c, fail=fail))  # type: ignore[arg-type,return-value]
    for node in ("n-1", "n-2"):
        if fail:
            with pytest.raises(RuntimeError):
                await port.patch_labels(node, {"team": "platform"})
        else:
            assert await port.patch_labels(node, {"team": "platform"}) == {"node": node}
    assert log == ["opened", "patch n-1", "closed", "opened", "patch n-2", "closed"]
    assert len({id(c) for c in opened}) == 2
