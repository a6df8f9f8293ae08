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

``kubeletExtraArgs`` flags are read as the kubelet reads them (``kubelet_labels``,
``kubelet_taints``): a flag the kubelet refuses -- a label it may not set itself (the
``kubernetes.io`` / ``k8s.io`` namespaces except ``kubelet.kubernetes.io``,
``node.kubernetes.io`` and the well-known keys; k8s ``IsKubeletLabel``), a malformed label or
taint, an effect not spelt exactly -- stops it, so no node of the pool joins: a ``FormatError``.
``node-role.kubernetes.io/*`` must come from the Machine template. In shell commands and files,
found by searching text, such a label is listed as ignored with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fleetwarden.core.pools import EFFECTS, Taint
from fleetwarden.formats import bootstrap
from fleetwarden.formats.accounting import Path
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

_KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


def kubelet_may_set(key: str) -> bool:
    """May a kubelet put this label on its own Node (k8s ``IsKubeletLabel``, and any label
    outside the kubernetes.io / k8s.io namespaces)?"""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    k8s = namespace in ("kubernetes.io", "k8s.io") or namespace.endswith(
        (".kubernetes.io", ".k8s.io")
    )
    if not k8s or key in _KUBELET_LABELS:
        return True
    return any(
        namespace == allowed or namespace.endswith("." + allowed)
        for allowed in ("kubelet.kubernetes.io", "node.kubernetes.io")
    )


_REFUSED = (
    "the kubelet may not set labels in the kubernetes.io / k8s.io namespaces (it refuses to "
    "start): never on a Node (node-role.kubernetes.io/* comes from the Machine template)"
)

# What the kubelet accepts in --node-labels and --register-with-taints, read in Kubernetes'
# source: component-base cli/flag/map_string_string.go (MapStringString.Set: split on ",",
# skip empty items, key and value TrimSpace'd), pkg/util/taints/taints.go (taintsVar.Set /
# parseTaint: nothing trimmed, exactly one ":" before an exact effect, at most one "="),
# cmd/kubelet/app/options/options.go (ValidateKubeletFlags) and apimachinery
# pkg/util/validation (IsQualifiedName, IsValidLabelValue). A flag the kubelet refuses stops
# it: no node of the pool ever joins, so the file is wrong, not a pool to compare.
_GO_SPACE = (  # unicode.IsSpace: what strings.TrimSpace removes
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\Z")


def qualified_name(key: str) -> bool:
    """A label / taint key the API server accepts: ``[dns-subdomain/]name``."""
    parts = key.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2 and not (len(parts[0]) <= 253 and _SUBDOMAIN.match(parts[0])):
        return False
    return len(parts[-1]) <= 63 and _NAME.match(parts[-1]) is not None


def label_value(value: str) -> bool:
    """A label / taint value the API server accepts (empty, or up to 63 name characters)."""
    return value == "" or (len(value) <= 63 and _NAME.match(value) is not None)


def kubelet_labels(text: str) -> list[tuple[str, str]]:
    """``--node-labels`` as the kubelet reads it: (key, value) pairs in order; ValueError,
    saying why, for a value the kubelet refuses to start with."""
    out: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item:
            continue
        raw_key, sep, raw_value = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not key=value (the kubelet refuses the flag)")
        key, value = raw_key.strip(_GO_SPACE), raw_value.strip(_GO_SPACE)
        if not kubelet_may_set(key):
            raise ValueError(f"{key}: {_REFUSED}")
        if not qualified_name(key):
            raise ValueError(f"{key!r} is not a label key (the kubelet refuses to start)")
        if not label_value(value):
            raise ValueError(f"{value!r} is not a label value (the kubelet refuses to start)")
        out.append((key, value))
    return out


def kubelet_taints(text: str) -> list[Taint]:
    """``--register-with-taints`` as the kubelet reads it; ValueError, saying why, for a
    value the kubelet refuses (or registers a Node with that the API server refuses)."""
    return [kubelet_taint(item) for item in text.split(",")] if text else []


def kubelet_taint(item: str) -> Taint:
    """One comma-separated item of ``--register-with-taints`` (see ``kubelet_taints``)."""
    parts = item.split(":")
    if len(parts) == 1:
        raise ValueError(
            f"{item!r} has no effect: the API server refuses the Node the kubelet registers"
        )
    if len(parts) > 2:
        raise ValueError(f"{item!r} is not key[=value]:Effect (the kubelet refuses it)")
    body, effect = parts
    if effect not in EFFECTS:
        raise ValueError(
            f"{item!r}: the effect must be one of {', '.join(EFFECTS)}, spelt exactly "
            "(the kubelet refuses it)"
        )
    pieces = body.split("=")
    if len(pieces) > 2:
        raise ValueError(f"{item!r} is not key[=value]:Effect (the kubelet refuses it)")
    key, value = pieces[0], pieces[1] if len(pieces) == 2 else ""
    if not qualified_name(key):
        raise ValueError(f"{item!r}: {key!r} is not a taint key (the kubelet refuses it)")
    if not label_value(value):
        raise ValueError(f"{item!r}: {value!r} is not a taint value (the kubelet refuses it)")
    return Taint(key, value or None, effect)


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
        facts = bootstrap.from_kubelet_flags(" ".join(flags))
        _boot_facts(src, flags_path, facts, "kubelet flags: no node labels, taints or max-pods")
    config_path: Path = (*kubelet, "config")
    config = src.at(config_path)
    if config:
        facts = bootstrap.BootFacts()
        bootstrap.kubelet_config(facts, config)
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
    """Read kubelet extra args; True when ``register-with-taints`` is among them."""
    replaced = False
    for name, value, where in _args(src, path):
        if name == "node-labels":
            _node_labels(src, value, where)
        elif name == "register-with-taints":
            replaced = True
            _register_with_taints(src, value, where)
        elif name == "max-pods":
            if placeholder(value):
                src.unresolved(where, "allocatable.pods", value)
            elif value.strip().isascii() and value.strip().isdigit():
                src.pool.allocatable["pods"] = value.strip()
                src.compared(where, "allocatable.pods", value.strip())
            else:
                raise src.error(where, f"max-pods {value!r} is not a number")
        elif name == "cloud-provider":
            src.ignored(
                where,
                "kubelet flag: the cloud provider (external: the node starts with the transient "
                f"{_CLOUD_UNINITIALIZED} taint)",
            )
        else:
            src.ignored(where, f"kubelet flag {name}: {_NOT_ON_NODE} (not compared)")
    return replaced


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
            fact = f"labels.{key.strip(_GO_SPACE)}" if sep and not placeholder(key) else "labels"
            src.unresolved(path, fact, item.strip(_GO_SPACE))
            continue
        try:
            pairs = kubelet_labels(item)
        except ValueError as exc:
            raise src.error(path, f"kubelet flag --node-labels: {exc}") from None
        for key, value in pairs:
            src.pool.labels[key] = value
            src.compared(path, f"labels.{key}", f"{key}={value}")
            shown.append(f"{key}={value}")
    if shown:  # one account entry for the whole flag, every label in it
        src.compared(path, "labels", ", ".join(shown))


def _register_with_taints(src: Source, text: str, path: Path) -> None:
    for item in text.split(",") if text else ():
        if placeholder(item):
            src.unresolved(path, "taints", item)
            continue
        try:
            taint = kubelet_taint(item)
        except ValueError as exc:
            raise src.error(path, f"kubelet flag --register-with-taints: {exc}") from None
        _taint(src, taint, path)


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
        bootstrap.from_user_data(text),
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
            bootstrap.from_user_data(text),
            "file content: no node labels, taints or max-pods in it",
        )


def _boot_facts(src: Source, path: Path, facts: bootstrap.BootFacts, nothing: str) -> None:
    pool = src.pool
    refused = []
    for key, value in facts.labels.items():
        if not kubelet_may_set(key):
            refused.append(f"{key}={value}")
            continue
        pool.labels[key] = value
        src.compared(path, f"labels.{key}", f"--node-labels {key}={value}")
    if refused:  # said, not dropped: a script may not hand the flag to the kubelet at all
        src.ignored(path, f"--node-labels {', '.join(refused)}: {_REFUSED}")
    for taint in facts.taints:
        _taint(src, taint, path)
    if facts.max_pods is not None and "pods" not in pool.allocatable:
        pool.allocatable["pods"] = str(facts.max_pods)
        src.compared(path, "allocatable.pods", f"--max-pods={facts.max_pods}")
    for expression in facts.unresolved:
        src.unresolved(path, _fact_of_flag(expression), expression)
    if not facts.labels and not facts.taints and facts.max_pods is None and not facts.unresolved:
        src.ignored(path, nothing)


def _fact_of_flag(expression: str) -> str:
    """The fact an unresolved kubelet flag (``--register-with-taints=${T}``) leaves open."""
    if expression.startswith(("--register-with-taints", "node-taints")):
        return "taints"
    if expression.startswith("--max-pods"):
        return "allocatable.pods"
    return "labels"


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
