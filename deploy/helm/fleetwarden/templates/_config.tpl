{{/*
The service config (`fleetwarden serve --config`, README "The service") for one role. Every
secret is an env:NAME reference to a variable the Deployment fills from a Secret: the
ConfigMap holds no credential.
*/}}
{{- define "fleetwarden.config" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $full := include "fleetwarden.fullname" $root -}}
{{- $ns := $root.Release.Namespace -}}
{{- $hosts := list $full (printf "%s.%s" $full $ns) (printf "%s.%s.svc" $full $ns) (printf "%s.%s.svc.cluster.local" $full $ns) "localhost" "127.0.0.1" -}}
{{- $hosts = concat $hosts $v.allowedHosts -}}
{{- if and $v.serviceMonitor.enabled $v.serviceMonitor.anyHost -}}
{{- $hosts = append $hosts "*" -}}
{{- end -}}
{{- $cfg := dict "listen" "0.0.0.0:8080" "allowedHosts" (uniq $hosts) "role" .role -}}
{{- if or $v.store.url $v.store.existingSecret -}}
{{- $_ := set $cfg "store" "env:FW_STORE_URL" -}}
{{- else -}}
{{- $_ := set $cfg "store" "sqlite:////var/lib/fleetwarden/audit.db" -}}
{{- end -}}
{{- if or $v.queue.url $v.queue.existingSecret -}}
{{- $_ := set $cfg "queue" "env:FW_QUEUE_URL" -}}
{{- else -}}
{{- $_ := set $cfg "queue" "sqlite" -}}
{{- $_ := set $cfg "queuePath" "/var/lib/fleetwarden/queue.db" -}}
{{- end -}}
{{- $_ := set $cfg "desired" (list "/etc/fleetwarden/desired/") -}}
{{- $clusters := dict -}}
{{- if $v.clusters.inCluster -}}
{{- $_ := set $clusters "inCluster" $v.clusters.inCluster -}}
{{- end -}}
{{- if $v.clusters.argocdSecrets.enabled -}}
{{- $_ := set $clusters "argocdSecrets" (dict "namespace" $v.clusters.argocdSecrets.namespace) -}}
{{- end -}}
{{- if $clusters -}}
{{- $_ := set $cfg "clusters" $clusters -}}
{{- end -}}
{{- $auth := dict "read" (dict "bearerToken" "env:FW_READ_TOKEN") -}}
{{- if $v.auth.admin -}}
{{- $_ := set $auth "admin" (dict "bearerToken" "env:FW_ADMIN_TOKEN") -}}
{{- end -}}
{{- range $source, $kind := $v.auth.sources -}}
{{- $_ := set $auth $source (dict $kind (printf "env:%s" (include "fleetwarden.sourceEnv" $source))) -}}
{{- end -}}
{{- $_ := set $cfg "auth" $auth -}}
{{- if $v.argocd.url -}}
{{- $argocd := dict "url" $v.argocd.url -}}
{{- if $v.argocd.tokenSecret -}}
{{- $_ := set $argocd "token" "env:ARGOCD_TOKEN" -}}
{{- end -}}
{{- if $v.argocd.insecure -}}
{{- $_ := set $argocd "insecure" true -}}
{{- end -}}
{{- $_ := set $cfg "argocd" $argocd -}}
{{- end -}}
{{- $_ := set $cfg "policy" (dict "mode" $v.policy.mode "requestExpiryMinutes" $v.policy.requestExpiryMinutes) -}}
{{- $workloads := dict "apps" $v.workloads.apps "secrets" $v.workloads.secrets "refreshSeconds" $v.workloads.refreshSeconds -}}
{{- if $v.workloads.namespaces -}}
{{- $_ := set $workloads "namespaces" $v.workloads.namespaces -}}
{{- end -}}
{{- $_ := set $cfg "workloads" $workloads -}}
{{- if $v.serviceMonitor.enabled -}}
{{- $_ := set $cfg "metrics" (dict "public" false) -}}
{{- end -}}
{{- if ne .role "gateway" -}}
{{- if $v.leaderElection.enabled -}}
{{- $_ := set $cfg "leaderElection" (dict "inCluster" true "namespace" $ns "name" (printf "%s-leader" $full) "leaseSeconds" (int $v.leaderElection.leaseSeconds)) -}}
{{- end -}}
{{- if $v.sharding.enabled -}}
{{- $_ := set $cfg "sharding" (dict "inCluster" true "namespace" $ns "group" $full "leaseSeconds" (int $v.sharding.leaseSeconds)) -}}
{{- end -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy $v.extraConfig)) -}}
{{- end -}}

{{/* the roles this release runs: role all -> [all]; split -> [gateway, worker] */}}
{{- define "fleetwarden.roles" -}}
{{- if eq .Values.role "split" -}}gateway worker{{- else -}}all{{- end -}}
{{- end -}}
