"""Figures for issue 14 (items 1 and 8): reading audit logs, joining them, parsing /metrics.

    .venv/bin/python benchmarks/audit_inputs.py [--events 200000] [--buffer 50000]
                                                [--samples 20000] [--markdown]

Side by side in one run, so the ratios hold on a loaded machine:

* audit log: ``adapters.audit_logs.read_audit_logs`` over a file of ``--events`` Metadata-level
  events shaped as kube-apiserver 1.36 writes them, against ``json.loads`` of the same lines
  (the floor of any reader): events/s and the ratio.
* join: ``core.actors.match_audit`` for one changed node, over that node's events as the
  followed log keeps them (``AuditLogTail.about``: the newest 64 per object), against a scan
  of a flat buffer of ``--buffer`` events: milliseconds per lookup.
* /metrics: ``formats.prometheus_text.parse_metrics`` over ``--samples`` samples (labels as
  the API server writes them) against ``prometheus_client``'s own text parser: samples/s and
  the ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from fleetwarden.adapters.audit_logs import AuditLogTail, read_audit_logs
from fleetwarden.core.actors import ChangedObject, match_audit
from fleetwarden.formats.prometheus_text import parse_metrics

T0 = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)


def event_line(i: int, rnd: random.Random) -> str:
    at = T0 + timedelta(milliseconds=i * 7)
    return json.dumps(
        {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": f"{i:08x}-1b2c-4d5e-8f90-{rnd.getrandbits(48):012x}",
            "stage": "ResponseComplete",
            "requestURI": f"/api/v1/nodes/node-{i % 500}?fieldManager=kubectl-label",
            "verb": rnd.choice(["get", "list", "watch", "patch", "update"]),
            "user": {"username": rnd.choice(["alice", "system:node:n-1", "ci-bot"])},
            "sourceIPs": ["10.0.0.9"],
            "userAgent": "kubectl/v1.36.3 (linux/amd64) kubernetes/abc1234",
            "objectRef": {"resource": "nodes", "name": f"node-{i % 500}", "apiVersion": "v1"},
            "responseStatus": {"metadata": {}, "code": 200},
            "requestReceivedTimestamp": (at - timedelta(milliseconds=5)).isoformat(),
            "stageTimestamp": at.isoformat(),
            "annotations": {"authorization.k8s.io/decision": "allow"},
        }
    )


def metrics_text(n: int, rnd: random.Random) -> str:
    lines = ["# HELP apiserver_request_total [STABLE] Counter of apiserver requests."]
    lines.append("# TYPE apiserver_request_total counter")
    for i in range(n):
        labels = (
            f'code="200",component="apiserver",dry_run="",group="g{i % 40}.k8s.io",'
            f'resource="r{i}",scope="cluster",subresource="",verb="LIST",version="v1"'
        )
        lines.append(f"apiserver_request_total{{{labels}}} {rnd.randint(0, 10**6)}")
    return "\n".join(lines) + "\n"


def timed(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--buffer", type=int, default=50_000)
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rnd = random.Random(14)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "audit.log"
        lines = [event_line(i, rnd) for i in range(args.events)]
        log.write_text("\n".join(lines) + "\n")

        def floor_read() -> None:
            for x in log.read_text().splitlines():
                json.loads(x)

        floor = timed(floor_read)
        read = timed(lambda: read_audit_logs(log, "c"))
        got = read_audit_logs(log, "c")
        assert len(got.events) == args.events and got.bad == 0
    rows.append(("audit log read (events/s)", f"{args.events / read:,.0f}"))
    rows.append(("json.loads only (events/s)", f"{args.events / floor:,.0f}"))
    rows.append(("reader / json.loads time", f"{read / floor:.2f}x"))
    buffer = got.events[-args.buffer :]
    tail = AuditLogTail(Path("unused"), "c")
    tail._keep(buffer)  # what poll() keeps of these lines
    target = next(e for e in reversed(buffer) if e.verb == "patch")
    obj = ChangedObject("c", "nodes", target.name, target.at.replace(microsecond=0))
    lookups = 50

    def scan() -> object:
        return match_audit(obj, buffer, manager="kubectl-label")

    def indexed() -> object:
        return match_audit(obj, tail.about("nodes", obj.name, None), manager="kubectl-label")

    flat = timed(lambda: [scan() for _ in range(lookups)])
    per_object = timed(lambda: [indexed() for _ in range(lookups)])
    assert indexed() is not None and indexed() == scan()
    rows.append(
        (f"join: scan of {len(buffer):,} events (ms/lookup)", f"{flat / lookups * 1e3:.2f}")
    )
    rows.append(
        ("join: the object's events (tail index, ms/lookup)", f"{per_object / lookups * 1e3:.3f}")
    )
    text = metrics_text(args.samples, rnd)
    ours = timed(lambda: list(parse_metrics(text, path="m")))
    theirs = timed(lambda: [s for f in text_string_to_metric_families(text) for s in f.samples])
    assert len(list(parse_metrics(text, path="m"))) == args.samples
    rows.append(("/metrics parse, strict (samples/s)", f"{args.samples / ours:,.0f}"))
    rows.append(("/metrics parse, prometheus_client (samples/s)", f"{args.samples / theirs:,.0f}"))
    rows.append(("strict / prometheus_client time", f"{ours / theirs:.2f}x"))
    if args.markdown:
        print("| measure | value |\n|---|---|")
        for name, value in rows:
            print(f"| {name} | {value} |")
    else:
        for name, value in rows:
            print(f"{name:48} {value}")


if __name__ == "__main__":
    main()
