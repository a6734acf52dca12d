{{/*
The name of the namespaced objects: the release name when it already says
formspec-hooks, so that `helm install formspec-hooks` gives the names the
docs use.
*/}}
{{- define "formspec-hooks.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "formspec-hooks" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-formspec-hooks" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Helm's labels, on every object. */}}
{{- define "formspec-hooks.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels of the objects that belong to the hook server. */}}
{{- define "formspec-hooks.labels" -}}
app.kubernetes.io/name: formspec-hooks
app.kubernetes.io/part-of: formspec
{{ include "formspec-hooks.helmLabels" . }}
{{- end -}}

{{/* The hook server's pods, as the Deployment, Service, PDB and NetworkPolicy select them. */}}
{{- define "formspec-hooks.selectorLabels" -}}
app.kubernetes.io/name: formspec-hooks
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Service port the controllers call: 443 with TLS, else 80. */}}
{{- define "formspec-hooks.servicePort" -}}
{{- if .Values.tls.enabled }}443{{ else }}80{{ end -}}
{{- end -}}

{{/* The hook server's port inside the pod: 8443 with TLS, else 8080. */}}
{{- define "formspec-hooks.listenPort" -}}
{{- if .Values.tls.enabled }}8443{{ else }}8080{{ end -}}
{{- end -}}

{{/* The Secret holding the serving certificate and its CA. */}}
{{- define "formspec-hooks.tlsSecretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "formspec-hooks.fullname" .)) -}}
{{- end -}}

{{/* The Secret holding the hook bearer tokens. */}}
{{- define "formspec-hooks.tokenSecretName" -}}
{{- .Values.authToken.secretName | default (printf "%s-token" (include "formspec-hooks.fullname" .)) -}}
{{- end -}}

{{/*
The names the serving certificate is for: Metacontroller calls a webhook
service as <name>.<namespace>:<port>; the longer forms are for people and
other clients. One per line.
*/}}
{{- define "formspec-hooks.dnsNames" -}}
{{- $svc := printf "%s.%s" (include "formspec-hooks.fullname" .) .Release.Namespace -}}
{{ $svc }}
{{ $svc }}.svc
{{ $svc }}.svc.cluster.local
{{- end -}}

{{/*
One hook's webhook, pointing at this release's Service. Call it with
(dict "root" $ "path" "/v1/...").
*/}}
{{- define "formspec-hooks.webhook" -}}
webhook:
  service:
    name: {{ include "formspec-hooks.fullname" .root }}
    namespace: {{ .root.Release.Namespace }}
    port: {{ include "formspec-hooks.servicePort" .root }}
    {{- if .root.Values.tls.enabled }}
    protocol: https
    {{- end }}
  path: {{ .path }}
  timeout: 10s
{{- end -}}

{{/*
The endpointConfigs of every controller when TLS or a token is on: which CA
Metacontroller trusts for the hook Service and which token it sends
(Metacontroller v4.16+). Empty otherwise.
*/}}
{{- define "formspec-hooks.endpointConfigs" -}}
{{- if or .Values.tls.enabled .Values.authToken.enabled -}}
# The CA Metacontroller trusts for the hook Service and the bearer token
# it sends (docs/security.md).
endpointConfigs:
  - host: {{ include "formspec-hooks.fullname" . }}.{{ .Release.Namespace }}:{{ include "formspec-hooks.servicePort" . }}
    {{- if .Values.tls.enabled }}
    caBundle:
      secretRef:
        name: {{ include "formspec-hooks.tlsSecretName" . }}
        namespace: {{ .Release.Namespace }}
        key: {{ .Values.tls.caKey }}
    {{- end }}
    {{- if .Values.authToken.enabled }}
    authorization:
      secretRef:
        name: {{ include "formspec-hooks.tokenSecretName" . }}
        namespace: {{ .Release.Namespace }}
        key: {{ .Values.authToken.clientKey }}
    {{- end }}
{{- end -}}
{{- end -}}

{{/*
The reporter's service account, which the hook pods run as. Fixed, like
the cluster-scoped objects that name it: its ClusterRoleBinding and the
admission policy's match, which name it with the release namespace.
*/}}
{{- define "formspec-hooks.reporterServiceAccount" -}}
formspec-reporter
{{- end -}}
