"""GKE inputs (``google_container_node_pool``, ``google_container_cluster``, the
kubernetes-engine module's pool maps) that are never compared, each with the reason.
"""

from __future__ import annotations

from fleetwarden.formats.terraform.reading import (
    META_IGNORED,
)

__all__: list[str] = []

_NOT_ON_NODE = "not visible on a Node"
_PROVIDER = "Google provider / GKE"


_CONFIG_IGNORED: dict[str, str] = {
    key: why
    for keys, why in (
        (("disk_type", "boot_disk"), f"disk type: {_NOT_ON_NODE} (its size is compared)"),
        (("service_account", "oauth_scopes"), f"node identity: {_NOT_ON_NODE}"),
        (("metadata",), f"instance metadata: {_NOT_ON_NODE}"),
        (("tags", "resource_labels", "resource_manager_tags"), f"GCE tags: {_NOT_ON_NODE}"),
        (
            ("local_ssd_count", "local_nvme_ssd_block_config", "secondary_boot_disks"),
            "extra disks: not the kubelet's ephemeral storage",
        ),
        (
            (
                "storage_pools",
                "boot_disk_kms_key",
                "enable_confidential_storage",
                "local_ssd_encryption_mode",
            ),
            f"disk settings: {_NOT_ON_NODE}",
        ),
        (("guest_accelerator",), "GPUs: not compared (a device plugin's resource)"),
        (
            ("kubelet_config", "linux_node_config", "windows_node_config", "containerd_config"),
            "kubelet / OS configuration: not compared",
        ),
        (
            (
                "workload_metadata_config",
                "shielded_instance_config",
                "confidential_nodes",
                "advanced_machine_features",
                "sandbox_config",
            ),
            f"node security: {_NOT_ON_NODE}",
        ),
        (
            (
                "reservation_affinity",
                "sole_tenant_config",
                "node_group",
                "host_maintenance_policy",
                "min_cpu_platform",
                "fast_socket",
                "gvnic",
                "gcfs_config",
                "logging_variant",
                "flex_start",
                "max_run_duration",
            ),
            f"GCE instance setting: {_NOT_ON_NODE}",
        ),
        (("effective_taints",), "computed by the provider"),
    )
    for key in keys
}
_POOL_IGNORED: dict[str, str] = {
    **META_IGNORED,
    "project": f"GCP project: {_NOT_ON_NODE}",
    "management": f"auto-repair: {_NOT_ON_NODE}; auto_upgrade read: whether the version counts",
    "upgrade_settings": f"surge upgrade settings: {_NOT_ON_NODE}",
    "network_config": f"networking: {_NOT_ON_NODE}",
    "placement_policy": f"VM placement: {_NOT_ON_NODE}",
    "queued_provisioning": f"provisioning mode: {_NOT_ON_NODE}",
    "autoscaling[*].location_policy": f"how the autoscaler spreads nodes: {_NOT_ON_NODE}",
    "location": "the cluster's region or zone: the zones are counted from the cluster's",
    "node_locations": "zones: read for the number of zones",
    **{f"node_config[*].{k}": v for k, v in _CONFIG_IGNORED.items()},
}
_CLUSTER_SETTING = "a cluster setting: not a property of the default pool's nodes"
_CLUSTER_IGNORED: dict[str, str] = {
    **_POOL_IGNORED,
    **{
        key: _CLUSTER_SETTING
        for key in (
            "network",
            "subnetwork",
            "networking_mode",
            "ip_allocation_policy",
            "private_cluster_config",
            "master_auth",
            "master_authorized_networks_config",
            "addons_config",
            "workload_identity_config",
            "logging_service",
            "monitoring_service",
            "logging_config",
            "monitoring_config",
            "maintenance_policy",
            "resource_labels",
            "description",
            "enable_shielded_nodes",
            "binary_authorization",
            "vertical_pod_autoscaling",
            "datapath_provider",
            "dns_config",
            "gateway_api_config",
            "security_posture_config",
            "cost_management_config",
            "enable_l4_ilb_subsetting",
            "enable_intranode_visibility",
            "enable_legacy_abac",
            "notification_config",
            "database_encryption",
            "cluster_ipv4_cidr",
            "default_snat_status",
            "enable_kubernetes_alpha",
            "enable_tpu",
            "fleet",
            "deletion_protection",
            "release_channel",
            "min_master_version",
            "authenticator_groups_config",
            "mesh_certificates",
            "service_external_ips_config",
            "enable_multi_networking",
            "control_plane_endpoints_config",
        )
    },
    "cluster_autoscaling": "node auto-provisioning: creates other pools (not this one)",
    "node_pool_defaults": "defaults of other pools: not compared",
    "node_pool_auto_config": "defaults of auto-provisioned pools: not compared",
    "remove_default_node_pool": "read: whether the default-pool exists",
    "enable_autopilot": "read: an Autopilot cluster has no default-pool",
    "name": "read: the cluster's name",
}
_MODULE_POOL_IGNORED: dict[str, str] = {
    **{
        key: why
        for keys, why in (
            (("auto_repair",), f"auto-repair: {_NOT_ON_NODE}"),
            (("disk_type",), f"disk type: {_NOT_ON_NODE} (its size is compared)"),
            (
                ("service_account", "enable_private_nodes"),
                f"node identity / access: {_NOT_ON_NODE}",
            ),
            (("local_ssd_count", "local_nvme_ssd_count"), "extra disks: not the kubelet's storage"),
            (
                (
                    "accelerator_count",
                    "accelerator_type",
                    "gpu_partition_size",
                    "gpu_sharing_strategy",
                    "max_shared_clients_per_gpu",
                    "gpu_driver_version",
                ),
                "GPUs: not compared (a device plugin's resource)",
            ),
            (
                (
                    "enable_gcfs",
                    "enable_gvnic",
                    "logging_variant",
                    "pod_range",
                    "min_cpu_platform",
                    "boot_disk_kms_key",
                    "enable_secure_boot",
                    "enable_integrity_monitoring",
                    "node_affinity",
                    "enable_nested_virtualization",
                    "placement_policy",
                    "threads_per_core",
                    "enable_confidential_nodes",
                    "tpu_topology",
                    "policy_name",
                    "reservation_affinity_consume_reservation_type",
                    "enable_confidential_storage",
                    "location_policy",
                    "queued_provisioning",
                    "strategy",
                    "max_surge",
                    "max_unavailable",
                    "node_pool_soak_duration",
                    "batch_node_count",
                    "batch_soak_duration",
                    "batch_percentage",
                    "flex_start",
                    "max_run_duration",
                    "consume_reservation_type",
                    "reservation_name",
                    "network",
                    "subnetwork",
                ),
                f"GCE / upgrade setting: {_NOT_ON_NODE}",
            ),
            (
                (
                    "sandbox_enabled",
                    "cpu_manager_policy",
                    "cpu_cfs_quota",
                    "cpu_cfs_quota_period",
                    "insecure_kubelet_readonly_port_enabled",
                    "pod_pids_limit",
                    "image_gc_low_threshold_percent",
                    "image_gc_high_threshold_percent",
                    "container_log_max_size",
                    "container_log_max_files",
                    "allowed_unsafe_sysctls",
                    "image_maximum_gc_age",
                    "image_minimum_gc_age",
                    "enable_fast_socket",
                    "performance_monitoring_unit",
                    "windows_node_config_os_version",
                ),
                "kubelet / sandbox configuration: not compared",
            ),
            (
                ("node_metadata",),
                "workload metadata mode (GKE_METADATA adds GKE's metadata-server label): "
                "not compared",
            ),
            (
                (
                    "provisioned_iops",
                    "provisioned_throughput",
                    "secondary_boot_disk",
                    "secondary_boot_disk_mode",
                    "ephemeral_storage_local_ssd_data_cache_count",
                    "total_egress_bandwidth_tier",
                    "respect_pdb_during_node_pool_deletion",
                ),
                f"disk performance, image cache, network tier, deletion: {_NOT_ON_NODE}",
            ),
        )
        for key in keys
    },
}


_MAP_REASONS = {
    "node_pools_oauth_scopes": f"node identity: {_NOT_ON_NODE}",
    "node_pools_metadata": f"instance metadata: {_NOT_ON_NODE}",
    "node_pools_tags": f"network tags: {_NOT_ON_NODE}",
    "node_pools_resource_labels": f"GCE labels: {_NOT_ON_NODE}",
    "node_pools_resource_manager_tags": f"GCE tags: {_NOT_ON_NODE}",
}

# the gke-node-pool sub-module's inputs (v38-v44 variables.tf): the resource's, as objects
_SUB_MODULE_IGNORED: dict[str, str] = {
    **META_IGNORED,
    "count": "read: whether the module makes the pool",
    "for_each": "read: how many pools the module makes",
    "project_id": f"GCP project: {_NOT_ON_NODE}",
    "project": f"GCP project: {_NOT_ON_NODE} (v38's name of project_id)",
    "location": "the cluster's region or zone: read for the number of zones",
    "node_locations": "zones: read for the number of zones",
    "management.auto_repair": f"auto-repair: {_NOT_ON_NODE}",
    "management": f"auto-repair / auto-upgrade: {_NOT_ON_NODE}",
    "upgrade_settings": f"surge upgrade settings: {_NOT_ON_NODE}",
    "network_config": f"networking: {_NOT_ON_NODE}",
    "placement_policy": f"VM placement: {_NOT_ON_NODE}",
    "queued_provisioning": f"provisioning mode: {_NOT_ON_NODE}",
    "autoscaling.location_policy": f"how the autoscaler spreads nodes: {_NOT_ON_NODE}",
    **{f"node_config.{k}": v for k, v in _CONFIG_IGNORED.items()},
}

# the gke-standard-cluster sub-module's inputs (v38-v44 variables.tf): the cluster resource's
# attributes of the same names (node_config an object), and the settings it adds since
_STANDARD_CLUSTER_IGNORED: dict[str, str] = {
    **{
        k: v
        for k, v in _CLUSTER_IGNORED.items()
        # the module sets these itself (VPC_NATIVE, never Autopilot): not its inputs
        if k not in _POOL_IGNORED and k not in ("networking_mode", "enable_autopilot")
    },
    **META_IGNORED,
    "count": "read: whether the module makes the cluster",
    "for_each": "read: how many clusters the module makes",
    "project_id": f"GCP project: {_NOT_ON_NODE}",
    "project": f"GCP project: {_NOT_ON_NODE} (v38's name of project_id)",
    "location": "the cluster's region or zone: read for the number of zones",
    "node_locations": "zones: read for the number of zones",
    "confidential_nodes": f"node security: {_NOT_ON_NODE}",
    **{
        key: _CLUSTER_SETTING
        for key in (
            "cluster_telemetry",
            "disable_l4_lb_firewall_reconciliation",
            "enable_cilium_clusterwide_network_policy",
            "enable_fqdn_network_policy",
            "enable_k8s_beta_apis",
            "enterprise_config",
            "identity_service_config",
            "in_transit_encryption_config",
            "network_policy",
            "pod_autoscaling",
            "pod_security_policy_config",
            "private_ipv6_google_access",
            "protect_config",
            "resource_usage_export_config",
            "secret_manager_config",
            "secret_sync_config",
            "workload_alts_config",
        )
    },
    **{f"node_config.{k}": v for k, v in _CONFIG_IGNORED.items()},
}
