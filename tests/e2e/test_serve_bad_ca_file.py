"""``fleetwarden serve`` with a sink whose ``caFile`` gives no certificate, against the real CLI:
it stops before serving with exit 2 and one line naming ``notify.<name>.caFile`` and the file
-- no traceback, no webhook token; never a silent start trusting the system's CAs alone. A
supervisor gives up at once instead of restarting its children."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.serve_process import free_port

SRC = Path(__file__).resolve().parents[2] / "src"
HOOK_TOKEN = "T0SECRET-xoxSecretWebhookToken"


@pytest.mark.parametrize(
    ("content", "complaint", "one_process"),
    [
        (None, "cannot be read: No such file or directory", True),
        (b"not a PEM file\n", "holds no PEM certificate", True),
        (None, "cannot be read: No such file or directory", False),
    ],
    ids=["missing", "not-pem", "missing-supervised"],
)
def test_serve_refuses_a_ca_file_giving_no_certificate_with_one_line_naming_it(
    tmp_path: Path, content: bytes | None, complaint: str, one_process: bool
) -> None:
    ca_file = tmp_path / "corp-ca.pem"
    if content is not None:
        ca_file.write_bytes(content)
    config = tmp_path / "serve.json"
    config.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{free_port()}",
                "store": f"sqlite:///{tmp_path / 'audit.db'}",
                "queuePath": str(tmp_path / "queue.db"),
                "notify": [
                    {"name": "corp", "kind": "webhook", "url": "env:HOOK", "caFile": str(ca_file)}
                ],
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.pop("FLEETWARDEN_ONE_PROCESS", None)
    env.update(PYTHONPATH=str(SRC), HOOK=f"https://hooks.corp.example/hook/{HOOK_TOKEN}")
    if one_process:
        env["FLEETWARDEN_ONE_PROCESS"] = "1"
    r = subprocess.run(
        [sys.executable, "-m", "fleetwarden", "serve", "-c", str(config), "--log-format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    error = "fleetwarden: error: serve config: notify.corp.caFile: "
    line = next(x for x in r.stderr.splitlines() if x.startswith(error))
    assert f"{str(ca_file)!r} {complaint}" in line, line
    for secret in (HOOK_TOKEN, "T0SECRET"):
        assert secret not in r.stderr + r.stdout, secret
    if not one_process:
        assert "a configuration error, not restarted" in r.stderr
