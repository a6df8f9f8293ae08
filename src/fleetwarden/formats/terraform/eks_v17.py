"""terraform-aws-eks v17: ``node_groups`` (EKS managed) and ``worker_groups`` /
``worker_groups_launch_template`` (self-managed) of the root module, with v17.24's defaults.

- ``workers_group_defaults`` (the user's, merged over the module's ``locals.tf``): min 1, max 3,
  desired 1, ``instance_type`` m4.large, ``root_volume_size`` 100, ``platform`` linux (AL2;
  ``windows``: Windows Server 2019), ``override_instance_types`` m5.large, m5a.large, m5d.large,
  m5ad.large (a ``worker_groups_launch_template`` group uses them when it sets
  ``override_instance_types`` or ``on_demand_allocation_strategy``);
- ``node_groups`` merge ``node_groups_defaults`` under each group (shallow; ``k8s_labels`` merged
  key by key); their counts, instance type (``[instance_type]``) and ``disk_size``
  (``root_volume_size``) come from the workers' defaults; ``ami_type`` / ``capacity_type``
  unset are EKS's defaults; a group without ``name`` is named ``<name_prefix or
  cluster-key><suffix>``;
- labels and taints of workers only through ``kubelet_extra_args`` / ``bootstrap_extra_args``
  kubelet flags (AL2); ``pre_userdata`` / ``additional_userdata`` are shell: not asserted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats import bootstrap
from fleetwarden.formats.terraform import eks
from fleetwarden.formats.terraform.eks_majors import Majors
from fleetwarden.formats.terraform.hcl import source_text
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import META_IGNORED, Context, Obj, Reader

__all__ = ["pools"]

_BUILT_IN: dict[str, Any] = {
    "asg_min_size": 1,
    "asg_max_size": 3,
    "asg_desired_capacity": 1,
    "instance_type": "m4.large",
    "root_volume_size": 100,
    "platform": "linux",
    "override_instance_types": ["m5.large", "m5a.large", "m5d.large", "m5ad.large"],
}
_LOCALS = "locals.tf workers_group_defaults"
_NOT_ON_NODE = "not visible on a Node"
_IGNORED: dict[str, str] = {
    **META_IGNORED,
    "create": "creates the group (true)",
    "name": "names the group",
    "name_prefix": "names the group",
    "additional_tags": f"AWS tags: {_NOT_ON_NODE}",
    "tags": f"AWS tags: {_NOT_ON_NODE}",
    "subnets": f"subnets: {_NOT_ON_NODE}",
    "key_name": f"EC2 key pair: {_NOT_ON_NODE}",
    "source_security_group_ids": f"SSH access: {_NOT_ON_NODE}",
    "additional_security_group_ids": f"security groups: {_NOT_ON_NODE}",
    "iam_role_arn": f"IAM: {_NOT_ON_NODE}",
    "iam_role_id": f"IAM: {_NOT_ON_NODE}",
    "iam_instance_profile_name": f"IAM: {_NOT_ON_NODE}",
    "force_update_version": f"rollout behaviour: {_NOT_ON_NODE}",
    "update_config": f"rollout behaviour: {_NOT_ON_NODE}",
    "ami_release_version": "AMI release: not compared",
    "ami_id_windows": "AMI of another platform",
    "public_ip": f"networking: {_NOT_ON_NODE}",
    "eni_delete": f"networking: {_NOT_ON_NODE}",
    "ebs_optimized": f"EC2 setting: {_NOT_ON_NODE}",
    "enable_monitoring": f"CloudWatch monitoring: {_NOT_ON_NODE}",
    "root_volume_type": f"EBS volume type: {_NOT_ON_NODE}",
    "root_iops": f"EBS IOPS: {_NOT_ON_NODE}",
    "root_encrypted": f"EBS encryption: {_NOT_ON_NODE}",
    "root_kms_key_id": f"EBS encryption: {_NOT_ON_NODE}",
    "disk_type": f"EBS volume type: {_NOT_ON_NODE}",
    "disk_encrypted": f"EBS encryption: {_NOT_ON_NODE}",
    "disk_kms_key_id": f"EBS encryption: {_NOT_ON_NODE}",
    "additional_ebs_volumes": "extra EBS volumes: not the kubelet's ephemeral storage",
    "metadata_http_endpoint": f"instance metadata settings: {_NOT_ON_NODE}",
    "metadata_http_tokens": f"instance metadata settings: {_NOT_ON_NODE}",
    "metadata_http_put_response_hop_limit": f"instance metadata settings: {_NOT_ON_NODE}",
    "spot_allocation_strategy": "Spot/On-Demand mix: self-managed nodes carry no label",
    "spot_instance_pools": "Spot/On-Demand mix: self-managed nodes carry no label",
    "spot_max_price": "Spot/On-Demand mix: self-managed nodes carry no label",
    "spot_price": "Spot/On-Demand mix: self-managed nodes carry no label",
    "on_demand_base_capacity": "Spot/On-Demand mix: self-managed nodes carry no label",
    "on_demand_percentage_above_base_capacity": (
        "Spot/On-Demand mix: self-managed nodes carry no label"
    ),
    "capacity_rebalance": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "enabled_metrics": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "suspended_processes": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "termination_policies": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "protect_from_scale_in": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "target_group_arns": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "health_check_type": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "placement_group": f"EC2 placement: {_NOT_ON_NODE}",
    "placement_tenancy": f"EC2 placement: {_NOT_ON_NODE}",
    "cpu_credits": f"EC2 setting: {_NOT_ON_NODE}",
    "instance_refresh_enabled": f"rollout behaviour: {_NOT_ON_NODE}",
    "instance_refresh_strategy": f"rollout behaviour: {_NOT_ON_NODE}",
    "instance_refresh_min_healthy_percentage": f"rollout behaviour: {_NOT_ON_NODE}",
    "instance_refresh_instance_warmup": f"rollout behaviour: {_NOT_ON_NODE}",
    "instance_refresh_triggers": f"rollout behaviour: {_NOT_ON_NODE}",
    "launch_template_version": "launch template version: read with launch_template_id",
    "launch_template_id": "the launch template of managed node_groups (worker groups make "
    "their own)",
    "set_instance_types_on_lt": "puts instance_types on the launch template: same types",
    "asg_recreate_on_change": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "asg_force_delete": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "asg_initial_lifecycle_hooks": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "default_cooldown": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "max_instance_lifetime": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "userdata_template_file": "custom user data template: read as opaque",
    "userdata_template_extra_args": "custom user data template arguments",
    "warm_pool": "warm pool instances are not Nodes",
    # the rest of v17's workers_group_defaults (locals.tf)
    "health_check_grace_period": f"Auto Scaling behaviour: {_NOT_ON_NODE}",
    "load_balancers": f"load balancer attachment: {_NOT_ON_NODE}",
    "service_linked_role_arn": f"IAM: {_NOT_ON_NODE}",
    "timeouts": f"Terraform timeouts: {_NOT_ON_NODE}",
    "root_volume_throughput": f"EBS throughput: {_NOT_ON_NODE}",
    "root_block_device_name": f"device name of the root volume: {_NOT_ON_NODE}",
    "root_block_device_name_windows": f"device name of the root volume: {_NOT_ON_NODE}",
    "snapshot_id": f"snapshot the root volume starts from: {_NOT_ON_NODE}",
    "instance_store_virtual_name": "instance store volumes: not the kubelet's ephemeral storage",
    "additional_instance_store_volumes": (
        "instance store volumes: not the kubelet's ephemeral storage"
    ),
    "enclave_support": f"Nitro enclaves: {_NOT_ON_NODE}",
    "elastic_inference_accelerator": f"Elastic Inference accelerator: {_NOT_ON_NODE}",
    "update_default_version": f"launch template default version: {_NOT_ON_NODE}",
    "launch_template_placement_tenancy": f"EC2 placement: {_NOT_ON_NODE}",
    "launch_template_placement_group": f"EC2 placement: {_NOT_ON_NODE}",
    "interface_type": f"networking (EFA): {_NOT_ON_NODE}",
    "market_type": "Spot/On-Demand mix: self-managed nodes carry no label",
}
_OPAQUE = ("pre_userdata", "additional_userdata")


class _Layers:
    """v17's shallow merge: the group, then the user's defaults, then the module's."""

    def __init__(self, r: Reader, objs: list[Obj], majors: Majors) -> None:
        self.r, self.objs = r, objs
        self.origin = f"{majors.label}: {_LOCALS}"  # where the module's own defaults are

    def find(self, attr: str) -> Obj | None:
        return next((o for o in self.objs if o.has(attr)), None)

    def count(self, attr: str, fact: str, built_in: str) -> int | None:
        obj = self.find(attr)
        if obj is not None:
            return self.r.count(obj, attr, fact)
        return self.built_in_count(built_in, fact, attr)

    def built_in_count(self, key: str, fact: str, attr: str) -> int | None:
        """A workers_group_defaults value: the user's (stated) or the module's (default)."""
        user = self.find_user(key)
        if user is not None:
            return self.r.count(user, key, fact)
        value = _BUILT_IN[key]
        self.r.default(fact, attr, value, f"{self.origin}: {key} {value}")
        return int(value)

    def find_user(self, key: str) -> Obj | None:
        return next(
            (o for o in self.objs[1:] if o.view.label == "workers_group_defaults" and o.has(key)),
            None,
        )


def pools(
    ctx: Context, label: str, module: Mapping[Any, Any], majors: Majors, remarks: list[str]
) -> list[NodePoolSpec]:
    scope, where, base = ctx.scope, f"module.{label}", ("module", label)
    out: list[NodePoolSpec] = []
    node_groups = scope.resolved(module.get("node_groups", {}))
    if not isinstance(node_groups, dict):
        remarks.append(f"{where}.node_groups: {source_text(node_groups)} cannot be read")
        node_groups = {}
    for key, group in node_groups.items():
        if not isinstance(group, dict):
            remarks.append(f"{where}.node_groups.{key}: {source_text(group)} cannot be read")
            continue
        r = Reader(ctx, f"{where}.node_groups.{key}")
        objs = _objs(r, ctx, module, base, group, ("node_groups", str(key)), "node_groups_defaults")
        if objs is None:
            remarks.append(f"{where}: node_groups_defaults cannot be read")
            continue
        out.append(_node_group(r, _Layers(r, objs, majors), module, base, str(key)))
    for section in ("worker_groups", "worker_groups_launch_template"):
        groups = scope.resolved(module.get(section, []))
        if not isinstance(groups, list):
            remarks.append(f"{where}.{section}: {source_text(groups)} cannot be read")
            continue
        for i, group in enumerate(groups):
            if not isinstance(group, dict):
                remarks.append(f"{where}.{section}[{i}]: {source_text(group)} cannot be read")
                continue
            r = Reader(ctx, f"{where}.{section}[{i}]")
            objs = _objs(r, ctx, module, base, group, (section, i), None)
            if objs is None:
                remarks.append(f"{where}: workers_group_defaults cannot be read")
                continue
            launch = section == "worker_groups_launch_template"
            layers = _Layers(r, objs, majors)
            out.append(_worker(r, layers, module, base, f"{section}[{i}]", launch))
    return out


def _objs(
    r: Reader,
    ctx: Context,
    module: Mapping[Any, Any],
    base: Path,
    group: Mapping[Any, Any],
    at: Path,
    defaults_attr: str | None,
) -> list[Obj] | None:
    objs = [r.obj(group, (*base, *at), _IGNORED)]
    for attr in (defaults_attr, "workers_group_defaults"):
        if attr is None or attr not in module:
            continue
        value = ctx.scope.resolved(module[attr])
        if not isinstance(value, dict):
            return None
        objs.append(r.obj(value, (*base, attr), _IGNORED, where=f"{r.where}.{attr}", label=attr))
    return objs


def _version(r: Reader, layers: _Layers, module: Mapping[Any, Any], base: Path) -> str | None:
    obj = layers.find("version")
    if obj is not None:
        return r.text(obj, "version", "kubernetesVersion")
    root = r.obj(module, base, {}, label=f"module.{base[1]}", close=False)
    if root.has("cluster_version"):
        return r.text(root, "cluster_version", "kubernetesVersion")
    r.unstated("kubernetesVersion", "cluster_version", "not stated: not compared")
    return None


def _node_group(
    r: Reader, layers: _Layers, module: Mapping[Any, Any], base: Path, key: str
) -> NodePoolSpec:
    group = layers.objs[0]
    root = r.obj(module, base, {}, label=f"module.{base[1]}", close=False)
    cluster = r.cluster(root, "cluster_name")
    name = key
    if group.has("name"):
        name = r.name(group, "name", key)
    else:
        prefix_obj = layers.find("name_prefix")
        prefix = r.text(prefix_obj, "name_prefix", "name") if prefix_obj else None
        if prefix_obj is None and cluster is not None:
            prefix = f"{cluster}-{key}"
        if prefix is not None:
            r.name_prefix = prefix
            r.note("name", f'"{prefix}" + a suffix Terraform generates (v17: no name)')
        elif prefix_obj is None:  # a stated prefix that is unknown is noted already
            r.note("name", "v17: <cluster>-<key> + a suffix, and the cluster is not known")
    version = _version(r, layers, module, base)
    lo = layers.count("min_capacity", "minSize", "asg_min_size")
    hi = layers.count("max_capacity", "maxSize", "asg_max_size")
    desired = layers.count("desired_capacity", "desiredSize", "asg_desired_capacity")
    eks.check_sizes(
        r,
        *(
            (found, (attr,), value)
            if value is not None and (found := layers.find(attr)) is not None
            else None
            for attr, value in (
                ("min_capacity", lo),
                ("max_capacity", hi),
                ("desired_capacity", desired),
            )
        ),
    )
    launch = layers.find("launch_template_id")
    if launch is not None:
        launch.view.unresolved(
            ("launch_template_id",), "a launch template: not followed", "diskSizeGiB"
        )
    types = _types(r, layers, launch, "instance_types")
    disk = None
    if launch is None:
        disk_obj = layers.find("disk_size")
        if disk_obj is not None:
            disk = r.count(disk_obj, "disk_size", "diskSizeGiB")
        else:
            disk = layers.built_in_count("root_volume_size", "diskSizeGiB", "disk_size")
    else:
        r.note("diskSizeGiB", "launch_template_id: its block device mapping (not followed)")
    create_lt = layers.find("create_launch_template")
    if create_lt is not None:
        r.flag(create_lt, "create_launch_template", "diskSizeGiB")
    families = _families(r, layers, version)
    labels = _capacity(r, layers)
    for obj in reversed(layers.objs):  # k8s_labels: defaults merged under the group's
        if obj.has("k8s_labels"):
            labels.update(r.labels(obj, "k8s_labels") or {})
    taints: tuple[Taint, ...] = ()
    taint_obj = layers.find("taints")
    if taint_obj is not None:
        taints = r.taints(taint_obj, "taints") or ()
    _opaque(r, layers, ("kubelet_extra_args", *_OPAQUE))
    r.startup_taints.append(eks.UPDATE_TAINT)
    return r.spec(
        Provisioner.AWS,
        name=name,
        cluster=cluster,
        instance_types=types,
        disk_size_gib=disk,
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels=labels,
        taints=taints,
        kubernetes_version=version,
        os_family=families[0] if families else None,
        os_family_alternatives=families[1:],
    )


def _types(r: Reader, layers: _Layers, launch: Obj | None, attr: str) -> tuple[str, ...]:
    """``instance_types``, else ``[workers_group_defaults.instance_type]``."""
    obj = layers.find(attr)
    if obj is not None:
        return r.texts(obj, attr, "instanceTypes") or ()
    if launch is not None:
        r.note("instanceTypes", "launch_template_id: the instance type may come from it")
        return ()
    user = layers.find_user("instance_type")
    if user is not None:
        single = r.text(user, "instance_type", "instanceTypes")
        return (single,) if single else ()
    value = str(_BUILT_IN["instance_type"])
    r.default("instanceTypes", attr, value, f"{layers.origin}: instance_type {value}")
    return (value,)


def _families(r: Reader, layers: _Layers, version: str | None) -> tuple[str, ...]:
    obj = layers.find("ami_type")
    if obj is not None:
        eks.check_accepted(r, obj, "ami_type")
        family = r.os_family(obj, "ami_type")
        return (family,) if family else ()
    families, why = eks.default_families(version)
    r.default("osImage", "ami_type", " or ".join(families), why)
    return families


def _capacity(r: Reader, layers: _Layers) -> dict[str, str]:
    fact = f"labels.{eks.CAPACITY_LABEL}"
    obj = layers.find("capacity_type")
    if obj is None:
        r.default(fact, "capacity_type", "ON_DEMAND", "EKS: managed node groups are ON_DEMAND")
        return {eks.CAPACITY_LABEL: "ON_DEMAND"}
    eks.check_accepted(r, obj, "capacity_type")
    stated = r.text(obj, "capacity_type", fact, note=False)
    if stated in ("ON_DEMAND", "SPOT"):
        r.compared(obj, "capacity_type", fact, stated)
        return {eks.CAPACITY_LABEL: stated}
    return {}


def _worker(
    r: Reader,
    layers: _Layers,
    module: Mapping[Any, Any],
    base: Path,
    stand_in: str,
    launch_template: bool,
) -> NodePoolSpec:
    group = layers.objs[0]
    root = r.obj(module, base, {}, label=f"module.{base[1]}", close=False)
    cluster = r.cluster(root, "cluster_name")
    name = r.name(group, "name", stand_in)
    version = _version(r, layers, module, base)
    lo = layers.count("asg_min_size", "minSize", "asg_min_size")
    hi = layers.count("asg_max_size", "maxSize", "asg_max_size")
    desired = layers.count("asg_desired_capacity", "desiredSize", "asg_desired_capacity")
    types = _worker_types(r, layers, launch_template)
    platform_obj = layers.find("platform")
    platform = r.text(platform_obj, "platform", "osImage", note=False) if platform_obj else "linux"
    custom = layers.find("ami_id")
    families: tuple[str, ...] = ()
    if custom is not None:
        custom.view.unresolved(
            ("ami_id",), "a custom AMI: its OS and volumes are not stated", "osImage"
        )
    elif platform in ("linux", "windows"):
        families = ("amazonlinux2",) if platform == "linux" else ("windows-2019",)
        if platform_obj is not None:
            r.compared(platform_obj, "platform", "osImage", platform)
        else:
            r.default(
                "osImage",
                "platform",
                "linux (AL2)",
                f"{layers.origin}: platform linux, the EKS AL2 AMI",
            )
    disk = None
    if custom is None:
        disk = layers.count("root_volume_size", "diskSizeGiB", "root_volume_size")
    elif (sized := layers.find("root_volume_size")) is not None:
        sized.view.ignored(
            ("root_volume_size",),
            "with a custom ami_id the size goes to root_block_device_name, which may not be "
            "that AMI's root device: not compared",
        )
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    max_pods = None
    for attr in ("kubelet_extra_args", "bootstrap_extra_args"):
        obj = layers.find(attr)
        if obj is None:
            continue
        text = r.text(obj, attr, "labels", note=False)
        if text is None:
            continue
        # the template passes kubelet_extra_args as bootstrap.sh's --kubelet-extra-args value
        parse = (
            bootstrap.from_kubelet_extra_args
            if attr == "kubelet_extra_args"
            else bootstrap.from_kubelet_flags
        )
        if platform != "linux" or custom is not None:
            _opaque_one(r, obj, attr, bootstrap.read_opaque(parse, text))
            continue
        try:
            facts = parse(text)
        except bootstrap.KubeletFlagError as exc:
            raise r.error(obj, attr, str(exc)) from None
        for key, value in facts.labels.items():
            labels[key] = value
            r.compared(obj, attr, f"labels.{key}", f"--node-labels {key}={value}")
        for taint in facts.taints:
            taints.append(taint)
            r.compared(obj, attr, taint.field_name, "--register-with-taints")
        if facts.max_pods is not None:
            max_pods = facts.max_pods
            r.compared(obj, attr, "allocatable.pods", facts.max_pods)
        for expression in facts.unresolved:  # a shell variable: never guessed
            r.unresolve(obj, attr, bootstrap.unresolved_fact(expression), expression)
        if facts.ignored:
            r.ignore(obj, attr, "; ".join(facts.ignored))
        if not facts.found:
            obj.view.ignored((attr,), "no node labels, taints or max-pods in it")
    _opaque(r, layers, _OPAQUE)
    for attr in ("labels", "taints", "k8s_labels"):
        r.ignore(group, attr, "v17 workers have no labels/taints input (kubelet_extra_args does)")
    return r.spec(
        Provisioner.AWS,
        name=name,
        cluster=cluster,
        instance_types=types,
        disk_size_gib=disk,
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels=labels,
        taints=tuple(sorted(set(taints))),
        kubernetes_version=version,
        os_family=families[0] if families else None,
        allocatable={"pods": str(max_pods)} if max_pods is not None else {},
    )


def _worker_types(r: Reader, layers: _Layers, launch_template: bool) -> tuple[str, ...]:
    """A launch-template worker group with ``override_instance_types`` or an
    ``on_demand_allocation_strategy`` gets a mixed instances policy: the override list."""
    overrides = layers.find("override_instance_types")
    strategy = layers.find("on_demand_allocation_strategy")
    own = layers.objs[0]
    mixed = launch_template and (own.has("override_instance_types") or strategy is not None)
    if strategy is not None:
        r.compared(strategy, "on_demand_allocation_strategy", "instanceTypes", "mixed instances")
    if mixed:
        if own.has("instance_type"):
            own.view.ignored(("instance_type",), "replaced by override_instance_types")
        if overrides is not None:
            return r.texts(overrides, "override_instance_types", "instanceTypes") or ()
        listed = [str(t) for t in _BUILT_IN["override_instance_types"]]
        origin = f"{layers.origin}: override_instance_types"
        r.default("instanceTypes", "override_instance_types", listed, origin)
        return tuple(listed)
    if overrides is not None:
        why = "no mixed instances policy: only a launch-template group setting it has one"
        overrides.view.ignored(("override_instance_types",), why)
    obj = layers.find("instance_type")
    if obj is not None:
        single = r.text(obj, "instance_type", "instanceTypes")
        return (single,) if single else ()
    value = str(_BUILT_IN["instance_type"])
    r.default("instanceTypes", "instance_type", value, f"{layers.origin}: instance_type {value}")
    return (value,)


def _opaque(r: Reader, layers: _Layers, attrs: tuple[str, ...]) -> None:
    for attr in attrs:
        obj = layers.find(attr)
        if obj is None:
            continue
        text = r.text(obj, attr, "labels", note=False)
        if text is not None:
            _opaque_one(r, obj, attr, bootstrap.read_opaque(bootstrap.from_user_data, text))


def _opaque_one(r: Reader, obj: Obj, attr: str, facts: bootstrap.BootFacts) -> None:
    if not facts.found:
        obj.view.ignored((attr,), "no node labels, taints or max-pods in it")
        return
    what = "may set node labels, taints or max-pods: not asserted (it may not take effect)"
    obj.view.unresolved((attr,), what, None)
    if facts.taints:
        r.note("taints", f"{attr}: {what}")
