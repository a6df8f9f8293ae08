"""Cluster API provider rules over small inline trees: which defaults apply for which release,
what each image says about the OS, what the kubelet and CAPI carry to the Node, and the account
of every attribute (compared / unresolved / ignored; never silently dropped)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from fleetwarden.core.pools import FieldAccount, FieldStatus, NodePoolSpec, Taint, Unresolved
from fleetwarden.formats import capi
from fleetwarden.formats.capi.azure import family_of_image_names
from fleetwarden.formats.capi.bootstraps import kubelet_may_set
from fleetwarden.formats.documents import parse_yaml_documents
from fleetwarden.formats.errors import FormatError


def _pools(text: str) -> dict[str, NodePoolSpec]:
    docs = parse_yaml_documents("tree.yaml", dedent(text))
    return {p.name: p for p in capi.read_pools(docs).pools}


def _entry(spec: NodePoolSpec, path_end: str) -> FieldAccount:
    found = [a for a in spec.account if a.path.endswith(path_end)]
    assert len(found) == 1, [a.path for a in spec.account]
    return found[0]


def _md(
    infra_kind: str, *, infra_version: str = "v1beta2", boot: str = "KubeadmConfigTemplate"
) -> str:
    return f"""\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: MachineDeployment
        metadata: {{name: md}}
        spec:
          clusterName: c1
          replicas: 2
          template:
            spec:
              clusterName: c1
              version: v1.31.4
              bootstrap:
                configRef: {{kind: {boot}, name: md}}
              infrastructureRef:
                apiVersion: infrastructure.cluster.x-k8s.io/{infra_version}
                kind: {infra_kind}
                name: md
        """


def _aws_template(spec: str, *, version: str = "v1beta2") -> str:
    return f"""\
        ---
        apiVersion: infrastructure.cluster.x-k8s.io/{version}
        kind: AWSMachineTemplate
        metadata: {{name: md}}
        spec:
          template:
            spec:
              instanceType: m5.large
{dedent(spec).strip() and _indent(dedent(spec), 14)}
        """


def _indent(text: str, width: int) -> str:
    return "\n".join(" " * width + line if line else line for line in text.splitlines())


CLUSTER = """\
    ---
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    metadata: {name: c1}
    spec:
      infrastructureRef: {kind: AWSCluster, name: c1}
      controlPlaneRef: {kind: KubeadmControlPlane, name: c1}
    ---
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: AWSCluster
    metadata: {name: c1}
    spec: {region: eu-west-1}
    """
EKS_CLUSTER = """\
    ---
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    metadata: {name: c1}
    spec:
      infrastructureRef: {kind: AWSManagedCluster, name: c1}
      controlPlaneRef: {kind: AWSManagedControlPlane, name: c1}
    """
BOOT = """\
    ---
    apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
    kind: KubeadmConfigTemplate
    metadata: {name: md}
    spec: {template: {spec: {}}}
    """


# ---------------------------------------------------------------------------------------------
# CAPA: the OS an AMI lookup gives, by release


def _tree(*parts: str) -> str:
    return "".join(dedent(p) for p in parts)


@pytest.mark.parametrize(
    ("infra", "version", "cluster", "families", "pinned"),
    [
        ("", "v1beta2", CLUSTER, ("ubuntu-24.04", "ubuntu-18.04"), "both are accepted"),
        ("", "v1beta1", CLUSTER, ("ubuntu-18.04",), "CAPA < v2.4"),
        ("marketType: OnDemand", "v1beta2", CLUSTER, ("ubuntu-24.04",), "CAPA >= v2.8"),
        (
            "cpuOptions: {confidentialCompute: Disabled}",
            "v1beta2",
            CLUSTER,
            ("ubuntu-24.04",),
            "v2.10",
        ),
        ("imageLookupBaseOS: flatcar-stable", "v1beta2", CLUSTER, ("flatcar",), None),
        ("imageLookupBaseOS: ubuntu-22.04", "v1beta2", CLUSTER, ("ubuntu-22.04",), None),
        ("", "v1beta2", EKS_CLUSTER, ("amazonlinux2",), "EKS-optimised Amazon Linux 2"),
        (
            "ami: {eksLookupType: AmazonLinux2023}",
            "v1beta2",
            EKS_CLUSTER,
            ("amazonlinux2023",),
            None,
        ),
        # no Cluster in the tree, but a kubeadm bootstrap: a self-managed cluster
        ("", "v1beta2", "", ("ubuntu-24.04", "ubuntu-18.04"), "both are accepted"),
    ],
)
def test_capa_default_os_follows_the_release_the_file_pins(
    infra, version, cluster, families, pinned
):
    spec = _pools(
        _tree(
            _md("AWSMachineTemplate", infra_version=version),
            _aws_template(infra, version=version),
            cluster,
            BOOT,
        )
    )["md"]
    assert (spec.os_family, *spec.os_family_alternatives) == families
    origin = spec.provenance["osImage"]
    if pinned is None:
        assert origin.startswith("tree.yaml:"), origin  # stated in the file
    else:
        assert origin.startswith("default: CAPA") and pinned in origin, origin


@pytest.mark.parametrize(
    ("infra", "families"),
    [
        ("", ("ubuntu-24.04", "ubuntu-18.04", "amazonlinux2")),
        ("ami: {eksLookupType: AmazonLinux2023}", ("amazonlinux2023",)),
    ],
)
def test_capa_os_when_neither_the_cluster_nor_the_bootstrap_says_whether_it_is_eks(infra, families):
    md = _md("AWSMachineTemplate", boot="TalosConfigTemplate")
    spec = _pools(_tree(md, _aws_template(infra)))["md"]
    assert (spec.os_family, *spec.os_family_alternatives) == families


def test_capa_cluster_wide_lookup_fields_apply_to_machines_that_state_none():
    cluster = CLUSTER.replace(
        "spec: {region: eu-west-1}", "spec: {region: eu-west-1, imageLookupBaseOS: flatcar-stable}"
    )
    spec = _pools(_tree(_md("AWSMachineTemplate"), _aws_template(""), cluster, BOOT))["md"]
    assert spec.os_family == "flatcar"
    assert _entry(spec, "AWSCluster/c1: spec.imageLookupBaseOS").status is FieldStatus.COMPARED


@pytest.mark.parametrize(
    "infra",
    [
        "ami: {id: ami-0123456789abcdef0}",
        "imageLookupFormat: my-image-{{.K8sVersion}}-*",
    ],
)
def test_capa_an_ami_that_does_not_name_its_os_asserts_none(infra):
    spec = _pools(_tree(_md("AWSMachineTemplate"), _aws_template(infra), CLUSTER, BOOT))["md"]
    assert spec.os_family is None and "osImage" not in spec.provenance
    assert any(a.fact == "osImage" and a.status is FieldStatus.IGNORED for a in spec.account)


def test_capa_root_volume_unset_is_the_amis_size_and_not_compared():
    spec = _pools(_tree(_md("AWSMachineTemplate"), _aws_template(""), CLUSTER, BOOT))["md"]
    assert spec.disk_size_gib is None
    assert "snapshot size" in _entry(spec, "spec.template.spec.rootVolume").detail
    sized = _pools(
        _tree(
            _md("AWSMachineTemplate"),
            _aws_template("rootVolume: {size: 120, type: gp3}"),
            CLUSTER,
            BOOT,
        )
    )["md"]
    assert (sized.disk_size_gib, sized.disk_type) == (120, "gp3")


def test_capa_spot_machines_carry_capis_interruptible_label():
    spec = _pools(
        _tree(_md("AWSMachineTemplate"), _aws_template("spotMarketOptions: {}"), CLUSTER, BOOT)
    )["md"]
    assert spec.labels["cluster.x-k8s.io/interruptible"] == ""
    assert spec.provenance["labels.cluster.x-k8s.io/interruptible"].startswith("tree.yaml:")


def test_capa_machine_pool_bounds_default_to_one():
    text = """\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: MachinePool
        metadata: {name: mp}
        spec:
          clusterName: c1
          template:
            spec:
              clusterName: c1
              bootstrap: {dataSecretName: boot}
              infrastructureRef: {kind: AWSMachinePool, name: mp}
        ---
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: AWSMachinePool
        metadata: {name: mp}
        spec:
          awsLaunchTemplate: {instanceType: m5.large}
          availabilityZones: [eu-west-1a, eu-west-1b]
        """
    spec = _pools(text)["mp"]
    assert (spec.min_size, spec.max_size, spec.desired_size) == (1, 1, 1)
    assert spec.provenance["minSize"].startswith("default: CAPA AWSMachinePool")
    assert [(r.key, r.values) for r in spec.requirements] == [
        ("topology.kubernetes.io/zone", ("eu-west-1a", "eu-west-1b"))
    ]


EKS_POOL = """\
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachinePool
    metadata: {name: mp, namespace: team-a}
    spec:
      clusterName: c1
      replicas: 3
      template:
        spec:
          clusterName: c1
          bootstrap: {dataSecretName: ""}
          infrastructureRef: {kind: AWSManagedMachinePool, name: mp}
    ---
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: AWSManagedMachinePool
    metadata: {name: mp, namespace: team-a}
    """


@pytest.mark.parametrize(
    ("spec_text", "want"),
    [
        ("spec: {}", ("team-a_mp", ("t3.medium",), 20, "amazonlinux2", "ON_DEMAND")),
        (
            "spec: {amiType: WINDOWS_CORE_2022_x86_64, capacityType: spot}",
            ("team-a_mp", ("t3.medium",), 50, "windows-2022", "SPOT"),
        ),
        # an ARM / GPU AMI type: EKS's default instance type for it is not known
        (
            "spec: {amiType: AL2023_ARM_64_STANDARD}",
            ("team-a_mp", (), 20, "amazonlinux2023", "ON_DEMAND"),
        ),
        # a launch template: its root volume sizes the disk (unset: the AMI's)
        (
            "spec: {awsLaunchTemplate: {instanceType: m6i.large}}",
            ("team-a_mp", ("m6i.large",), None, "amazonlinux2", "ON_DEMAND"),
        ),
    ],
)
def test_eks_managed_node_group_defaults(spec_text, want):
    spec = _pools(dedent(EKS_POOL) + spec_text + "\n" + dedent(EKS_CLUSTER))["team-a_mp"]
    labels = spec.labels.get("eks.amazonaws.com/capacityType")
    assert (spec.name, spec.instance_types, spec.disk_size_gib, spec.os_family, labels) == want
    assert spec.provenance["name"].startswith("default: CAPA webhook")


def test_eks_min_size_without_max_size_is_not_sent_by_capa():
    text = dedent(EKS_POOL) + "spec: {scaling: {minSize: 2}}\n" + dedent(EKS_CLUSTER)
    spec = _pools(text)["team-a_mp"]
    assert (spec.min_size, spec.max_size, spec.desired_size) == (None, None, 3)
    assert "without scaling.maxSize" in _entry(spec, "spec.scaling.minSize").detail


# ---------------------------------------------------------------------------------------------
# CAPZ: images


@pytest.mark.parametrize(
    ("names", "family"),
    [
        (("kinvolk", "flatcar-container-linux-corevm-amd64", "stable-gen2"), "flatcar"),
        (
            (
                "flatcar4capi-742ef0cb-dcaa-4ecb-9cb0-bfd2e43dccc0",
                "flatcar-stable-amd64-capi-v1.31.1",
            ),
            "flatcar",
        ),
        (("ClusterAPI-f72ceb4f-5159-4c26-a0fe-2ea738f0d019", "capi-ubun2-2404"), "ubuntu-24.04"),
        (("cncf-upstream", "capi", "ubuntu-2204-gen1"), "ubuntu-22.04"),
        (("cncf-upstream", "capi", "k8s-1dot21dot2-ubuntu-2004"), "ubuntu-20.04"),
        (("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"), "ubuntu-22.04"),
        (("ClusterAPI-f72ceb4f", "capi-win-2019-containerd"), "windows-2019"),
        (("cncf-upstream", "capi-windows", "windows-2022-containerd-gen1"), "windows-2022"),
        (("microsoft-aks", "aks", "azurelinux-v3-gen2"), "azurelinux"),
        (("my-gallery", "golden-image"), None),
        (("winterfell-gallery", "darwin-build"), None),
    ],
)
def test_azure_image_names_give_the_os_family(names, family):
    assert family_of_image_names(*names) == family


def _capz(image: str, *, os_type: str = "Linux", annotations: str = "") -> str:
    return _tree(
        _md("AzureMachineTemplate", infra_version="v1beta1"),
        f"""\
        ---
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: AzureMachineTemplate
        metadata: {{name: md}}
        spec:
          template:
            metadata: {{annotations: {{{annotations}}}}}
            spec:
              vmSize: Standard_D4s_v5
              osDisk: {{osType: {os_type}}}
              {image}
        """,
        BOOT,
    )


@pytest.mark.parametrize(
    ("image", "os_type", "annotations", "families", "default"),
    [
        ("", "Linux", "", ("ubuntu",), True),
        ("", "Windows", "", ("windows-2022", "windows-2019"), True),
        ("", "Windows", "windowsServerVersion: windows-2019", ("windows-2019",), False),
        (
            "image: {computeGallery: {gallery: flatcar4capi-742ef0cb, "
            "name: 'flatcar-stable-amd64-capi-${KUBERNETES_VERSION}', "
            "version: '${FLATCAR_VERSION}'}}",
            "Linux",
            "",
            ("flatcar",),
            False,
        ),
        (
            "image: {sharedGallery: {subscriptionID: s, resourceGroup: rg, gallery: g, "
            "name: ubuntu-2404-custom, version: '1.0.0'}}",
            "Linux",
            "",
            ("ubuntu-24.04",),
            False,
        ),
        (
            "image: {computeGallery: {gallery: mine, name: golden, version: '1', "
            "plan: {publisher: kinvolk, offer: flatcar-container-linux-free, sku: stable}}}",
            "Linux",
            "",
            ("flatcar",),
            False,
        ),
    ],
)
def test_capz_os_from_the_image_or_capzs_reference_image(
    image, os_type, annotations, families, default
):
    spec = _pools(_capz(image, os_type=os_type, annotations=annotations))["md"]
    assert (spec.os_family, *spec.os_family_alternatives) == families
    assert spec.provenance["osImage"].startswith("default: CAPZ" if default else "tree.yaml:")


def test_capz_an_image_by_id_or_unknown_names_asserts_no_os():
    spec = _pools(_capz("image: {id: /subscriptions/x/images/golden}"))["md"]
    assert spec.os_family is None
    assert "its OS is not in the file" in _entry(spec, "spec.template.spec.image").detail


def test_capz_os_disk_size_unset_is_not_compared():
    spec = _pools(_capz(""))["md"]
    assert spec.disk_size_gib is None
    assert "image's own OS disk size" in _entry(spec, "osDisk.diskSizeGB").detail


# ---------------------------------------------------------------------------------------------
# AKS


def _aks(spec: str) -> NodePoolSpec:
    text = f"""\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: MachinePool
        metadata: {{name: mp}}
        spec:
          clusterName: c1
          template:
            spec:
              clusterName: c1
              version: v1.31.4
              bootstrap: {{dataSecretName: ""}}
              infrastructureRef: {{kind: AzureManagedMachinePool, name: mp}}
        ---
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: AzureManagedMachinePool
        metadata: {{name: mp}}
        spec: {spec}
        """
    return _pools(text)["user1"]


def test_aks_linux_pool_defaults_to_ubuntu_and_one_node():
    spec = _aks("{mode: User, name: user1, sku: Standard_D2s_v3}")
    assert (spec.os_family, spec.desired_size, spec.disk_size_gib) == ("ubuntu", 1, None)
    assert spec.provenance["osImage"].startswith("default: AKS")
    assert "vCPU count" in _entry(spec, "spec.osDiskSizeGB").detail


def test_aks_spot_pools_get_akss_label_and_taint():
    spec = _aks("{mode: User, name: user1, sku: Standard_D2s_v3, scaleSetPriority: Spot}")
    assert spec.labels["kubernetes.azure.com/scalesetpriority"] == "spot"
    assert Taint("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule") in spec.taints
    assert spec.provenance["labels.kubernetes.azure.com/scalesetpriority"].startswith(
        "default: AKS"
    )


def test_aks_os_sku_is_not_a_capz_field_but_an_aso_patch_sets_it():
    plain = _aks("{mode: User, name: user1, sku: Standard_D2s_v3, osSKU: AzureLinux}")
    assert plain.os_family == "ubuntu"  # the API server drops the field: AKS's default
    assert "API server drops it" in _entry(plain, "spec.osSKU").detail
    patched = _aks(
        """{mode: User, name: user1, sku: Standard_D2s_v3,
        asoManagedClustersAgentPoolPatches: ['{"spec": {"osSKU": "AzureLinux", "maxPods": 50}}']}"""
    )
    assert (patched.os_family, dict(patched.allocatable)) == ("azurelinux", {"pods": "50"})
    assert patched.provenance["osImage"].startswith("tree.yaml:")


def test_aso_agent_pool_initialization_taints_are_startup_taints():
    text = """\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: MachinePool
        metadata: {name: mp}
        spec:
          clusterName: c1
          replicas: 2
          template:
            spec:
              clusterName: c1
              bootstrap: {dataSecretName: ""}
              infrastructureRef: {kind: AzureASOManagedMachinePool, name: mp}
        ---
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: AzureASOManagedMachinePool
        metadata: {name: mp}
        spec:
          resources:
          - apiVersion: containerservice.azure.com/v1api20240901
            kind: ManagedClustersAgentPool
            metadata: {name: c1-gpu}
            spec:
              azureName: gpu
              vmSize: Standard_NC6s_v3
              osSKU: Ubuntu2204
              scaleSetPriority: Spot
              nodeInitializationTaints: ["warming=true:NoSchedule"]
        """
    spec = _pools(text)["gpu"]
    assert spec.startup_taints == (Taint("warming", "true", "NoSchedule"),)
    assert spec.taints == (Taint("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule"),)
    assert (spec.os_family, spec.instance_types) == ("ubuntu-22.04", ("Standard_NC6s_v3",))


def test_aks_temporary_kubelet_disk_is_not_the_os_disk():
    spec = _aks(
        "{mode: User, name: user1, sku: Standard_D2s_v3, osDiskSizeGB: 128, "
        "kubeletDiskType: Temporary}"
    )
    assert spec.disk_size_gib is None
    assert "not on the OS disk" in _entry(spec, "spec.osDiskSizeGB").detail


# ---------------------------------------------------------------------------------------------
# CAPI: counts, labels, the kubelet, patches


def test_capi_template_labels_outside_the_synced_domains_are_ignored_with_the_reason():
    md = _md("DockerMachineTemplate").replace(
        "      template:\n            spec:",
        "      template:\n            metadata:\n              labels:\n"
        "                node-role.kubernetes.io/worker: ''\n"
        "                tier.node.cluster.x-k8s.io/class: web\n"
        "                team: payments\n            spec:",
    )
    spec = _pools(_tree(md, BOOT))["md"]
    assert dict(spec.labels) == {
        "node-role.kubernetes.io/worker": "",
        "tier.node.cluster.x-k8s.io/class": "web",
    }
    team = _entry(spec, "spec.template.metadata.labels.team")
    assert team.status is FieldStatus.IGNORED
    assert team.detail.startswith("Machine template label not synced to Nodes (CAPI syncs only")


def test_kubelet_labels_it_may_set_are_expected_and_one_it_may_not_is_an_error():
    """The kubelet refuses to start with a kubernetes.io label it may not set: no node of the
    pool joins, so the file is wrong (exit 2), not a pool with that label left out."""
    boot = BOOT.replace(
        "spec: {template: {spec: {}}}",
        "spec: {template: {spec: {joinConfiguration: {nodeRegistration: {kubeletExtraArgs: "
        "{node-labels: 'node.kubernetes.io/tier=a,team=x', max-pods: '58'}}}}}}",
    )
    spec = _pools(_tree(_md("DockerMachineTemplate"), boot))["md"]
    assert dict(spec.labels) == {"node.kubernetes.io/tier": "a", "team": "x"}
    assert dict(spec.allocatable) == {"pods": "58"}
    refused = boot.replace("node-labels: '", "node-labels: 'node-role.kubernetes.io/worker=,")
    with pytest.raises(FormatError) as caught:
        _pools(_tree(_md("DockerMachineTemplate"), refused))
    assert caught.value.path == "tree.yaml"
    assert caught.value.field is not None
    assert caught.value.field.startswith("KubeadmConfigTemplate/md: ")
    assert caught.value.field.endswith("kubeletExtraArgs.node-labels")
    assert "node-role.kubernetes.io/worker" in caught.value.reason
    assert "refuses to start" in caught.value.reason
    assert kubelet_may_set("kubernetes.io/hostname") and kubelet_may_set("example.com/a")
    assert not kubelet_may_set("node-role.kubernetes.io/worker")
    assert not kubelet_may_set("foo.k8s.io/x") and kubelet_may_set("cluster.x-k8s.io/x")


def test_a_cluster_class_patch_stops_a_default_it_may_overwrite():
    text = """\
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: Cluster
        metadata: {name: c1}
        spec:
          infrastructureRef: {kind: AWSCluster, name: c1}
          topology:
            class: aws
            version: v1.31.4
            workers:
              machineDeployments:
              - {class: worker, name: md-0}
        ---
        apiVersion: cluster.x-k8s.io/v1beta1
        kind: ClusterClass
        metadata: {name: aws}
        spec:
          workers:
            machineDeployments:
            - class: worker
              template:
                metadata:
                  annotations:
                    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "1"
                    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "9"
                bootstrap: {ref: {kind: KubeadmConfigTemplate, name: md}}
                infrastructure: {ref: {kind: AWSMachineTemplate, name: md}}
          patches:
          - name: baseOS
            definitions:
            - selector:
                kind: AWSMachineTemplate
                matchResources: {machineDeploymentClass: {names: [worker]}}
              jsonPatches:
              - {op: add, path: /spec/template/spec/imageLookupBaseOS, valueFrom: {variable: os}}
        """
    spec = _pools(_tree(text, _aws_template(""), BOOT))["md-0"]
    assert spec.os_family is None  # no CAPA default: the patch may set the base OS
    assert Unresolved("osImage", "ClusterClass aws patch 'baseOS'") in spec.unresolved
    # the class's autoscaler annotations make the count a range
    assert (spec.min_size, spec.max_size, spec.desired_size) == (1, 9, None)


def test_an_attribute_fleetwarden_does_not_know_is_unaccounted_not_dropped():
    spec = _pools(_tree(_md("AWSMachineTemplate"), _aws_template("futureField: 3"), CLUSTER, BOOT))[
        "md"
    ]
    unknown = _entry(spec, "spec.template.spec.futureField")
    assert unknown.status is FieldStatus.UNACCOUNTED


def test_nodeadm_and_eks_bootstrap_kubelet_settings_are_read():
    nodeadm = """\
        ---
        apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
        kind: NodeadmConfigTemplate
        metadata: {name: md}
        spec:
          template:
            spec:
              kubelet:
                flags: ["--node-labels=team=a"]
                config:
                  maxPods: 29
                  registerWithTaints: [{key: gpu, value: "true", effect: NoSchedule}]
                  evictionHard: {memory.available: 5%}
        """
    spec = _pools(
        _tree(
            _md("AWSMachineTemplate", boot="NodeadmConfigTemplate"),
            _aws_template(""),
            EKS_CLUSTER,
            nodeadm,
        )
    )["md"]
    assert (dict(spec.labels), dict(spec.allocatable)) == ({"team": "a"}, {"pods": "29"})
    assert spec.taints == (Taint("gpu", "true", "NoSchedule"),)
    assert spec.os_family == "amazonlinux2"  # EKS, no lookup field: the AL2 AMI from SSM
    assert spec.startup_taints == (
        Taint("node.cluster.x-k8s.io/outdated-revision", None, "PreferNoSchedule"),
    )


def test_nodeadm_flags_override_the_kubelet_config_as_the_kubelet_lets_them():
    """A NodeadmConfig's ``kubelet.flags`` reach the kubelet's command line, ``kubelet.config``
    its configuration file: ``--max-pods`` / ``--register-with-taints`` win (both taints were
    expected, and ``maxPods`` beat the flag)."""
    nodeadm = """\
        ---
        apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
        kind: NodeadmConfigTemplate
        metadata: {name: md}
        spec:
          template:
            spec:
              kubelet:
                flags: ["--max-pods=20", "--register-with-taints=a:NoExecute"]
                config:
                  maxPods: 29
                  registerWithTaints: [{key: gpu, value: "true", effect: NoSchedule}]
        """
    spec = _pools(
        _tree(
            _md("AWSMachineTemplate", boot="NodeadmConfigTemplate"),
            _aws_template(""),
            EKS_CLUSTER,
            nodeadm,
        )
    )["md"]
    assert dict(spec.allocatable) == {"pods": "20"}
    assert spec.taints == (Taint("a", None, "NoExecute"),)
    overridden = [a for a in spec.account if "overrides its configuration" in a.detail]
    assert {a.path.rsplit(".", 1)[-1] for a in overridden} == {"maxPods", "registerWithTaints"}
    assert all(a.status is FieldStatus.IGNORED for a in overridden)


def test_a_placeholder_named_cluster_in_another_file_says_nothing_of_this_pool():
    """Templates all call their cluster ${CLUSTER_NAME}: an EKS template elsewhere in the tree
    must not make a self-managed pool expect Amazon Linux."""
    md = _md("AWSMachineTemplate").replace("clusterName: c1", "clusterName: ${CLUSTER_NAME}")
    here = parse_yaml_documents("a.yaml", _tree(md, _aws_template(""), BOOT))
    eks = parse_yaml_documents("b.yaml", dedent(EKS_CLUSTER).replace("c1", "'${CLUSTER_NAME}'"))
    spec = {p.name: p for p in capi.read_pools([*here, *eks]).pools}["md"]
    assert (spec.os_family, *spec.os_family_alternatives) == ("ubuntu-24.04", "ubuntu-18.04")


def test_kubelet_flags_in_bootstrap_commands_are_read_and_variables_stay_unresolved():
    boot = BOOT.replace(
        "spec: {template: {spec: {}}}",
        "spec:\n      template:\n        spec:\n          preKubeadmCommands:\n"
        "          - echo 'KUBELET_EXTRA_ARGS=--node-labels=team=a "
        "--register-with-taints=${TAINTS}' >> /etc/default/kubelet\n",
    )
    spec = _pools(_tree(_md("DockerMachineTemplate"), boot))["md"]
    assert spec.labels["team"] == "a"
    assert Unresolved("taints", "--register-with-taints=${TAINTS}") in spec.unresolved
