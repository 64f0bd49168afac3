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
