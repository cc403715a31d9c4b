{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "decice-extender.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart, or the release name when it contains the chart name. */}}
{{- define "decice-extender.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "decice-extender.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "decice-extender.selectorLabels" -}}
app.kubernetes.io/name: {{ include "decice-extender.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "decice-extender.labels" -}}
helm.sh/chart: {{ include "decice-extender.chart" . }}
{{ include "decice-extender.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ if include "decice-extender.shadow" . }}shadow{{ else }}scheduler{{ end }}
app.kubernetes.io/part-of: decice
{{- end }}

{{- define "decice-extender.serviceAccountName" -}}
{{- default (include "decice-extender.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/*
Shadow mode (mode: shadow): the Deployment runs `decice-extender shadow` alone, with
read-only RBAC; no kube-scheduler, no scheduler config, no lease. "true" or "".
*/}}
{{- define "decice-extender.shadow" -}}
{{- if eq (toString .Values.mode) "shadow" }}true{{ end }}
{{- end }}

{{/*
The Prometheus Operator's objects (ServiceMonitor, PrometheusRule) are rendered: the API
serves monitoring.coreos.com/v1, or metrics.operatorCRDs says they are installed. "true" or "".
*/}}
{{- define "decice-extender.operatorCRDs" -}}
{{- if or (eq (toString .Values.metrics.operatorCRDs) "installed") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") }}true{{ end }}
{{- end }}

{{/* kube-scheduler's own /metrics get a Service (and a ServiceMonitor endpoint). */}}
{{- define "decice-extender.schedulerMetrics" -}}
{{- if and (not (include "decice-extender.shadow" .)) .Values.metrics.scheduler.enabled (include "decice-extender.serviceEnabled" .) }}true{{ end }}
{{- end }}

{{/* The PodDisruptionBudget: podDisruptionBudget.enabled, or (null) replicas > 1. */}}
{{- define "decice-extender.pdb" -}}
{{- $enabled := .Values.podDisruptionBudget.enabled }}
{{- if or (eq (toString $enabled) "true") (and (kindIs "invalid" $enabled) (gt (int .Values.replicas) 1)) }}true{{ end }}
{{- end }}

{{/* The metrics Service exists for metrics.service or metrics.serviceMonitor. */}}
{{- define "decice-extender.serviceEnabled" -}}
{{- if or .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled }}true{{ end }}
{{- end }}

{{/* Where the verbs listen: loopback; the scheduler is in the same pod. */}}
{{- define "decice-extender.listenHost" -}}
{{- .Values.extender.listenAddress | default "127.0.0.1" }}
{{- end }}

{{/*
The kube-scheduler image tag: scheduler.image.tag, else the cluster's own version
(v1.31.4 from v1.31.4-eks-2d5f260 or v1.31.4+k3s1), so the scheduler is never newer
than its API server (the version-skew policy) and runs under that version's
system:kube-scheduler role.
*/}}
{{- define "decice-extender.schedulerTag" -}}
{{- if .Values.scheduler.image.tag }}
{{- .Values.scheduler.image.tag }}
{{- else }}
{{- $v := regexFind "^v?[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version }}
{{- if not $v }}
{{- fail (printf "cannot tell the kube-scheduler version from the cluster's %q: set scheduler.image.tag" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- printf "v%s" (trimPrefix "v" $v) }}
{{- end }}
{{- end }}

{{/* Prometheus credentials from Secrets: name -> (secretName, key, mount directory). */}}
{{- define "decice-extender.prometheusSecrets" -}}
{{- $auth := .Values.extender.prometheusAuth | default dict }}
{{- range $name := list "bearerToken" "basicAuth" "ca" }}
{{- $s := get $auth $name | default dict }}
{{- if get $s "secretName" }}
{{ $name }}: {secretName: {{ get $s "secretName" | quote }}, key: {{ get $s "key" | quote }}, dir: {{ printf "/etc/decice-secrets/%s" (lower $name) | quote }}}
{{- end }}
{{- end }}
{{- range $header, $s := (get $auth "headers" | default dict) }}
{{- if not (regexMatch "^[A-Za-z0-9-]{1,40}$" $header) }}
{{- fail (printf "extender.prometheusAuth.headers: %q is not a header name made of letters, digits and '-'" $header) }}
{{- end }}
{{- if not (and (get $s "secretName") (get $s "key")) }}
{{- fail (printf "extender.prometheusAuth.headers.%s needs secretName and key" $header) }}
{{- end }}
header-{{ lower $header }}: {header: {{ $header | quote }}, secretName: {{ get $s "secretName" | quote }}, key: {{ get $s "key" | quote }}, dir: {{ printf "/etc/decice-secrets/header-%s" (lower $header) | quote }}}
{{- end }}
{{- end }}

{{/* The Secret with the verbs' TLS certificate: extender.tls.secretName, or <fullname>-tls when cert-manager makes it; empty: no TLS. */}}
{{- define "decice-extender.tlsSecret" -}}
{{- $tls := .Values.extender.tls | default dict }}
{{- if $tls.secretName }}
{{- $tls.secretName }}
{{- else if ($tls.certManager | default dict).enabled }}
{{- printf "%s-tls" (include "decice-extender.fullname" .) }}
{{- end }}
{{- end }}

{{/* The policy's urlPrefix, normalised to "" or "/path" without a trailing slash. */}}
{{- define "decice-extender.urlPrefix" -}}
{{- $server := (.Values.policy.server | default dict) }}
{{- $prefix := (get $server "urlPrefix" | default "" | trimSuffix "/") }}
{{- $prefix }}
{{- end }}

{{/* Whether the extender answers /bind: policy.bind.enabled, default true (docs/configuration.md). */}}
{{- define "decice-extender.bindEnabled" -}}
{{- $bind := (.Values.policy.bind | default dict) }}
{{- if or (not (hasKey $bind "enabled")) (eq (toString (get $bind "enabled")) "true") }}true{{ end }}
{{- end }}

{{/*
Every metric of the policy file as YAML {metrics: [...]}: the top-level policy.metrics
(one policy) and the metrics of each of policy.policies (named policies). Read it with
(include "decice-extender.policyMetrics" . | fromYaml).metrics.
*/}}
{{- define "decice-extender.policyMetrics" -}}
{{- $policy := .Values.policy | default dict }}
{{- $metrics := list }}
{{- range (get $policy "metrics" | default list) }}
{{- $metrics = append $metrics . }}
{{- end }}
{{- range $name, $named := (get $policy "policies" | default dict) }}
{{- range (get ($named | default dict) "metrics" | default list) }}
{{- $metrics = append $metrics . }}
{{- end }}
{{- end }}
{{- toYaml (dict "metrics" $metrics) }}
{{- end }}

{{/*
Whether some policy can reject a node (a metric of policy.metrics or of any of
policy.policies with a filter threshold, or onMissing: fail-closed), as
extender.policy.settings.Settings.filters_anything (a non-empty filter map counts). Only then
does the scheduler call filter, and preempt with it: a preemption the extender
has not seen could evict pods for a node its filter then rejects.
*/}}
{{- define "decice-extender.filtersAnything" -}}
{{- range (include "decice-extender.policyMetrics" . | fromYaml).metrics }}
{{- $filter := (get . "filter") | default dict }}
{{- if or (gt (len $filter) 0) (eq (toString (get . "onMissing")) "fail-closed") }}true{{ end }}
{{- end }}
{{- end }}

{{/* The extender policy file: values.policy plus the keys the chart owns. */}}
{{- define "decice-extender.policy" -}}
{{- $policy := deepCopy (.Values.policy | default dict) }}
{{- $server := deepCopy (get $policy "server" | default dict) }}
{{- $_ := set $server "host" (include "decice-extender.listenHost" .) }}
{{- $_ := set $server "port" (int .Values.extender.port) }}
{{- $_ := set $server "metricsHost" "0.0.0.0" }}
{{- $_ := set $server "metricsPort" (int .Values.extender.metricsPort) }}
{{- if include "decice-extender.tlsSecret" . }}
{{- $tls := dict "certFile" "/etc/decice-tls/tls.crt" "keyFile" "/etc/decice-tls/tls.key" }}
{{- if .Values.extender.tls.clientAuth }}
{{- $_ := set $tls "clientCAFile" "/etc/decice-tls/ca.crt" }}
{{- end }}
{{- $_ := set $server "tls" $tls }}
{{- end }}
{{- $_ := set $policy "server" $server }}
{{- $prom := deepCopy (get $policy "prometheus" | default dict) }}
{{- range $key, $_ := (get $prom "headers" | default dict) }}
{{- if has (lower $key) (list "authorization" "proxy-authorization" "cookie") }}
{{- fail (printf "policy.prometheus.headers.%s would land in a plain ConfigMap: use extender.prometheusAuth.bearerToken (or basicAuth, or headers) with a Secret" $key) }}
{{- end }}
{{- end }}
{{- $secrets := include "decice-extender.prometheusSecrets" . | fromYaml }}
{{- with $secrets.bearerToken }}
{{- $_ := set $prom "bearerTokenFile" (printf "%s/%s" .dir .key) }}
{{- end }}
{{- with $secrets.basicAuth }}
{{- $_ := set $prom "basicAuth" (dict "username" $.Values.extender.prometheusAuth.basicAuth.username "passwordFile" (printf "%s/%s" .dir .key)) }}
{{- end }}
{{- with $secrets.ca }}
{{- $_ := set $prom "caFile" (printf "%s/%s" .dir .key) }}
{{- end }}
{{- $files := deepCopy (get $prom "headerFiles" | default dict) }}
{{- range $name, $s := $secrets }}
{{- if hasPrefix "header-" $name }}
{{- $_ := set $files $s.header (printf "%s/%s" $s.dir $s.key) }}
{{- end }}
{{- end }}
{{- if $files }}
{{- $_ := set $prom "headerFiles" $files }}
{{- end }}
{{- if $prom }}
{{- $_ := set $policy "prometheus" $prom }}
{{- end }}
{{- $_ := set $policy "schedulerNames" (list .Values.scheduler.name) }}
{{- toYaml $policy }}
{{- end }}

{{/* The KubeSchedulerConfiguration of the dedicated scheduler. */}}
{{- define "decice-extender.schedulerConfig" -}}
{{- $ext := .Values.scheduler.extender -}}
{{- $le := .Values.scheduler.leaderElection -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ $le.enabled }}
  resourceLock: leases
  resourceName: {{ $le.resourceName }}
  resourceNamespace: {{ .Release.Namespace }}
  leaseDuration: {{ $le.leaseDuration }}
  renewDeadline: {{ $le.renewDeadline }}
  retryPeriod: {{ $le.retryPeriod }}
percentageOfNodesToScore: {{ int .Values.scheduler.percentageOfNodesToScore }}
profiles:
  - schedulerName: {{ .Values.scheduler.name }}
extenders:
  {{- $https := include "decice-extender.tlsSecret" . }}
  - urlPrefix: {{ printf "%s://127.0.0.1:%d%s" (ternary "https" "http" (ne $https "")) (int .Values.extender.port) (include "decice-extender.urlPrefix" .) | quote }}
    {{- if include "decice-extender.filtersAnything" . }}
    filterVerb: filter
    preemptVerb: preempt
    {{- end }}
    prioritizeVerb: prioritize
    {{- if include "decice-extender.bindEnabled" . }}
    bindVerb: bind
    {{- end }}
    weight: {{ int $ext.weight }}
    enableHTTPS: {{ ne $https "" }}
    {{- if $https }}
    tlsConfig:
      caFile: /etc/decice-tls/ca.crt
      {{- if .Values.extender.tls.clientAuth }}
      certFile: /etc/decice-tls/tls.crt
      keyFile: /etc/decice-tls/tls.key
      {{- end }}
    {{- end }}
    nodeCacheCapable: {{ $ext.nodeCacheCapable }}
    ignorable: {{ $ext.ignorable }}
    httpTimeout: {{ $ext.httpTimeout }}
{{- end }}

{{/* The rebalancer: rebalancer.enabled, or (null, the default) on with mode: extender and
off with mode: shadow (a shadow release changes nothing). */}}
{{- define "decice-extender.rebalancerEnabled" -}}
{{- $enabled := .Values.rebalancer.enabled }}
{{- if or (eq (toString $enabled) "true") (and (kindIs "invalid" $enabled) (not (include "decice-extender.shadow" .))) }}true{{ end }}
{{- end }}

{{/*
The rebalancer (rebalancer.enabled): its own name, labels and ServiceAccount. Its
app.kubernetes.io/name differs from the extender's, so neither the extender's Deployment
selector nor its Service, ServiceMonitor, PDB or NetworkPolicy select rebalancer pods.
*/}}
{{- define "decice-extender.rebalancerFullname" -}}
{{- printf "%s-rebalancer" (include "decice-extender.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{- define "decice-extender.rebalancerSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-rebalancer" (include "decice-extender.name" . | trunc 52 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "decice-extender.rebalancerLabels" -}}
helm.sh/chart: {{ include "decice-extender.chart" . }}
{{ include "decice-extender.rebalancerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: rebalancer
app.kubernetes.io/part-of: decice
{{- end }}

{{- define "decice-extender.rebalancerServiceAccountName" -}}
{{- default (include "decice-extender.rebalancerFullname" .) (dig "serviceAccount" "name" "" .Values.rebalancer) }}
{{- end }}

{{/* The rebalancer's Lease: policy.rebalance.leaseName (default decice-rebalancer). */}}
{{- define "decice-extender.rebalancerLease" -}}
{{- dig "rebalance" "leaseName" "decice-rebalancer" (.Values.policy | default dict) | default "decice-rebalancer" }}
{{- end }}

{{/* Its namespace: policy.rebalance.leaseNamespace, else the release's (POD_NAMESPACE). */}}
{{- define "decice-extender.rebalancerLeaseNamespace" -}}
{{- dig "rebalance" "leaseNamespace" "" (.Values.policy | default dict) | default .Release.Namespace }}
{{- end }}

{{/*
topologySpreadConstraints with the chart's own selector filled in: a constraint that leaves
labelSelector out selects the pods of this release (dict "constraints" LIST "selector"
MAP), so the values need not spell the release name out.
*/}}
{{- define "decice-extender.spreadConstraints" -}}
{{- $out := list -}}
{{- range .constraints -}}
{{- $c := deepCopy . -}}
{{- if not (hasKey $c "labelSelector") -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $.selector) -}}
{{- end -}}
{{- $out = append $out $c -}}
{{- end -}}
{{- toYaml $out -}}
{{- end }}

{{/*
The extender's image: extender.image.repository (default ghcr.io/decice/decice-extender,
what the release workflow pushes on a tag), the tag defaulting to the appVersion.
*/}}
{{- define "decice-extender.image" -}}
{{- $repository := required "extender.image.repository is empty: leave the default (ghcr.io/decice/decice-extender, pushed by the release workflow on a tag) or name your own build (scripts/image, or docker build -t REGISTRY/decice-extender:TAG .): the chart README's first section" .Values.extender.image.repository -}}
{{- printf "%s:%s" $repository (.Values.extender.image.tag | default .Chart.AppVersion) -}}
{{- end }}
