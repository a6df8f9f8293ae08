"""Bootstrap objects: what the kubelet of a pool's machines registers.

- ``KubeadmConfigTemplate`` (MachineDeployment) / ``KubeadmConfig`` (MachinePool): the join
  ``nodeRegistration.taints`` and ``kubeletExtraArgs`` (v1beta1 ``{name: value}``, v1beta2
  ``[{name, value}]``): ``node-labels``, ``register-with-taints`` (it replaces the taints kubeadm
  derives from ``nodeRegistration.taints``), ``max-pods``. Kubeadm bootstrap also registers every
  node with ``node.cluster.x-k8s.io/uninitialized:NoSchedule``, which CAPI removes once it has
  synced the Machine's labels (CAPI >= 1.4): a startup taint.
- CAPA's ``EKSConfig(Template)``: ``kubeletExtraArgs``; ``NodeadmConfig(Template)`` (AL2023
  nodeadm): ``kubelet.flags`` and ``kubelet.config`` (``registerWithTaints``, ``maxPods``).
- Shell commands and file contents (``preKubeadmCommands``, ``files[*].content`` ...) are
  searched for kubelet flags with ``formats.bootstrap``.

``kubeletExtraArgs`` flags are read as the kubelet reads them (``formats.bootstrap``:
``kubelet_labels``, ``register_with_taints``, ``max_pods``): a flag the kubelet refuses -- a
label it may not set itself (the ``kubernetes.io`` / ``k8s.io`` namespaces except
``kubelet.kubernetes.io``, ``node.kubernetes.io`` and the well-known keys; k8s
``IsKubeletLabel``), a malformed label or taint, an effect not spelt exactly, a ``max-pods``
Go's ParseInt refuses (``058``, `` 58``) -- stops it, so no node of the pool joins: a
``FormatError``. A flag given twice (the v1beta2 list) acts as in the kubelet: the last
``register-with-taints`` / ``max-pods`` wins, the earlier is listed as ignored.
``node-role.kubernetes.io/*`` must come from the Machine template. In shell commands and files,
found by searching text, such a flag is an error too where it is a shell word of its own (one
inside other text, a ``sed`` expression, is unresolved, and a label the kubelet may not set there
is listed as ignored with the reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from fleetwarden.core.pools import Taint
from fleetwarden.formats import bootstrap
from fleetwarden.formats.accounting import Path
from fleetwarden.formats.bootstrap import (
    GO_SPACE,
    KubeletFlagError,
    kubelet_labels,
    kubelet_may_set,
    kubelet_taint,
    kubelet_taints,
    label_value,
    qualified_name,
)
from fleetwarden.formats.capi.objects import Context, Reader, Source, placeholder

__all__ = [
    "READERS",
    "UNINITIALIZED",
    "kubelet_labels",
    "kubelet_may_set",
    "kubelet_taint",
    "kubelet_taints",
    "label_value",
    "qualified_name",
]

# Set by kubeadm bootstrap on every joining node, removed by CAPI once labels are synced.
UNINITIALIZED = Taint("node.cluster.x-k8s.io/uninitialized", None, "NoSchedule")
_CLOUD_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"

# what to do instead of a --node-labels label the kubelet refuses
_ON_THE_TEMPLATE = (
    " (a node-role.kubernetes.io/* label belongs in the Machine template's metadata.labels: "
    "CAPI syncs it to the Node)"
)
_T = TypeVar("_T")

_NOT_ON_NODE = "not visible on a Node"

_KUBEADM: dict[str, str] = {
    "clusterConfiguration": "kubeadm ClusterConfiguration: control-plane settings, not used "
    "by joining workers",
    "initConfiguration": "kubeadm init: run only by the first control-plane machine",
    "joinConfiguration.apiVersion": "kubeadm API version of the join configuration",
    "joinConfiguration.kind": "kubeadm API kind of the join configuration",
    "joinConfiguration.caCertPath": f"how kubeadm joins: {_NOT_ON_NODE}",
    "joinConfiguration.discovery": f"how kubeadm joins: {_NOT_ON_NODE}",
    "joinConfiguration.skipPhases": f"kubeadm join phases: {_NOT_ON_NODE}",
    "joinConfiguration.patches": "kubeadm component patches: not compared",
    "joinConfiguration.timeouts": f"kubeadm timeouts: {_NOT_ON_NODE}",
    "joinConfiguration.nodeRegistration.name": "node name template: nodes are grouped by "
    "pool labels, not names",
    "joinConfiguration.nodeRegistration.criSocket": "container runtime socket: not compared",
    "joinConfiguration.nodeRegistration.ignorePreflightErrors": f"kubeadm checks: {_NOT_ON_NODE}",
    "joinConfiguration.nodeRegistration.imagePullPolicy": f"kubeadm image pulls: {_NOT_ON_NODE}",
    "joinConfiguration.nodeRegistration.imagePullSerial": f"kubeadm image pulls: {_NOT_ON_NODE}",
    "diskSetup": "disk partitions: not compared (the infrastructure's OS disk size is)",
    "mounts": f"mounts: {_NOT_ON_NODE}",
    "users": f"OS users and SSH keys: {_NOT_ON_NODE}",
    "ntp": f"time servers: {_NOT_ON_NODE}",
    "format": "bootstrap data format (cloud-config; ignition for Flatcar): the OS is read from "
    "the infrastructure's image",
    "ignition": f"Ignition settings: {_NOT_ON_NODE}",
    "verbosity": "kubeadm log level",
    "useExperimentalRetryJoin": "kubeadm join retries",
}
_FILES: dict[str, str] = {
    f"files[*].{key}": f"file written on the machine: {_NOT_ON_NODE}"
    for key in ("path", "owner", "permissions", "encoding", "append", "contentFrom")
}
_EKS: dict[str, str] = {
    "containerRuntime": "container runtime: not compared",
    "dnsClusterIP": "kubelet cluster DNS: not on the Node object",
    "dockerConfigJson": f"registry credentials: {_NOT_ON_NODE}",
    "apiRetryAttempts": f"bootstrap retries: {_NOT_ON_NODE}",
    "pauseContainer": f"pause image: {_NOT_ON_NODE}",
    "useMaxPods": "the AMI's max-pods computation: allocatable is compared with the pool's median",
    "serviceIPV6Cidr": f"service network: {_NOT_ON_NODE}",
    "diskSetup": "disk partitions: not compared",
    "mounts": f"mounts: {_NOT_ON_NODE}",
    "users": f"OS users and SSH keys: {_NOT_ON_NODE}",
    "ntp": f"time servers: {_NOT_ON_NODE}",
}
_NODEADM: dict[str, str] = {
    "containerd": "containerd configuration: not compared",
    "featureGates": "nodeadm feature gates: not compared",
    "diskSetup": "disk partitions: not compared",
    "mounts": f"mounts: {_NOT_ON_NODE}",
    "users": f"OS users and SSH keys: {_NOT_ON_NODE}",
    "ntp": f"time servers: {_NOT_ON_NODE}",
}
_TEMPLATE_METADATA = "labels/annotations of the generated bootstrap objects: not on Nodes"


def _base(src: Source, inner: Mapping[str, str]) -> tuple[Path, dict[str, str]]:
    """``spec.template.spec`` of a template, ``spec`` of an object; the table to close
    the whole ``spec``, keyed from it."""
    if src.doc.kind.endswith("Template"):
        table = {f"template.spec.{k}": v for k, v in inner.items()}
        table["template.metadata"] = _TEMPLATE_METADATA
        return ("spec", "template", "spec"), table
    return ("spec",), dict(inner)


def _kubeadm(src: Source, _base_path: Path, ctx: Context) -> None:
    base, table = _base(src, {**_KUBEADM, **_FILES})
    pool = src.pool
    registration: Path = (*base, "joinConfiguration", "nodeRegistration")
    if src.get((*base, "joinConfiguration", "controlPlane")) is not None:
        # bootstrap/kubeadm/.../kubeadmconfig_controller.go joinWorker: "Machine is a Worker,
        # but JoinConfiguration.ControlPlane is set in the KubeadmConfig object"
        raise src.error(
            (*base, "joinConfiguration", "controlPlane"),
            "set for the machines of a worker pool: CAPI refuses to bootstrap them (no node "
            "joins); control-plane join settings belong in a KubeadmControlPlane",
        )
    pool.startup_taints.append(UNINITIALIZED)
    src.default(
        (*registration, "taints"),
        f"startupTaints.{UNINITIALIZED.key}",
        f"{UNINITIALIZED.key}:{UNINITIALIZED.effect}",
        "CAPI kubeadm bootstrap (>= 1.4): every joining node, until CAPI has synced its labels",
    )
    taints_path: Path = (*registration, "taints")
    taint_why = src.patch_of(taints_path)
    taints: list[tuple[Taint, Path]] = []
    if taint_why is not None:
        src.unresolved(taints_path, "taints", taint_why)
    else:
        taints = [(t, where) for t, _, where in src.taint_objects(taints_path)]
    args_path: Path = (*registration, "kubeletExtraArgs")
    args_why = src.patch_of(args_path)
    if args_why is not None:
        src.unresolved(args_path, "labels", args_why)
        src.unresolved(args_path, "taints", args_why)
    else:
        replaced = _kubelet_args(src, args_path)
        if replaced:
            for _, where in taints:
                src.ignored(
                    where, "replaced by kubeletExtraArgs register-with-taints (the kubelet flag)"
                )
            taints = []
    for taint, where in taints:
        _taint(src, taint, where)
    for key in ("preKubeadmCommands", "postKubeadmCommands", "bootCommands"):
        _commands(src, (*base, key))
    _file_contents(src, base)
    src.close(("spec",), table)


def _eks_config(src: Source, _base_path: Path, ctx: Context) -> None:
    base, table = _base(src, {**_EKS, **_FILES})
    _kubelet_args(src, (*base, "kubeletExtraArgs"))
    for key in ("preBootstrapCommands", "postBootstrapCommands", "boostrapCommandOverride"):
        _commands(src, (*base, key))
    _file_contents(src, base)
    src.close(("spec",), table)


def _nodeadm(src: Source, _base_path: Path, ctx: Context) -> None:
    base, table = _base(src, {**_NODEADM, **_FILES})
    kubelet: Path = (*base, "kubelet")
    flags_path: Path = (*kubelet, "flags")
    flags = [
        src.string(f, (*flags_path, i), allow_none=False) or ""
        for i, f in enumerate(src.items(src.get(flags_path), flags_path))
    ]
    if flags:
        facts = _read(src, flags_path, _nodeadm_flags, " ".join(flags))
        _boot_facts(src, flags_path, facts, "kubelet flags: no node labels, taints or max-pods")
    config_path: Path = (*kubelet, "config")
    config = src.at(config_path)
    if config:
        # the kubelet lets a flag override its configuration (nodeadm: flags on the command
        # line, the configuration in a drop-in file)
        given = bootstrap.flags_given(" ".join(flags))
        facts = _read(src, config_path, partial(_kubelet_config, flags=given), config)
        for note in facts.ignored:
            src.ignored((*config_path, note.split(":", 1)[0]), note)
        for expression in facts.unresolved:
            src.unresolved(config_path, bootstrap.unresolved_fact(expression), expression)
        for taint in facts.taints:
            src.pool.taints.append(taint)
            src.compared((*config_path, "registerWithTaints"), taint.field_name)
        if facts.max_pods is not None:
            src.pool.allocatable["pods"] = str(facts.max_pods)
            src.compared((*config_path, "maxPods"), "allocatable.pods", facts.max_pods)
        for key in config:
            if key not in ("registerWithTaints", "maxPods"):
                src.ignored(
                    (*config_path, str(key)),
                    "kubelet configuration: not compared (allocatable is compared with the "
                    "pool's median)",
                )
    _commands(src, (*base, "preNodeadmCommands"))
    _file_contents(src, base)
    src.close(("spec",), table)


def _kubelet_args(src: Source, path: Path) -> bool:
    """Read kubelet extra args; True when ``register-with-taints`` is among them. A flag given
    twice (the v1beta2 list) is read as the kubelet reads it: ``node-labels`` add up, the last
    ``register-with-taints`` and ``max-pods`` win."""
    args = _args(src, path)
    last = {name: where for name, _, where in args if name in _LAST_WINS}
    replaced = False
    for name, value, where in args:
        if name in _LAST_WINS and where != last[name]:
            src.ignored(where, f"replaced by a later {name} (the kubelet keeps the last)")
        elif name == "node-labels":
            _node_labels(src, value, where)
        elif name == "register-with-taints":
            replaced = True
            _register_with_taints(src, value, where)
        elif name == "max-pods":
            _max_pods(src, value, where)
        elif name == "cloud-provider":
            src.ignored(
                where,
                "kubelet flag: the cloud provider (external: the node starts with the transient "
                f"{_CLOUD_UNINITIALIZED} taint)",
            )
        else:
            src.ignored(where, f"kubelet flag {name}: {_NOT_ON_NODE} (not compared)")
    return replaced


_LAST_WINS = ("register-with-taints", "max-pods")


def _max_pods(src: Source, value: str, where: Path) -> None:
    if placeholder(value):
        src.unresolved(where, "allocatable.pods", value)
        return
    try:
        pods = bootstrap.max_pods(value)
    except KubeletFlagError as exc:
        raise src.error(where, f"kubelet flag --max-pods: {exc}") from None
    src.pool.allocatable["pods"] = str(pods)
    src.compared(where, "allocatable.pods", value if str(pods) == value else f"{value} ({pods})")


def _args(src: Source, path: Path) -> list[tuple[str, str, Path]]:
    """v1beta1 ``{name: value}`` or v1beta2 ``[{name, value}]`` as (name, value, path)."""
    value = src.get(path)
    out = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            where: Path = (*path, i)
            entry = src.mapping(item, where)
            name = src.string(entry.get("name"), (*where, "name"), allow_none=False) or ""
            text = src.string(entry.get("value"), (*where, "value")) or ""
            out.append((name, text, where))
        return out
    for raw_name, raw_value in src.mapping(value, path).items():
        name = src.string(raw_name, path, allow_none=False) or ""
        where = (*path, name)
        out.append((name, src.string(raw_value, where) or "", where))
    return out


def _node_labels(src: Source, text: str, path: Path) -> None:
    shown: list[str] = []
    for item in text.split(","):
        if placeholder(item):
            key, sep, _ = item.partition("=")
            fact = f"labels.{key.strip(GO_SPACE)}" if sep and not placeholder(key) else "labels"
            src.unresolved(path, fact, item.strip(GO_SPACE))
            continue
        try:
            pairs = kubelet_labels(item)
        except KubeletFlagError as exc:
            raise src.error(path, f"kubelet flag --node-labels: {_refusal(exc)}") from None
        for key, value in pairs:
            src.pool.labels[key] = value
            src.compared(path, f"labels.{key}", f"{key}={value}")
            shown.append(f"{key}={value}")
    if shown:  # one account entry for the whole flag, every label in it
        src.compared(path, "labels", ", ".join(shown))


def _register_with_taints(src: Source, text: str, path: Path) -> None:
    items = text.split(",") if text else []
    for item in items:
        if placeholder(item):
            src.unresolved(path, "taints", item)
    literal = ",".join(item for item in items if not placeholder(item))
    try:
        taints, dropped = bootstrap.register_with_taints(literal)
    except KubeletFlagError as exc:
        raise src.error(path, f"kubelet flag --register-with-taints: {exc}") from None
    for taint in taints:
        _taint(src, taint, path)
    if dropped:
        src.ignored(path, f"{', '.join(dropped)}: {bootstrap.DROPPED_TAINT}")


def _taint(src: Source, taint: Taint, where: Path) -> None:
    if taint.key == _CLOUD_UNINITIALIZED:  # removed by the cloud controller manager
        src.pool.startup_taints.append(taint)
        src.compared(where, f"startupTaints.{taint.key}", f"{taint.key}:{taint.effect}")
    else:
        src.pool.taints.append(taint)
        src.compared(where, taint.field_name, f"{taint.key}={taint.value or ''}:{taint.effect}")


def _commands(src: Source, path: Path) -> None:
    raw = src.get(path)
    if raw is None:
        return
    texts = raw if isinstance(raw, list) else [raw]
    text = "\n".join(
        src.string(t, (*path, i) if isinstance(raw, list) else path, allow_none=False) or ""
        for i, t in enumerate(texts)
    )
    _boot_facts(
        src,
        path,
        _read(src, path, bootstrap.from_user_data, text),
        "shell commands: no node labels, taints or max-pods in them",
    )


def _file_contents(src: Source, base: Path) -> None:
    files: Path = (*base, "files")
    for i, item in enumerate(src.items(src.get(files), files)):
        where: Path = (*files, i)
        content = src.mapping(item, where).get("content")
        if content is None:
            continue
        text = src.string(content, (*where, "content"), allow_none=False) or ""
        _boot_facts(
            src,
            (*where, "content"),
            _read(src, (*where, "content"), bootstrap.from_user_data, text),
            "file content: no node labels, taints or max-pods in it",
        )


def _read(
    src: Source, path: Path, parse: Callable[[_T], bootstrap.BootFacts], text: _T
) -> bootstrap.BootFacts:
    """``parse(text)``; a value the kubelet refuses is an error naming ``path``."""
    try:
        return parse(text)
    except KubeletFlagError as exc:
        raise src.error(path, _refusal(exc)) from None


def _refusal(exc: KubeletFlagError) -> str:
    """The reason, with what to do instead for a label the kubelet may not set."""
    reason = str(exc)
    return reason + _ON_THE_TEMPLATE if bootstrap.REFUSED_LABEL in reason else reason


def _nodeadm_flags(line: str) -> bootstrap.BootFacts:
    """A NodeConfig's ``kubelet.flags``: nodeadm hands them to the kubelet through no shell."""
    return bootstrap.from_kubelet_flags(line, shell=False)


def _kubelet_config(
    config: Mapping[str, Any], *, flags: frozenset[str] = frozenset()
) -> bootstrap.BootFacts:
    facts = bootstrap.BootFacts()
    bootstrap.kubelet_config(facts, config, flags=flags, drop_in=True)  # nodeadm writes one
    return facts


def _boot_facts(src: Source, path: Path, facts: bootstrap.BootFacts, nothing: str) -> None:
    pool = src.pool
    for key, value in facts.labels.items():
        pool.labels[key] = value
        src.compared(path, f"labels.{key}", f"--node-labels {key}={value}")
    if facts.ignored:
        src.ignored(path, "; ".join(facts.ignored))
    for taint in facts.taints:
        _taint(src, taint, path)
    if facts.max_pods is not None and "pods" not in pool.allocatable:
        pool.allocatable["pods"] = str(facts.max_pods)
        src.compared(path, "allocatable.pods", f"--max-pods={facts.max_pods}")
    for expression in facts.unresolved:
        src.unresolved(path, bootstrap.unresolved_fact(expression), expression)
    said = facts.labels or facts.taints or facts.unresolved or facts.ignored
    if not said and facts.max_pods is None:
        src.ignored(path, nothing)


def _gke_config(src: Source, _base_path: Path, ctx: Context) -> None:
    """CAPG's GKEConfig(Template): a placeholder (its spec has no field) for the CAPI
    contract; GKE bootstraps the nodes itself."""
    src.close(("spec",), {"template.metadata": _TEMPLATE_METADATA})


READERS: dict[str, Reader] = {
    "KubeadmConfigTemplate": _kubeadm,
    "KubeadmConfig": _kubeadm,
    "EKSConfigTemplate": _eks_config,
    "EKSConfig": _eks_config,
    "NodeadmConfigTemplate": _nodeadm,
    "NodeadmConfig": _nodeadm,
    "GKEConfigTemplate": _gke_config,
    "GKEConfig": _gke_config,
}
