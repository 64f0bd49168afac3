{{/* The services this chart installs: values key, binary name and metrics port. */}}
{{- define "plimsoll.services" -}}
- {key: hpaPlus, name: hpa-plus, port: 8080}
- {key: cronHpa, name: cron-hpa, port: 8081}
- {key: vpaRecommender, name: vpa-recommender, port: 8942}
- {key: vpaUpdater, name: vpa-updater, port: 8943}
- {key: vpaAdmission, name: vpa-admission, port: 8944}
{{- end -}}
