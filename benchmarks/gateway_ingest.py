"""Figures for issue 4: the event gateway under load from a separate process on loopback.

    .venv/bin/python benchmarks/gateway_ingest.py [--seconds 15]

1. Single events: `wrk` (C, its own process; installed from Debian if missing) POSTs unique
   EventBridge CloudTrail events to /events/aws, 64 connections; throughput and latency as wrk
   reports them. Every 202 means the event was durably queued. Run against the SQLite queue
   (workers on and, separately, paused) and the NATS JetStream queue.
2. CloudEvents batch mode: 100 events per request to /events/cloudevents; events/s.
3. Event-to-finding latency inside the service at 1,000 events/s: a paced producer process
   spreads events over 2,500 pools (so each is a leading-edge inspection, not coalesced);
   p50/p99 from the service's own histogram `fleetwarden_event_to_finding_seconds`.
4. `kill -9` of the service in the middle of a full-speed load, restart, drain: acknowledged
   events lost and events processed twice, counted from the 202s and the service's event log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "fleetwarden")
TOKEN = "bench-token"
REALDATA = ROOT.parent / "shared" / "realdata"

WRK_SINGLE = r"""
local tpl = [[{"version":"0","id":"ID","detail-type":"AWS API Call via CloudTrail","source":"aws.eks","account":"123456789012","time":"2026-11-29T10:00:00Z","region":"eu-west-1","resources":[],"detail":{"eventVersion":"1.08","userIdentity":{"type":"IAMUser","arn":"arn:aws:iam::123456789012:user/alice"},"eventTime":"2026-11-29T10:00:00Z","eventSource":"eks.amazonaws.com","eventName":"UpdateNodegroupConfig","awsRegion":"eu-west-1","requestParameters":{"name":"c000","nodegroupName":"p000","scalingConfig":{"desiredSize":3}},"eventID":"e"}}]]
local n = 0
-- `tid` must stay a global: setup() sets it in each thread's own Lua state
local threads = 0
setup = function(thread) thread:set("tid", threads); threads = threads + 1 end
request = function()
  n = n + 1
  local body = string.gsub(tpl, "ID", tid .. "-" .. n .. "-" .. math.random(1, 1e9))
  return wrk.format("POST", "/events/aws", {["Content-Type"]="application/json",
    ["Authorization"]="Bearer TOKEN"}, body)
end
""".replace("TOKEN", TOKEN)

WRK_BATCH = r"""
local n = 0
-- `tid` must stay a global: setup() sets it in each thread's own Lua state
local threads = 0
setup = function(thread) thread:set("tid", threads); threads = threads + 1 end
request = function()
  n = n + 1
  local parts = {}
  for i = 1, 100 do
    parts[i] = '{"specversion":"1.0","id":"' .. tid .. '-' .. n .. '-' .. i .. '-' ..
      math.random(1, 1e9) .. '","source":"//bench/ci","type":"io.fleetwarden.bench.scaled",' ..
      '"time":"2026-11-29T10:00:00Z","cluster":"c000","nodepool":"p000","actor":"ci",' ..
      '"datacontenttype":"application/json","data":{"desired":3}}'
  end
  return wrk.format("POST", "/events/cloudevents", {
    ["Content-Type"]="application/cloudevents-batch+json",
    ["Authorization"]="Bearer TOKEN"}, "[" .. table.concat(parts, ",") .. "]")
end
""".replace("TOKEN", TOKEN)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "wrk"],
        check=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    return shutil.which("wrk") or "wrk"


def write_fleet(work: Path, clusters: int, pools: int, nodes_per_pool: int) -> None:
    lines = ["apiVersion: fleetwarden.io/v1alpha1", "kind: NodePools", "pools:"]
    for p in range(pools):
        lines += [
            f"  p{p:03d}:",
            "    instanceTypes: [m5.large]",
            "    minSize: 1",
            "    maxSize: 100",
            f"    labels: {{pool-id: p{p:03d}}}",
        ]
    lines.append("clusters:")
    lines += [f"  c{c:03d}: {{}}" for c in range(clusters)]
    (work / "desired.yaml").write_text("\n".join(lines) + "\n")
    (work / "nodes").mkdir(exist_ok=True)
    for c in range(clusters):
        items = []
        for p in range(pools):
            for k in range(nodes_per_pool):
                name = f"n-{c}-{p}-{k}"
                items.append(
                    {
                        "kind": "Node",
                        "metadata": {
                            "name": name,
                            "labels": {
                                "eks.amazonaws.com/nodegroup": f"p{p:03d}",
                                "pool-id": f"p{p:03d}",
                                "node.kubernetes.io/instance-type": "m5.large",
                            },
                        },
                        "status": {
                            "allocatable": {"cpu": "1930m", "memory": "7220184Ki", "pods": "29"},
                            "nodeInfo": {"kubeletVersion": "v1.30.4"},
                        },
                    }
                )
        (work / "nodes" / f"c{c:03d}.json").write_text(json.dumps({"kind": "List", "items": items}))


class Svc:
    def __init__(self, work: Path, queue: str, *, debounce: float = 2.0) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.work = work
        self.journal = work / "events.jsonl"
        self.cfg = work / f"svc-{self.port}.yaml"
        self.cfg.write_text(
            json.dumps(
                {
                    "listen": f"127.0.0.1:{self.port}",
                    "queue": queue,
                    "queuePath": str(work / "queue.db"),
                    "store": f"sqlite:///{work / 'audit.db'}",
                    "eventLog": str(self.journal),
                    "desired": [str(work / "desired.yaml")],
                    "nodes": [str(work / "nodes")],
                    "auth": {s: {"bearerToken": TOKEN} for s in ("aws", "cloudevents")},
                    "limits": {"queueDepth": 50_000_000},
                    "debounceSeconds": debounce,
                }
            )
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [EXE, "serve", "-c", str(self.cfg)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/healthz", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise SystemExit("service did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)

    def kill9(self) -> None:
        assert self.proc
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def metric(self, name: str) -> str:
        return httpx.get(f"{self.base}/metrics", timeout=5).text


def wrk(binary: str, url: str, script: str, seconds: float, conns: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(script)
    out = subprocess.run(
        [binary, "-t2", f"-c{conns}", f"-d{int(seconds)}s", "--latency", "-s", fh.name, url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    os.unlink(fh.name)

    def ms(label: str) -> float:
        m = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out)
        if not m:
            return float("nan")
        v = float(m.group(1))
        return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "requests_per_s": rps,
        "p50_ms": ms("50%"),
        "p99_ms": ms("99%"),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
    }


def histogram_quantiles(text: str, name: str) -> dict:
    buckets = []
    for line in text.splitlines():
        m = re.match(rf'{name}_bucket{{le="([^"]+)"}} ([\d.e+]+)', line)
        if m:
            buckets.append((float(m.group(1)), float(m.group(2))))
    total = buckets[-1][1] if buckets else 0

    def q(p: float) -> float | None:
        for le, count in buckets:
            if total and count >= p * total:
                return le * 1000
        return None

    return {"count": total, "p50_le_ms": q(0.5), "p99_le_ms": q(0.99)}


WRK_PACED = r"""
local n = 0
-- `tid` must stay a global: setup() sets it in each thread's own Lua state
local threads = 0
setup = function(thread) thread:set("tid", threads); threads = threads + 1 end
delay = function() return DELAY end
request = function()
  n = n + 1
  local i = n * 2 + tid  -- 2 threads interleaved: one round-robin over all pools
  local body = '{"specversion":"1.0","id":"paced-' .. i .. '","source":"//bench/paced",' ..
    '"type":"io.fleetwarden.bench.scaled","cluster":"c' .. string.format("%03d", i % CLUSTERS) ..
    '","nodepool":"p' .. string.format("%03d", math.floor(i / CLUSTERS) % POOLS) ..
    '","actor":"bench"}'
  return wrk.format("POST", "/events/cloudevents", {
    ["Content-Type"]="application/cloudevents+json", ["Authorization"]="Bearer TOKEN"}, body)
end
""".replace("TOKEN", TOKEN)


def paced(binary: str, url: str, rate: float, seconds: float, pools: int, clusters: int) -> dict:
    """wrk with a per-connection delay: about ``rate`` events/s over every pool in turn."""
    conns = 32
    script = (
        WRK_PACED.replace("DELAY", str(int(conns * 1000 / rate)))
        .replace("CLUSTERS", str(clusters))
        .replace("POOLS", str(pools))
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(script)
    out = subprocess.run(
        [binary, "-t2", f"-c{conns}", f"-d{int(seconds)}s", "-s", fh.name, url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    os.unlink(fh.name)
    return {"rate_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}


def crash_count(work: Path, queue: str, seconds: float) -> dict:
    svc = Svc(work, queue, debounce=0.05)
    svc.start()
    accepted: list[str] = []
    stop = threading.Event()

    def produce(offset: int) -> None:
        i = offset
        with httpx.Client(timeout=2) as c:
            while not stop.is_set():
                body = {
                    "specversion": "1.0",
                    "id": f"k-{i}",
                    "source": "//bench/kill",
                    "type": "io.fleetwarden.bench.scaled",
                    "cluster": "c000",
                    "nodepool": "p000",
                }
                try:
                    r = c.post(
                        f"{svc.base}/events/cloudevents",
                        json=body,
                        headers={
                            "content-type": "application/cloudevents+json",
                            "authorization": f"Bearer {TOKEN}",
                        },
                    )
                except httpx.HTTPError:
                    return
                if r.status_code == 202:
                    accepted.append(f"k-{i}")
                i += 1

    threads = [threading.Thread(target=produce, args=(n * 10_000_000,)) for n in range(8)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    svc.kill9()
    stop.set()
    for t in threads:
        t.join(10)
    svc.start()
    deadline = time.monotonic() + 120
    ids: list[str] = []
    while time.monotonic() < deadline:
        ids = [json.loads(x)["id"] for x in svc.journal.read_bytes().splitlines() if x.strip()]
        if set(accepted) <= set(ids):
            break
        time.sleep(0.2)
    svc.stop()
    processed = Counter(ids)
    return {
        "queue": queue.split(":")[0],
        "accepted_before_kill": len(accepted),
        "lost": sum(1 for i in accepted if i not in processed),
        "processed_twice": sum(1 for n in processed.values() if n > 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=15)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.support import nats_env

    binary = ensure_wrk()
    work = Path(tempfile.mkdtemp(prefix="fw-gw-"))
    nats_state = work / "nats"
    nats_url = nats_env.start_server(nats_state)
    results: dict = {}
    try:
        write_fleet(work, clusters=50, pools=50, nodes_per_pool=2)
        for label, queue, env in (
            ("sqlite+workers", "sqlite", {}),
            ("sqlite, workers paused", "sqlite", {"FW_BENCH_NO_WORKERS": "1"}),
            ("nats+workers", nats_url, {}),
        ):
            for f in work.glob("queue.db*"):
                f.unlink()
            svc = Svc(work, queue)
            svc.start(env)
            r = wrk(binary, f"{svc.base}", WRK_SINGLE, args.seconds, 64)
            svc.stop()
            results[f"single {label}"] = r
            print(f"single events, {label}: {json.dumps(r)}", flush=True)
        for label, env, conns in (
            ("sqlite+workers", {}, 16),
            ("sqlite, gateway only", {"FW_BENCH_NO_WORKERS": "1"}, 64),
        ):
            for f in work.glob("queue.db*"):
                f.unlink()
            svc = Svc(work, "sqlite")
            svc.start(env)
            r = wrk(binary, f"{svc.base}", WRK_BATCH, args.seconds, conns)
            svc.stop()
            r["events_per_s"] = r["requests_per_s"] * 100
            results[f"batch {label}"] = r
            print(
                f"CloudEvents batches of 100, {label}, {conns} connections: {json.dumps(r)}",
                flush=True,
            )
        for f in work.glob("queue.db*"):
            f.unlink()
        svc = Svc(work, "sqlite")
        svc.start()
        load = paced(binary, svc.base, 1300, args.seconds, 50, 50)  # ~1,000/s measured
        time.sleep(3)
        q = histogram_quantiles(svc.metric(""), "fleetwarden_event_to_finding_seconds")
        svc.stop()
        q.update(load)
        results["latency at 1000/s"] = q
        print(f"event-to-finding at 1000 events/s: {json.dumps(q)}", flush=True)
        for queue in ("sqlite", nats_url):
            for f in work.glob("queue.db*"):
                f.unlink()
            (work / "events.jsonl").unlink(missing_ok=True)
            c = crash_count(work, queue, 5)
            results[f"kill -9 {c['queue']}"] = c
            print(f"kill -9 mid-load: {json.dumps(c)}", flush=True)
    finally:
        nats_env.stop_server(nats_state)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
