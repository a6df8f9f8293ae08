"""One sharding ``Membership`` in its own process, for the sharding tests and benchmark: it
prints each change of its owned set as a JSON line on stdout
(``{"event": "assign", "added": [...], "removed": [...], "t": <unix time>}``), ``ready`` at
start and ``released`` after a SIGTERM::

    python -m tests.support.shard_member KUBECONFIG CONTEXT NAMESPACE GROUP IDENTITY \
        --clusters 100 --lease 4 --deadline 2.5 --retry 0.5

The clusters are named ``cluster-000`` .. ``cluster-NNN``. With ``--watch-context CTX`` the
member also *watches* each cluster it owns the way a watcher replica would use ``on_assign``:
cluster ``cluster-007`` stands for the namespace ``cluster-007`` on that context's API server,
a gained cluster starts ``app.reflecting.reflect`` over its ConfigMaps (a fresh list first, so
changes made while nobody watched are found) and a lost one is cancelled; every ConfigMap
listed or changed is printed (``{"event": "seen", "cluster": ..., "name": ..., "value": ...}``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.kube.lease import KubeLeaseGroup
from fleetwarden.app.reflecting import reflect
from fleetwarden.app.sharding import MEMBERSHIP_LABEL, Membership
from fleetwarden.core.leadership import ElectionTiming
from fleetwarden.ports.kube import Conflict, NotFound

ROOT = Path(__file__).resolve().parents[2]


def cluster_names(n: int) -> list[str]:
    return [f"cluster-{i:03d}" for i in range(n)]


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


async def put_probes(
    api: KubeClient, clusters: list[str], value: str, *, create_namespaces: bool = False
) -> None:
    """Write ``value`` into the ``probe`` ConfigMap of each cluster's namespace (creating the
    namespace first, if asked and missing)."""
    for c in clusters:
        if create_namespaces:
            with contextlib.suppress(Conflict):
                await api.create("/api/v1/namespaces", {"metadata": {"name": c}})
        path = f"/api/v1/namespaces/{c}/configmaps"
        body: dict[str, Any] = {"metadata": {"name": "probe"}, "data": {"v": value}}
        try:
            current = await api.get(f"{path}/probe")
        except NotFound:
            await api.create(path, body)
            continue
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await api.replace(f"{path}/probe", body)


def seen(cluster: str, obj: Mapping[str, Any]) -> None:
    meta, data = obj.get("metadata") or {}, obj.get("data") or {}
    say("seen", cluster=cluster, name=meta.get("name"), value=data.get("v"))


async def watch_cluster(api: KubeClient, cluster: str) -> None:
    """One owned cluster's watch: list (reporting every object), then follow the changes."""
    path = f"/api/v1/namespaces/{cluster}/configmaps"

    async def relist() -> str:
        listed = await api.list(path)
        for item in listed.items:
            seen(cluster, item)
        return listed.resource_version

    async def apply(kind: str, obj: Mapping[str, Any]) -> None:
        seen(cluster, obj)

    await reflect(api, path, relist=relist, apply=apply)


async def main(args: argparse.Namespace) -> None:
    endpoints = load_kubeconfig(Path(args.kubeconfig))
    endpoint = next(e for e in endpoints if e.name == args.context)
    timing = ElectionTiming(args.lease, args.deadline, args.retry)
    watched = next((e for e in endpoints if e.name == args.watch_context), None)
    async with (
        KubeClient(endpoint, timeout=args.deadline) as api,
        KubeClient(watched or endpoint) as watch_api,
        asyncio.TaskGroup() as tg,
    ):
        watches: dict[str, asyncio.Task[None]] = {}

        def on_assign(added: frozenset[str], removed: frozenset[str]) -> None:
            say("assign", added=sorted(added), removed=sorted(removed))
            if watched is None:
                return
            for cluster in removed:
                watches.pop(cluster).cancel()
            for cluster in sorted(added):
                watches[cluster] = tg.create_task(watch_cluster(watch_api, cluster))

        group = KubeLeaseGroup(
            api, namespace=args.namespace, label=MEMBERSHIP_LABEL, value=args.group
        )
        membership = Membership(
            group,
            identity=args.identity,
            clusters=cluster_names(args.clusters),
            timing=timing,
            on_assign=on_assign,
        )
        member = tg.create_task(membership.run())
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, member.cancel)
        say("ready", pid=os.getpid())
        with contextlib.suppress(asyncio.CancelledError):
            await member
        say("released")


def spawn(
    kubeconfig: str,
    context: str,
    namespace: str,
    group: str,
    identity: str,
    *,
    clusters: int,
    lease: int,
    deadline: float,
    retry: float,
    watch_context: str | None = None,
) -> subprocess.Popen[str]:
    """Start one member process (stdout: its JSON lines)."""
    argv = [
        sys.executable,
        "-m",
        "tests.support.shard_member",
        kubeconfig,
        context,
        namespace,
        group,
        identity,
        f"--clusters={clusters}",
        f"--lease={lease}",
        f"--deadline={deadline}",
        f"--retry={retry}",
    ]
    if watch_context:
        argv.append(f"--watch-context={watch_context}")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(
        argv, cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


class MemberProc:
    """A member process, its JSON lines (read by a thread) and the owned set they add up to."""

    def __init__(self, name: str, popen: subprocess.Popen[str]) -> None:
        self.name, self.popen = name, popen
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with contextlib.suppress(ValueError), self._lock:
                self.events.append(json.loads(line))

    def assigns(self, since: float = 0.0) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == "assign" and e["t"] >= since]

    @property
    def owned(self) -> set[str]:
        out: set[str] = set()
        for e in self.assigns():
            out = (out | set(e["added"])) - set(e["removed"])
        return out

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)


def rss_and_cpu(pid: int) -> tuple[int, float]:
    """(resident set size in bytes, user+system CPU seconds) of a live process (Linux /proc)."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    # fields after the ")" that closes the command name: utime and stime are the 12th/13th
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss_kb * 1024, (int(fields[11]) + int(fields[12])) / ticks


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for positional in ("kubeconfig", "context", "namespace", "group", "identity"):
        parser.add_argument(positional)
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--lease", type=int, required=True)
    parser.add_argument("--deadline", type=float, required=True)
    parser.add_argument("--retry", type=float, required=True)
    parser.add_argument("--watch-context")
    asyncio.run(main(parser.parse_args()))
