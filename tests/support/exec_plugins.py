"""Real exec credential plugins for tests: small executables written into a tmp dir.

``write_plugin(dir, "name", [Reply(token=...), Reply(exit=1, stderr=...)])`` writes an
executable that, on its N-th run, acts out the N-th reply (the last one again after that):
prints an ExecCredential (token and/or client certificate, an expiry N seconds ahead, in the
requested apiVersion), or raw stdout, or fails with an exit code and stderr, or sleeps. Every
run appends one JSON line to ``<name>.runs`` beside it: its argv, the KUBERNETES_EXEC_INFO it
was given, the variables named in ``record_env`` and whether stdin was a terminal -- tests
count runs and check inputs there.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"

_SCRIPT = """#!{python}
import datetime, json, os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
LOG = os.path.join(HERE, {log!r})
REPLIES = json.loads({replies!r})
RECORD = {record!r}
try:
    with open(LOG) as fh:
        n = sum(1 for _ in fh)
except FileNotFoundError:
    n = 0
reply = REPLIES[min(n, len(REPLIES) - 1)]
EXPECT = {expect!r}
with open(LOG, "a") as fh:
    fh.write(json.dumps({{
        "argv": sys.argv[1:],
        "info": json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "null"),
        "env": {{k: os.environ.get(k) for k in RECORD}},
        "tty": os.isatty(0),
    }}) + "\\n")
if EXPECT is not None and sys.argv[1:] != EXPECT:
    sys.stderr.write("unexpected arguments: %r" % (sys.argv[1:],))
    sys.exit(64)
if reply.get("sleep"):
    time.sleep(reply["sleep"])
if reply.get("stderr"):
    sys.stderr.write(reply["stderr"])
if reply.get("exit"):
    sys.exit(reply["exit"])
if reply.get("stdout") is not None:
    sys.stdout.write(reply["stdout"])
    sys.exit(0)
status = {{}}
if reply.get("token"):
    status["token"] = reply["token"]
if reply.get("cert"):
    status["clientCertificateData"] = reply["cert"]
    status["clientKeyData"] = reply["key"]
if reply.get("expires_in") is not None:
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
        seconds=reply["expires_in"]
    )
    status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
api = reply.get("api_version") or {api_version!r}
print(json.dumps({{"apiVersion": api, "kind": "ExecCredential", "spec": {{}}, "status": status}}))
"""


@dataclass(frozen=True)
class Reply:
    token: str | None = None
    cert: str | None = None
    key: str | None = None
    expires_in: float | None = None
    api_version: str | None = None  # default: the plugin's
    stdout: str | None = None  # printed as is instead of an ExecCredential
    stderr: str | None = None
    exit: int = 0
    sleep: float = 0.0


def write_plugin(
    directory: Path,
    name: str,
    replies: list[Reply],
    *,
    api_version: str = V1BETA1,
    record_env: tuple[str, ...] = (),
    expect_argv: list[str] | None = None,
) -> Path:
    """``expect_argv``: fail (exit 64, saying so on stderr) when run with other arguments."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(
        _SCRIPT.format(
            python=sys.executable,
            log=f"{name}.runs",
            replies=json.dumps([asdict(r) for r in replies]),
            record=list(record_env),
            api_version=api_version,
            expect=expect_argv,
        )
    )
    path.chmod(0o755)
    return path


def runs(plugin: Path) -> list[dict[str, Any]]:
    """One entry per run of ``plugin`` so far."""
    log = plugin.with_name(f"{plugin.name}.runs")
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
