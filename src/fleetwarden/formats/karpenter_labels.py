"""The labels Karpenter refuses on a NodePool template (a Provisioner's ``spec.labels``).

Karpenter puts a NodePool's ``spec.template.metadata.labels`` on its Nodes itself (the
controller syncs the NodeClaim's labels; the AWS provider hands the kubelet only the labels it
may set: ``amifamily.RejectForbiddenLabels``), so the kubelet's own rule (``bootstrap``'s
``kubelet_may_set``) is not Karpenter's. Karpenter's, per API version, read in
kubernetes-sigs/karpenter (the NodePool CRD's ``x-kubernetes-validations`` on the labels, and
``NodeClaimTemplate.validateLabels`` / ``IsRestrictedLabel``, which leave a NodePool not ready
and making no nodes):

- every version: a key that is no qualified name, a value that is no label value, the pool's
  own label (``karpenter.sh/nodepool``; ``karpenter.sh/provisioner-name``), another key in the
  ``karpenter.sh`` domain (but ``karpenter.sh/capacity-type``), ``kubernetes.io/hostname``;
- ``karpenter.sh/v1beta1`` (v0.33-v1.0) and ``v1alpha5`` (v0.32 and before, its webhook): keys in
  the ``kubernetes.io`` and ``k8s.io`` domains, but for the well-known labels,
  ``node.kubernetes.io``, ``node-restriction.kubernetes.io`` and ``kops.k8s.io``;
- ``karpenter.sh/v1``: those domains were refused up to v1.8 and are accepted from v1.9
  (#2586, "relax cel restrictions"): the file does not say which release, so they are not refused.

Not done: the provider's own domains (``karpenter.k8s.aws``: the AWS provider's CRD refuses all
but its well-known labels; the NodePool does not say which provider's CRD it meets). Pure.
"""

from __future__ import annotations

from fleetwarden.formats import kubelet_values

__all__ = ["refusal"]

# the kubernetes.io labels the v1beta1 / v1 (to v1.8) NodePool CRD lets through by name
_WELL_KNOWN = frozenset(
    {
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/windows-build",
    }
)
# v1alpha5's WellKnownLabels (pkg/apis/v1alpha5/labels.go, v0.32)
_V1ALPHA5_WELL_KNOWN = frozenset(
    {
        "karpenter.sh/provisioner-name",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "karpenter.sh/capacity-type",
    }
)
_CRD = "the NodePool CRD refuses it (the NodePool is not created)"
_VALIDATION = "Karpenter's validation refuses it (the pool is not ready and makes no nodes)"


def refusal(api_version: str, key: str, value: str) -> str | None:
    """Why Karpenter refuses this label on a pool of ``api_version`` (None: it accepts it)."""
    legacy = api_version == "karpenter.sh/v1alpha5"
    own = "karpenter.sh/provisioner-name" if legacy else "karpenter.sh/nodepool"
    if key == own:
        return f'label "{own}" is restricted: {_VALIDATION}'
    if not kubelet_values.qualified_name(key):
        return f"invalid key name {key!r} in labels: not a qualified name: {_VALIDATION}"
    if not kubelet_values.label_value(value):
        return f"invalid value {value!r} for label {key!r}: not a label value: {_VALIDATION}"
    if legacy:
        return _v1alpha5(key)
    # CEL's x.find("^([^/]+)"): the part before the first "/" -- a key without one, whole
    domain = key.split("/", 1)[0]
    if domain.endswith("karpenter.sh") and key != "karpenter.sh/capacity-type":
        return f'label domain "karpenter.sh" is restricted: {_CRD}'
    if key == "kubernetes.io/hostname":
        return f'label "kubernetes.io/hostname" is restricted: {_CRD}'
    if api_version != "karpenter.sh/v1beta1":
        return None
    if (
        domain.endswith("kubernetes.io")
        and key not in _WELL_KNOWN
        and not domain.endswith(("node.kubernetes.io", "node-restriction.kubernetes.io"))
    ):
        return f'label domain "kubernetes.io" is restricted: {_CRD}'
    if domain.endswith("k8s.io") and not domain.endswith("kops.k8s.io"):
        return f'label domain "k8s.io" is restricted: {_CRD}'
    return None


def _v1alpha5(key: str) -> str | None:
    """v0.32's IsRestrictedLabel, which the Provisioner webhook applies."""
    if key in _V1ALPHA5_WELL_KNOWN:
        return None
    domain = key.split("/", 1)[0] if "/" in key else ""
    restricted = domain not in (
        "kops.k8s.io",
        "node.kubernetes.io",
        "node-restriction.kubernetes.io",
    )
    if restricted and domain.endswith(("kubernetes.io", "k8s.io", "karpenter.sh")):
        return (
            f"label {key} is restricted; specify a well known label or a custom label that does "
            "not use a restricted domain: Karpenter's Provisioner webhook refuses it"
        )
    if key == "kubernetes.io/hostname":
        return (
            "label kubernetes.io/hostname is restricted: Karpenter's Provisioner webhook refuses it"
        )
    return None
