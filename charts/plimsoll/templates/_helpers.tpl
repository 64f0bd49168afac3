{{/* Common labels for every object of one service: include "plimsoll.labels" (list . "hpa-plus") */}}
{{- define "plimsoll.labels" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
app.kubernetes.io/name: plimsoll
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ $component }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
{{- end -}}

{{/* Selector labels: include "plimsoll.selectorLabels" (list . "hpa-plus") */}}
{{- define "plimsoll.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: plimsoll
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}


{{/* The restricted Pod Security Standard, and then some: every pod of the chart runs as the
images' non-root user 65532 under the runtime's default seccomp profile. */}}
{{- define "plimsoll.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* Every container: the same user, no privilege escalation, no capabilities and nothing
writable on its root filesystem (the services keep all state in the API). */}}
{{- define "plimsoll.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* The number of shards of hpa-plus or vpa-recommender, given its values: `shards`, where 0
means 8 as soon as there is more than one replica (else 1). include "plimsoll.shards" $v | int */}}
{{- define "plimsoll.shards" -}}
{{- $shards := int (.shards | default 0) -}}
{{- if and (eq $shards 0) (gt (int .replicas) 1) }}{{ $shards = 8 }}{{ end -}}
{{- if lt $shards 1 }}{{ $shards = 1 }}{{ end -}}
{{ $shards }}
{{- end -}}

{{/* The Leases a controller renews, as a YAML flow list: include "plimsoll.leaseNames" (list
"plimsoll-hpa-plus" 8). The single-leader Lease <name>; with more than one shard also
<name>-shard-0 … <name>-shard-<N-1> and <name>-shard-join (crates/runtime/src/leader/shards.rs).
The single-leader name stays listed when sharded: a replica of the previous release renews and
releases it during the rollout that turns sharding on. */}}
{{- define "plimsoll.leaseNames" -}}
{{- $name := index . 0 -}}
{{- $shards := int (index . 1) -}}
[{{ $name }}{{ if gt $shards 1 }}{{ range $i := until $shards }}, {{ $name }}-shard-{{ $i }}{{ end }}, {{ $name }}-shard-join{{ end }}]
{{- end -}}

{{/* The namespaces the VPA updater and the admission webhook leave alone, comma-separated:
kube-system, the release namespace and vpa.ignoredNamespaces (each once, in that order). Both
services get it as --ignored-vpa-object-namespaces, and the chart's webhook registration uses it
as its namespaceSelector (crates/core/src/vertical/scope.rs). */}}
{{- define "plimsoll.vpaIgnoredNamespaces" -}}
{{- $all := list "kube-system" -}}
{{- if ne .Release.Namespace "kube-system" }}{{ $all = append $all .Release.Namespace }}{{ end -}}
{{- range .Values.vpa.ignoredNamespaces }}{{ if not (has . $all) }}{{ $all = append $all . }}{{ end }}{{ end -}}
{{ join "," $all }}
{{- end -}}
