"""The inputs of ``fleet versions | diff`` and ``gate``, read and checked: the settings, the
desired state from files or Argo CD and what the clusters run, from dumps or live contexts
(``adapters.fleet_inputs``), with ``app.fleet``'s checks (the application is in the desired
state; not every observed file was skipped).

What is missing or unreadable raises: ``ValueError`` naming the option to give (``FormatError``
naming the file or field; ``CredentialError`` for a context's exec plugin), which the commands
turn into exit 2. No argument parsing, no comparison (``app.fleet``), no rendering: the
commands give the options' values and the progress bar of a live read.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from fleetwarden.adapters.fleet_inputs import (
    LiveSources,
    Progress,
    load_fleet_settings,
    read_fleet,
    read_gate,
)
from fleetwarden.app.fleet import GateInputs, LoadedFleet, nothing_observed, require_app

__all__ = ["load_fleet", "load_gate"]

_NO_DESIRED = "no desired state: give --desired PATH or --argocd-app APPLICATION"


def load_fleet(
    app: str,
    desired: Sequence[str],
    workloads: Sequence[str],
    config: Path | None,
    live: LiveSources,
    *,
    progress: Progress,
) -> LoadedFleet:
    """``app``'s desired state and the clusters' workloads, from ``desired``/``workloads``
    paths and the ``live`` sources; ``config``: the ``--config`` file."""
    settings, fleet = load_fleet_settings(config)
    if not desired and not live.argocd_apps:
        raise ValueError(_NO_DESIRED)
    if not workloads and live.kubeconfig is None:
        raise ValueError(
            "no observed state: give --workloads PATH (dumps) or --kubeconfig FILE (live)"
        )
    state, observed = read_fleet(
        app, desired, workloads, settings, fleet, live,
        check=partial(require_app, app), progress=progress,
    )  # fmt: skip
    if (problem := nothing_observed(state, observed)) is not None:
        raise ValueError(problem)
    return LoadedFleet(app, state, state.indexes(observed), observed, fleet)


def load_gate(
    app: str,
    desired: Sequence[str],
    nodes: Sequence[str],
    workloads: Sequence[str],
    config: Path | None,
    live: LiveSources,
    *,
    in_cluster: str | None,
    progress: Progress,
) -> GateInputs:
    """What ``gate`` needs for ``app``: nodes from ``nodes`` dumps, the ``live`` contexts or
    the pod's own cluster (``in_cluster``, named as the pool definitions name it)."""
    settings, fleet = load_fleet_settings(config)
    if not desired and not live.argocd_apps:
        raise ValueError(_NO_DESIRED)
    if not nodes and live.kubeconfig is None and in_cluster is None:
        raise ValueError("no nodes: give --nodes PATH, --kubeconfig FILE or --in-cluster CLUSTER")
    state, node_map, observed = read_gate(
        app, desired, nodes, workloads, settings, fleet, live,
        in_cluster=in_cluster, check=partial(require_app, app), progress=progress,
    )  # fmt: skip
    if not node_map:
        raise ValueError("--nodes: no node dump found")
    return GateInputs(app, settings, fleet, state, node_map, observed)
