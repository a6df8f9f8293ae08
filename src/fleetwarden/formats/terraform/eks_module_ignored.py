"""terraform-aws-eks node-group inputs that are never compared, each with the reason (not
visible on a Node, bookkeeping, or an effect that depends on an unpinned major).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetwarden.formats.terraform.reading import META_IGNORED

__all__: list[str] = []

_NOT_ON_NODE = "not visible on a Node"
_TAGS = f"AWS tags: {_NOT_ON_NODE}"
_IAM = f"IAM: {_NOT_ON_NODE}"
_NET = f"networking: {_NOT_ON_NODE}"
_CONN = f"how nodes reach the cluster: {_NOT_ON_NODE}"
_LT = f"launch template bookkeeping: {_NOT_ON_NODE}"
_EC2 = f"EC2 instance setting: {_NOT_ON_NODE}"
_ASG = f"Auto Scaling group behaviour: {_NOT_ON_NODE}"
_ROLLOUT = f"rollout behaviour: {_NOT_ON_NODE}"
_AMI_RELEASE = "AMI release: not compared (the kubelet minor is, through the version)"
_MAJOR = "its effect depends on the terraform-aws-eks major, which is not pinned"

_COMMON_IGNORED: dict[str, str] = {
    **META_IGNORED,
    "create": "creates the group (true)",
    "tags": _TAGS,
    "launch_template_tags": _TAGS,
    "tag_specifications": _TAGS,
    "autoscaling_group_tags": _TAGS,
    "region": _CONN,
    "partition": _CONN,
    "account_id": _CONN,
    "cluster_endpoint": _CONN,
    "cluster_auth_base64": _CONN,
    "cluster_service_cidr": _CONN,
    "cluster_service_ipv4_cidr": _CONN,
    "cluster_ip_family": _CONN,
    "additional_cluster_dns_ips": _CONN,
    # v18 node-group inputs (node_groups.tf of v18.31.2: the groups' security group's VPC, and
    # the provider's default tags copied to the Auto Scaling group)
    "vpc_id": _NET,
    "use_default_tags": _TAGS,
    "cluster_primary_security_group_id": _NET,
    "vpc_security_group_ids": _NET,
    "attach_cluster_primary_security_group": _NET,
    "subnet_ids": f"subnets: {_NOT_ON_NODE}",
    "network_interfaces": _NET,
    "create_security_group": _NET,
    "launch_template_name": _LT,
    "launch_template_use_name_prefix": _LT,
    "launch_template_description": _LT,
    "description": _LT,
    "launch_template_default_version": _LT,
    "update_launch_template_default_version": _LT,
    "launch_template_version": _LT,
    "ebs_optimized": _EC2,
    "key_name": _EC2,
    "disable_api_termination": _EC2,
    "instance_initiated_shutdown_behavior": _EC2,
    "kernel_id": _EC2,
    "ram_disk_id": _EC2,
    "capacity_reservation_specification": _EC2,
    "cpu_options": _EC2,
    "credit_specification": _EC2,
    "elastic_gpu_specifications": _EC2,
    "elastic_inference_accelerator": _EC2,
    "hibernation_options": _EC2,
    "enclave_options": _EC2,
    "maintenance_options": _EC2,
    "license_specifications": _EC2,
    "metadata_options": f"instance metadata settings: {_NOT_ON_NODE}",
    "enable_monitoring": f"CloudWatch monitoring: {_NOT_ON_NODE}",
    "placement": _EC2,
    "placement_group": _EC2,
    "create_placement_group": _EC2,
    "placement_group_strategy": _EC2,
    "placement_group_az": _EC2,
    "private_dns_name_options": _EC2,
    "enable_efa_support": "EFA interfaces: not compared (a device plugin's resource)",
    "enable_efa_only": "EFA interfaces: not compared (a device plugin's resource)",
    "efa_indices": "EFA interfaces: not compared (a device plugin's resource)",
    "create_iam_role": _IAM,
    "create_iam_role_policy": _IAM,
    "create_iam_instance_profile": _IAM,
    "iam_instance_profile_arn": _IAM,
    "create_access_entry": _IAM,
    "ami_release_version": _AMI_RELEASE,
    "use_latest_ami_release_version": _AMI_RELEASE,
    "force_update_version": _ROLLOUT,
    "update_config": _ROLLOUT,
    "instance_refresh": _ROLLOUT,
    "node_repair_config": f"EKS node auto-repair: {_NOT_ON_NODE}",
    "remote_access": f"SSH access: {_NOT_ON_NODE}",
    "create_schedule": "switches schedules (read with them)",
    "enable_bootstrap_user_data": "a switch: the module's bootstrap user data (read with "
    "bootstrap_extra_args, where it matters)",
    "use_custom_launch_template": "a switch: the module's launch template (read with the disk)",
    "create_launch_template": "a switch: the module's launch template (read with the disk)",
    "use_mixed_instances_policy": "a switch: the mixed instances policy (read with it)",
    "delete_timeout": "Terraform timeouts: not visible on a Node",
    "use_name_prefix": "names the group: read with name",
    "name": "names the group",
}
_SELF_IGNORED: dict[str, str] = {
    **_COMMON_IGNORED,
    "create_autoscaling_group": _ASG,
    "availability_zones": f"zones: {_NOT_ON_NODE}",
    "ignore_failed_scaling_activities": _ASG,
    "context": _ASG,
    "capacity_rebalance": _ASG,
    "min_elb_capacity": _ASG,
    "wait_for_elb_capacity": _ASG,
    "wait_for_capacity_timeout": _ASG,
    "default_cooldown": _ASG,
    "target_group_arns": _ASG,
    "service_linked_role_arn": _ASG,
    "default_instance_warmup": _ASG,
    "protect_from_scale_in": _ASG,
    "health_check_type": _ASG,
    "health_check_grace_period": _ASG,
    "force_delete": _ASG,
    "force_delete_warm_pool": _ASG,
    "termination_policies": _ASG,
    "suspended_processes": _ASG,
    "max_instance_lifetime": _ASG,
    "enabled_metrics": _ASG,
    "metrics_granularity": _ASG,
    "initial_lifecycle_hooks": _ASG,
    "instance_maintenance_policy": _ASG,
    "warm_pool": "warm pool instances are not Nodes",
    "instance_market_options": "Spot/On-Demand: self-managed nodes carry no capacity label",
    "iam_role_arn": _IAM,
    "mixed_instances_policy.instances_distribution": (
        "Spot/On-Demand mix: self-managed nodes carry no capacity label"
    ),
    "mixed_instances_policy.launch_template.launch_template_specification": _LT,
    "launch_template_id": _LT,
}
_MANAGED_IGNORED: dict[str, str] = {
    **_COMMON_IGNORED,
    "instance_market_options": _EC2,
}
_PREFIXES = {"iam_role_": _IAM, "security_group_": _NET}
_OPAQUE = ("pre_bootstrap_user_data", "post_bootstrap_user_data", "cloudinit_post_nodeadm")
_SELF_NO_INPUT = (
    "self-managed groups have no {key} input (v18-v20 never read it, v21 drops it): "
    "never expected on the nodes"
)


def _reasons(body: Mapping[Any, Any], table: Mapping[str, str]) -> dict[str, str]:
    out = dict(table)
    for key in body:
        for prefix, why in _PREFIXES.items():
            if isinstance(key, str) and key.startswith(prefix):
                out.setdefault(key, why)
    return out


def _table(managed: bool) -> dict[str, str]:
    return _MANAGED_IGNORED if managed else _SELF_IGNORED
