"""OS families on both sides (issue #10, part 5): every family a pool can name is recognised in
the osImage strings real nodes report, and a family without a release accepts every release."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.osfamilies import (
    FAMILIES,
    family_matches,
    family_of_image,
    family_of_setting,
)

# osImage strings as real kubelets report them (PRETTY_NAME of /etc/os-release; Windows'
# product name), from public node dumps
IMAGES = [
    ("Amazon Linux 2", "amazonlinux2"),
    ("Amazon Linux 2023", "amazonlinux2023"),
    ("Amazon Linux 2023.6.20250218", "amazonlinux2023"),
    ("Bottlerocket OS 1.19.4 (aws-k8s-1.30)", "bottlerocket"),
    ("Bottlerocket (EKS Auto, Nvidia) 2025.3.14 (aws-k8s-1.32-nvidia)", "bottlerocket"),
    ("Container-Optimized OS from Google", "cos"),
    ("Ubuntu 22.04.4 LTS", "ubuntu-22.04"),
    ("Ubuntu 20.04.6 LTS", "ubuntu-20.04"),
    ("CBL-Mariner/Linux", "azurelinux"),
    ("Microsoft Azure Linux 3.0", "azurelinux"),
    ("Windows Server 2019 Datacenter", "windows-2019"),
    ("Windows Server 2022 Datacenter", "windows-2022"),
    ("Red Hat Enterprise Linux CoreOS 414.92.202402130420-0 (Plow)", "rhcos"),
    ("Red Hat Enterprise Linux 8.9 (Ootpa)", "rhel"),
    ("Flatcar Container Linux by Kinvolk 3815.2.0 (Oklo)", "flatcar"),
    ("Talos (v1.7.5)", "talos"),
    ("Debian GNU/Linux 12 (bookworm)", "debian-12"),
    ("Debian GNU/Linux 11 (bullseye)", "debian-11"),
]

SETTINGS = [
    # eksctl amiFamily
    ("AmazonLinux2", "amazonlinux2"),
    ("AmazonLinux2023", "amazonlinux2023"),
    ("Ubuntu2204", "ubuntu-22.04"),
    ("UbuntuPro2404", "ubuntu-24.04"),
    ("Bottlerocket", "bottlerocket"),
    ("WindowsServer2022CoreContainer", "windows-2022"),
    # EKS / terraform-aws-eks ami_type
    ("AL2_x86_64", "amazonlinux2"),
    ("AL2023_ARM_64_STANDARD", "amazonlinux2023"),
    ("BOTTLEROCKET_x86_64_FIPS", "bottlerocket"),
    ("WINDOWS_CORE_2019_x86_64", "windows-2019"),
    # Karpenter aliases
    ("al2023@latest", "amazonlinux2023"),
    ("windows2022@latest", "windows-2022"),
    # GKE image_type, AKS os_sku / os_type
    ("COS_CONTAINERD", "cos"),
    ("UBUNTU_CONTAINERD", "ubuntu"),
    ("WINDOWS_LTSC_CONTAINERD", "windows"),
    ("AzureLinux", "azurelinux"),
    ("Windows2022", "windows-2022"),
    ("Windows", "windows"),
    # Cluster API image lookups
    ("ubuntu-24.04", "ubuntu-24.04"),
    ("flatcar-stable", "flatcar"),
    # other distributions
    ("rhcos", "rhcos"),
    ("talos", "talos"),
    ("Debian12", "debian-12"),
]


@pytest.mark.parametrize(("image", "family"), IMAGES)
def test_node_os_images_map_to_their_family(image, family):
    assert family_of_image(image) == family


@pytest.mark.parametrize(("setting", "family"), SETTINGS)
def test_pool_settings_map_to_their_family(setting, family):
    assert family_of_setting(setting) == family


def test_amazon_linux_2_is_not_a_prefix_match_for_2023():
    assert family_of_image("Amazon Linux 2023.4.20240416") != "amazonlinux2"
    assert not family_matches("amazonlinux2", "amazonlinux2023")


def test_a_family_without_release_accepts_every_release_and_releases_differ():
    assert family_matches("ubuntu", "ubuntu-22.04")
    assert family_matches("windows", "windows-2019")
    assert not family_matches("ubuntu-20.04", "ubuntu-22.04")
    assert not family_matches("windows-2022", "windows-2019")
    assert not family_matches("bottlerocket", "amazonlinux2023")


@given(st.text(max_size=80))
def test_unknown_text_is_never_a_family_by_accident(text):
    """Anything not recognised maps to None (never reported as drift) and nothing raises."""
    image = family_of_image(text)
    setting = family_of_setting(text)
    for family in (image, setting):
        assert family is None or family.split("-", 1)[0] in FAMILIES
