"""Kubelet flags found in bootstrap scripts, user data and kubelet configuration are read as the
kubelet reads them by every reader that takes them (Karpenter, eksctl, Cluster API, Terraform):
a value the kubelet refuses to start with is an error naming the file, the object and the
field -- never a flag quietly dropped while the pool passes; text that may not take effect is
left unresolved instead."""

from __future__ import annotations

from textwrap import dedent

import pytest

from fleetwarden.core.pools import FieldStatus, NodePoolSpec, Taint
from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.formats.errors import FormatError

_KARPENTER = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2@latest}]
  role: r
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
  userData: |
    #!/bin/bash
    /etc/eks/bootstrap.sh c --kubelet-extra-args 'ARGS'
"""
_EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: c1, region: us-west-2, version: '1.31'}
nodeGroups:
  - name: ng
    overrideBootstrapCommand: |
      /etc/eks/bootstrap.sh c1 --kubelet-extra-args 'ARGS'
"""
_CAPI = """\
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: md}
spec:
  clusterName: c1
  replicas: 1
  template:
    spec:
      clusterName: c1
      bootstrap:
        configRef: {kind: KubeadmConfigTemplate, name: md, apiGroup: bootstrap.cluster.x-k8s.io}
      infrastructureRef: {kind: DockerMachineTemplate, name: md, apiGroup: x}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: md}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs: @EXTRA@
      preKubeadmCommands:
        - echo "KUBELET_EXTRA_ARGS=@ARGS@" >> /etc/default/kubelet
"""


def _pools(path: str, text: str) -> list[NodePoolSpec]:
    """The pools of one file named on the command line (a refusal raises, naming it)."""
    return read_desired([SourceFile(path, text.encode(), direct=True)]).pools


def _refused(path: str, text: str) -> FormatError:
    with pytest.raises(FormatError) as caught:
        _pools(path, text)
    assert caught.value.path == path
    assert caught.value.field is not None
    return caught.value


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("--register-with-taints=dedicated=gpu:noschedule", "spelt exactly"),
        ("--max-pods=058", "octal"),
        ("--node-labels=team", "not key=value"),
    ],
)
def test_karpenter_user_data_the_kubelet_refuses_is_an_error_naming_the_node_class(args, says):
    error = _refused("np.yaml", _KARPENTER.replace("ARGS", args))
    assert error.field == "EC2NodeClass/default: spec.userData"
    assert says in error.reason and "kubelet flag" in error.reason


def test_karpenter_user_data_keeps_the_last_taints_flag_and_lists_the_earlier():
    args = "--register-with-taints=a=b:NoSchedule --max-pods=010 --register-with-taints=c:NoExecute"
    (pool,) = _pools("np.yaml", _KARPENTER.replace("ARGS", args))
    assert pool.taints == (Taint("c", None, "NoExecute"),)
    assert pool.allocatable["pods"] == "8"  # 010: octal, as pflag reads it
    notes = [a for a in pool.account if a.path.endswith("spec.userData")]
    assert any(a.status is FieldStatus.IGNORED and "a=b:NoSchedule" in a.detail for a in notes)


def test_eksctl_bootstrap_command_the_kubelet_refuses_is_an_error_naming_the_field():
    error = _refused("c.yaml", _EKSCTL.replace("ARGS", "--register-with-taints=a:noexecute"))
    assert error.field == "ClusterConfig/c1: nodeGroups[0].overrideBootstrapCommand"
    assert "spelt exactly" in error.reason


def test_eksctl_kubelet_extra_config_taint_the_api_server_refuses_is_an_error():
    head = _EKSCTL.split("    overrideBootstrapCommand")[0]
    text = (
        head + "    kubeletExtraConfig:\n      registerWithTaints: [{key: a, effect: noSchedule}]\n"
    )
    error = _refused("c.yaml", text)
    assert error.field == "ClusterConfig/c1: nodeGroups[0].kubeletExtraConfig"
    assert "spelt exactly" in error.reason


def test_capi_bootstrap_commands_the_kubelet_refuses_are_an_error_naming_the_field():
    text = _CAPI.replace("@EXTRA@", "[]").replace("@ARGS@", "--max-pods=0x")
    error = _refused("tree.yaml", text)
    assert error.field is not None
    assert error.field.startswith("KubeadmConfigTemplate/md: ")
    assert error.field.endswith("preKubeadmCommands")
    assert "--max-pods" in error.reason


@pytest.mark.parametrize(("value", "pods"), [("'010'", "8"), ("'0x3a'", "58"), ("'58'", "58")])
def test_capi_max_pods_is_read_as_the_kubelet_reads_it(value, pods):
    extra = f"[{{name: max-pods, value: {value}}}]"
    (pool,) = _pools("tree.yaml", _CAPI.replace("@EXTRA@", extra).replace("@ARGS@", ""))
    assert pool.allocatable["pods"] == pods


@pytest.mark.parametrize("value", ["'058'", "' 58'", "'-1'"])
def test_capi_max_pods_the_kubelet_refuses_is_an_error(value):
    extra = f"[{{name: max-pods, value: {value}}}]"
    error = _refused("tree.yaml", _CAPI.replace("@EXTRA@", extra).replace("@ARGS@", ""))
    assert error.field is not None and error.field.endswith("kubeletExtraArgs[0]")
    assert "kubelet flag --max-pods" in error.reason


def test_capi_repeated_register_with_taints_keeps_the_last_as_the_kubelet_does():
    extra = (
        "[{name: register-with-taints, value: 'a=b:NoSchedule'},"
        " {name: register-with-taints, value: 'c:NoExecute'}]"
    )
    (pool,) = _pools("tree.yaml", _CAPI.replace("@EXTRA@", extra).replace("@ARGS@", ""))
    assert pool.taints == (Taint("c", None, "NoExecute"),)
    first = next(a for a in pool.account if a.path.endswith("kubeletExtraArgs[0]"))
    assert first.status is FieldStatus.IGNORED and "keeps the last" in first.detail


def _terraform(group: str) -> str:
    return dedent(
        """\
        module "eks" {
          source  = "terraform-aws-modules/eks/aws"
          version = "~> 20.0"
          cluster_name = "prod"
          eks_managed_node_groups = {
            g = {
              ami_type = "AL2_x86_64"
              ami_id = "ami-1"
              enable_bootstrap_user_data = true
        GROUP
            }
          }
        }
        """
    ).replace("GROUP", group)


def test_terraform_bootstrap_args_the_kubelet_refuses_are_an_error_naming_the_attribute():
    group = "      bootstrap_extra_args = \"--kubelet-extra-args '--max-pods=058'\""
    error = _refused("infra/main.tf", _terraform(group))
    assert error.field is not None and error.field.endswith("bootstrap_extra_args")
    assert "octal" in error.reason


def test_terraform_user_data_that_may_not_take_effect_is_unresolved_not_an_error():
    group = (
        "      pre_bootstrap_user_data = <<-EOT\n"
        '        export KUBELET_EXTRA_ARGS="--register-with-taints=x:noschedule"\n'
        "      EOT"
    )
    (pool,) = _pools("infra/main.tf", _terraform(group))
    entry = next(a for a in pool.account if a.path == "pre_bootstrap_user_data")
    assert entry.status is FieldStatus.UNRESOLVED


_VARIABLE_FLAGS = "--register-with-taints=${TAINTS} --max-pods=${PODS}"
_TF_ARGS = "      bootstrap_extra_args = \"--kubelet-extra-args 'ARGS'\""  # ${ is $${ in HCL


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("np.yaml", _KARPENTER.replace("ARGS", _VARIABLE_FLAGS)),
        ("c.yaml", _EKSCTL.replace("ARGS", _VARIABLE_FLAGS)),
        ("infra/main.tf", _terraform(_TF_ARGS.replace("ARGS", _VARIABLE_FLAGS.replace("$", "$$")))),
        ("tree.yaml", _CAPI.replace("@EXTRA@", "[]").replace("@ARGS@", _VARIABLE_FLAGS)),
    ],
)
def test_a_variable_in_a_boot_taints_or_max_pods_flag_leaves_that_fact_unchecked(path, text):
    """``--register-with-taints=${TAINTS}`` leaves the taints open, not the labels: noted as
    labels, the taints would still be compared (as none) and every tainted node would drift."""
    (pool,) = _pools(path, text)
    assert {"taints", "allocatable.pods"} <= pool.unresolved_fields
    assert "labels" not in pool.unresolved_fields


_ROLE = "--node-labels=team=a,node-role.kubernetes.io/worker="


@pytest.mark.parametrize(
    ("path", "text", "field"),
    [
        ("np.yaml", _KARPENTER.replace("ARGS", _ROLE), "EC2NodeClass/default: spec.userData"),
        (
            "c.yaml",
            _EKSCTL.replace("ARGS", _ROLE),
            "ClusterConfig/c1: nodeGroups[0].overrideBootstrapCommand",
        ),
        ("infra/main.tf", _terraform(_TF_ARGS.replace("ARGS", _ROLE)), "bootstrap_extra_args"),
        (
            "tree.yaml",
            _CAPI.replace("@EXTRA@", "[]").replace("@ARGS@", _ROLE),
            "preKubeadmCommands",
        ),
    ],
)
def test_a_node_role_label_given_to_the_kubelet_is_an_error_in_every_format(path, text, field):
    """The kubelet refuses to start with a node-role.kubernetes.io label in --node-labels
    (ValidateKubeletFlags): every reader refuses it naming the file and the field, as Cluster
    API's kubeletExtraArgs did -- not a pool expecting a label no node will ever carry."""
    error = _refused(path, text)
    assert error.field is not None and error.field.endswith(field)
    assert "node-role.kubernetes.io/worker" in error.reason
    assert "refuses to start" in error.reason


_MIME = """\
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 30

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "KUBELET_EXTRA_ARGS=--register-with-taints=gpu=true:NoSchedule" >> /etc/sysconfig/kubelet
--//--
"""


def test_karpenter_mime_user_data_reads_the_taints_of_a_script_part_beside_a_nodeconfig():
    head = _KARPENTER.split("  userData: |")[0].replace("al2@latest", "al2023@latest")
    text = head + "  userData: |\n" + "".join(f"    {line}\n" for line in _MIME.splitlines())
    (pool,) = _pools("np.yaml", text)
    assert Taint("gpu", "true", "NoSchedule") in pool.taints
    # Karpenter's own NodeConfig, appended last, always sets maxPods: the part's 30 never applies
    assert "pods" not in pool.allocatable


def test_terraform_nodeadm_parts_a_script_part_beside_the_nodeconfig_is_unresolved_not_lost():
    """cloudinit_pre_nodeadm's parts were read as one YAML text: a shell part beside the
    NodeConfig made it unreadable, and both were reported as setting nothing. The NodeConfig
    part is read; the shell part, like other shell user data here, is listed as not asserted
    (its taints unresolved), never dropped."""
    group = dedent(
        """\
              ami_type = "AL2023_x86_64_STANDARD"
              cloudinit_pre_nodeadm = [
                {
                  content_type = "application/node.eks.aws"
                  content      = <<-EOT
                    apiVersion: node.eks.aws/v1alpha1
                    kind: NodeConfig
                    spec:
                      kubelet:
                        config:
                          maxPods: 30
                  EOT
                },
                {
                  content_type = "text/x-shellscript"
                  content      = <<-EOT
                    #!/bin/bash
                    echo "KUBELET_EXTRA_ARGS=--register-with-taints=gpu=true:NoSchedule" >> /x
                  EOT
                }
              ]
        """
    )
    text = _terraform(group).replace('      ami_type = "AL2_x86_64"\n', "")
    (pool,) = _pools("infra/main.tf", text)
    assert pool.allocatable["pods"] == "30"
    assert "taints" in pool.unresolved_fields
    entries = [a for a in pool.account if a.path == "cloudinit_pre_nodeadm"]
    assert {a.status for a in entries} >= {FieldStatus.COMPARED, FieldStatus.UNRESOLVED}


_STRAY = "--node-labels=team=a oops"


@pytest.mark.parametrize(
    ("path", "text", "field"),
    [
        ("np.yaml", _KARPENTER.replace("ARGS", _STRAY), "EC2NodeClass/default: spec.userData"),
        (
            "c.yaml",
            _EKSCTL.replace("ARGS", _STRAY),
            "ClusterConfig/c1: nodeGroups[0].overrideBootstrapCommand",
        ),
        ("infra/main.tf", _terraform(_TF_ARGS.replace("ARGS", _STRAY)), "bootstrap_extra_args"),
        (
            "tree.yaml",
            _CAPI.replace("@EXTRA@", "[]").replace(
                'echo "KUBELET_EXTRA_ARGS=@ARGS@" >> /etc/default/kubelet',
                f"/etc/eks/bootstrap.sh c1 --kubelet-extra-args '{_STRAY}'",
            ),
            "preKubeadmCommands",
        ),
        (  # echo "KUBELET_EXTRA_ARGS=..." >> /etc/default/kubelet
            "tree.yaml",
            _CAPI.replace("@EXTRA@", "[]").replace("@ARGS@", _STRAY),
            "preKubeadmCommands",
        ),
    ],
)
def test_a_stray_word_in_kubelet_extra_args_is_an_error_in_every_format(path, text, field):
    """``--kubelet-extra-args '--node-labels=team=a oops'``: the kubelet gets ``oops`` as a
    positional argument and refuses to start; every reader says so, naming the field."""
    error = _refused(path, text)
    assert error.field is not None and error.field.endswith(field)
    assert "'oops' is not a flag" in error.reason


def test_terraform_v17_kubelet_extra_args_is_read_as_the_value_of_that_flag():
    """v17's template passes ``kubelet_extra_args`` as bootstrap.sh's --kubelet-extra-args."""
    text = dedent(
        """\
        module "eks" {
          source  = "terraform-aws-modules/eks/aws"
          version = "17.24.0"
          cluster_name = "prod"
          worker_groups = [
            {
              name               = "w"
              kubelet_extra_args = "KUBELET_ARGS"
            },
          ]
        }
        """
    )
    (pool,) = _pools("main.tf", text.replace("KUBELET_ARGS", "--node-labels=team=a"))
    assert pool.labels["team"] == "a"
    error = _refused("main.tf", text.replace("KUBELET_ARGS", _STRAY))
    assert error.field is not None and error.field.endswith("kubelet_extra_args")
    assert "'oops' is not a flag" in error.reason


_BROKEN_NODECONFIG = """\
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags: [--node-labels=team=a
    config: {maxPods: 30}
"""


def _karpenter_al2023(user_data: str) -> str:
    head = _KARPENTER.split("  userData: |")[0].replace("al2@latest", "al2023@latest")
    return head + "  userData: |\n" + "".join(f"    {line}\n" for line in user_data.splitlines())


def test_karpenter_nodeconfig_part_that_is_not_yaml_is_an_error_naming_the_node_class():
    """nodeadm refuses a user data whose NodeConfig part does not decode (Karpenter's own part
    goes with it) and the node does not join: the pool was read as the part setting nothing."""
    mime = _MIME.replace(
        "spec:\n  kubelet:\n    config:\n      maxPods: 30\n",
        _BROKEN_NODECONFIG.split("kind: NodeConfig\n")[1],
    )
    error = _refused("np.yaml", _karpenter_al2023(mime))
    assert error.field == "EC2NodeClass/default: spec.userData"
    assert "not YAML" in error.reason and "MIME part 1 (application/node.eks.aws)" in error.reason


def test_karpenter_plain_nodeconfig_that_is_not_yaml_leaves_boot_facts_unresolved():
    """Karpenter passes plain user data it cannot parse as YAML on as a shell script: nodeadm
    never reads it, so no refusal -- but what it meant to set is said unresolved, not dropped."""
    (pool,) = _pools("np.yaml", _karpenter_al2023(_BROKEN_NODECONFIG))
    assert {"labels", "taints", "allocatable.pods"} <= pool.unresolved_fields
    notes = [a for a in pool.account if a.path.endswith("spec.userData")]
    assert notes and all(a.status is FieldStatus.UNRESOLVED for a in notes)
    assert all("laid out as a NodeConfig" in a.detail for a in notes)


def test_eksctl_al2023_override_bootstrap_command_that_is_not_yaml_is_an_error():
    """On AmazonLinux2023 eksctl unmarshals overrideBootstrapCommand into a NodeConfig and
    refuses text that is not YAML."""
    text = (
        _EKSCTL.split("    overrideBootstrapCommand")[0]
        + "    amiFamily: AmazonLinux2023\n    overrideBootstrapCommand: |\n"
        + "".join(f"      {line}\n" for line in _BROKEN_NODECONFIG.splitlines())
    )
    error = _refused("c.yaml", text)
    assert error.field == "ClusterConfig/c1: nodeGroups[0].overrideBootstrapCommand"
    assert "not YAML" in error.reason and "eksctl refuses it" in error.reason


def _eksctl_al2023(override: str) -> str:
    return (
        _EKSCTL.split("    overrideBootstrapCommand")[0]
        + "    amiFamily: AmazonLinux2023\n    overrideBootstrapCommand: |\n"
        + "".join(f"      {line}\n" for line in override.splitlines())
    )


@pytest.mark.parametrize(
    "override",
    [
        "#!/bin/bash\n/usr/bin/nodeadm init --kubelet-extra-args '--max-pods=20'",
        "- --max-pods=20",
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n"
        "    flags: --max-pods=20",
    ],
    ids=["shell-script", "list", "flags-not-a-list"],
)
def test_eksctl_al2023_override_bootstrap_command_that_is_no_nodeconfig_is_refused(override):
    """A shell script is valid YAML (a string) but does not unmarshal into the NodeConfig
    eksctl hands nodeadm: eksctl refuses it ("unmarshalling ... into nodeadm.NodeConfig"); it
    was read as a NodeConfig setting nothing, and the pool compared."""
    error = _refused("c.yaml", _eksctl_al2023(override))
    assert error.field == "ClusterConfig/c1: nodeGroups[0].overrideBootstrapCommand"
    assert "eksctl refuses it" in error.reason and "nodeadm.NodeConfig" in error.reason


@pytest.mark.parametrize(
    "override",
    [
        "spec:\n  kubelet:\n    flags: [--max-pods=20]",
        "apiVersion: node.eks.aws/v1alpha1\nkind: Config\nspec: {}",
        "# a comment only",
    ],
    ids=["no-kind", "other-kind", "empty"],
)
def test_eksctl_al2023_override_bootstrap_command_nodeadm_refuses_is_refused(override):
    """eksctl unmarshals any mapping (kind and apiVersion unchecked) and writes it into the
    user data as a NodeConfig part; nodeadm refuses one that is not a NodeConfig of
    node.eks.aws/v1alpha1 and the node does not join."""
    error = _refused("c.yaml", _eksctl_al2023(override))
    assert error.field == "ClusterConfig/c1: nodeGroups[0].overrideBootstrapCommand"
    assert "nodeadm refuses" in error.reason and "does not join" in error.reason


def test_eksctl_al2023_override_bootstrap_command_reads_its_first_document_only():
    config = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n"
    text = _eksctl_al2023(
        config + "    flags: [--max-pods=20]\n---\n" + config + "    flags: [--max-pods=30]"
    )
    (pool,) = _pools("c.yaml", text)
    assert pool.allocatable["pods"] == "20"


def test_terraform_nodeadm_part_that_is_not_yaml_is_an_error_naming_the_attribute():
    content = "".join(f"            {line}\n" for line in _BROKEN_NODECONFIG.splitlines())
    group = (
        '      ami_type = "AL2023_x86_64_STANDARD"\n'
        "      cloudinit_pre_nodeadm = [{\n"
        '        content_type = "application/node.eks.aws"\n'
        f"        content      = <<-EOT\n{content}          EOT\n"
        "      }]"
    )
    text = _terraform(group).replace('      ami_type = "AL2_x86_64"\n', "")
    error = _refused("infra/main.tf", text)
    assert error.field is not None and error.field.endswith("cloudinit_pre_nodeadm")
    assert "not YAML" in error.reason


@pytest.mark.parametrize("family", ["AmazonLinux2", "AmazonLinux2023"])
def test_eksctl_group_taints_override_kubelet_extra_config_taints(family):
    """eksctl hands the group's ``taints`` to the kubelet as --register-with-taints and
    ``kubeletExtraConfig`` as its configuration: the flag wins, so only the group's taints are
    registered (both were expected) and the configuration's are listed as ignored."""
    text = (
        _EKSCTL.split("    overrideBootstrapCommand")[0]
        + f"    amiFamily: {family}\n"
        + '    taints: [{key: a, value: "1", effect: NoSchedule}]\n'
        + "    kubeletExtraConfig:\n"
        + "      registerWithTaints: [{key: b, effect: NoExecute}]\n"
    )
    (pool,) = _pools("c.yaml", text)
    assert pool.taints == (Taint("a", "1", "NoSchedule"),)
    notes = [a for a in pool.account if "kubeletExtraConfig.registerWithTaints" in a.path]
    assert notes and all(a.status is FieldStatus.IGNORED for a in notes)
    assert any("overrides its configuration" in a.detail for a in notes)


def test_terraform_nodeadm_part_without_a_type_is_not_nodeadms():
    """A cloudinit_pre_nodeadm part without ``content_type`` is text/plain (the cloudinit
    provider's default): nodeadm reads only application/node.eks.aws parts, so its maxPods was
    expected on the nodes (and a broken one would be refused): now not asserted."""
    content = "".join(
        f"            {line}\n"
        for line in _BROKEN_NODECONFIG.replace("[--node-labels=team=a", "[]").splitlines()
    )
    group = (
        '      ami_type = "AL2023_x86_64_STANDARD"\n'
        "      cloudinit_pre_nodeadm = [{\n"
        f"        content      = <<-EOT\n{content}          EOT\n"
        "      }]"
    )
    text = _terraform(group).replace('      ami_type = "AL2_x86_64"\n', "")
    (pool,) = _pools("infra/main.tf", text)
    assert pool.allocatable.get("pods") != "30"
    broken = text.replace("flags: []", "flags: [--node-labels=team=a")
    (pool,) = _pools("infra/main.tf", broken)  # not nodeadm's: no refusal
    assert "team" not in pool.labels


@pytest.mark.parametrize(("family", "pods"), [("AmazonLinux2", "110"), ("AmazonLinux2023", None)])
def test_eksctl_kubelet_extra_config_max_pods_zero(family, pods):
    """kubeletExtraConfig maxPods 0: on AmazonLinux2 it is merged into the kubelet's
    configuration file, whose decoding defaults it to 110; on AmazonLinux2023 eksctl puts it in
    the NodeConfig's kubelet.config, a drop-in the kubelet merges undefaulted: unresolved."""
    text = (
        _EKSCTL.split("    overrideBootstrapCommand")[0]
        + f"    amiFamily: {family}\n"
        + "    kubeletExtraConfig:\n"
        + "      maxPods: 0\n"
    )
    (pool,) = _pools("c.yaml", text)
    assert pool.allocatable.get("pods") == pods
    assert ("allocatable.pods" in pool.unresolved_fields) is (pods is None)


@pytest.mark.parametrize("content", ["", "  \n", "# nothing yet\n"])
def test_terraform_empty_nodeadm_part_is_an_error_naming_the_part(content):
    """An empty cloudinit_pre_nodeadm part of type application/node.eks.aws: nodeadm's decoder
    finds no kind in it, drops every NodeConfig of the user data and the node does not join.
    It was accepted as setting nothing."""
    body = "".join(f"            {line}\n" for line in content.splitlines())
    group = (
        '      ami_type = "AL2023_x86_64_STANDARD"\n'
        "      cloudinit_pre_nodeadm = [{\n"
        '        content_type = "text/x-shellscript"\n'
        '        content      = "echo hi"\n'
        "      }, {\n"
        '        content_type = "application/node.eks.aws"\n'
        f"        content      = <<-EOT\n{body}          EOT\n"
        "      }]"
    )
    text = _terraform(group).replace('      ami_type = "AL2_x86_64"\n', "")
    error = _refused("infra/main.tf", text)
    assert error.field is not None and error.field.endswith("cloudinit_pre_nodeadm")
    assert "cloudinit_pre_nodeadm[1]" in error.reason and "empty" in error.reason


@pytest.mark.parametrize(
    "override",
    [
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nSpec:\n  Kubelet:\n"
        "    FLAGS: [--max-pods=20]",
        "APIVersion: node.eks.aws/v1alpha1\nKind: NodeConfig\nspec:\n  kubelet:\n"
        "    flags: [--max-pods=20]",
        # the Kelvin sign folds to k in Go's encoding/json
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  \u212aubelet:\n"
        "    flags: [--max-pods=20]",
    ],
    ids=["field-case", "type-meta-case", "kelvin"],
)
def test_eksctl_al2023_override_bootstrap_command_field_names_match_as_go_json_does(override):
    """eksctl unmarshals overrideBootstrapCommand into nodeadm's NodeConfig type with
    sigs.k8s.io/yaml (encoding/json: a field name matches case-insensitively) and marshals it
    again for nodeadm (createMimeMessage), so the node gets ``Spec:`` as ``spec``: its
    --max-pods was not read (and ``Kind:`` was refused as no NodeConfig)."""
    (pool,) = _pools("c.yaml", _eksctl_al2023(override))
    assert pool.allocatable["pods"] == "20"


def test_eksctl_al2023_override_bootstrap_command_field_named_twice_merges_as_go_json_does():
    """Keys are decoded sorted (sigs.k8s.io/yaml goes through a map): ``Spec`` before ``spec``,
    the second decoded into the first, so both kubelet settings reach the node; a null for the
    kubelet struct has no effect."""
    override = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n"
        "    flags: [--node-labels=team=a]\nSpec:\n  kubelet:\n    config: {maxPods: 30}\n"
        "  Kubelet: null"
    )
    (pool,) = _pools("c.yaml", _eksctl_al2023(override))
    assert pool.allocatable["pods"] == "30" and pool.labels.get("team") == "a"
