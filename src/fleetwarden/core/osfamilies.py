"""OS families: compare a pool's OS setting with what a node reports as ``osImage``.

Pools name an image family (eksctl ``amiFamily``, GKE ``image_type``, AKS ``os_sku``,
Karpenter ``amiSelectorTerms.alias``, CAPA ``imageLookupBaseOS``); nodes report a free-text
``osImage`` (the ``PRETTY_NAME`` of ``/etc/os-release``; Windows' product name). Both map to one
family name, with the release where the text pins it: ``ubuntu-22.04``, ``windows-2022``,
``debian-12``. A setting without a release (``Ubuntu``, ``Windows``) is satisfied by any release
of its family. Anything not recognised maps to ``None`` and is never reported as drift.

Families: amazonlinux2, amazonlinux2023, bottlerocket, cos, ubuntu[-YY.MM], azurelinux,
windows[-YYYY], rhcos, rhel, flatcar, talos, debian[-N].
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["FAMILIES", "family_matches", "family_of_image", "family_of_setting"]

FAMILIES = (
    "amazonlinux2",
    "amazonlinux2023",
    "bottlerocket",
    "cos",
    "ubuntu",
    "azurelinux",
    "windows",
    "rhcos",
    "rhel",
    "flatcar",
    "talos",
    "debian",
)

# osImage text (as the kubelet reports it) -> family; the first match wins, so "Amazon Linux
# 2023" is tried before "Amazon Linux 2" (a prefix of it)
_IMAGE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Amazon Linux 2023", re.I), "amazonlinux2023"),
    (re.compile(r"^Amazon Linux 2\b", re.I), "amazonlinux2"),
    (re.compile(r"^Bottlerocket", re.I), "bottlerocket"),
    (re.compile(r"^Container-Optimized OS", re.I), "cos"),
    (re.compile(r"^Ubuntu (\d\d\.\d\d)", re.I), "ubuntu-{0}"),
    (re.compile(r"^Ubuntu", re.I), "ubuntu"),
    (re.compile(r"^(CBL-Mariner|Microsoft Azure Linux|Azure Linux)", re.I), "azurelinux"),
    (re.compile(r"^Windows Server (\d{4})", re.I), "windows-{0}"),
    (re.compile(r"^Windows", re.I), "windows"),
    (re.compile(r"^Red Hat Enterprise Linux CoreOS", re.I), "rhcos"),
    (re.compile(r"^Red Hat Enterprise Linux", re.I), "rhel"),
    (re.compile(r"^Flatcar", re.I), "flatcar"),
    (re.compile(r"^Talos", re.I), "talos"),
    (re.compile(r"^Debian GNU/Linux (\d+)", re.I), "debian-{0}"),
    (re.compile(r"^Debian", re.I), "debian"),
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
    "al2023arm64nvidia": "amazonlinux2023",
    "al2023x8664neuron": "amazonlinux2023",
    "bottlerocket": "bottlerocket",
    "bottlerocketfips": "bottlerocket",
    "bottlerocketx8664": "bottlerocket",
    "bottlerocketarm64": "bottlerocket",
    "bottlerocketx8664fips": "bottlerocket",
    "bottlerocketarm64fips": "bottlerocket",
    "bottlerocketx8664nvidia": "bottlerocket",
    "bottlerocketarm64nvidia": "bottlerocket",
    "ubuntu": "ubuntu",
    "ubuntucontainerd": "ubuntu",
    "cos": "cos",
    "coscontainerd": "cos",
    "azurelinux": "azurelinux",
    "azurelinux2": "azurelinux",
    "azurelinux3": "azurelinux",
    "cblmariner": "azurelinux",
    "mariner": "azurelinux",
    "windows": "windows",
    "windowsltsccontainerd": "windows",
    "windowssaccontainerd": "windows",
    "flatcar": "flatcar",
    "flatcarstable": "flatcar",
    "flatcarbeta": "flatcar",
    "flatcaralpha": "flatcar",
    "flatcarcontainerlinux": "flatcar",
    "rhcos": "rhcos",
    "redhatenterpriselinuxcoreos": "rhcos",
    "rhel": "rhel",
    "talos": "talos",
    "debian": "debian",
}
_UBUNTU = re.compile(r"^ubuntu(?:pro)?-?(\d\d)\.?(\d\d)$")
_WINDOWS = re.compile(
    r"^windows(?:server|core|full)?(\d{4})(?:core|full)?(?:container)?(?:x8664)?$"
)
_DEBIAN = re.compile(r"^debian(\d+)$")
_NON_ALNUM = re.compile(r"[^a-z0-9.]")


@lru_cache(maxsize=1024)
def family_of_image(os_image: str) -> str | None:
    for pattern, family in _IMAGE_PATTERNS:
        match = pattern.search(os_image)
        if match:
            return family.format(*match.groups())
    return None


@lru_cache(maxsize=1024)
def family_of_setting(setting: str) -> str | None:
    """Family of a pool-side setting such as ``AmazonLinux2023``, ``COS_CONTAINERD``,
    ``AL2023_x86_64_STANDARD``, ``Ubuntu2204``, ``WindowsServer2022CoreContainer``,
    ``flatcar-stable`` or Karpenter's alias ``al2023@latest``."""
    base = _NON_ALNUM.sub("", setting.split("@", 1)[0].strip().lower())
    plain = base.replace(".", "")
    if plain in _SETTINGS:
        return _SETTINGS[plain]
    if match := _UBUNTU.match(base) or _UBUNTU.match(plain):
        return f"ubuntu-{match[1]}.{match[2]}"
    if match := _WINDOWS.match(plain):
        return f"windows-{match[1]}"
    if match := _DEBIAN.match(plain):
        return f"debian-{match[1]}"
    return None


def family_matches(want: str, have: str) -> bool:
    """Does a node of family ``have`` satisfy the setting ``want``? A setting without a
    release accepts every release of its family; a node that does not say its release
    satisfies a setting that names one (nothing contradicts it)."""
    if want == have:
        return True
    return have.startswith(want + "-") or want.startswith(have + "-")
