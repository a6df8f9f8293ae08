"""Workloads across clusters: models, normalisation and the seed-002 drift diff.

What is compared: Deployments, StatefulSets, DaemonSets, the ConfigMaps and Secrets of an
application, and its HorizontalPodAutoscalers, desired (Git: plain YAML, Kustomize or Helm
output, Argo CD's rendered manifests) against observed (``kubectl get -o json`` or a watch).

The pipeline, per object (gitops-engine's order: normalise first, then compare):

1. ``redact`` at the edge, right after parsing: ``status``, volatile metadata and the
   ``kubectl.kubernetes.io/last-applied-configuration`` annotation (it holds a Secret's data
   in clear) are dropped, and every Secret value becomes a SHA-256 digest. Nothing downstream
   ever holds Secret content, so nothing can log, store or print it.
2. ignore rules (``core.ignoring``, Argo CD's ``ignoreDifferences``) remove fields from both
   sides, in the objects' original list order.
3. normalisation: values equal to an API-server default are dropped from both sides, lists
   keyed by name are sorted, quantities take one canonical spelling (``2000m`` is ``2``,
   ``1024Mi`` is ``1Gi``), empty maps and lists are dropped, noise metadata goes
   (``managedFields``, ``resourceVersion``, ``uid``, the revision annotation...).
   ``normalise`` gives an object's whole normal form (idempotent); the models of step 4
   normalise only the fields they read, with the same helpers, so that
   ``workload_from(normalise(x)) == workload_from(x)`` (pinned by a property test) at a third
   of the cost.
4. ``model_from`` (``workload_from`` / ``config_from`` / ``autoscaler_from``): typed models.
5. ``diff_workload`` / ``diff_config`` / ``diff_autoscaler`` / ``diff_app`` return findings.

Drift kinds (``driftKind`` in a finding's JSON) and their fields:

- image: ``image.<container>`` (repository, tag or digest; a digest is compared only when
  Git states one, since admission controllers commonly pin tags to digests)
- configuration: ``config.<configmap>`` / ``secret.<secret>`` (content digests; a Secret's
  finding shows key names only), ``env.<container>.<NAME>``, ``envFrom.<container>``,
  ``volume.<volume>`` (which ConfigMap/Secret a volume mounts)
- resources: ``resources.<container>.requests.<res>`` / ``.limits.<res>``, ``replicas``
  (not compared when an HPA owns the replicas, or when Git does not state them),
  ``hpa.<name>.minReplicas`` / ``.maxReplicas``
- dependency: ``sidecar.<container>`` (a container or native sidecar added or removed),
  ``initContainer.<container>``, ``mesh.<annotation>`` (service-mesh injection switches)
- scheduling: ``nodeSelector.<key>``, ``tolerations``
- presence: ``workload`` / ``config.<name>`` / ``secret.<name>`` / ``hpa.<name>`` with a
  null ``actual`` (missing in the cluster) or null ``expected`` (in the cluster, labelled
  for the app, not in Git)

In these findings ``layer`` is ``WORKLOAD`` and ``pool`` names the object the finding is about
(``Deployment/boutique/frontend``): it keeps the finding's id unique when two workloads share
a container name; ``subject`` is the same object, typed (``core.subjects.WorkloadRef``).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from fleetwarden.core.workloads.diffing import (
    AppDiff,
    Pair,
    WorkloadOptions,
    diff_app,
    diff_autoscaler,
    diff_config,
    diff_fleet_workloads,
    diff_workload,
    pair_objects,
)
from fleetwarden.core.workloads.images import ImageRef, default_pull_policy, image_drift
from fleetwarden.core.workloads.indexing import ManifestObject, ObjectIndex
from fleetwarden.core.workloads.models import (
    MESH_KEYS,
    Autoscaler,
    ConfigObject,
    Container,
    EnvVar,
    Toleration,
    Workload,
    autoscaler_from,
    config_from,
    model_from,
    workload_from,
)
from fleetwarden.core.workloads.normalising import canonical_quantity, normalise
from fleetwarden.core.workloads.objects import (
    AUTOSCALER_KIND,
    CONFIG_KINDS,
    GROUPS,
    INSTANCE_LABEL,
    KINDS,
    LAST_APPLIED,
    TRACKING_ANNOTATION,
    WORKLOAD_KINDS,
    ObjectKey,
    app_of,
    key_of,
)
from fleetwarden.core.workloads.redaction import redact
from fleetwarden.core.workloads.versions import VersionRow, fleet_versions

__all__ = [
    "AUTOSCALER_KIND",
    "CONFIG_KINDS",
    "GROUPS",
    "INSTANCE_LABEL",
    "KINDS",
    "LAST_APPLIED",
    "MESH_KEYS",
    "TRACKING_ANNOTATION",
    "WORKLOAD_KINDS",
    "AppDiff",
    "Autoscaler",
    "ConfigObject",
    "Container",
    "EnvVar",
    "ImageRef",
    "ManifestObject",
    "ObjectIndex",
    "ObjectKey",
    "Pair",
    "Toleration",
    "VersionRow",
    "Workload",
    "WorkloadOptions",
    "app_of",
    "autoscaler_from",
    "canonical_quantity",
    "config_from",
    "default_pull_policy",
    "diff_app",
    "diff_autoscaler",
    "diff_config",
    "diff_fleet_workloads",
    "diff_workload",
    "fleet_versions",
    "image_drift",
    "key_of",
    "model_from",
    "normalise",
    "pair_objects",
    "redact",
    "workload_from",
]
