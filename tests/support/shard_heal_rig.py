"""Three ``fleetwarden serve`` replicas with ``leaderElection`` AND ``sharding`` on the test
env's two real API servers, one audit store, enforce mode: the rig of
tests/e2e/test_serve_shardheal_live.py and benchmarks/shard_heal.py.

Each cluster holds one node per pool (``sh-<cluster>-<pool>``, label ``team: platform``); the
replicas' identities are picked so the two clusters are owned by two different replicas."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.core.sharding import owner_of
from tests.support.serve_process import ServeProcess, free_port

POOLS = ["p0", "p1", "p2", "p3"]


def split_identities(clusters: list[str]) -> list[str]:
    """Three identities under which the first two clusters have two different owners."""
    for n in range(1000):
        ids = [f"heal-{n}-{i}" for i in range(3)]
        if owner_of(clusters[0], ids) != owner_of(clusters[1], ids):
            return ids
    raise AssertionError("no split found")


def node(name: str, pool: str, team: str) -> dict[str, Any]:
    labels = {"eks.amazonaws.com/nodegroup": pool, "team": team}
    labels["node.kubernetes.io/instance-type"] = "m5.large"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


async def relabel(api: KubeClient, names: list[str], team: str) -> None:
    for name in names:
        await api.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"metadata": {"labels": {"team": team}}},
            content_type="application/merge-patch+json",
        )


async def teams(api: KubeClient) -> dict[str, str]:
    listed = await api.list("/api/v1/nodes")
    return {n["metadata"]["name"]: n["metadata"]["labels"].get("team", "") for n in listed.items}


def nodes_of(cluster: str) -> list[str]:
    return [f"sh-{cluster}-{pool}" for pool in POOLS]


async def reset(apis: dict[str, KubeClient]) -> None:
    """Every cluster holds exactly its pools' nodes, none drifted."""
    for cluster, api in apis.items():
        for item in (await api.list("/api/v1/nodes")).items:
            await api.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")
        for name, pool in zip(nodes_of(cluster), POOLS, strict=True):
            await api.request("POST", "/api/v1/nodes", body=node(name, pool, "platform"))


@dataclass
class Rig:
    replicas: list[ServeProcess]
    identities: list[str]

    def who(self, p: ServeProcess) -> str:
        return self.identities[self.replicas.index(p)]

    def by_identity(self, who: str) -> ServeProcess:
        return self.replicas[self.identities.index(who)]

    def start(self, pythonpath: str) -> None:
        for p, who in zip(self.replicas, self.identities, strict=True):
            p.start(env={"POD_NAME": who, "FLEETWARDEN_ONE_PROCESS": "1", "PYTHONPATH": pythonpath})

    def stop(self) -> None:
        for p in self.replicas:
            p.stop()


def rig(
    tmp: Path,
    *,
    kubeconfig: str,
    clusters: list[str],
    store: str,
    lease: int = 4,
    retry: float = 0.5,
    renew: float = 2.5,
    mode: str = "enforce",
    admin: str | None = None,
) -> Rig:
    """Three replicas' configs written under ``tmp`` (not started); ``admin``: the bearer
    token that may approve requests (``mode: approval``)."""
    desired = tmp / "desired.yaml"
    pools = "".join(f"  {p}:\n    minSize: 1\n    labels: {{team: platform}}\n" for p in POOLS)
    desired.write_text(
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n"
        f"pools:\n{pools}clusters:\n" + "".join(f"  {c}: {{}}\n" for c in clusters)
    )
    tag = uuid.uuid4().hex[:8]
    timing = {"leaseSeconds": lease, "renewDeadlineSeconds": renew, "retryPeriodSeconds": retry}
    where = {"context": clusters[0], "namespace": "default"}
    replicas = []
    for i in range(3):
        port = free_port()
        cfg = tmp / f"replica-{i}.yaml"
        config: dict[str, Any] = {
            "listen": f"127.0.0.1:{port}",
            "queuePath": str(tmp / f"q{i}.db"),
            "store": store,
            "desired": [str(desired)],
            "clusters": {"kubeconfig": kubeconfig, "contexts": clusters, "probeIntervalSeconds": 1},
            "debounceSeconds": 0.2,
            "policy": {"mode": mode, "maxActionsPerCluster": 100, "maxActionsFleet": 100},
            **({"auth": {"admin": {"bearerToken": admin}}} if admin else {}),
            "leaderElection": {**where, "name": f"fw-heal-{tag}", **timing},
            "sharding": {**where, "group": f"fw-heal-{tag}", **timing},
        }
        cfg.write_text(json.dumps(config))
        replicas.append(ServeProcess(cfg, port))
    return Rig(replicas, split_identities(clusters))


def owners(p: ServeProcess) -> dict[str, str | None] | None:
    """``/api/clusters``: each cluster's owner in ``p``'s view (None if it does not answer)."""
    try:
        r = httpx.get(f"{p.base}/api/clusters", timeout=2.0)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    return {row["cluster"]: row.get("owner") for row in r.json()}


def agreed(r: Rig, live: list[ServeProcess], clusters: list[str]) -> dict[str, Any] | None:
    """Every live replica names the same live owner for every cluster (else None)."""
    views = [owners(p) for p in live]
    first = views[0]
    if first is None or any(v != first for v in views):
        return None
    alive = {r.who(p) for p in live}
    if any(first.get(c) not in alive for c in clusters):
        return None
    return first
