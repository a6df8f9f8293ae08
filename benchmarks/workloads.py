"""Figures for the workloads issue: `fleet versions` warm and cold, and diff throughput.

    .venv/bin/python benchmarks/workloads.py [--clusters 500] [--workloads 200] [--keep DIR]

1. Generates a fleet: per cluster one `kubectl get deploy,sts,ds,cm,secret,hpa -A -o json` dump
   with ``--workloads`` workloads (20 applications; Deployments, StatefulSets, DaemonSets of
   two containers with env, resources, probes and a ConfigMap volume, each with its ConfigMap;
   an HPA for every other Deployment; one Secret per application), shown the way the API
   server serves them (defaults, status, managedFields, last-applied, Argo CD's tracking
   annotation): about 4 KB per workload. Image drift is planted in 1 cluster in 25.
2. `fleet versions` for one app across all clusters from the warm cache: the clusters'
   objects held in ``ObjectIndex``es (what the watchers keep), models built; best of 5.
   Also "first query": the same with models still to build.
3. Cold: the real command, ``fleet versions --app APP -d app/ -w dumps/ -o json``, in a fresh
   process (interpreter start included), best of 3; plus its in-process part alone.
4. Diff throughput on one core: ``diff_app`` for every app of every cluster, (a) warm models,
   (b) models rebuilt from the redacted objects the indexes hold, (c) cold, raw object ->
   findings: every object as the API server serves it (desired: as in Git) is redacted and
   indexed (``ObjectIndex.add``), modelled and diffed, both sides, with the interpreter's
   default GC; only the JSON parsing of each dump is left out of the clock. All three must
   give the same findings: exactly the planted drifts (the script fails otherwise).
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from fleetwarden.app import fleet as fleet_app
from fleetwarden.core import workloads as wl
from fleetwarden.formats.workloads import parse_workload_dump

APPS = 20
TARGET_APP = "app-07"
CLI = "from fleetwarden.cli.main import main; main()"


def desired_app(app: str, n: int, rnd: random.Random) -> list[dict[str, Any]]:
    """The Git manifests of one application: workloads, their ConfigMaps, HPAs, a Secret."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        name = f"{app}-svc-{i:02d}"
        kind = "Deployment" if i % 10 < 8 else ("StatefulSet" if i % 10 == 8 else "DaemonSet")
        containers = [
            {
                "name": "main",
                "image": f"registry.example.com/{app}/svc-{i:02d}:1.{rnd.randint(0, 9)}.0",
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(5)]
                + [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi"},
                    "limits": {"cpu": "1", "memory": "256Mi"},
                },
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
            }
        ]
        if i % 3 == 0:
            containers.append({"name": "proxy", "image": "envoyproxy/envoy:v1.31.2"})
        spec: dict[str, Any] = {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": containers,
                    "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
                },
            },
        }
        if kind != "DaemonSet":
            spec["replicas"] = 2
        if kind == "StatefulSet":
            spec["serviceName"] = name
        out.append(
            {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}
        )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{name}-config"},
                "data": {"app.yaml": f"name: {name}\nlevel: info\n" + "x: 1\n" * 20},
            }
        )
        if kind == "Deployment" and i % 2 == 0:
            out.append(
                {
                    "apiVersion": "autoscaling/v2",
                    "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": name},
                    "spec": {
                        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": name},
                        "minReplicas": 2,
                        "maxReplicas": 6,
                    },
                }
            )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{app}-credentials"},
            "stringData": {"password": f"{app}-not-a-secret"},
        }
    )
    return out


def served(obj: dict[str, Any], app: str, namespace: str) -> dict[str, Any]:
    """``obj`` as the API server serves it after Argo CD applied it (compact liveify)."""
    live = copy.deepcopy(obj)
    kind = live["kind"]
    meta = live["metadata"]
    meta["namespace"] = namespace
    meta["annotations"] = {
        wl.LAST_APPLIED: json.dumps(obj, separators=(",", ":")),
        wl.TRACKING_ANNOTATION: f"{app}:{wl.GROUPS[kind]}/{kind}:{namespace}/{meta['name']}",
    }
    meta.update(
        uid="6c9c53f2-7b7e-4a51-9bfa-2f9d58a4d1c1",
        resourceVersion="7492752",
        creationTimestamp="2026-11-29T23:50:25Z",
        managedFields=[
            {
                "apiVersion": obj["apiVersion"],
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {".": {}}}, "f:spec": {}},
                "manager": "argocd-controller",
                "operation": "Update",
                "time": "2026-11-29T23:50:25Z",
            }
        ],
    )
    if kind in wl.WORKLOAD_KINDS:
        meta["generation"] = 4
        spec = live["spec"]
        spec.setdefault("revisionHistoryLimit", 10)
        if kind == "Deployment":
            spec.update(
                progressDeadlineSeconds=600,
                strategy={
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                },
            )
        elif kind == "StatefulSet":
            spec.update(
                podManagementPolicy="OrderedReady",
                updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            )
        else:
            spec["updateStrategy"] = {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            }
        spec["template"]["metadata"]["creationTimestamp"] = None
        pod = spec["template"]["spec"]
        pod.update(
            dnsPolicy="ClusterFirst",
            restartPolicy="Always",
            schedulerName="default-scheduler",
            securityContext={},
            terminationGracePeriodSeconds=30,
        )
        for c in pod["containers"]:
            c.setdefault("imagePullPolicy", wl.default_pull_policy(c["image"]))
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            for p in c.get("ports", []):
                p["protocol"] = "TCP"
            for e in c.get("env", []):
                if "valueFrom" in e:
                    e["valueFrom"]["fieldRef"]["apiVersion"] = "v1"
            if "readinessProbe" in c:
                c["readinessProbe"].update(
                    timeoutSeconds=1, periodSeconds=10, successThreshold=1, failureThreshold=3
                )
                c["readinessProbe"]["httpGet"]["scheme"] = "HTTP"
        for v in pod.get("volumes", []):
            v["configMap"]["defaultMode"] = 420
        live["status"] = {
            "observedGeneration": 4,
            "replicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "lastTransitionTime": "2026-11-29T23:50:27Z",
                }
            ],
        }
    elif kind == "Secret":
        live["data"] = {
            k: base64.b64encode(v.encode()).decode() for k, v in live.pop("stringData").items()
        }
        live["type"] = "Opaque"
    elif kind == "HorizontalPodAutoscaler":
        live["status"] = {"currentReplicas": 2, "desiredReplicas": 2}
    return live


def write_fleet(work: Path, clusters: int, workloads: int) -> dict[str, Any]:
    rnd = random.Random(42)
    per_app = workloads // APPS
    apps = {f"app-{a:02d}": desired_app(f"app-{a:02d}", per_app, rnd) for a in range(APPS)}
    (work / "git").mkdir(parents=True)
    (work / "git" / "manifests.yaml").write_text(
        "---\n".join(json.dumps(d) + "\n" for d in apps[TARGET_APP])
    )
    template = [served(d, app, f"ns-{app}") for app, docs in apps.items() for d in docs]
    dumps = work / "dumps"
    dumps.mkdir()
    planted = 0
    for c in range(clusters):
        items = template
        if c % 25 == 0:  # one cluster in 25 runs an older image of every app's first service
            items = copy.deepcopy(template)
            for item in items:
                if item["kind"] == "Deployment" and item["metadata"]["name"].endswith("-svc-00"):
                    main = item["spec"]["template"]["spec"]["containers"][0]
                    main["image"] = main["image"].rsplit(":", 1)[0] + ":0.9.9"
                    planted += 1
        body = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}
        (dumps / f"cluster-{c:03d}.json").write_bytes(
            orjson.dumps(body, option=orjson.OPT_INDENT_2)
        )
    return {"apps": apps, "planted": planted, "objects_per_cluster": len(template)}


def best(fn: Any, runs: int) -> tuple[float, Any]:
    result, fastest = None, float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        fastest = min(fastest, time.perf_counter() - t)
    return fastest, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=500)
    ap.add_argument("--workloads", type=int, default=200)
    ap.add_argument("--keep", type=Path, help="write the fleet here and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="fw-bench-workloads-"))
    try:
        t = time.perf_counter()
        meta = write_fleet(work, args.clusters, args.workloads)
        size = sum(p.stat().st_size for p in (work / "dumps").iterdir())
        print(
            f"generated {args.clusters} clusters x {args.workloads} workloads "
            f"({meta['objects_per_cluster']} objects per dump, {size / 2**20:.0f} MiB of JSON) "
            f"in {time.perf_counter() - t:.1f}s; planted {meta['planted']} image drifts",
            flush=True,
        )
        dumps = sorted((work / "dumps").iterdir())

        # --- warm cache: every object of every cluster indexed (as the watchers hold them)
        t = time.perf_counter()
        desired = wl.ObjectIndex()
        for d in meta["apps"][TARGET_APP]:
            desired.add(d, source="git")
        observed: dict[str, wl.ObjectIndex] = {}
        for path in dumps:
            observed[path.stem] = wl.ObjectIndex(parse_workload_dump(str(path), path.read_bytes()))
        print(f"cache filled with all objects of all clusters in {time.perf_counter() - t:.1f}s")
        desired_by = dict.fromkeys(observed, desired)
        first, doc = best(lambda: fleet_app.build_versions(TARGET_APP, desired_by, observed), 1)
        warm, doc = best(lambda: fleet_app.build_versions(TARGET_APP, desired_by, observed), 5)
        s = doc["summary"]
        print(
            f"fleet versions, warm cache: {warm * 1000:.0f} ms (first query, models still to "
            f"build: {first * 1000:.0f} ms) for {s['rows']} rows, {s['clusters']} clusters; "
            f"{len(s['clustersDivergingFromGit'])} clusters diverge from Git"
        )

        # --- diff throughput, one core
        app_desired = {}
        for app, docs in meta["apps"].items():
            idx = wl.ObjectIndex()
            for d in docs:
                idx.add(d, source="git")
            app_desired[app] = idx

        per_cluster = sum(_workloads_of(want) for want in app_desired.values())

        def diff_all() -> tuple[int, list[dict[str, Any]]]:
            findings = []
            for cluster, index in observed.items():
                for app, want in app_desired.items():
                    findings.extend(wl.diff_app(cluster, app, want, index).findings)
            return per_cluster * len(observed), [f.to_json() for f in findings]

        def _fresh() -> None:
            # drop the models the indexes keep (private, on purpose)
            for index in [*observed.values(), *app_desired.values()]:
                index._models.clear()
                index._autoscaled = None

        diff_all()  # build models once
        warm_s, (n, expected) = best(diff_all, 3)
        _check(expected, meta["planted"], "warm")
        remodel_runs = []
        for _ in range(2):
            _fresh()
            t = time.perf_counter()
            _, found = diff_all()
            remodel_runs.append(time.perf_counter() - t)
            _check(found, meta["planted"], "models rebuilt", expected)
        remodel_s = min(remodel_runs)
        print(
            f"diff throughput, one core: warm models {n / warm_s:,.0f} workloads/s "
            f"({n} workloads in {warm_s:.2f}s, {len(expected)} findings); models rebuilt "
            f"from the indexed redacted objects: {n / remodel_s:,.0f} workloads/s "
            f"({remodel_s:.2f}s)"
        )
        observed.clear()  # the cold path starts from raw objects, not from the warm cache

        def cold_from_raw() -> tuple[float, int, list[dict[str, Any]]]:
            """raw objects -> findings on one core: redact + index + model + diff, both
            sides (desired once per run: clusters sharing a Git source share its index)."""
            clock = time.perf_counter()
            wants = {}
            for app, docs in meta["apps"].items():
                idx = wl.ObjectIndex()
                for d in docs:
                    idx.add(d, source="git")
                wants[app] = idx
            spent = time.perf_counter() - clock
            findings = []
            workloads = 0
            for path in dumps:
                items = orjson.loads(path.read_bytes())["items"]  # parsing: not timed
                clock = time.perf_counter()
                index = wl.ObjectIndex()
                source = str(path)
                for item in items:
                    index.add(item, source=source)
                for app, want in wants.items():
                    findings.extend(wl.diff_app(path.stem, app, want, index).findings)
                spent += time.perf_counter() - clock
                workloads += _workloads_of(index)
                del items, index
            return spent, workloads, [f.to_json() for f in findings]

        cold_runs = []
        for _ in range(2):
            spent, cold_n, found = cold_from_raw()
            cold_runs.append(spent)
            _check(found, meta["planted"], "cold", expected)
        cold_s = min(cold_runs)
        print(
            f"diff throughput, one core, cold, raw object -> findings: "
            f"{cold_n / cold_s:,.0f} workloads/s per core (redact, index, model and diff, "
            f"both sides; JSON parsing not timed; {cold_n} workloads in {cold_s:.2f}s, "
            f"runs {', '.join(f'{r:.2f}' for r in cold_runs)}; {len(found)} findings, "
            f"the same as warm)"
        )

        # --- cold: the real command in a fresh process
        cmd = [
            sys.executable,
            "-c",
            CLI,
            "fleet",
            "versions",
            "--app",
            TARGET_APP,
            "-d",
            str(work / "git"),
            "-w",
            str(work / "dumps"),
            "-o",
            "json",
        ]
        walls = []
        for _ in range(3):
            t = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            walls.append(time.perf_counter() - t)
            assert r.returncode in (0, 1), r.stderr[-2000:]
        cold_doc = json.loads(r.stdout)
        print(
            f"fleet versions, cold from {args.clusters} dumps (fresh process): "
            f"{min(walls):.2f}s (runs {', '.join(f'{w:.2f}' for w in walls)}); "
            f"{cold_doc['summary']['rows']} rows; diverging from Git: "
            f"{len(cold_doc['summary']['clustersDivergingFromGit'])} clusters"
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _check(
    found: list[dict[str, Any]],
    planted: int,
    what: str,
    expected: list[dict[str, Any]] | None = None,
) -> None:
    """Exactly the planted image drifts, and (``expected``) the same findings as warm."""
    kinds = {(f["field"], f["driftKind"]) for f in found}
    if len(found) != planted or not kinds <= {("image.main", "image")}:
        raise SystemExit(f"{what}: {len(found)} findings ({kinds}), {planted} drifts planted")
    if expected is not None and found != expected:
        raise SystemExit(f"{what}: the findings differ from the warm run's")


def _workloads_of(index: wl.ObjectIndex) -> int:
    return sum(1 for k in index.objects if k.kind in wl.WORKLOAD_KINDS)


if __name__ == "__main__":
    main()
