"""OS families: compare a pool's OS setting with what a node reports as ``osImage``.

Pools name an image family (eksctl ``amiFamily``, GKE ``image_type``, AKS ``os_sku``,
Karpenter ``amiSelectorTerms.alias``); nodes report a free-text ``osImage``. Both are mapped to
one family name; anything not recognised maps to ``None`` and is never reported as drift.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["family_of_image", "family_of_setting"]

# osImage text (as the kubelet reports it) -> family
_IMAGE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Amazon Linux 2023", re.I), "amazonlinux2023"),
    (re.compile(r"^Amazon Linux 2\b", re.I), "amazonlinux2"),
    (re.compile(r"^Bottlerocket", re.I), "bottlerocket"),
    (re.compile(r"^Container-Optimized OS", re.I), "cos"),
    (re.compile(r"^Ubuntu", re.I), "ubuntu"),
    (re.compile(r"^(CBL-Mariner|Azure Linux)", re.I), "azurelinux"),
    (re.compile(r"^Windows", re.I), "windows"),
    (re.compile(r"^Red Hat Enterprise Linux CoreOS", re.I), "rhcos"),
    (re.compile(r"^Flatcar", re.I), "flatcar"),
    (re.compile(r"^Talos", re.I), "talos"),
)

# pool setting (normalised: lower case, separators removed) -> family
_SETTINGS: dict[str, str] = {
    "amazonlinux2": "amazonlinux2",
    "al2": "amazonlinux2",
    "al2x8664": "amazonlinux2",
    "al2arm64": "amazonlinux2",
    "al2x8664gpu": "amazonlinux2",
    "amazonlinux2023": "amazonlinux2023",
    "al2023": "amazonlinux2023",
    "al2023x8664standard": "amazonlinux2023",
    "al2023arm64standard": "amazonlinux2023",
    "al2023x8664nvidia": "amazonlinux2023",
    "al2023x8664neuron": "amazonlinux2023",
    "bottlerocket": "bottlerocket",
    "bottlerocketx8664": "bottlerocket",
    "bottlerocketarm64": "bottlerocket",
    "bottlerocketx8664nvidia": "bottlerocket",
    "bottlerocketarm64nvidia": "bottlerocket",
    "ubuntu1804": "ubuntu",
    "ubuntu2004": "ubuntu",
    "ubuntu2204": "ubuntu",
    "ubuntu2404": "ubuntu",
    "ubuntupro2204": "ubuntu",
    "ubuntu": "ubuntu",
    "ubuntucontainerd": "ubuntu",
    "cos": "cos",
    "coscontainerd": "cos",
    "azurelinux": "azurelinux",
    "cblmariner": "azurelinux",
    "mariner": "azurelinux",
    "windows": "windows",
    "windows2019": "windows",
    "windows2022": "windows",
    "windowsltsccontainerd": "windows",
    "windowssaccontainerd": "windows",
    "windowsserver2019fullcontainer": "windows",
    "windowsserver2019corecontainer": "windows",
    "windowsserver2022fullcontainer": "windows",
    "windowsserver2022corecontainer": "windows",
    "windowscore2019x8664": "windows",
    "windowscore2022x8664": "windows",
    "windowsfull2019x8664": "windows",
    "windowsfull2022x8664": "windows",
    "flatcar": "flatcar",
}

_NON_ALNUM = re.compile(r"[^a-z0-9]")


@lru_cache(maxsize=1024)
def family_of_image(os_image: str) -> str | None:
    for pattern, family in _IMAGE_PATTERNS:
        if pattern.search(os_image):
            return family
    return None


def family_of_setting(setting: str) -> str | None:
    """Family of a pool-side setting such as ``AmazonLinux2023``, ``COS_CONTAINERD``,
    ``AL2023_x86_64_STANDARD``, ``Windows2022`` or Karpenter's alias ``al2023@latest``."""
    base = setting.split("@", 1)[0]
    return _SETTINGS.get(_NON_ALNUM.sub("", base.lower()))
