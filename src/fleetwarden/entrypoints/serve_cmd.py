"""``fleetwarden serve``: event gateway + durable queue + workers + watchers in one process.

The service and its adapters are ``wiring/service.py`` (start-up order, leader election,
sharding), running them ``wiring/running.py`` (``run_service``); this module parses the
command's options and puts the HTTP side in front: the gateway, the read API, the dashboard,
approvals.
SIGINT/SIGTERM stop the HTTP server first, then the rest.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden import logs
from fleetwarden.adapters import processes
from fleetwarden.app.service_config import gateway_config
from fleetwarden.cli.common import config_option, failing, warn
from fleetwarden.entrypoints import (
    dashboard,
    gateway_process,
    history_api,
    incidents_api,
    workloads_api,
)
from fleetwarden.entrypoints.gateway import create_app
from fleetwarden.formats.events import parsers
from fleetwarden.wiring import running, service, supervisor
from fleetwarden.wiring.service import Service
from fleetwarden.wiring.service_config import ServiceConfig, load_serve_config

__all__ = ["build_service", "register"]


def build_service(config: ServiceConfig) -> Service:
    """``wiring.service.build_service`` with the HTTP side in front (``Service.app``)."""
    svc = service.build_service(config)
    admins = admin.bearer_tokens if (admin := config.auth.get("admin")) is not None else ()
    svc.app = create_app(
        gateway_config(config, svc.known_pools()),
        svc.queue,
        parsers(),
        metrics=svc.metrics,
        findings=svc.findings,
        on_reply=svc.on_reply,
        extra_routes=[
            *history_api.routes(lambda: svc.healer.audit),
            *workloads_api.routes(svc.workloads),
            *dashboard.routes(
                svc.fleet, svc.snapshot, svc.findings, svc.owners, pipeline=svc, admin_tokens=admins
            ),
            *incidents_api.routes(svc.findings),
        ],
        health=lambda: {"leader": svc.heals and svc.leading, **svc.desired_state()},
    )
    return svc


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_command(
        config: Annotated[
            Path | None,
            config_option(
                "Service YAML: listen, queue, desired, nodes, clusters, auth.<source>, limits "
                "(see the README)."
            ),
        ] = None,
        log_format: Annotated[
            str | None,
            typer.Option(
                "--log-format",
                metavar="json|console",
                help="Log lines on stderr: JSON lines, or for a person "
                "(default: json when stderr is not a terminal, else console).",
            ),
        ] = None,
        log_level: Annotated[
            str,
            typer.Option(
                "--log-level",
                metavar="debug|info|warning|error",
                help="The least severe log lines shown.",
            ),
        ] = "info",
    ) -> None:
        """Run the event gateway (POST /events/<source>), the durable queue, the inspection
        workers and the live watchers, with /api/events, /api/findings, /healthz and
        /metrics."""
        child = processes.child_setup()  # role: all's gateway or worker process, or None
        with failing(ValueError):
            fmt = logs.checked_format(log_format, log_level, terminal=sys.stderr.isatty())
        logs.configure(fmt, log_level)
        with failing():  # a bad config file, or one that would expose the read side
            cfg = load_serve_config(config)
            if supervisor.wanted(cfg):  # gateway and worker in two processes
                raise typer.Exit(supervisor.run(cfg, warn=warn))
            svc = build_service(cfg)
        with failing():  # the audit store, or the in-cluster credentials
            running.run_service(svc, child, gateway=gateway_process.create_gateway_app)
