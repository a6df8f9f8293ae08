"""Which provisioner release made a pool, when the files do not say: defaults change with it.

An eksctl ``ClusterConfig`` never records the eksctl release that applied it; a terraform-aws-eks
module block usually pins its version (``version = "~> 20.0"``, ``?ref=v19.21.0``). Where a
release matters and is not stated, readers use ``Assumed`` (config ``scan.provisioners``) and
otherwise accept every value the supported releases would have produced, saying so in the
provenance (``default: eksctl, release not stated ...``), so a default never invents drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Assumed", "Release", "parse_release"]

Release = tuple[int, int, int]
_RELEASE = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$")


def parse_release(text: str) -> Release | None:
    """``0.190.0`` / ``v0.190`` / ``20`` -> (0, 190, 0) / (0, 190, 0) / (20, 0, 0)."""
    match = _RELEASE.match(text.strip())
    if match is None:
        return None
    return (int(match[1]), int(match[2] or 0), int(match[3] or 0))


@dataclass(frozen=True, slots=True)
class Assumed:
    """Releases to assume where a file does not state its provisioner's (``None``: unknown).

    ``eksctl``: the eksctl release that created the node groups (``0.190.0``);
    ``terraform_aws_eks``: the terraform-aws-eks major version for module blocks that do not
    pin one (``20``).
    """

    eksctl: Release | None = None
    terraform_aws_eks: int | None = None

    def describe(self) -> str:
        parts = []
        if self.eksctl is not None:
            parts.append(f"eksctl {'.'.join(map(str, self.eksctl))}")
        if self.terraform_aws_eks is not None:
            parts.append(f"terraform-aws-eks v{self.terraform_aws_eks}")
        return ", ".join(parts) or "no provisioner release assumed"
