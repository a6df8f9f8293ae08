"""The command line loads only what the command it runs uses (issue 12: a CLI that starts in a
blink). Each case runs in a fresh interpreter and lists the heavy packages it ended up with;
``--help``, ``--version``, ``scan`` and ``gate`` are paid in every CI job and PreSync hook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "sqlalchemy",
    "alembic",
    "starlette",
    "uvicorn",
    "httpx",
    "nats",
    "prometheus_client",
    "hcl2",
    "lark",
    "rich",
    "yaml",
    "jsonschema",
    "msgspec",
    "pydantic",  # typer 0.29 coerces every option through it (pyproject pins typer below)
    "fleetwarden.adapters",
    "fleetwarden.app",
    "fleetwarden.formats",
    "fleetwarden.entrypoints",
)
# the Typer plumbing every command line runs through (its package's __init__ is a docstring):
# loaded with typer itself, it imports nothing but typer and the core
TYPER_PLUMBING = ("fleetwarden.adapters", "fleetwarden.adapters.typer_cli")
SERVICE = {"sqlalchemy", "alembic", "starlette", "uvicorn", "nats", "prometheus_client"}
NETWORK = {"httpx"}

# run a command line (or import a module) and print the heavy packages that got loaded
PROBE = """
import json, sys
heavy = {heavy!r}
plumbing = {plumbing!r}
def loaded():
    names = [m for m in sys.modules if m not in plumbing]
    return sorted(h for h in heavy if any(m == h or m.startswith(h + ".") for m in names))
mode, rest = sys.argv[1], sys.argv[2:]
try:
    if mode == "import":
        __import__(rest[0])
    else:
        from fleetwarden.cli.main import app
        app(args=rest, prog_name="fleetwarden")
except SystemExit as exc:
    if exc.code not in (0, 1, None):
        raise
print("LOADED " + json.dumps(loaded()))
"""


def probe(*args: str) -> set[str]:
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    r = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY, plumbing=TYPER_PLUMBING), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("LOADED ")][-1]
    return set(json.loads(line.removeprefix("LOADED ")))


NODE_POOLS = """\
apiVersion: fleetwarden.io/v1alpha1
kind: NodePools
pools:
  general:
    provider: aws
    instanceTypes: [m5.large]
    labels: {tier: web}
clusters:
  tiny: {}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app.kubernetes.io/instance: shop}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {tier: web}
      containers:
        - name: web
          image: registry.example.com/web:1.0
          resources: {requests: {cpu: 100m, memory: 64Mi}}
"""


def _node(i: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"ip-10-0-0-{i}.ec2.internal",
            "labels": {
                "eks.amazonaws.com/nodegroup": "general",
                "node.kubernetes.io/instance-type": "m5.large",
                "tier": "web",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "1930m", "memory": "7220Mi", "pods": "29"},
            "capacity": {"cpu": "2", "memory": "7900Mi", "pods": "29"},
            "nodeInfo": {"kubeletVersion": "v1.30.4", "osImage": "Amazon Linux 2023"},
        },
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    (root / "desired").mkdir()
    (root / "desired" / "pools.yaml").write_text(NODE_POOLS)
    (root / "desired" / "web.yaml").write_text(DEPLOYMENT)
    dump = {"apiVersion": "v1", "kind": "List", "items": [_node(i) for i in range(3)]}
    (root / "tiny.json").write_text(json.dumps(dump))
    return root


def test_help_and_version_load_nothing_but_typer():
    for args in (["--help"], ["--version"]):
        assert probe("run", *args) == set(), args


def test_a_command_s_help_loads_that_command_only():
    loaded = probe("run", "scan", "--help")
    assert not loaded & (SERVICE | NETWORK | {"fleetwarden.entrypoints"}), loaded


def test_scan_of_a_small_dump_loads_no_service_network_or_hcl_library(tiny):
    loaded = probe("run", "scan", "-d", str(tiny / "desired" / "pools.yaml"),
                   "-n", str(tiny / "tiny.json"), "-o", "json")  # fmt: skip
    assert "fleetwarden.app" in loaded  # it did run the scan
    assert not loaded & (SERVICE | NETWORK | {"hcl2", "lark", "pydantic"}), loaded


def test_gate_on_dumps_loads_no_service_or_network_library(tiny):
    loaded = probe("run", "gate", "--app", "shop", "-d", str(tiny / "desired"),
                   "-n", f"tiny={tiny / 'tiny.json'}", "-o", "json")  # fmt: skip
    assert "fleetwarden.formats" in loaded  # it did read the desired state
    assert not loaded & (SERVICE | NETWORK | {"pydantic"}), loaded


def test_deprecations_as_json_loads_neither_rich_nor_node_dump_readers(tmp_path):
    """The check pluto is compared with: JSON output needs no table renderer, and manifests
    need no node-dump stream reader (msgspec)."""
    (tmp_path / "old.yaml").write_text(
        "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: old}\n"
    )
    loaded = probe("run", "deprecations", "-m", str(tmp_path), "-t", "1.25", "-o", "json")
    assert "fleetwarden.app" in loaded  # it did run the check
    assert not loaded & (SERVICE | NETWORK | {"rich", "pydantic", "msgspec"}), loaded


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("fleetwarden.cli.main", set()),
        ("fleetwarden.cli.common", set()),
        ("fleetwarden.cli.scan", set()),
        # the demo talks to no server, but adapters.simulated takes merge_taints from
        # adapters.kube.restore, whose module imports the HTTP client (a pure helper that
        # could live in core): tighten to set() when it moves
        ("fleetwarden.cli.demo", NETWORK),
        ("fleetwarden.cli.deprecations", set()),
        ("fleetwarden.cli.gate", set()),
        ("fleetwarden.cli.fleet", set()),
        ("fleetwarden.entrypoints.serve_cmd", SERVICE | NETWORK),
        # approve calls the service over HTTP, watch the API servers; the audit store
        # (SQLAlchemy) and the serve stack (--follow, --config) load when they are used
        ("fleetwarden.cli.audit", set()),
        ("fleetwarden.cli.approve", NETWORK),
        ("fleetwarden.cli.watch", NETWORK),
    ],
)
def test_each_command_module_loads_only_the_service_libraries_it_needs(module, allowed):
    loaded = probe("import", module)
    assert not loaded & (SERVICE | NETWORK) - allowed, loaded


def test_the_probe_sees_the_serve_stack_where_it_is_loaded():
    """The check above can fail: ``serve``'s module does load the service libraries."""
    assert {"starlette", "uvicorn", "sqlalchemy"} <= probe(
        "import", "fleetwarden.entrypoints.serve_cmd"
    )
