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
  eksctl`` both families are accepted below Kubernetes 1.33 (EKS has no AL2 AMIs from 1.33);
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
from types import MappingProxyType
from typing import Any

from fleetwarden.core import osfamilies, versions
from fleetwarden.core.pools import (
    NodePoolSpec,
    Provisioner,
    Requirement,
    Taint,
    Unresolved,
    normalise_effect,
)
from fleetwarden.formats import bootstrap, eks_auto_mode
from fleetwarden.formats.accounting import Ledger, View
from fleetwarden.formats.documents import (
    Document,
    PoolsRead,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed, Release

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
            str(expect_str(doc, n, f"autoModeConfig.nodePools[{i}]", allow_none=False))
            for i, n in enumerate(raw)
        ]
        if stated
        else list(eks_auto_mode.BUILT_IN)
    )
    problem = eks_auto_mode.check_names(names)
    if problem:
        raise FormatError(doc.path, problem, field=doc.where("autoModeConfig.nodePools"))
    meta = expect_mapping(doc, doc.body.get("metadata"), "metadata")
    cluster = expect_str(doc, meta.get("name"), "metadata.name")
    version = expect_str(doc, meta.get("version"), "metadata.version")
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
    cluster = expect_str(doc, meta.get("name"), "metadata.name")
    version = expect_str(doc, meta.get("version"), "metadata.version")
    pools = []
    for section, managed in (("nodeGroups", False), ("managedNodeGroups", True)):
        for i, raw in enumerate(expect_list(doc, doc.body.get(section), section)):
            where = f"{section}[{i}]"
            ng = expect_mapping(doc, raw, where)
            group = _Group(doc, ng, (section, i), where, managed=managed, assume=assume)
            pools.append(group.spec(cluster=cluster, version=version))
    return pools


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

    # -- typed reads -------------------------------------------------------------------------

    def _str(self, key: str) -> str | None:
        return expect_str(self.doc, self.ng.get(key), f"{self.where}.{key}")

    def _int(self, key: str) -> int | None:
        return expect_int(self.doc, self.ng.get(key), f"{self.where}.{key}")

    def _unresolve(self, attr: str, fact: str, expression: str) -> None:
        self.view.unresolved(attr, expression, fact)
        self.unresolved.append(Unresolved(fact, expression))

    # -- the pool --------------------------------------------------------------------------

    def spec(self, *, cluster: str | None, version: str | None) -> NodePoolSpec:
        doc, ng, view = self.doc, self.ng, self.view
        name = expect_str(doc, ng.get("name"), f"{self.where}.name", allow_none=False)
        assert name is not None
        view.compared("name", "name", name)
        meta_view = self.ledger.view(doc.path, base=("metadata",), lines=doc.line_of)
        if version:
            meta_view.compared("version", "kubernetesVersion", version)
        else:
            self.ledger.unstated(
                "kubernetesVersion",
                "metadata.version",
                "not stated: eksctl then uses the control plane's version, which the file "
                "does not say (not compared)",
            )
        types = self._instance_types()
        lo, hi, desired = self._sizes()
        labels, taints, max_pods = self._labels_taints(cluster, name)
        disk = self._disk()
        family, alternatives = self._os_family(version, types)
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
        single = self._str("instanceType")
        if single == "mixed":
            view.ignored("instanceType", "'mixed': the types are instancesDistribution's")
        elif single:
            types.append(single)
            view.compared("instanceType", "instanceTypes", single)
        listed = expect_list(doc, ng.get("instanceTypes"), f"{where}.instanceTypes")
        for j, t in enumerate(listed):
            types.append(str(expect_str(doc, t, f"{where}.instanceTypes[{j}]", allow_none=False)))
        if listed:
            view.compared("instanceTypes", "instanceTypes", list(listed))
        dist = expect_mapping(
            doc, ng.get("instancesDistribution"), f"{where}.instancesDistribution"
        )
        dist_types = expect_list(
            doc, dist.get("instanceTypes"), f"{where}.instancesDistribution.instanceTypes"
        )
        for j, t in enumerate(dist_types):
            text = expect_str(
                doc, t, f"{where}.instancesDistribution.instanceTypes[{j}]", allow_none=False
            )
            types.append(str(text))
        if dist_types:
            view.compared("instancesDistribution.instanceTypes", "instanceTypes", list(dist_types))
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
        if not types and not selector and not launch:
            if ng.get("outpostARN"):
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
        """eksctl's defaulting of min / max / desired (see the module docstring)."""
        view, ledger = self.view, self.ledger
        desired, lo, hi = self._int("desiredCapacity"), self._int("minSize"), self._int("maxSize")
        for key, fact, value in (
            ("desiredCapacity", "desiredSize", desired),
            ("minSize", "minSize", lo),
            ("maxSize", "maxSize", hi),
        ):
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
        if desired is None:
            desired = lo
            ledger.default(
                "desiredSize", "desiredCapacity", desired, "eksctl: the initial size is minSize"
            )
        return lo, hi, desired

    def _labels_taints(
        self, cluster: str | None, name: str
    ) -> tuple[dict[str, str], list[Taint], int | None]:
        doc, ng, view, where, ledger = self.doc, self.ng, self.view, self.where, self.ledger
        labels: dict[str, str] = {}
        custom_ami = self.managed and str(ng.get("ami") or "").startswith("ami-")
        if not custom_ami:  # with a custom AMI the user's bootstrap must pass them
            if cluster:
                labels["alpha.eksctl.io/cluster-name"] = cluster
                ledger.default(
                    "labels.alpha.eksctl.io/cluster-name",
                    "labels.alpha.eksctl.io/cluster-name",
                    cluster,
                    "eksctl: ClusterNameLabel (metadata.name)",
                )
            labels["alpha.eksctl.io/nodegroup-name"] = name
            ledger.default(
                "labels.alpha.eksctl.io/nodegroup-name",
                "labels.alpha.eksctl.io/nodegroup-name",
                name,
                "eksctl: NodeGroupNameLabel",
            )
        if self.managed and not ng.get("instanceMarketOptions"):
            spot = ng.get("spot") is True
            capacity = "SPOT" if spot else "ON_DEMAND"
            labels[_CAPACITY_LABEL] = capacity
            if "spot" in ng:
                view.compared("spot", f"labels.{_CAPACITY_LABEL}", ng.get("spot"))
            else:
                ledger.default(
                    f"labels.{_CAPACITY_LABEL}",
                    f"labels.{_CAPACITY_LABEL}",
                    capacity,
                    "EKS: managed node groups are ON_DEMAND unless spot",
                )
        for k, v in expect_mapping(doc, ng.get("labels"), f"{where}.labels").items():
            text = str(expect_str(doc, v, f"{where}.labels.{k}", allow_none=False))
            labels[str(k)] = text
            view.compared(("labels", str(k)), f"labels.{k}", text)
        taints = list(_taints(doc, ng.get("taints"), f"{where}.taints"))
        for taint in taints:
            view.compared(
                "taints", taint.field_name, f"{taint.key}={taint.value or ''}:{taint.effect}"
            )
        max_pods = self._int("maxPodsPerNode")
        if max_pods is not None:
            view.compared("maxPodsPerNode", "allocatable.pods", max_pods)
        boot_pods = self._boot(labels, taints)
        if boot_pods is not None and max_pods is None:
            max_pods = boot_pods
        kubelet = expect_mapping(doc, ng.get("kubeletExtraConfig"), f"{where}.kubeletExtraConfig")
        if kubelet:
            facts = bootstrap.BootFacts()
            bootstrap.kubelet_config(facts, kubelet)
            for taint in facts.taints:
                taints.append(taint)
                view.compared("kubeletExtraConfig.registerWithTaints", taint.field_name)
            if facts.max_pods is not None and max_pods is None:
                max_pods = facts.max_pods
                view.compared("kubeletExtraConfig.maxPods", "allocatable.pods", max_pods)
            for key in kubelet:
                if key not in ("registerWithTaints", "maxPods"):
                    view.ignored(("kubeletExtraConfig", str(key)), _KUBELET_IGNORED)
        return labels, taints, max_pods

    def _boot(self, labels: dict[str, str], taints: list[Taint]) -> int | None:
        """Labels, taints and max-pods in the bootstrap commands."""
        max_pods = None
        for key in ("overrideBootstrapCommand", "preBootstrapCommands"):
            raw = self.ng.get(key)
            if raw is None:
                continue
            texts = raw if isinstance(raw, list) else [raw]
            text = "\n".join(
                str(expect_str(self.doc, t, f"{self.where}.{key}", allow_none=False)) for t in texts
            )
            facts = bootstrap.from_user_data(text)
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
                self._unresolve(key, "labels", expression)
            if not facts.found or (own and not others and not facts.labels and not facts.taints):
                why = (
                    "passes eksctl's own label list (${NODE_LABELS}: the labels compared above)"
                    if own
                    else "shell commands: no node labels, taints or max-pods in them"
                )
                self.view.ignored(key, why)
        return max_pods

    def _disk(self) -> int | None:
        size = self._int("volumeSize")
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
        if setting:
            family = osfamilies.family_of_setting(setting)
            if family is None:
                self.view.ignored("amiFamily", f"unknown AMI family {setting!r}: not compared")
            else:
                self.view.compared("amiFamily", "osImage", setting)
            return family, ()
        if self.managed and str(self.ng.get("ami") or "").startswith("ami-"):
            self.ledger.unstated(
                "osImage", "amiFamily", "not stated with a custom AMI (eksctl refuses that)"
            )
            return None, ()
        families, why = _default_families(self.assume.eksctl, version, managed=self.managed)
        self.ledger.default("osImage", "amiFamily", " or ".join(families), why)
        return families[0], families[1:]

    def _zones(self) -> tuple[Requirement, ...]:
        zones = expect_list(
            self.doc, self.ng.get("availabilityZones"), f"{self.where}.availabilityZones"
        )
        if not zones:
            return ()
        values = tuple(str(z) for z in zones)
        self.view.compared("availabilityZones", f"requirements.{_ZONE_LABEL}", list(values))
        return (Requirement(_ZONE_LABEL, "In", values),)


def _default_families(
    release: Release | None, version: str | None, *, managed: bool
) -> tuple[tuple[str, ...], str]:
    """The AMI family eksctl defaults to, per release (eksctl's DefaultNodeImageFamily)."""
    al2, al2023 = "amazonlinux2", "amazonlinux2023"
    parsed = versions.parse_version(version) if version else None
    minor = parsed[:2] if parsed is not None else None
    if release is None:
        if minor is not None and minor >= (1, 33):
            return (al2023,), "eksctl: AmazonLinux2023 (EKS has no AmazonLinux2 AMIs from 1.33)"
        return (al2023, al2), (
            "eksctl: AmazonLinux2023 since 0.219, AmazonLinux2 before (the eksctl release is "
            "not stated: set scan.provisioners.eksctl to pick one)"
        )
    shown = ".".join(map(str, release))
    if release >= (0, 219, 0):
        return (al2023,), f"eksctl {shown}: DefaultNodeImageFamily AmazonLinux2023"
    threshold = (1, 30) if managed else (1, 33)
    first = (0, 179, 0) if managed else (0, 209, 0)
    if release >= first and minor is not None and minor >= threshold:
        return (
            al2023,
        ), f"eksctl {shown}: AmazonLinux2023 on Kubernetes >= {threshold[0]}.{threshold[1]}"
    if release >= first and minor is None:
        return (
            al2023,
            al2,
        ), f"eksctl {shown}: AmazonLinux2023 or AmazonLinux2 by Kubernetes version"
    return (al2,), f"eksctl {shown}: DefaultNodeImageFamily AmazonLinux2"


def _is_bottlerocket(ng: Mapping[str, Any]) -> bool:
    return str(ng.get("amiFamily") or "").lower().startswith("bottlerocket")


def _compact(value: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"


def _taints(doc: Document, raw: Any, where: str) -> tuple[Taint, ...]:
    """eksctl accepts a list of {key, value, effect} or the legacy map key: "value:Effect"."""
    out = []
    if isinstance(raw, Mapping):
        for key, spec in raw.items():
            text = str(expect_str(doc, spec, f"{where}.{key}", allow_none=False))
            value, _, effect = text.rpartition(":")
            out.append(Taint(str(key), value or None, _effect(doc, effect, f"{where}.{key}")))
        return tuple(sorted(out))
    for i, item in enumerate(expect_list(doc, raw, where)):
        t = expect_mapping(doc, item, f"{where}[{i}]")
        t_key = expect_str(doc, t.get("key"), f"{where}[{i}].key", allow_none=False)
        t_value = expect_str(doc, t.get("value"), f"{where}[{i}].value")
        t_effect = expect_str(doc, t.get("effect"), f"{where}[{i}].effect", allow_none=False)
        out.append(Taint(str(t_key), t_value, _effect(doc, str(t_effect), f"{where}[{i}].effect")))
    return tuple(sorted(out))


def _effect(doc: Document, text: str, where: str) -> str:
    try:
        return normalise_effect(text)
    except ValueError as exc:
        raise FormatError(doc.path, str(exc), field=doc.where(where)) from None
