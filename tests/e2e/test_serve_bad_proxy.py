"""``fleetwarden serve`` with a proxy variable naming no usable proxy, against the real CLI: it
stops before serving with exit 2 and one line naming the config field whose client needs the
proxy and the variable -- no traceback, no proxy password, no webhook token or API token; a
supervisor gives up at once instead of restarting its children."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve_process import free_port

SRC = Path(__file__).resolve().parents[2] / "src"
PROXY_PASSWORD = "pr0xyS3cret"
HOOK_TOKEN = "T0SECRET-xoxSecretWebhookToken"
ARGO_TOKEN = "argo-t0ken-secret"


@pytest.mark.parametrize(
    ("section", "field", "one_process"),
    [
        (
            {"notify": [{"name": "oncall", "kind": "slack", "url": "env:HOOK"}]},
            "notify.oncall",
            True,
        ),
        (
            {"notify": [{"name": "oncall", "kind": "slack", "url": "env:HOOK"}]},
            "notify.oncall",
            False,
        ),
        ({"argocd": {"url": "https://argocd.internal", "token": "env:ARGO"}}, "argocd.url", True),
    ],
    ids=["sink", "sink-supervised", "argocd"],
)
def test_serve_refuses_a_bad_proxy_variable_with_one_line_naming_it(
    tmp_path: Path, section: dict[str, Any], field: str, one_process: bool
) -> None:
    config = tmp_path / "serve.json"
    config.write_text(
        json.dumps(
            {
                "listen": f"127.0.0.1:{free_port()}",
                "store": f"sqlite:///{tmp_path / 'audit.db'}",
                "queuePath": str(tmp_path / "queue.db"),
                **section,
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.pop("FLEETWARDEN_ONE_PROCESS", None)
    env.update(
        PYTHONPATH=str(SRC),
        HTTPS_PROXY=f"http://fw:{PROXY_PASSWORD}@proxy.corp:31x8",
        HOOK=f"https://hooks.slack.com/services/{HOOK_TOKEN}",
        ARGO=ARGO_TOKEN,
    )
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
    error = f"fleetwarden: error: serve config: {field}: "
    assert error in r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith(error))
    assert line.endswith("HTTPS_PROXY='http://***@proxy.corp:31x8': the port is not a number")
    for secret in (PROXY_PASSWORD, HOOK_TOKEN, "T0SECRET", ARGO_TOKEN):
        assert secret not in r.stderr + r.stdout, secret
    if not one_process:
        assert "a configuration error, not restarted" in r.stderr
