"""One ``Elector`` in its own process, for the leader-election tests: it prints each change
as a JSON line on stdout (``{"event": "started", "token": 3, "t": <unix time>}``,
``{"event": "stopped", "reason": ..., "t": ...}``, ``{"event": "released", ...}`` after a
SIGTERM). ``--server`` sends its requests elsewhere (a proxy the test can cut)::

    python -m tests.support.lease_elector KUBECONFIG CONTEXT NAMESPACE NAME IDENTITY \
        --lease 4 --deadline 2.5 --retry 0.5 [--server https://127.0.0.1:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.kube.lease import KubeLeaseStore
from fleetwarden.app.electing import Elector
from fleetwarden.core.leadership import ElectionTiming

ROOT = Path(__file__).resolve().parents[2]


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


async def main(args: argparse.Namespace) -> None:
    endpoint = load_kubeconfig(Path(args.kubeconfig), contexts=[args.context])[0]
    if args.server:
        endpoint = dataclasses.replace(endpoint, server=args.server)
    timing = ElectionTiming(args.lease, args.deadline, args.retry)
    async with KubeClient(endpoint, timeout=args.deadline) as api:
        elector = Elector(
            KubeLeaseStore(api, namespace=args.namespace, name=args.name),
            identity=args.identity,
            timing=timing,
            on_started_leading=lambda token: say("started", token=token),
            on_stopped_leading=lambda reason: say("stopped", reason=reason),
        )
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        say("ready", pid=os.getpid())
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.TaskGroup() as tg:
                tg.create_task(elector.run())
        say("released")


def spawn(
    kubeconfig: str,
    context: str,
    namespace: str,
    name: str,
    identity: str,
    *,
    lease: int,
    deadline: float,
    retry: float,
    server: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start one elector process (stdout: its JSON lines)."""
    argv = [
        sys.executable,
        "-m",
        "tests.support.lease_elector",
        kubeconfig,
        context,
        namespace,
        name,
        identity,
        f"--lease={lease}",
        f"--deadline={deadline}",
        f"--retry={retry}",
    ]
    if server:
        argv.append(f"--server={server}")
    environ = {**os.environ, **(env or {})}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return subprocess.Popen(
        argv, cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for positional in ("kubeconfig", "context", "namespace", "name", "identity"):
        parser.add_argument(positional)
    parser.add_argument("--lease", type=int, required=True)
    parser.add_argument("--deadline", type=float, required=True)
    parser.add_argument("--retry", type=float, required=True)
    parser.add_argument("--server")
    asyncio.run(main(parser.parse_args()))
