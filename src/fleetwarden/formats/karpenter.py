"""Karpenter ``NodePool`` (karpenter.sh v1 and v1beta1) and the older v1alpha5 ``Provisioner``,
with their node classes (``EC2NodeClass``, ``AWSNodeTemplate``, ``AKSNodeClass``).

A Karpenter pool is heterogeneous by design: it is described by *requirements* on node labels
(instance family, size, arch, capacity type), not by one instance type. Nodes carry
``karpenter.sh/nodepool`` (``karpenter.sh/provisioner-name`` for v1alpha5). The cluster is not
named in these objects: give it as ``CLUSTER=PATH``.

Defaults Karpenter applies (read in aws/karpenter-provider-aws and kubernetes-sigs/karpenter):

- v1alpha5 ``Provisioner`` (AWS provider webhook, v0.19 - v0.32): when the key is absent,
  ``kubernetes.io/os In [linux]``, ``kubernetes.io/arch In [amd64]``,
  ``karpenter.sh/capacity-type In [on-demand]``, and without any instance-type / family /
  category / generation requirement ``instance-category In [c, m, r]`` and
  ``instance-generation Gt 2``. Requirement keys are normalised first, as Karpenter does
  (``beta.kubernetes.io/arch`` is ``kubernetes.io/arch``, ``failure-domain.beta...`` the
  ``topology.kubernetes.io`` labels), in every version. v1beta1 and v1 NodePools have no
  requirement defaults (an unstated key may take any value; spot is even preferred), so none is
  assumed there.
- OS family: v1alpha5 ``AWSNodeTemplate`` without ``amiFamily`` is AL2; v1beta1 states it (the
  field is required); v1 takes ``amiFamily``, else the ``amiSelectorTerms`` alias
  (``al2023@latest``). ``Custom`` means the AMI's own OS: not compared.
- AKSNodeClass (Azure provider CRD defaults): ``imageFamily`` Ubuntu (``Ubuntu2204`` up to
  v1.6.2; ``Ubuntu`` since, 22.04 or 24.04 by Kubernetes version: any release is accepted),
  ``osDiskSizeGB`` 128.
- Disk: without ``blockDeviceMappings`` the family's default volume holds ephemeral storage —
  20 GiB (AL2, AL2023, Ubuntu; Bottlerocket's data volume ``/dev/xvdb``), 50 GiB (Windows); none
  for Custom. With mappings, the ``rootVolume: true`` one, else the family's ephemeral device.
  ``instanceStorePolicy: RAID0`` puts ephemeral storage on instance store: not compared.

A ``nodeClassRef`` / ``providerRef`` names the node class in the pool's own file when that file
defines it, else the only one of that name in the tree; several candidates leave the OS and disk
unresolved (naming them), never a pick. Two NodePools (or Provisioners) of one name in a tree are
an error naming both places. A NodePool without what its CRD requires (``spec.template.spec``
with ``nodeClassRef`` -- v1: its ``group``, ``kind`` and ``name``, none empty; v1beta1: its
``name`` -- and ``requirements``), and a
Provisioner without exactly one of ``spec.provider`` / ``spec.providerRef`` (what Karpenter's
v1alpha5 validation webhook demands; a missing or null ``spec`` has neither), are errors naming
the file and the object: Karpenter never made nodes from them. So is an EC2NodeClass ``amiFamily``
its CRD refuses (v1: not in its enum, missing without an alias, another family than its alias's;
v1beta1: missing), and a v1 class without ``amiSelectorTerms``.

Every attribute of the pool and its node class is accounted for (``fleetwarden explain``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.integers import ascii_int
from fleetwarden.core.pools import (
    NodePoolSpec,
    Provisioner,
    Requirement,
    Taint,
    Unresolved,
    normalise_effect,
)
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.formats import bootstrap, karpenter_labels, karpenter_user_data
from fleetwarden.formats.accounting import Ledger, Path, View, dotted
from fleetwarden.formats.documents import (
    Document,
    PoolsRead,
    expect_int,
    expect_list,
    expect_mapping,
    expect_str,
)
from fleetwarden.formats.errors import FormatError

__all__ = ["read_pools"]

_POOL_KINDS = {("karpenter.sh", "NodePool"), ("karpenter.sh", "Provisioner")}
_CLASS_KINDS = {"EC2NodeClass", "AWSNodeTemplate", "KWOKNodeClass", "AKSNodeClass"}
_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"}
_NOT_ON_NODE = "not visible on a Node"
_INSTANCE_KEYS = (
    "node.kubernetes.io/instance-type",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-generation",
)
_V1ALPHA5_DEFAULTS = (
    Requirement("kubernetes.io/os", "In", ("linux",)),
    Requirement("kubernetes.io/arch", "In", ("amd64",)),
    Requirement("karpenter.sh/capacity-type", "In", ("on-demand",)),
)
_V1ALPHA5_INSTANCE_DEFAULTS = (
    Requirement("karpenter.k8s.aws/instance-category", "In", ("c", "m", "r")),
    Requirement("karpenter.k8s.aws/instance-generation", "Gt", ("2",)),
)
# Karpenter reads these deprecated aliases as the stable labels (NormalizedLabels in
# karpenter-core / kubernetes-sigs/karpenter, applied to every requirement it builds), so a
# requirement written with an alias constrains, and is compared on, the stable label
_NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
}
_V1ALPHA5_WHY = "Karpenter AWS provider v0.19-v0.32: the v1alpha5 Provisioner defaulting webhook"
# family -> (default ephemeral volume GiB, the device that holds ephemeral storage)
_DISK_DEFAULTS: dict[str, tuple[int, str]] = {
    "amazonlinux2": (20, "/dev/xvda"),
    "amazonlinux2023": (20, "/dev/xvda"),
    "ubuntu": (20, "/dev/sda1"),
    "bottlerocket": (20, "/dev/xvdb"),
    "windows": (50, "/dev/sda1"),
}
_AKS_IMAGE_DEFAULT = (
    "Karpenter Azure provider: the AKSNodeClass CRD default imageFamily, Ubuntu2204 up to "
    "v1.6.2, Ubuntu from v1.6.3 (22.04 below Kubernetes 1.34, 24.04 from 1.34): any Ubuntu "
    "release accepted"
)
_AKS_DISK_DEFAULT = "Karpenter Azure provider: the AKSNodeClass CRD default osDiskSizeGB 128"
_KUBELET = "kubelet configuration: not compared (allocatable is compared with the pool's median)"

_POOL_IGNORED: dict[str, str] = {
    "spec.template.metadata.annotations": "node annotations: not compared",
    "spec.template.spec.expireAfter": f"node lifetime: {_NOT_ON_NODE}",
    "spec.template.spec.terminationGracePeriod": f"drain grace period: {_NOT_ON_NODE}",
    "spec.disruption": f"consolidation and disruption budgets: {_NOT_ON_NODE}",
    "spec.limits": "resource limits of the whole NodePool: not compared per node",
    "spec.weight": f"NodePool priority: {_NOT_ON_NODE}",
    "spec.annotations": "node annotations: not compared",
    "spec.ttlSecondsAfterEmpty": f"empty-node removal: {_NOT_ON_NODE}",
    "spec.ttlSecondsUntilExpired": f"node lifetime: {_NOT_ON_NODE}",
    "spec.consolidation": f"consolidation: {_NOT_ON_NODE}",
}
_CLASS_IGNORED: dict[str, str] = {
    "spec.subnetSelectorTerms": f"subnets: {_NOT_ON_NODE}",
    "spec.subnetSelector": f"subnets: {_NOT_ON_NODE}",
    "spec.securityGroupSelectorTerms": f"security groups: {_NOT_ON_NODE}",
    "spec.securityGroupSelector": f"security groups: {_NOT_ON_NODE}",
    "spec.capacityReservationSelectorTerms": f"capacity reservations: {_NOT_ON_NODE}",
    "spec.placementGroupSelector": f"placement group: {_NOT_ON_NODE}",
    "spec.associatePublicIPAddress": f"public IP: {_NOT_ON_NODE}",
    "spec.ipPrefixCount": f"IP prefixes: {_NOT_ON_NODE}",
    "spec.role": f"IAM role: {_NOT_ON_NODE}",
    "spec.instanceProfile": f"IAM instance profile: {_NOT_ON_NODE}",
    "spec.tags": f"AWS resource tags: {_NOT_ON_NODE}",
    "spec.metadataOptions": f"instance metadata settings: {_NOT_ON_NODE}",
    "spec.detailedMonitoring": f"CloudWatch monitoring: {_NOT_ON_NODE}",
    "spec.context": f"EC2 fleet context: {_NOT_ON_NODE}",
    "spec.networkInterfaces": f"network interfaces: {_NOT_ON_NODE}",
    "spec.connectionTracking": f"connection tracking: {_NOT_ON_NODE}",
    "spec.cpuOptions": f"CPU options: {_NOT_ON_NODE}",
    # AKS node auto-provisioning
    "spec.vnetSubnetID": f"subnet: {_NOT_ON_NODE}",
}

# the same settings written inline in a v1alpha5 Provisioner's ``provider:`` block
_INLINE_PROVIDER_IGNORED: dict[str, str] = {
    f"spec.provider.{key.removeprefix('spec.')}": why for key, why in _CLASS_IGNORED.items()
} | {
    "spec.provider.apiVersion": "the provider block's own type",
    "spec.provider.kind": "the provider block's own type",
}


def read_pools(docs: Sequence[Document]) -> PoolsRead:
    """The pools of a tree. A NodePool (or Provisioner) defined twice is an error naming both
    places: a cluster holds one object per name, so which one applies would be a guess."""
    out = PoolsRead()
    classes: dict[str, list[Document]] = {}  # name -> node classes of that name, any kind
    pool_docs: list[Document] = []
    first: dict[tuple[str, str], Document] = {}
    for doc in docs:
        group = doc.group
        if (group, doc.kind) in _POOL_KINDS:
            out.claimed.add((doc.path, doc.index))
            pool_docs.append(doc)
            if doc.name:
                earlier = first.setdefault((doc.kind, doc.name), doc)
                if earlier is not doc:
                    raise _defined_twice(doc, earlier)
        elif group.startswith("karpenter.") and doc.kind in _CLASS_KINDS:
            out.claimed.add((doc.path, doc.index))
            if doc.name:
                classes.setdefault(doc.name, []).append(doc)
        elif doc.kind == "CustomResourceDefinition" and group == "apiextensions.k8s.io":
            spec = doc.body.get("spec")
            if isinstance(spec, Mapping) and str(spec.get("group", "")).startswith("karpenter."):
                out.claimed.add((doc.path, doc.index))
                out.notes.setdefault(doc.path, "no node-pool definition (Karpenter CRD schema)")
    for doc in pool_docs:
        out.pools.append(_Pool(doc, classes).spec())
    for doc in docs:
        if (doc.path, doc.index) in out.claimed and not any(
            p.source == doc.path for p in out.pools
        ):
            out.notes.setdefault(doc.path, "no node-pool definition (only Karpenter node classes)")
    return out


class _Pool:
    """One NodePool / Provisioner being read, with its node class."""

    def __init__(self, doc: Document, classes: Mapping[str, Sequence[Document]]) -> None:
        self.doc, self.classes = doc, classes
        self.legacy = doc.kind == "Provisioner"
        self.ledger = Ledger()
        self.view = self.ledger.view(doc.path, lines=doc.line_of)
        self.unresolved: list[Unresolved] = []
        self.labels: dict[str, str] = {}
        self.taints: list[Taint] = []
        self.pool_taints: dict[Taint, tuple[str, str]] = {}  # NodePool taints the nodes may lack
        self.max_pods: int | None = None
        self.pool_pods_at: Path | None = None  # the NodePool's kubelet maxPods (v1beta1)
        self.api = doc.api_version  # the NodePool's (the node class's document is read later)

    def spec(self) -> NodePoolSpec:
        doc, view = self.doc, self.view
        name = doc.name
        if not name:
            raise FormatError(doc.path, "missing", field=doc.where("metadata.name"))
        view.compared("metadata.name", "name", name)
        if not self.legacy:  # the NodePool CRD requires spec.template.spec
            at: Any = doc.body
            for field_ in ("spec", "spec.template", "spec.template.spec"):
                step = field_.rpartition(".")[2]
                if isinstance(at, Mapping) and at.get(step) is None:
                    raise FormatError(
                        doc.path, "missing (required by the NodePool CRD)", field=doc.where(field_)
                    )
                at = at.get(step) if isinstance(at, Mapping) else None
            _check_template_spec(doc, at)
        spec = expect_mapping(doc, doc.body.get("spec"), "spec")
        if self.legacy:
            _check_provider(doc, spec)
        if self.legacy:
            meta_path, spec_path = "spec", "spec"
            tmpl_meta: Mapping[str, Any] = spec
            tmpl_spec: Mapping[str, Any] = spec
        else:
            meta_path, spec_path = "spec.template.metadata", "spec.template.spec"
            template = expect_mapping(doc, spec.get("template"), "spec.template")
            tmpl_meta = expect_mapping(doc, template.get("metadata"), meta_path)
            tmpl_spec = expect_mapping(doc, template.get("spec"), spec_path)
        for k, v in expect_mapping(doc, tmpl_meta.get("labels"), f"{meta_path}.labels").items():
            text = str(expect_str(doc, v, f"{meta_path}.labels.{k}", allow_none=False))
            refused = karpenter_labels.refusal(doc.api_version, str(k), text)
            if refused is not None:
                raise FormatError(doc.path, refused, field=doc.where(f"{meta_path}.labels.{k}"))
            self.labels[str(k)] = text
            # a label key holds dots (team.example.com/owner): one path step, never split
            view.compared((*_p(meta_path), "labels", str(k)), f"labels.{k}", text)
        taints = _taints(doc, tmpl_spec.get("taints"), f"{spec_path}.taints")
        self.taints.extend(taints)
        startup = _taints(doc, tmpl_spec.get("startupTaints"), f"{spec_path}.startupTaints")
        if startup:
            view.ignored(
                _p(spec_path, "startupTaints"),
                "startup taints: removed once the node is ready, so never expected",
            )
        requirements = self._requirements(tmpl_spec, spec_path)
        if self.legacy:
            self._kubelet(
                tmpl_spec.get("kubeletConfiguration"), _p(spec_path, "kubeletConfiguration")
            )
        elif doc.api_version != "karpenter.sh/v1":
            self._kubelet(tmpl_spec.get("kubelet"), _p(spec_path, "kubelet"))
        # v1 moved kubelet to the EC2NodeClass: a NodePool's is not a v1 field (the API server
        # prunes it), so it is left to close() as unaccounted and never overrides the class's
        count = self._replicas(spec)
        family, alternatives, disk = self._node_class(tmpl_spec, spec_path, spec)
        for taint in taints:  # after the node class: its user data may replace them
            status, why = self.pool_taints.get(taint, ("", ""))
            if status == "unresolved":
                view.unresolved(_p(spec_path, "taints"), why, "taints")
                if Unresolved("taints", why) not in self.unresolved:
                    self.unresolved.append(Unresolved("taints", why))
            elif status:
                view.ignored(_p(spec_path, "taints"), f"{_show_taint(taint)}: {why}")
            else:
                view.compared(_p(spec_path, "taints"), taint.field_name, _show_taint(taint))
        view.close(doc.body.get("spec") or {}, _POOL_IGNORED, at="spec")
        allocatable = {"pods": str(self.max_pods)} if self.max_pods is not None else {}
        return NodePoolSpec(
            name=name,
            cluster=None,
            provider=Provisioner.KARPENTER,
            source=doc.path,
            source_format="karpenter",
            # the requirement itself is checked; listing the types too would double-report
            instance_types=(),
            requirements=requirements,
            disk_size_gib=disk,
            min_size=count,
            max_size=count,
            desired_size=count,
            labels=MappingProxyType(self.labels),
            taints=tuple(sorted(set(self.taints))),
            startup_taints=startup,
            os_family=family,
            os_family_alternatives=alternatives,
            allocatable=allocatable,
            unresolved=tuple(self.unresolved),
            heterogeneous=True,
            provenance=dict(self.ledger.provenance),
            account=self.ledger.entries(),
        )

    # -- pool parts --------------------------------------------------------------------------

    def _requirements(
        self, tmpl_spec: Mapping[str, Any], spec_path: str
    ) -> tuple[Requirement, ...]:
        path = f"{spec_path}.requirements"
        found = _requirements(self.doc, tmpl_spec.get("requirements"), path)
        for i, (req, written) in enumerate(found):
            shown = f"{req.key} {req.operator} {list(req.values)}"
            if written != req.key:
                shown += f" (written as {written})"
            self.view.compared(_p(spec_path, "requirements", i), f"requirements.{req.key}", shown)
        stated = tuple(req for req, _ in found)
        if not self.legacy:
            return stated
        keys = {r.key for r in stated}  # the stable labels: an alias counts as stated
        defaults = [r for r in _V1ALPHA5_DEFAULTS if r.key not in keys]
        if not keys & set(_INSTANCE_KEYS):
            defaults.extend(_V1ALPHA5_INSTANCE_DEFAULTS)
        for req in defaults:
            self.ledger.default(
                f"requirements.{req.key}",
                "spec.requirements",
                f"{req.key} {req.operator} {list(req.values)}",
                _V1ALPHA5_WHY,
            )
        return (*stated, *defaults)

    def _kubelet(self, raw: Any, path: Path) -> None:
        where = dotted(path)
        kubelet = expect_mapping(self.doc, raw, where)
        for key, value in kubelet.items():
            if key == "maxPods":
                pods = expect_int(self.doc, value, f"{where}.maxPods")
                if pods is not None:
                    self.max_pods = pods
                    self.pool_pods_at = (*path, "maxPods")
                    self.view.compared(self.pool_pods_at, "allocatable.pods", pods)
                    continue
            self.view.ignored((*path, str(key)), _KUBELET)

    def _replicas(self, spec: Mapping[str, Any]) -> int | None:
        """v1 static NodePools keep exactly ``spec.replicas`` nodes."""
        replicas = expect_int(self.doc, spec.get("replicas"), "spec.replicas")
        if replicas is not None:
            for fact in ("minSize", "maxSize", "desiredSize"):
                self.view.compared("spec.replicas", fact, replicas)
        return replicas

    # -- the node class ----------------------------------------------------------------------

    def _node_class(
        self, tmpl_spec: Mapping[str, Any], spec_path: str, spec: Mapping[str, Any]
    ) -> tuple[str | None, tuple[str, ...], int | None]:
        """OS family (with alternatives) and ephemeral disk size from the node class."""
        if self.legacy and spec.get("provider") is not None:
            # an inline v1alpha5 ``provider:`` block is an AWSNodeTemplate spec in place
            provider = expect_mapping(self.doc, spec["provider"], "spec.provider")
            result = self._aws_class(self.view, provider, "spec.provider", legacy=True)
            self.view.close(provider, _INLINE_PROVIDER_IGNORED, at="spec.provider")
            return result
        ref_key = "providerRef" if self.legacy else "nodeClassRef"
        ref_path = _p(spec_path, ref_key)
        ref = tmpl_spec.get(ref_key)
        if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
            for fact in ("osImage", "diskSizeGiB"):  # both come from the node class
                self.view.unstated(fact, ref_path, "no node class referenced")
            return None, (), None
        target, why = self._resolve(ref)
        if target is None:
            for fact in ("osImage", "diskSizeGiB"):  # both come from the node class
                self.view.unresolved(ref_path, why, fact)
                self.unresolved.append(Unresolved(fact, why))
            return None, (), None
        kind = target.kind
        label = f"{kind}/{ref['name']}"
        self.view.ignored(ref_path, f"the node class: read from {label}")
        view = self.ledger.view(target.path, lines=target.line_of, label=label)
        body = expect_mapping(target, target.body.get("spec"), "spec")
        if kind == "AKSNodeClass":
            result = self._aks_class(view, target, body)
        elif kind == "KWOKNodeClass":
            result = (None, (), None)
        else:
            doc_before = self.doc
            self.doc = target
            try:
                result = self._aws_class(view, body, "spec", legacy=kind == "AWSNodeTemplate")
            finally:
                self.doc = doc_before
        view.close(body, _CLASS_IGNORED, at="spec")
        return result

    def _resolve(self, ref: Mapping[str, Any]) -> tuple[Document | None, str]:
        """The node class ``ref`` names, else why it cannot be told. The class in the pool's own
        file wins; one defined only elsewhere in the tree is taken when it is the only one of
        that name."""
        name = str(ref["name"])
        if self.legacy:
            kinds: set[str] = {"AWSNodeTemplate"}
        elif isinstance(ref.get("kind"), str):
            kinds = {ref["kind"]}
        else:  # v1beta1 allows a ref without kind: whichever node class has that name
            kinds = _CLASS_KINDS - {"AWSNodeTemplate"}
        found = [c for c in self.classes.get(name, ()) if c.kind in kinds]
        here = [c for c in found if c.path == self.doc.path]
        chosen = here or found
        if len(chosen) == 1:
            return chosen[0], ""
        wanted = next(iter(kinds)) if len(kinds) == 1 else "a node class"
        if not chosen:
            return None, f"{wanted} {name!r} is not in the desired-state tree"
        places = ", ".join(f"{c.kind} in {c.path}" for c in chosen)
        where = "this file" if here else "the tree (none in this file)"
        return None, f"{wanted} {name!r} is ambiguous: {len(chosen)} in {where}: {places}"

    def _aws_class(
        self, view: View, spec: Mapping[str, Any], at: str, *, legacy: bool
    ) -> tuple[str | None, tuple[str, ...], int | None]:
        doc = self.doc
        family: str | None = None
        setting = expect_str(doc, spec.get("amiFamily"), f"{at}.amiFamily")
        terms = expect_list(doc, spec.get("amiSelectorTerms"), f"{at}.amiSelectorTerms")
        alias = next(
            (
                t["alias"]
                for t in terms
                if isinstance(t, Mapping) and isinstance(t.get("alias"), str)
            ),
            None,
        )
        if not legacy:
            _check_ami_family(doc, setting, alias, at)
        custom = setting is not None and setting.lower() == "custom"
        if setting and not custom:
            family = osfamilies.family_of_setting(setting)
            view.compared(f"{at}.amiFamily", "osImage", setting)
        elif custom:
            view.ignored(f"{at}.amiFamily", "Custom: the OS is the AMI's own (not compared)")
        if alias is not None:
            if family is None and not custom:
                family = osfamilies.family_of_setting(alias)
                view.compared(f"{at}.amiSelectorTerms", "osImage", alias)
            else:
                view.ignored(f"{at}.amiSelectorTerms", "the AMI; its family is amiFamily's")
        elif terms:
            view.ignored(f"{at}.amiSelectorTerms", "AMIs chosen by id/name/tags: not compared")
        if spec.get("amiSelector") is not None:
            view.ignored(f"{at}.amiSelector", "AMIs chosen by id/name/tags: not compared")
        if family is None and setting is None and alias is None and legacy:
            family = "amazonlinux2"
            view.default(
                "osImage",
                f"{at}.amiFamily",
                "AL2",
                "Karpenter v1alpha5: AL2 when amiFamily is unset",
            )
        if spec.get("launchTemplate") is not None:
            why = "launchTemplate: the disk and AMI come from it"
            view.unresolved(f"{at}.launchTemplate", why, "diskSizeGiB")
            self.unresolved.append(Unresolved("diskSizeGiB", why))
            return family, (), None
        disk = self._aws_disk(view, spec, at, family, custom=custom)
        self._user_data(view, spec, at, al2023=family == "amazonlinux2023" and not custom)
        self._kubelet_in_class(view, spec, at)
        return family, (), disk

    def _aws_disk(
        self, view: View, spec: Mapping[str, Any], at: str, family: str | None, *, custom: bool
    ) -> int | None:
        doc = self.doc
        if spec.get("instanceStorePolicy") is not None:
            view.ignored(
                f"{at}.instanceStorePolicy",
                "ephemeral storage on instance store (RAID0): the EBS size is not compared",
            )
            if spec.get("blockDeviceMappings") is not None:
                view.ignored(f"{at}.blockDeviceMappings", "ephemeral storage is on instance store")
            return None
        base = (family or "").split("-", 1)[0]
        default = _DISK_DEFAULTS.get(base)
        mappings = expect_list(doc, spec.get("blockDeviceMappings"), f"{at}.blockDeviceMappings")
        if not mappings:
            if custom or default is None:
                view.unstated(
                    "diskSizeGiB", f"{at}.blockDeviceMappings", "the AMI's own volumes (not known)"
                )
                return None
            size, device = default
            view.default(
                "diskSizeGiB",
                f"{at}.blockDeviceMappings",
                size,
                f"Karpenter: default block device {device} of {base} ({size}Gi)",
            )
            return size
        chosen: int | None = None
        for i, item in enumerate(mappings):
            where = f"{at}.blockDeviceMappings[{i}]"
            at_item = _p(at, "blockDeviceMappings", i)
            entry = expect_mapping(doc, item, where)
            device = expect_str(doc, entry.get("deviceName"), f"{where}.deviceName")
            ebs = expect_mapping(doc, entry.get("ebs"), f"{where}.ebs")
            root = entry.get("rootVolume") is True
            ephemeral = root or (default is not None and device == default[1])
            size_text = expect_str(doc, ebs.get("volumeSize"), f"{where}.ebs.volumeSize")
            if not (ephemeral and size_text is not None and chosen is None):
                view.ignored(at_item, "a volume that does not hold the kubelet's ephemeral storage")
                continue
            try:
                chosen = round(parse_quantity(size_text) / 2**30)
            except ValueError:
                raise FormatError(
                    doc.path,
                    f"not a quantity: {size_text!r}",
                    field=doc.where(f"{where}.ebs.volumeSize"),
                ) from None
            view.compared((*at_item, "ebs", "volumeSize"), "diskSizeGiB", size_text)
            view.ignored((*at_item, "deviceName"), "the device that holds ephemeral storage")
            for key in entry:
                if key not in ("ebs", "deviceName"):
                    view.ignored((*at_item, str(key)), f"volume option: {_NOT_ON_NODE}")
            for key in ebs:
                if key != "volumeSize":
                    view.ignored((*at_item, "ebs", str(key)), f"EBS option: {_NOT_ON_NODE}")
        if chosen is None:
            view.unstated(
                "diskSizeGiB",
                f"{at}.blockDeviceMappings",
                "no mapping is the root volume or the family's ephemeral device",
            )
        return chosen

    def _user_data(self, view: View, spec: Mapping[str, Any], at: str, al2023: bool) -> None:
        read = karpenter_user_data.read(
            self.doc, view, spec, at, pool_taints=self.taints, al2023=al2023, pool_api=self.api
        )
        if read is None:
            return
        facts, self.pool_taints = read.facts, read.pool_taints
        self.taints = [t for t in self.taints if t not in self.pool_taints]
        for key, value in facts.labels.items():
            self.labels[key] = value
            view.compared(f"{at}.userData", f"labels.{key}", f"{key}={value}")
        for taint in facts.taints:
            self.taints.append(taint)
            view.compared(f"{at}.userData", taint.field_name, _show_taint(taint))
        if facts.max_pods is not None:  # v1beta1: the NodePool's kubelet.maxPods read first
            pool_pods = (self.view, self.pool_pods_at, self.max_pods)
            self.max_pods = karpenter_user_data.max_pods(view, facts, at, pool_pods, al2023)
        for expression in facts.unresolved:
            fact = bootstrap.unresolved_fact(expression)
            view.unresolved(f"{at}.userData", expression, fact)
            self.unresolved.append(Unresolved(fact, expression))
        if facts.ignored:
            view.ignored(f"{at}.userData", "; ".join(facts.ignored))
        if not facts.found:
            view.ignored(f"{at}.userData", "user data: no node labels, taints or max-pods in it")

    def _kubelet_in_class(self, view: View, spec: Mapping[str, Any], at: str) -> None:
        kubelet = expect_mapping(self.doc, spec.get("kubelet"), f"{at}.kubelet")
        for key, value in kubelet.items():
            if key == "maxPods":
                pods = expect_int(self.doc, value, f"{at}.kubelet.maxPods")
                if pods is not None and self.max_pods is None:
                    self.max_pods = pods
                    view.compared(f"{at}.kubelet.maxPods", "allocatable.pods", pods)
                    continue
            view.ignored(f"{at}.kubelet.{key}", _KUBELET)

    def _aks_class(
        self, view: View, doc: Document, spec: Mapping[str, Any]
    ) -> tuple[str | None, tuple[str, ...], int | None]:
        """AKS node auto-provisioning: ``imageFamily`` and ``osDiskSizeGB``, stated or the CRD's
        defaults (Azure/karpenter-provider-azure, ``AKSNodeClassSpec``)."""
        family: str | None
        setting = expect_str(doc, spec.get("imageFamily"), "spec.imageFamily")
        if setting:
            family = osfamilies.family_of_setting(setting)
            view.compared("spec.imageFamily", "osImage", setting)
        else:
            family = osfamilies.family_of_setting("Ubuntu")
            view.default("osImage", "spec.imageFamily", "Ubuntu", _AKS_IMAGE_DEFAULT)
        disk = expect_int(doc, spec.get("osDiskSizeGB"), "spec.osDiskSizeGB")
        if disk is not None:
            view.compared("spec.osDiskSizeGB", "diskSizeGiB", disk)
        else:
            disk = 128
            view.default("diskSizeGiB", "spec.osDiskSizeGB", disk, _AKS_DISK_DEFAULT)
        pods = expect_int(doc, spec.get("maxPods"), "spec.maxPods")
        if pods is not None:
            self.max_pods = pods
            view.compared("spec.maxPods", "allocatable.pods", pods)
        for key in spec:
            if key not in ("imageFamily", "osDiskSizeGB", "maxPods"):
                if key == "kubelet":
                    for inner in expect_mapping(doc, spec[key], "spec.kubelet"):
                        view.ignored(f"spec.kubelet.{inner}", _KUBELET)
                elif key == "tags":
                    view.ignored("spec.tags", f"Azure resource tags: {_NOT_ON_NODE}")
                elif f"spec.{key}" not in _CLASS_IGNORED:
                    view.ignored(f"spec.{key}", f"AKS node class setting: {_NOT_ON_NODE}")
        return family, (), disk


def _check_template_spec(doc: Document, tmpl_spec: Any) -> None:
    """What the NodePool CRD requires of ``spec.template.spec`` (karpenter.sh_nodepools.yaml,
    v1 and v1beta1 alike): ``nodeClassRef`` and ``requirements`` (an empty list is allowed);
    a v1 ``nodeClassRef`` needs ``group``, ``kind`` and ``name``, none empty
    (x-kubernetes-validations "... may not be empty"), a v1beta1 one its ``name``. The API
    server refuses a NodePool without them: Karpenter never made nodes from it."""
    at = "spec.template.spec"
    if not isinstance(tmpl_spec, Mapping):
        expect_mapping(doc, tmpl_spec, at)
        return
    for key in ("nodeClassRef", "requirements"):
        if tmpl_spec.get(key) is None:
            raise FormatError(
                doc.path, "missing (required by the NodePool CRD)", field=doc.where(f"{at}.{key}")
            )
    ref = expect_mapping(doc, tmpl_spec["nodeClassRef"], f"{at}.nodeClassRef")
    v1 = doc.api_version == "karpenter.sh/v1"
    for key in ("group", "kind", "name") if v1 else ("name",):
        where = f"{at}.nodeClassRef.{key}"
        value = expect_str(doc, ref.get(key), where)
        if value is None:
            raise FormatError(
                doc.path, "missing (required by the NodePool CRD)", field=doc.where(where)
            )
        if not value and v1:
            why = f"{key} may not be empty (the NodePool CRD refuses it)"
            raise FormatError(doc.path, why, field=doc.where(where))


def _check_provider(doc: Document, spec: Mapping[str, Any]) -> None:
    """A v1alpha5 Provisioner states exactly one of ``spec.provider`` and ``spec.providerRef``.

    The Provisioner CRD marks no field required, but Karpenter's admission webhook refuses a
    Provisioner with neither or both (``validateProvider`` in karpenter-core
    ``pkg/apis/v1alpha5/provisioner_validation.go``), so such an object never made nodes: a
    Provisioner without ``spec`` (or ``spec: null``) is as invalid as a NodePool without it."""
    has_provider = spec.get("provider") is not None
    has_ref = spec.get("providerRef") is not None
    if has_provider and has_ref:
        raise FormatError(
            doc.path,
            "both spec.provider and spec.providerRef: Karpenter's v1alpha5 Provisioner "
            "validation takes exactly one",
            field=doc.where("spec.providerRef"),
            line=doc.line_of(("spec", "providerRef")),
        )
    if not (has_provider or has_ref):
        field_ = "spec" if not spec else "spec.providerRef"
        raise FormatError(
            doc.path,
            "missing (Karpenter's v1alpha5 Provisioner validation requires spec.provider or "
            "spec.providerRef)",
            field=doc.where(field_),
            line=doc.line_of(("spec",)) if spec else None,
        )


# EC2NodeClass amiFamily per API version, as its CRD validates it: v1 (realdata's
# pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml: the enum, "must specify amiFamily if
# amiSelectorTerms does not contain an alias", "if set, amiFamily must be '<alias family>' or
# 'Custom' when using an <alias family> alias"); v1beta1 (EC2NodeClassSpec.AMIFamily: required,
# with Ubuntu and without Windows2025)
_AMI_FAMILIES = {
    "karpenter.k8s.aws/v1": (
        "AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"
    ),
    "karpenter.k8s.aws/v1beta1": (
        "AL2", "AL2023", "Bottlerocket", "Ubuntu", "Custom", "Windows2019", "Windows2022"
    ),
}  # fmt: skip


def _check_ami_family(doc: Document, setting: str | None, alias: str | None, at: str) -> None:
    """Refuse an EC2NodeClass amiFamily its CRD refuses: Karpenter never made nodes of it."""
    allowed = _AMI_FAMILIES.get(doc.api_version) if doc.kind == "EC2NodeClass" else None
    if allowed is None:
        return
    field_ = doc.where(f"{at}.amiFamily")
    line = doc.line_of((at, "amiFamily"))
    v1 = doc.api_version == "karpenter.k8s.aws/v1"
    spec = doc.body.get("spec")
    if v1 and isinstance(spec, Mapping) and not spec.get("amiSelectorTerms"):
        raise FormatError(
            doc.path,
            "missing (required by the v1 EC2NodeClass CRD)",
            field=doc.where(f"{at}.amiSelectorTerms"),
        )
    if setting is None:
        if alias is None and v1:
            why = "missing: the EC2NodeClass CRD requires it when amiSelectorTerms has no alias"
            raise FormatError(doc.path, why, field=field_)
        if doc.api_version == "karpenter.k8s.aws/v1beta1":
            raise FormatError(
                doc.path, "missing (required by the v1beta1 EC2NodeClass CRD)", field=field_
            )
        return
    if setting not in allowed:
        why = f"{setting!r} is not an amiFamily of {doc.api_version} (one of {', '.join(allowed)})"
        raise FormatError(doc.path, why, field=field_, line=line)
    if alias is not None and setting != "Custom":
        family = alias.partition("@")[0].lower()
        if family != setting.lower():
            why = (
                f"amiFamily {setting!r} with the alias {alias!r}: the EC2NodeClass CRD takes only "
                f"its own family or 'Custom' beside an alias"
            )
            raise FormatError(doc.path, why, field=field_, line=line)


def _defined_twice(doc: Document, earlier: Document) -> FormatError:
    line = earlier.line_of(("metadata", "name"))
    there = f"{earlier.path}:{line}" if line is not None else earlier.path
    return FormatError(
        doc.path,
        f"{doc.kind} {doc.name!r} is defined twice (also at {there}): a cluster holds one "
        "per name; rename one, or give each cluster's files as their own tree (CLUSTER=PATH)",
        field=doc.where("metadata.name"),
        line=doc.line_of(("metadata", "name")),
    )


def _p(*parts: str | int) -> Path:
    """A path tuple from dotted strings and list positions (never a key from the data: keys
    may hold dots)."""
    out: list[str | int] = []
    for part in parts:
        out.extend(part.split(".") if isinstance(part, str) else [part])
    return tuple(out)


def _show_taint(taint: Taint) -> str:
    return f"{taint.key}={taint.value or ''}:{taint.effect}"


def _requirements(doc: Document, raw: Any, where: str) -> tuple[tuple[Requirement, str], ...]:
    """The requirements (keys normalised as Karpenter does), each with its key as written."""
    out = []
    for i, item in enumerate(expect_list(doc, raw, where)):
        r = expect_mapping(doc, item, f"{where}[{i}]")
        key = expect_str(doc, r.get("key"), f"{where}[{i}].key", allow_none=False)
        op = expect_str(doc, r.get("operator"), f"{where}[{i}].operator", allow_none=False)
        if op not in _OPERATORS:
            raise FormatError(
                doc.path, f"unknown operator {op!r}", field=doc.where(f"{where}[{i}].operator")
            )
        values = tuple(
            str(expect_str(doc, v, f"{where}[{i}].values[{j}]", allow_none=False))
            for j, v in enumerate(expect_list(doc, r.get("values"), f"{where}[{i}].values"))
        )
        if op in ("Gt", "Lt", "Gte", "Lte"):
            # Karpenter's validation: one value, a non-negative integer
            bound = ascii_int(values[0]) if len(values) == 1 else None
            if bound is None:
                raise FormatError(
                    doc.path,
                    f"operator {op} takes a single non-negative integer value, got {list(values)}",
                    field=doc.where(f"{where}[{i}].values"),
                )
            # Karpenter's Gte/Lte are Gt/Lt shifted by one
            if op in ("Gte", "Lte"):
                op, values = ("Gt", (str(bound - 1),)) if op == "Gte" else ("Lt", (str(bound + 1),))
        written = str(key)
        out.append(
            (Requirement(_NORMALIZED_LABELS.get(written, written), str(op), values), written)
        )
    return tuple(out)


def _taints(doc: Document, raw: Any, where: str) -> tuple[Taint, ...]:
    out = []
    for i, item in enumerate(expect_list(doc, raw, where)):
        t = expect_mapping(doc, item, f"{where}[{i}]")
        key = expect_str(doc, t.get("key"), f"{where}[{i}].key", allow_none=False)
        value = expect_str(doc, t.get("value"), f"{where}[{i}].value")
        effect = expect_str(doc, t.get("effect"), f"{where}[{i}].effect", allow_none=False)
        try:
            out.append(Taint(str(key), value, normalise_effect(str(effect))))
        except ValueError as exc:
            raise FormatError(doc.path, str(exc), field=doc.where(f"{where}[{i}].effect")) from None
    return tuple(sorted(out))
