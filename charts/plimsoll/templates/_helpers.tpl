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
