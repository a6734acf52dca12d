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
      {{- with include "formspec-hooks.inlineCABundle" . }}
      # In the spec, so that a new CA is a spec change, which makes
      # Metacontroller recreate the controller with it (no restart).
      inline: |
        {{- . | trim | nindent 8 }}
      {{- else }}
      secretRef:
        name: {{ include "formspec-hooks.tlsSecretName" . }}
        namespace: {{ .Release.Namespace }}
        key: {{ .Values.tls.caKey }}
      {{- end }}
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


{{/*
The CA bundle given inline to Metacontroller: tls.caBundle, else the
generated CA bundle when the chart generates the certificate. Empty
otherwise (the controllers then name caKey of the serving Secret).
*/}}
{{- define "formspec-hooks.inlineCABundle" -}}
{{- if .Values.tls.caBundle -}}
{{- .Values.tls.caBundle -}}
{{- else if not (or .Values.tls.secretName .Values.tls.certManager.enabled) -}}
{{- include "formspec-hooks.generatedTLS" . -}}
{{- index .Values "_generatedTLS" "data" .Values.tls.caKey | b64dec -}}
{{- end -}}
{{- end -}}

{{/*
The serving certificate and CA the chart generates, worked out once per
render into .Values._generatedTLS (data: the Secret's data, base64;
notAfter: when the certificate expires, RFC 3339), since tls.yaml renders
the Secret and every controller is given its CA bundle.

An existing Secret with all three keys is kept as it is while its
certificate has more than tls.generated.renewBeforeDays left (its
formspec.dev/certificate-not-after annotation; one without it predates
renewal and is renewed). lookup sees nothing under `helm template` or a
client-side dry run, which therefore show freshly generated material.

Renewing makes a new CA too: its private key is not kept anywhere, so
nothing can sign with it again. The bundle is the new CA followed by the
CA of the certificate it replaces: a replica serves the old certificate
until the kubelet updates its files, and must be trusted until then.
*/}}
{{- define "formspec-hooks.generatedTLS" -}}
{{- if not (hasKey .Values "_generatedTLS") -}}
{{- $fullname := include "formspec-hooks.fullname" . -}}
{{- $secretName := include "formspec-hooks.tlsSecretName" . -}}
{{- $caKey := .Values.tls.caKey -}}
{{- $days := int .Values.tls.generated.validityDays -}}
{{- $renewBefore := int .Values.tls.generated.renewBeforeDays -}}
{{- if ge $renewBefore $days -}}
{{- fail (printf "tls.generated.renewBeforeDays (%d) must be less than tls.generated.validityDays (%d): every upgrade would renew the certificate" $renewBefore $days) -}}
{{- end -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace $secretName -}}
{{- $notAfter := dig "metadata" "annotations" "formspec.dev/certificate-not-after" "" $old -}}
{{- $complete := and (dig "data" "tls.crt" "" $old) (dig "data" "tls.key" "" $old) (dig "data" $caKey "" $old) -}}
{{- $left := 0 -}}
{{- if $notAfter -}}
{{- $left = sub (toDate "2006-01-02T15:04:05Z07:00" $notAfter | unixEpoch | int64) (now | unixEpoch | int64) -}}
{{- end -}}
{{- if and $complete (gt (int64 $left) (mul $renewBefore 86400)) -}}
{{- $_ := set .Values "_generatedTLS" (dict "data" $old.data "notAfter" $notAfter) -}}
{{- else -}}
{{- $dnsNames := list -}}
{{- range include "formspec-hooks.dnsNames" . | splitList "\n" -}}
{{- $dnsNames = append $dnsNames . -}}
{{- end -}}
{{- $ca := genCAWithKey (printf "%s-ca" $fullname) $days (genPrivateKey "ecdsa") -}}
{{- $cert := genSignedCertWithKey (first $dnsNames) nil $dnsNames $days $ca (genPrivateKey "ecdsa") -}}
{{- $bundle := $ca.Cert -}}
{{- $previous := dig "data" $caKey "" $old | b64dec | splitList "-----END CERTIFICATE-----" | first | trim -}}
{{- if $previous -}}
{{- $bundle = printf "%s%s\n-----END CERTIFICATE-----\n" $bundle $previous -}}
{{- end -}}
{{- $notAfter = dateInZone "2006-01-02T15:04:05Z" (now | dateModify (printf "+%dh" (mul $days 24))) "UTC" -}}
{{- $data := dict "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) $caKey ($bundle | b64enc) -}}
{{- $_ := set .Values "_generatedTLS" (dict "data" $data "notAfter" $notAfter) -}}
{{- end -}}
{{- end -}}
{{- end -}}
