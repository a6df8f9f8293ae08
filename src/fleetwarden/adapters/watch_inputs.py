"""The inputs of ``fleetwarden watch``: the ``--config`` settings, the desired pools, the
kubeconfig contexts to watch and where the Argo CD cluster Secrets are read.

Refusals: ``FormatError`` (a file), ``NothingToCompare`` (a desired tree that compares nothing:
no pool, or none of its clusters among the contexts, unless ``allow_empty``), ``ValueError``
(no context for the Argo CD Secrets; a bad
``--audit-log``), ``CredentialError`` (a context's exec plugin)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fleetwarden.adapters import files
from fleetwarden.adapters.audit_logs import AuditLogTail, audit_log_paths
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.fleet import NothingToCompare, check_comparable
from fleetwarden.formats.settings import Settings, load_settings

if TYPE_CHECKING:  # the readers load when the command runs, as files.load_desired does
    from fleetwarden.formats.desired import DesiredRead

__all__ = ["WatchInputs", "read_watch_inputs"]


@dataclass(frozen=True, slots=True)
class WatchInputs:
    settings: Settings
    desired: DesiredRead
    endpoints: list[ClusterEndpoint]
    argocd: tuple[ClusterEndpoint, str] | None  # the context holding the Secrets, namespace
    audit_logs: dict[str, AuditLogTail]  # cluster -> its API server's audit log, followed


def read_watch_inputs(
    kubeconfig: Path,
    desired: Sequence[str],
    *,
    contexts: Sequence[str],
    config: Path | None,
    argocd_secrets: str | None,
    argocd_context: str | None,
    following: bool,
    allow_empty: bool,
    audit_logs: Sequence[str] = (),
    on_bad_audit_line: Callable[[str], None] | None = None,
) -> WatchInputs:
    settings = load_settings(config)
    desired_args = [files.parse_path_arg(a) for a in desired]
    loaded = files.load_desired(
        desired_args, limit=settings.desired_file_limit, assume=settings.assume
    )
    if desired and not loaded.pools and not following and not allow_empty:
        raise NothingToCompare(loaded.nothing_found([a.label for a in desired_args]))
    endpoints = load_kubeconfig(kubeconfig, contexts=contexts)
    argocd = None
    if argocd_secrets:
        pool = load_kubeconfig(kubeconfig, contexts=[argocd_context] if argocd_context else ())
        if not pool:
            raise ValueError(f"{kubeconfig}: no context to read Argo CD secrets from")
        argocd = (pool[0], argocd_secrets)
    elif loaded.pools and not allow_empty:
        # the contexts are all there is to watch: a desired tree none of whose clusters is
        # among them would compare nothing, for ever
        check_comparable(
            loaded.pools, [e.name for e in endpoints], desired_paths=[a.label for a in desired_args]
        )
    names = [e.name for e in endpoints]
    logs = audit_log_paths(audit_logs, settings.audit_logs, names)
    tails = {n: AuditLogTail(p, n, on_bad=on_bad_audit_line) for n, p in logs.items()}
    return WatchInputs(settings, loaded, endpoints, argocd, tails)
