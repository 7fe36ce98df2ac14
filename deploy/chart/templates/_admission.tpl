{{/*
The admission webhook (admission.enabled): helpers included by the pod template and
admission-webhook.yaml. Nothing here renders when admission.enabled is false, so the default
install is unchanged.
*/}}

{{/* The name of the webhook's Service, Secret and certificate objects. */}}
{{- define "hcloud-policy-ccm.admission.name" -}}
{{- printf "%s-admission" (include "hcloud-cloud-controller-manager.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/* Where the serving certificate Secret is mounted in the pod. */}}
{{- define "hcloud-policy-ccm.admission.certDir" -}}
/etc/hcloud-policy-ccm/admission
{{- end }}

{{/* The CCM's flags that serve the webhook (appended after args: the later flag wins). */}}
{{- define "hcloud-policy-ccm.admission.args" -}}
{{- if .Values.admission.enabled }}
- "--webhooks=service-policy"
- "--feature-gates=CloudControllerManagerWebhook=true"
- {{ printf "--webhook-secure-port=%d" (int .Values.admission.port) | quote }}
- {{ printf "--webhook-tls-cert-file=%s/tls.crt" (include "hcloud-policy-ccm.admission.certDir" .) | quote }}
- {{ printf "--webhook-tls-private-key-file=%s/tls.key" (include "hcloud-policy-ccm.admission.certDir" .) | quote }}
- {{ printf "--admission-exempt-users=system:serviceaccount:%s:%s" .Release.Namespace (include "hcloud-cloud-controller-manager.name" .) | quote }}
- {{ printf "--admission-timeout=%dms" (sub (mul (int .Values.admission.timeoutSeconds) 1000) 500) | quote }}
{{- end }}
{{- end }}

{{/* The container port of the webhook. */}}
{{- define "hcloud-policy-ccm.admission.port" -}}
{{- if .Values.admission.enabled }}
- name: webhook
  containerPort: {{ int .Values.admission.port }}
  protocol: TCP
{{- end }}
{{- end }}

{{/* The mount of the serving certificate. */}}
{{- define "hcloud-policy-ccm.admission.volumeMount" -}}
{{- if .Values.admission.enabled }}
- name: admission-tls
  mountPath: {{ include "hcloud-policy-ccm.admission.certDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The volume of the serving certificate Secret (the chart's, or cert-manager's). */}}
{{- define "hcloud-policy-ccm.admission.volume" -}}
{{- if .Values.admission.enabled }}
- name: admission-tls
  secret:
    secretName: {{ include "hcloud-policy-ccm.admission.name" . }}
{{- end }}
{{- end }}

{{/* Render-time checks of admission.*. */}}
{{- define "hcloud-policy-ccm.admission.validate" -}}
{{- if .Values.admission.enabled -}}
{{- if not (has .Values.admission.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail (printf "admission.failurePolicy: %q is not supported; set it to Ignore (recommended: a CCM outage never blocks Service writes) or Fail" (toString .Values.admission.failurePolicy)) -}}
{{- end -}}
{{- $t := int .Values.admission.timeoutSeconds -}}
{{- if or (lt $t 1) (gt $t 30) -}}
{{- fail (printf "admission.timeoutSeconds: %v is out of range; set 1 to 30 (the API server's limits; default 5)" .Values.admission.timeoutSeconds) -}}
{{- end -}}
{{- $p := int .Values.admission.port -}}
{{- if or (lt $p 1) (gt $p 65535) (eq $p (include "hcloud-policy-ccm.securePort" . | int)) -}}
{{- fail (printf "admission.port: %v is not usable; set a free port from 1 to 65535 other than the secure port (default 10260)" .Values.admission.port) -}}
{{- end -}}
{{- end -}}
{{- end }}
