{{/* Names and labels shared by every manifest of the chart. */}}

{{- define "growler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "growler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "growler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "growler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "growler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "growler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "growler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "growler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The migration Job's service account (templates/migration-job.yaml): a hook of its own when
the chart creates the release's (which does not exist yet when a pre-install hook runs). */}}
{{- define "growler.migrationServiceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- printf "%s-migrate" (include "growler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "growler.serviceAccountName" . -}}
{{- end -}}
{{- end -}}

{{- define "growler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* One secretKeyRef entry; nothing when the key is "". */}}
{{- define "growler.secretEnv" -}}
{{- if .key }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
{{- end }}
{{- end -}}

{{/* The secret environment: every entry a reference into .Values.secrets.name. */}}
{{- define "growler.secretEnvs" -}}
{{- $s := required "secrets.name must name an existing Secret" .Values.secrets.name -}}
{{- include "growler.secretEnv" (dict "name" "GROWLER_DATABASE_URL" "secret" $s "key" (required "secrets.databaseUrlKey is required" .Values.secrets.databaseUrlKey)) }}
{{- include "growler.secretEnv" (dict "name" "GROWLER_TOKEN_KEY_PASSWORD" "secret" $s "key" .Values.secrets.tokenKeyPasswordKey) }}
{{- include "growler.secretEnv" (dict "name" "GROWLER_SECRETS_KEY" "secret" $s "key" .Values.secrets.secretsKeyKey) }}
{{- include "growler.secretEnv" (dict "name" "GROWLER_S3_ACCESS_KEY" "secret" $s "key" .Values.secrets.s3AccessKeyKey) }}
{{- include "growler.secretEnv" (dict "name" "GROWLER_S3_SECRET_KEY" "secret" $s "key" .Values.secrets.s3SecretKeyKey) }}
{{- include "growler.secretEnv" (dict "name" "GROWLER_BOOTSTRAP_CLIENT_ID" "secret" $s "key" .Values.secrets.bootstrapClientIdKey) }}
{{- include "growler.secretEnv" (dict "name" "GROWLER_BOOTSTRAP_CLIENT_SECRET" "secret" $s "key" .Values.secrets.bootstrapClientSecretKey) }}
{{- end -}}

{{- define "growler.probe" -}}
httpGet:
  path: {{ .probe.path }}
  port: http
{{- with .probe.initialDelaySeconds }}
initialDelaySeconds: {{ . }}
{{- end }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}
