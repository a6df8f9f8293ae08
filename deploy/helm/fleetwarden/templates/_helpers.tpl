{{- define "fleetwarden.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fleetwarden.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "fleetwarden.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "fleetwarden.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fleetwarden.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetwarden.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fleetwarden.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "fleetwarden.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "fleetwarden.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fleetwarden.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "fleetwarden.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* the Secret with the auth tokens: the user's, or the one the chart generates */}}
{{- define "fleetwarden.authSecret" -}}
{{- default (printf "%s-auth" (include "fleetwarden.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{/* the Secret the chart keeps inline queue/store URLs in */}}
{{- define "fleetwarden.urlSecret" -}}
{{- printf "%s-urls" (include "fleetwarden.fullname" .) -}}
{{- end -}}

{{/* true when policy.mode heals (patches): enforce, or approval once approved */}}
{{- define "fleetwarden.heals" -}}
{{- if has .Values.policy.mode (list "enforce" "approval") -}}true{{- end -}}
{{- end -}}

{{/* the SQLite files live on the data volume when queue or store is not external */}}
{{- define "fleetwarden.needsVolume" -}}
{{- if or (not (or .Values.queue.url .Values.queue.existingSecret)) (not (or .Values.store.url .Values.store.existingSecret)) -}}true{{- end -}}
{{- end -}}

{{/* event source -> environment variable of its token */}}
{{- define "fleetwarden.sourceEnv" -}}
{{- printf "FW_%s_TOKEN" (upper .) -}}
{{- end -}}

{{/* What is refused before anything is rendered: combinations that would not run. */}}
{{- define "fleetwarden.validate" -}}
{{- if not (has .Values.role (list "all" "split")) -}}
{{- fail (printf "role must be all or split, not %q" .Values.role) -}}
{{- end -}}
{{- if not (has .Values.policy.mode (list "dry-run" "enforce" "approval")) -}}
{{- fail (printf "policy.mode must be dry-run, enforce or approval, not %q" .Values.policy.mode) -}}
{{- end -}}
{{- if eq .Values.role "split" -}}
{{- if not (or .Values.queue.url .Values.queue.existingSecret) -}}
{{- fail "role split needs a NATS JetStream queue: set queue.url (nats://...) or queue.existingSecret" -}}
{{- end -}}
{{- if not (or .Values.store.url .Values.store.existingSecret) -}}
{{- fail "role split needs a shared audit store: set store.url (postgresql://...) or store.existingSecret" -}}
{{- end -}}
{{- if and (gt (int .Values.worker.replicas) 1) (include "fleetwarden.heals" .) (not .Values.worker.allowMultipleHealers) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "worker.replicas %d with policy.mode %s: every worker would heal; set leaderElection.enabled: true (one healer), or use 1 worker, policy.mode dry-run, or worker.allowMultipleHealers: true" (int .Values.worker.replicas) .Values.policy.mode) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.queue.url (not (hasPrefix "nats://" .Values.queue.url)) -}}
{{- fail "queue.url must be a nats:// URL (leave it empty for the embedded SQLite queue)" -}}
{{- end -}}
{{- range $name, $kind := .Values.auth.sources -}}
{{- if not (has $name (list "aws" "azure" "gcp" "cloudevents" "argocd" "flux")) -}}
{{- fail (printf "auth.sources.%s: not an event source (aws, azure, gcp, cloudevents, argocd, flux)" $name) -}}
{{- end -}}
{{- if not (has $kind (list "bearerToken" "hmacSecret")) -}}
{{- fail (printf "auth.sources.%s must be bearerToken or hmacSecret" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* the six workload kinds the watchers diff (Secrets and ConfigMaps only listed, to hash) */}}
{{- define "fleetwarden.workloadRules" -}}
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, list, watch]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [configmaps{{ if .Values.workloads.secrets }}, secrets{{ end }}]
  verbs: [list, watch]
{{- end -}}
