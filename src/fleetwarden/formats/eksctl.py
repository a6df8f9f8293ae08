"""eksctl ``ClusterConfig``: ``nodeGroups`` and ``managedNodeGroups`` as desired pools.

Nodes of an eksctl nodegroup carry ``alpha.eksctl.io/nodegroup-name`` (and, when managed,
``eks.amazonaws.com/nodegroup``); both name the nodegroup, so the pool name is its ``name``.

Most real eksctl files rely on eksctl's defaults, so they are desired values too, each with its
provenance (read in eksctl's own source, ``pkg/apis/eksctl.io/v1alpha5``, up to v0.230.0):

- instance type ``m5.large`` (``DefaultNodeType``, unchanged since 2019) unless the group states
  ``instanceType``/``instanceTypes``, ``instancesDistribution.instanceTypes``,
  ``instanceSelector`` or a ``launchTemplate``, or runs on an Outpost;
- sizes: ``DefaultNodeCount`` 2; an unset ``minSize`` is ``desiredCapacity`` (else 2), an
  unset ``maxSize`` is ``desiredCapacity`` (else ``minSize``; managed groups: at least 1)
  (``pkg/cfn/builder/nodegroup.go``, ``validation.go``). The count is checked against
  ``minSize..maxSize``: an autoscaler moves ``desiredCapacity``;
- volume ``DefaultNodeVolumeSize`` 80 GiB since eksctl 0.22 (not for a managed group with a
  ``launchTemplate``); on Bottlerocket it sizes the data volume that holds ephemeral storage;
- AMI family ``DefaultNodeImageFamily``: AmazonLinux2023 since eksctl 0.219; before that AL2,
  with AL2023 for managed groups on Kubernetes >= 1.30 (0.179+) and unmanaged ones on >= 1.33
  (0.209+). The file does not say which release applied it, so without ``scan.provisioners.
  eksctl`` both families are accepted below Kubernetes 1.33 (EKS has no AL2 AMIs from 1.33).
  A managed group of GPU instance types on Kubernetes 1.30-1.32 got AL2023 and was refused
  (0.179-0.182), AL2 (0.183-0.191; ARM GPUs to 0.207) or AL2023: without the release its
  ``amiFamily`` (the OS image) is unresolved, with that reason, not assumed;
- labels eksctl sets on every node: ``alpha.eksctl.io/cluster-name`` and
  ``alpha.eksctl.io/nodegroup-name``; EKS adds ``eks.amazonaws.com/capacityType``
  (``SPOT`` with ``spot: true``, else ``ON_DEMAND``) on managed nodes.

The node groups have no version of their own: the kubelet minor is ``metadata.version``; when
that is unset eksctl uses the control plane's version, which the file does not state (so it is
not compared). Labels, taints and max-pods in ``overrideBootstrapCommand`` /
``preBootstrapCommands`` (kubelet flags, an AL2023 NodeConfig) and ``kubeletExtraConfig``
(``registerWithTaints``, ``maxPods``) are read; every other attribute is listed as ignored with
the reason, and an attribute this reader does not know as unaccounted (``fleetwarden explain``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import (
    NodePoolSpec,
    Provisioner,
    Requirement,
    Taint,
    Unresolved,
)
from fleetwarden.formats import bootstrap, eks_auto_mode
from fleetwarden.formats import eksctl_families as families_of
from fleetwarden.formats import eksctl_values as strict
from fleetwarden.formats.accounting import Ledger, View
from fleetwarden.formats.documents import Document, PoolsRead, expect_list, expect_mapping
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed

__all__ = ["DEFAULT_INSTANCE_TYPE", "DEFAULT_NODE_COUNT", "DEFAULT_VOLUME_GIB", "read_pools"]

_GROUP = "eksctl.io"
DEFAULT_INSTANCE_TYPE = "m5.large"
DEFAULT_NODE_COUNT = 2
DEFAULT_VOLUME_GIB = 80
_ZONE_LABEL = "topology.kubernetes.io/zone"
_CAPACITY_LABEL = "eks.amazonaws.com/capacityType"
_NOT_ON_NODE = "not visible on a Node"

# attribute (dotted, "[*]" for list items) -> why it is not compared
_IGNORED: dict[str, str] = {
    "subnets": f"subnets: {_NOT_ON_NODE} (zones are compared through availabilityZones)",
    "localZones": "local zones: not compared",
    "instancePrefix": f"EC2 Name tag prefix: {_NOT_ON_NODE}",
    "instanceName": f"EC2 Name tag: {_NOT_ON_NODE}",
    "ssh": f"SSH / SSM access: {_NOT_ON_NODE}",
    "privateNetworking": f"subnet choice: {_NOT_ON_NODE}",
    "tags": f"AWS resource tags: {_NOT_ON_NODE}",
    "iam": f"IAM role and policies: {_NOT_ON_NODE}",
    "securityGroups": f"security groups: {_NOT_ON_NODE}",
    "asgSuspendProcesses": f"Auto Scaling group behaviour: {_NOT_ON_NODE}",
    "ebsOptimized": f"EC2 EBS optimisation: {_NOT_ON_NODE}",
    "volumeType": f"EBS volume type: {_NOT_ON_NODE} (its size is compared)",
    "volumeName": f"device name of the sized volume: {_NOT_ON_NODE}",
    "volumeEncrypted": f"EBS encryption: {_NOT_ON_NODE}",
    "volumeKmsKeyID": f"EBS encryption key: {_NOT_ON_NODE}",
    "volumeIOPS": f"EBS IOPS: {_NOT_ON_NODE}",
    "volumeThroughput": f"EBS throughput: {_NOT_ON_NODE}",
    "additionalVolumes": "extra EBS volumes: not the kubelet's ephemeral storage",
    "additionalEncryptedVolume": f"extra encrypted volume: {_NOT_ON_NODE}",
    "propagateASGTags": f"copies labels/taints to Auto Scaling tags: {_NOT_ON_NODE}",
    "disableIMDSv1": f"instance metadata settings: {_NOT_ON_NODE}",
    "disablePodIMDS": f"instance metadata settings: {_NOT_ON_NODE}",
    "placement": f"EC2 placement group: {_NOT_ON_NODE}",
    "efaEnabled": "EFA network interfaces: not compared (an extended resource of a device plugin)",
    "enableDetailedMonitoring": f"CloudWatch monitoring: {_NOT_ON_NODE}",
    "capacityReservation": f"On-Demand capacity reservation: {_NOT_ON_NODE}",
    "instanceMarketOptions": f"EC2 market options (capacity blocks): {_NOT_ON_NODE}",
    "outpostARN": f"AWS Outposts placement: {_NOT_ON_NODE}",
    "asgMetricsCollection": f"Auto Scaling metrics: {_NOT_ON_NODE}",
    "cpuCredits": f"burstable CPU credits: {_NOT_ON_NODE}",
    "classicLoadBalancerNames": f"load balancer attachment: {_NOT_ON_NODE}",
    "targetGroupARNs": f"load balancer attachment: {_NOT_ON_NODE}",
    "updateConfig": f"rolling update settings: {_NOT_ON_NODE}",
    "clusterDNS": "kubelet clusterDNS: not on the Node object",
    "containerRuntime": "container runtime: not compared",
    "maxInstanceLifetime": f"instance recycling: {_NOT_ON_NODE}",
    "enclaveEnabled": f"Nitro enclaves: {_NOT_ON_NODE}",
    "nodeRepairConfig": f"EKS node auto-repair: {_NOT_ON_NODE}",
    "releaseVersion": "EKS AMI release: not compared (the kubelet minor is, via metadata.version)",
    "bottlerocket": "Bottlerocket settings (eksctl refuses node labels and taints there): "
    "not compared",
    "warmPool": f"Auto Scaling warm pool: {_NOT_ON_NODE}",
    "ami": "AMI id / resolver: nodes do not report it (the OS family is compared)",
}
for _key in (
    "maxPrice",
    "onDemandBaseCapacity",
    "onDemandPercentageAboveBaseCapacity",
    "spotInstancePools",
    "spotAllocationStrategy",
    "capacityRebalance",
):
    _IGNORED[f"instancesDistribution.{_key}"] = (
        "spot / on-demand mix of the Auto Scaling group: not compared per node"
    )
_KUBELET_IGNORED = (
    "kubelet configuration: not compared (allocatable is compared with the pool's own median)"
)


def read_pools(docs: Sequence[Document], *, assume: Assumed | None = None) -> PoolsRead:
    assume = assume or Assumed()
    out = PoolsRead()
    for doc in docs:
        if doc.group != _GROUP or doc.kind != "ClusterConfig":
            continue
        out.claimed.add((doc.path, doc.index))
        if doc.api_version != strict.API_VERSION:
            raise FormatError(
                doc.path,
                f"eksctl serves only apiVersion {strict.API_VERSION}, not {doc.api_version!r}",
                field=doc.where("apiVersion"),
            )
        pools = _pools_of(doc, assume) + _auto_mode_pools(doc)
        out.pools.extend(pools)
        if not pools:
            auto = expect_mapping(doc, doc.body.get("autoModeConfig"), "autoModeConfig")
            why = " (EKS Auto Mode with nodePools: [])" if auto.get("enabled") is True else ""
            out.notes.setdefault(doc.path, f"no node-pool definition (eksctl ClusterConfig{why})")
    return out


def _auto_mode_pools(doc: Document) -> list[NodePoolSpec]:
    """EKS Auto Mode's built-in NodePools the file enables (``autoModeConfig``): eksctl
    creates ``nodePools`` (default: both built-in ones, ``[]``: none), validated as eksctl
    does (``ValidateAutoModeConfig``)."""
    auto = expect_mapping(doc, doc.body.get("autoModeConfig"), "autoModeConfig")
    enabled = auto.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise FormatError(
            doc.path, "expected true or false", field=doc.where("autoModeConfig.enabled")
        )
    raw = expect_list(doc, auto.get("nodePools"), "autoModeConfig.nodePools")
    if not enabled:
        if raw or auto.get("nodeRoleARN") or auto.get("permissionsBoundaryARN"):
            raise FormatError(
                doc.path,
                "cannot set nodeRoleARN, permissionsBoundaryARN or nodePools when Auto Mode "
                "is disabled (autoModeConfig.enabled is not true)",
                field=doc.where("autoModeConfig"),
            )
        return []
    stated = "nodePools" in auto and auto["nodePools"] is not None
    names = (
        [
            str(strict.text(doc, n, f"autoModeConfig.nodePools[{i}]", allow_none=False))
            for i, n in enumerate(raw)
        ]
        if stated
        else list(eks_auto_mode.BUILT_IN)
    )
    problem = eks_auto_mode.check_names(names)
    if problem:
        raise FormatError(doc.path, problem, field=doc.where("autoModeConfig.nodePools"))
    meta = expect_mapping(doc, doc.body.get("metadata"), "metadata")
    cluster = _cluster_name(doc, meta)
    version, version_unknown = strict.version(doc, meta.get("version"))
    pools = []
    for i, name in enumerate(names):
        ledger = Ledger()
        view = ledger.view(doc.path, lines=doc.line_of)
        attr = f"autoModeConfig.nodePools[{i}]" if stated else "autoModeConfig.nodePools"
        if stated:
            view.compared(("autoModeConfig", "nodePools", i), "name", name)
        else:
            ledger.default("name", attr, name, _AUTO_MODE_POOLS_DEFAULT)
        view.ignored("autoModeConfig.enabled", "switches EKS Auto Mode on: these are its pools")
        for key in ("nodeRoleARN", "permissionsBoundaryARN"):
            if auto.get(key):
                view.ignored(("autoModeConfig", key), "IAM of Auto Mode nodes: not on a node")
        if version:
            view.compared("metadata.version", "kubernetesVersion", version)
        elif version_unknown:
            view.unresolved("metadata.version", version_unknown, "kubernetesVersion")
        else:
            ledger.unstated(
                "kubernetesVersion",
                "metadata.version",
                "not stated: Auto Mode nodes follow the control plane's version, which the "
                "file does not say (not compared)",
            )
        pools.append(
            eks_auto_mode.builtin_pool(
                name,
                cluster=cluster,
                source=doc.path,
                source_format="eksctl",
                attr=attr,
                ledger=ledger,
                kubernetes_version=version,
            )
        )
    return pools


_AUTO_MODE_POOLS_DEFAULT = (
    "eksctl: autoModeConfig.nodePools defaults to every built-in NodePool "
    "(AutoModeKnownNodePools: general-purpose, system)"
)


def _pools_of(doc: Document, assume: Assumed) -> list[NodePoolSpec]:
    meta = expect_mapping(doc, doc.body.get("metadata"), "metadata")
    version, version_unknown = strict.version(doc, meta.get("version"))
    outpost = expect_mapping(doc, doc.body.get("outpost"), "outpost")
    raw_name = strict.text(doc, meta.get("name"), "metadata.name")
    cluster_facts = _Cluster(
        _cluster_name(doc, meta),
        raw_name if strict.placeholder(raw_name) else None,
        version,
        version_unknown,
        bool(outpost.get("controlPlaneOutpostARN")),
    )
    pools: list[NodePoolSpec] = []
    seen: dict[str, str] = {}
    for section, managed in (("nodeGroups", False), ("managedNodeGroups", True)):
        for i, raw in enumerate(expect_list(doc, doc.body.get(section), section)):
            where = f"{section}[{i}]"
            ng = expect_mapping(doc, raw, where)
            group = _Group(doc, ng, (section, i), where, managed=managed, assume=assume)
            spec = group.spec(cluster_facts)
            if spec.name in seen:
                raise FormatError(
                    doc.path,
                    f"nodegroup name {spec.name!r} is used twice ({seen[spec.name]} and "
                    f"{where}): eksctl refuses the file",
                    field=doc.where(f"{where}.name"),
                )
            seen[spec.name] = where
            pools.append(spec)
    return pools


@dataclass(frozen=True, slots=True)
class _Cluster:
    """What the cluster part of the file says that its node groups depend on."""

    name: str | None  # None: not stated, or a variable (listed as unresolved)
    name_variable: str | None  # metadata.name when it is a variable (``${CLUSTER}``)
    version: str | None
    version_unknown: str | None  # why the version is not known (auto, latest, a variable)
    outposts: bool  # the control plane runs on AWS Outposts (so do the node groups)


def _cluster_name(doc: Document, meta: Mapping[str, Any]) -> str | None:
    """``metadata.name``; None when it is a variable (a template: the cluster is then the one
    given on the command line, ``CLUSTER=PATH``)."""
    name = strict.text(doc, meta.get("name"), "metadata.name")
    return None if strict.placeholder(name) else name


class _Group:
    """One node group being read: its facts, their provenance and the account of its fields."""

    def __init__(
        self,
        doc: Document,
        ng: Mapping[str, Any],
        base: tuple[str | int, ...],
        where: str,
        *,
        managed: bool,
        assume: Assumed,
    ) -> None:
        self.doc, self.ng, self.where, self.managed, self.assume = doc, ng, where, managed, assume
        self.ledger = Ledger()
        self.view: View = self.ledger.view(doc.path, base=base, lines=doc.line_of)
        self.unresolved: list[Unresolved] = []
        self.ami_family: str | None = None  # amiFamily as eksctl spells it, when stated
        self.outposts = False  # the control plane is on AWS Outposts

    # -- typed reads -------------------------------------------------------------------------

    def _str(self, key: str) -> str | None:
        return strict.text(self.doc, self.ng.get(key), f"{self.where}.{key}")

    def _int(self, key: str, fact: str) -> int | None:
        """A whole number; a variable (``${SIZE}``) is listed as unresolved (None)."""
        value = self.ng.get(key)
        if strict.placeholder(value):
            self._unresolve(key, fact, value)
            return None
        return strict.count(self.doc, value, f"{self.where}.{key}")

    def _unresolve(self, attr: str, fact: str, expression: str) -> None:
        self.view.unresolved(attr, expression, fact)
        self.unresolved.append(Unresolved(fact, expression))

    # -- the pool --------------------------------------------------------------------------

    def spec(self, facts: _Cluster) -> NodePoolSpec:
        doc, ng, view = self.doc, self.ng, self.view
        cluster, version = facts.name, facts.version
        self.outposts = facts.outposts
        name = strict.text(doc, ng.get("name"), f"{self.where}.name", allow_none=False)
        assert name is not None
        if strict.placeholder(name):  # a template's group: its nodes cannot be told apart
            self._unresolve("name", "name", name)
        else:
            view.compared("name", "name", name)
        meta_view = self.ledger.view(doc.path, base=("metadata",), lines=doc.line_of)
        if facts.name_variable:
            meta_view.unresolved("name", facts.name_variable, "cluster")
        if version:
            meta_view.compared("version", "kubernetesVersion", version)
        elif facts.version_unknown:
            meta_view.unresolved("version", facts.version_unknown, "kubernetesVersion")
            self.unresolved.append(Unresolved("kubernetesVersion", facts.version_unknown))
        else:
            self.ledger.unstated(
                "kubernetesVersion",
                "metadata.version",
                "not stated: eksctl then uses the control plane's version, which the file "
                "does not say (not compared)",
            )
        types = self._instance_types()
        lo, hi, desired = self._sizes()
        family, alternatives = self._os_family(version, types)
        labels, taints, max_pods = self._labels_taints(facts, name)
        disk = self._disk()
        requirements = self._zones()
        allocatable = {"pods": str(max_pods)} if max_pods is not None else {}
        view.close(ng, _IGNORED)
        return NodePoolSpec(
            name=name,
            cluster=cluster,
            provider=Provisioner.AWS,
            source=doc.path,
            source_format="eksctl",
            instance_types=types,
            requirements=requirements,
            disk_size_gib=disk,
            disk_type=self._str("volumeType"),
            min_size=lo,
            max_size=hi,
            desired_size=desired,
            labels=MappingProxyType(labels),
            taints=tuple(sorted(set(taints))),
            kubernetes_version=version,
            os_family=family,
            os_family_alternatives=alternatives,
            allocatable=allocatable,
            unresolved=tuple(self.unresolved),
            provenance=dict(self.ledger.provenance),
            account=self.ledger.entries(),
        )

    def _instance_types(self) -> tuple[str, ...]:
        doc, ng, view, where = self.doc, self.ng, self.view, self.where
        types: list[str] = []
        variables: list[str] = []  # ${VAR} types: unresolved
        single = self._str("instanceType")
        if single == "mixed":
            view.ignored("instanceType", "'mixed': the types are instancesDistribution's")
        elif strict.placeholder(single):
            variables.append(str(single))
            self._unresolve("instanceType", "instanceTypes", str(single))
        elif single:
            types.append(single)
            view.compared("instanceType", "instanceTypes", single)
        if "instanceTypes" in ng and not self.managed:
            raise FormatError(
                doc.path,
                "instanceTypes is a field of managedNodeGroups: a nodeGroups entry takes "
                "instanceType or instancesDistribution.instanceTypes (eksctl refuses it)",
                field=doc.where(f"{where}.instanceTypes"),
            )
        for attr in ("instanceTypes", "instancesDistribution.instanceTypes"):
            holder = (
                ng
                if attr == "instanceTypes"
                else expect_mapping(
                    doc, ng.get("instancesDistribution"), f"{where}.instancesDistribution"
                )
            )
            listed = expect_list(doc, holder.get("instanceTypes"), f"{where}.{attr}")
            texts = [
                str(strict.text(doc, t, f"{where}.{attr}[{j}]", allow_none=False))
                for j, t in enumerate(listed)
            ]
            if any(strict.placeholder(t) for t in texts):
                variables.extend(texts)
                self._unresolve(attr, "instanceTypes", ", ".join(texts))
            elif texts:
                types.extend(texts)
                view.compared(attr, "instanceTypes", texts)
        selector = expect_mapping(doc, ng.get("instanceSelector"), f"{where}.instanceSelector")
        if selector and types:
            view.ignored("instanceSelector", "the instance types are stated")
        elif selector:
            self._unresolve(
                "instanceSelector",
                "instanceTypes",
                f"instanceSelector {_compact(selector)}: eksctl picks the types at creation",
            )
        launch = expect_mapping(doc, ng.get("launchTemplate"), f"{where}.launchTemplate")
        if launch and self.managed:
            facts = "the instance type, disk and AMI" if not types else "the disk and AMI"
            self._unresolve(
                "launchTemplate",
                "instanceTypes" if not types else "diskSizeGiB",
                f"launchTemplate {_compact(launch)}: {facts} come from it",
            )
        if variables:
            return ()  # a type is a variable: which types the group has is not known
        if not types and not selector and not launch:
            if ng.get("outpostARN") or self.outposts:
                self.ledger.unstated(
                    "instanceTypes",
                    "instanceType",
                    "not stated: on an Outpost eksctl picks a type the Outpost offers",
                )
            else:
                types.append(DEFAULT_INSTANCE_TYPE)
                self.ledger.default(
                    "instanceTypes",
                    "instanceType",
                    DEFAULT_INSTANCE_TYPE,
                    "eksctl (every release): DefaultNodeType",
                )
        return tuple(dict.fromkeys(types))

    def _sizes(self) -> tuple[int | None, int | None, int | None]:
        """eksctl's defaulting of min / max / desired (see the module docstring), and its
        checks of them. A size that is a variable (``${N}``) is unresolved: nothing is derived
        from it, so the sizes that would depend on it stay unknown too."""
        view, ledger = self.view, self.ledger
        keys = {"desiredCapacity": "desiredSize", "minSize": "minSize", "maxSize": "maxSize"}
        if any(strict.placeholder(self.ng.get(key)) for key in keys):
            for key, fact in keys.items():
                value = self._int(key, fact)
                if value is not None:
                    view.compared(key, fact, value)
            return None, None, None
        desired, lo, hi = (self._int(key, fact) for key, fact in keys.items())
        stated = (desired, lo, hi)
        for (key, fact), value in zip(keys.items(), stated, strict=True):
            if value is not None:
                view.compared(key, fact, value)
        if lo is None:
            if desired is None:
                lo = DEFAULT_NODE_COUNT
                ledger.default("minSize", "minSize", lo, "eksctl: DefaultNodeCount")
            else:
                lo = desired
                ledger.default(
                    "minSize",
                    "minSize",
                    lo,
                    f"eksctl: desiredCapacity ({view.origin('desiredCapacity')})",
                )
        if hi is None:
            if desired is not None:
                hi = desired
                why = f"eksctl: desiredCapacity ({view.origin('desiredCapacity')})"
            else:
                hi = lo
                why = "eksctl: minSize"
            if self.managed and hi == 0:
                hi, why = 1, "eksctl: DefaultMaxSize (managed groups need at least 1)"
            ledger.default("maxSize", "maxSize", hi, why)
        strict.check_sizes(self.doc, self.where, stated, (lo, hi))
        if desired is None:
            desired = lo
            ledger.default(
                "desiredSize", "desiredCapacity", desired, "eksctl: the initial size is minSize"
            )
        return lo, hi, desired

    def _labels_taints(
        self, facts: _Cluster, name: str
    ) -> tuple[dict[str, str], list[Taint], int | None]:
        doc, ng, view, where = self.doc, self.ng, self.view, self.where
        labels: dict[str, str] = {}
        self._own_labels(facts, name, labels)
        stated = {
            str(k): str(strict.text(doc, v, f"{where}.labels.{k}", allow_none=False))
            for k, v in expect_mapping(doc, ng.get("labels"), f"{where}.labels").items()
        }
        strict.check_labels(doc, stated, f"{where}.labels")
        for k, text in stated.items():
            if strict.placeholder(text):
                self._unresolve(("labels", str(k)), f"labels.{k}", text)
                continue
            labels[str(k)] = text
            view.compared(("labels", str(k)), f"labels.{k}", text)
        taints = list(_taints(doc, ng.get("taints"), f"{where}.taints", managed=self.managed))
        for taint in taints:
            view.compared(
                "taints", taint.field_name, f"{taint.key}={taint.value or ''}:{taint.effect}"
            )
        max_pods = self._int("maxPodsPerNode", "allocatable.pods")
        if max_pods is not None:
            view.compared("maxPodsPerNode", "allocatable.pods", max_pods)
        boot_pods = self._boot(labels, taints)
        if boot_pods is not None and max_pods is None:
            max_pods = boot_pods
        kubelet = expect_mapping(doc, ng.get("kubeletExtraConfig"), f"{where}.kubeletExtraConfig")
        if kubelet:
            config = bootstrap.BootFacts()
            # eksctl passes the group's taints as --register-with-taints (bootstrap.helper.sh's
            # NODE_TAINTS; the AL2023 NodeConfig's kubelet.flags) and kubeletExtraConfig in the
            # kubelet's configuration: the kubelet lets the flag win
            given = {"register-with-taints"} if ng.get("taints") else set()
            if ng.get("overrideBootstrapCommand") and self.ami_family != "AmazonLinux2023":
                given = set()  # the user's command passes what it passes (read above)
            try:
                bootstrap.kubelet_config(  # AL2023: the NodeConfig's kubelet.config
                    config, kubelet, flags=given, drop_in=self.ami_family == "AmazonLinux2023"
                )
            except bootstrap.KubeletFlagError as exc:
                raise FormatError(
                    doc.path, str(exc), field=doc.where(f"{where}.kubeletExtraConfig")
                ) from None
            for expression in config.unresolved:
                on_taints = expression.startswith("registerWithTaints")
                fact = "taints" if on_taints else "allocatable.pods"
                self._unresolve("kubeletExtraConfig", fact, expression)
            for taint in config.taints:
                taints.append(taint)
                view.compared("kubeletExtraConfig.registerWithTaints", taint.field_name)
            if config.max_pods is not None and max_pods is None:
                max_pods = config.max_pods
                view.compared("kubeletExtraConfig.maxPods", "allocatable.pods", max_pods)
            for note in config.ignored:
                key = "maxPods" if note.startswith("maxPods") else "registerWithTaints"
                view.ignored(("kubeletExtraConfig", key), note)
            for key in kubelet:
                if key not in ("registerWithTaints", "maxPods"):
                    view.ignored(("kubeletExtraConfig", str(key)), _KUBELET_IGNORED)
        return labels, taints, max_pods

    def _own_labels(self, facts: _Cluster, name: str, labels: dict[str, str]) -> None:
        """The labels eksctl and EKS put on the group's nodes themselves.

        eksctl's two labels reach the nodes through the user data eksctl writes; a managed
        group with a custom AMI (``ami: ami-...``) gets them only where eksctl still writes the
        kubelet's labels: the AL2023 NodeConfig (``nodebootstrap/al2023.go``) and the Ubuntu
        bootstrap (``NODE_LABELS``); on AmazonLinux2, Bottlerocket and Windows the user's
        ``overrideBootstrapCommand`` passes them. EKS labels ``eks.amazonaws.com/capacityType``
        only through the bootstrap it merges for its own AMI types: not with a custom AMI,
        nor for Ubuntu, whose AMI eksctl looks up (to EKS a custom AMI)."""
        ng, view, ledger = self.ng, self.view, self.ledger
        family = self.ami_family
        custom_ami = self.managed and str(ng.get("ami") or "").startswith("ami-")
        writes_labels = not custom_ami or (
            family is not None and (family == "AmazonLinux2023" or family.startswith("Ubuntu"))
        )
        own = {"alpha.eksctl.io/nodegroup-name": (name, "eksctl: NodeGroupNameLabel")}
        if facts.name:
            own["alpha.eksctl.io/cluster-name"] = (
                facts.name,
                "eksctl: ClusterNameLabel (metadata.name)",
            )
        elif facts.name_variable:
            ledger.unstated(
                "labels.alpha.eksctl.io/cluster-name",
                "labels.alpha.eksctl.io/cluster-name",
                f"the cluster name is a variable ({facts.name_variable}): not compared",
            )
        for key, (value, origin) in sorted(own.items()):
            fact = f"labels.{key}"
            if writes_labels:
                labels[key] = value
                why = origin if not custom_ami else f"{origin}, written by eksctl for {family}"
                ledger.default(fact, fact, value, why)
            else:
                ledger.unstated(
                    fact,
                    fact,
                    "not stated: with a custom AMI on "
                    f"{family or 'this AMI family'} the node's labels are the ones "
                    "overrideBootstrapCommand passes (compared where it does)",
                )
        spot = strict.flag(self.doc, ng.get("spot"), f"{self.where}.spot")
        if not self.managed or ng.get("instanceMarketOptions"):
            return
        if custom_ami or not strict.native_family(family):
            why = (
                "with a custom AMI EKS sets no capacityType label (only the labels the "
                "bootstrap command passes are on the node)"
                if custom_ami
                else f"{family}: eksctl looks up the AMI, so EKS sets no capacityType label"
            )
            if "spot" in ng:
                view.ignored("spot", why + ": not compared")
            else:
                ledger.unstated(f"labels.{_CAPACITY_LABEL}", f"labels.{_CAPACITY_LABEL}", why)
            return
        capacity = "SPOT" if spot else "ON_DEMAND"
        labels[_CAPACITY_LABEL] = capacity
        if "spot" in ng:
            view.compared("spot", f"labels.{_CAPACITY_LABEL}", spot)
        else:
            ledger.default(
                f"labels.{_CAPACITY_LABEL}",
                f"labels.{_CAPACITY_LABEL}",
                capacity,
                "EKS: managed node groups are ON_DEMAND unless spot",
            )

    def _boot(self, labels: dict[str, str], taints: list[Taint]) -> int | None:
        """Labels, taints and max-pods in the bootstrap commands."""
        max_pods = None
        for key in ("overrideBootstrapCommand", "preBootstrapCommands"):
            raw = self.ng.get(key)
            if raw is None:
                continue
            texts = raw if isinstance(raw, list) else [raw]
            text = "\n".join(
                str(strict.text(self.doc, t, f"{self.where}.{key}", allow_none=False))
                for t in texts
            )
            # on AL2023 eksctl unmarshals overrideBootstrapCommand into the NodeConfig it
            # hands nodeadm (nodebootstrap/al2023.go stringToNodeConfig): it is never a script
            nodeadm = key == "overrideBootstrapCommand" and self.ami_family == "AmazonLinux2023"
            try:
                facts = (bootstrap.from_node_config if nodeadm else bootstrap.from_user_data)(text)
            except bootstrap.KubeletFlagError as exc:
                reason = strict.override_refusal(exc) if nodeadm else str(exc)
                raise FormatError(
                    self.doc.path, reason, field=self.doc.where(f"{self.where}.{key}")
                ) from None
            for label_key, value in facts.labels.items():
                labels[label_key] = value
                self.view.compared(key, f"labels.{label_key}", f"--node-labels {label_key}={value}")
            for taint in facts.taints:
                taints.append(taint)
                self.view.compared(key, taint.field_name, "--register-with-taints")
            if facts.max_pods is not None:
                max_pods = facts.max_pods
                self.view.compared(key, "allocatable.pods", f"--max-pods={facts.max_pods}")
            own = [u for u in facts.unresolved if u == "--node-labels=${NODE_LABELS}"]
            others = [u for u in facts.unresolved if u not in own]
            for expression in others:
                self._unresolve(key, bootstrap.unresolved_fact(expression), expression)
            if facts.ignored:
                self.view.ignored(key, "; ".join(facts.ignored))
            if not facts.found or (own and not others and not facts.labels and not facts.taints):
                why = (
                    "passes eksctl's own label list (${NODE_LABELS}: the labels compared above)"
                    if own
                    else "shell commands: no node labels, taints or max-pods in them"
                )
                self.view.ignored(key, why)
        return max_pods

    def _disk(self) -> int | None:
        if strict.placeholder(self.ng.get("volumeSize")):
            self._int("volumeSize", "diskSizeGiB")  # listed as unresolved
            return None
        size = self._int("volumeSize", "diskSizeGiB")
        if size is not None:
            self.view.compared("volumeSize", "diskSizeGiB", size)
            return size
        if self.managed and self.ng.get("launchTemplate"):
            return None  # the launch template's (unresolved above)
        where = "the data volume" if _is_bottlerocket(self.ng) else "the root volume"
        self.ledger.default(
            "diskSizeGiB",
            "volumeSize",
            DEFAULT_VOLUME_GIB,
            f"eksctl >= 0.22: DefaultNodeVolumeSize ({where})",
        )
        return DEFAULT_VOLUME_GIB

    def _os_family(
        self, version: str | None, types: Sequence[str]
    ) -> tuple[str | None, tuple[str, ...]]:
        setting = self._str("amiFamily")
        if strict.placeholder(setting):
            self._unresolve("amiFamily", "osImage", str(setting))
            return None, ()
        if setting:
            name = strict.family(self.doc, setting, f"{self.where}.amiFamily", version)
            self.ami_family = name
            family = osfamilies.family_of_setting(name)
            if family is None:  # a family of eksctl's that names no OS release we know
                self.view.ignored("amiFamily", f"AMI family {setting!r}: its OS is not known")
            else:
                self.view.compared("amiFamily", "osImage", setting)
            return family, ()
        if self.managed and str(self.ng.get("ami") or "").startswith("ami-"):
            self.ledger.unstated(
                "osImage",
                "amiFamily",
                "not stated with a custom AMI (eksctl >= 0.130 refuses that; older releases "
                "did not say which OS it is): not compared",
            )
            return None, ()
        gpu = families_of.gpu_kind(types) if self.managed else None
        families, why = families_of.default_families(
            self.assume.eksctl, version, managed=self.managed, gpu=gpu
        )
        if not families:  # the default depends on what the file does not say: not assumed
            self._unresolve("amiFamily", "osImage", why)
            return None, ()
        self.ledger.default("osImage", "amiFamily", " or ".join(families), why)
        return families[0], families[1:]

    def _zones(self) -> tuple[Requirement, ...]:
        zones = expect_list(
            self.doc, self.ng.get("availabilityZones"), f"{self.where}.availabilityZones"
        )
        if not zones:
            return ()
        values = tuple(
            str(strict.text(self.doc, z, f"{self.where}.availabilityZones[{i}]", allow_none=False))
            for i, z in enumerate(zones)
        )
        self.view.compared("availabilityZones", f"requirements.{_ZONE_LABEL}", list(values))
        return (Requirement(_ZONE_LABEL, "In", values),)


def _is_bottlerocket(ng: Mapping[str, Any]) -> bool:
    return str(ng.get("amiFamily") or "").lower().startswith("bottlerocket")


def _compact(value: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"


def _taints(doc: Document, raw: Any, where: str, *, managed: bool) -> tuple[Taint, ...]:
    """A list of {key, value, effect}; unmanaged groups also take the legacy map
    ``key: "value:Effect"`` (eksctl's ``NodeGroup.Taints`` is a ``taintsWrapper``; a managed
    group's is a plain list)."""
    out = []
    if isinstance(raw, Mapping):
        if managed:
            raise FormatError(
                doc.path,
                "managedNodeGroups take taints as a list of {key, value, effect}, not a map "
                "(eksctl refuses it)",
                field=doc.where(where),
            )
        for key, spec in raw.items():
            text = str(strict.text(doc, spec, f"{where}.{key}", allow_none=False))
            value, _, effect = text.rpartition(":")
            out.append(Taint(str(key), value or None, _effect(doc, effect, f"{where}.{key}")))
        return tuple(sorted(out))
    for i, item in enumerate(expect_list(doc, raw, where)):
        t = expect_mapping(doc, item, f"{where}[{i}]")
        t_key = strict.text(doc, t.get("key"), f"{where}[{i}].key", allow_none=False)
        t_value = strict.text(doc, t.get("value"), f"{where}[{i}].value")
        t_effect = strict.text(doc, t.get("effect"), f"{where}[{i}].effect", allow_none=False)
        out.append(Taint(str(t_key), t_value, _effect(doc, str(t_effect), f"{where}[{i}].effect")))
    return tuple(sorted(out))


def _effect(doc: Document, text: str, where: str) -> str:
    """A taint effect as Kubernetes spells it: eksctl refuses any other spelling."""
    if text not in strict.EFFECTS:
        raise FormatError(
            doc.path,
            f"invalid taint effect {text!r} (eksctl accepts {', '.join(strict.EFFECTS)})",
            field=doc.where(where),
        )
    return text
