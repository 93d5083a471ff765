{{/* Names, labels, images and the environment every voxlog process shares. */}}

{{- define "voxlog.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "voxlog.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The labels a component's pods are selected by: (dict "root" $ "component" "api"). */}}
{{- define "voxlog.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image of infra/Dockerfile's targets: (dict "root" $ "target" "api"). */}}
{{- define "voxlog.image" -}}
{{- $image := .root.Values.image -}}
{{- printf "%s%s:%s-%s" $image.registry $image.repository (default .root.Chart.AppVersion $image.tag) .target -}}
{{- end -}}

{{- define "voxlog.secretName" -}}
{{- default (printf "%s-credentials" (include "voxlog.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "voxlog.blobClaim" -}}
{{- default (printf "%s-blobs" (include "voxlog.fullname" .)) .Values.blobs.existingClaim -}}
{{- end -}}

{{- define "voxlog.saslOn" -}}
{{- if hasPrefix "SASL_" .Values.kafka.securityProtocol }}true{{ end -}}
{{- end -}}

{{/* A name: value map as env entries (values.schema.json lets only VOXLOG_ names in). */}}
{{- define "voxlog.envMap" -}}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* Where Kafka and PostgreSQL are, and their credentials (from the Secret): what every process and
`voxlog topics` / `voxlog migrate` read. */}}
{{- define "voxlog.connectionEnv" -}}
{{- $v := .Values -}}
- name: VOXLOG_KAFKA_BOOTSTRAP_SERVERS
  value: {{ $v.kafka.bootstrapServers | quote }}
- name: VOXLOG_KAFKA_SECURITY_PROTOCOL
  value: {{ $v.kafka.securityProtocol | quote }}
{{- if include "voxlog.saslOn" . }}
- name: VOXLOG_KAFKA_SASL_MECHANISM
  value: {{ $v.kafka.saslMechanism | quote }}
- name: VOXLOG_KAFKA_SASL_USERNAME
  value: {{ required "kafka.saslUsername: a SASL_* protocol needs a login" $v.kafka.saslUsername | quote }}
- name: VOXLOG_KAFKA_SASL_PASSWORD_FILE
  value: /etc/voxlog/credentials/kafka-sasl-password
{{- end }}
{{- if $v.kafka.tls.secretName }}
- name: VOXLOG_KAFKA_SSL_CA_FILE
  value: /etc/voxlog/kafka-tls/{{ $v.kafka.tls.caKey }}
{{- if $v.kafka.tls.certKey }}
- name: VOXLOG_KAFKA_SSL_CERT_FILE
  value: /etc/voxlog/kafka-tls/{{ $v.kafka.tls.certKey }}
{{- end }}
{{- if $v.kafka.tls.keyKey }}
- name: VOXLOG_KAFKA_SSL_KEY_FILE
  value: /etc/voxlog/kafka-tls/{{ $v.kafka.tls.keyKey }}
{{- end }}
{{- end }}
{{- if hasSuffix "SSL" $v.kafka.securityProtocol }}
- name: VOXLOG_KAFKA_SSL_CHECK_HOSTNAME
  value: {{ $v.kafka.tls.checkHostname | toString | quote }}
{{- end }}
- name: VOXLOG_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "voxlog.secretName" . }}
      key: database-url
- name: VOXLOG_DATABASE_SCHEMA
  value: {{ $v.postgres.schema | quote }}
{{- end -}}

{{/* config and a component's env values (dict "root" $ "env" <map> "own" <names the chart sets for it>),
refused where the chart sets the name itself. */}}
{{- define "voxlog.extraEnv" -}}
{{- $extra := merge (dict) (default (dict) .env) .root.Values.config }}
{{- $reserved := concat (list "VOXLOG_KAFKA_BOOTSTRAP_SERVERS" "VOXLOG_KAFKA_SECURITY_PROTOCOL" "VOXLOG_KAFKA_SASL_MECHANISM" "VOXLOG_KAFKA_SASL_USERNAME" "VOXLOG_KAFKA_SASL_PASSWORD" "VOXLOG_KAFKA_SASL_PASSWORD_FILE" "VOXLOG_KAFKA_SSL_CA_FILE" "VOXLOG_KAFKA_SSL_CERT_FILE" "VOXLOG_KAFKA_SSL_KEY_FILE" "VOXLOG_KAFKA_SSL_CHECK_HOSTNAME" "VOXLOG_DATABASE_URL" "VOXLOG_DATABASE_SCHEMA" "VOXLOG_JOBS_PARTITIONS" "VOXLOG_TOPIC_REPLICATION_FACTOR" "VOXLOG_BLOB_DIR" "VOXLOG_METRICS_HOST" "VOXLOG_METRICS_PORT" "VOXLOG_SHUTDOWN_TIMEOUT_S") (default (list) .own) }}
{{- range $name := keys $extra | sortAlpha }}
{{- if has $name $reserved }}
{{- fail (printf "%s is set by the chart from its values (docs/deployment.md, Kubernetes): leave it out of config and the env values" $name) }}
{{- end }}
{{- end }}
{{- include "voxlog.envMap" $extra }}
{{- end -}}

{{/* The environment of a long-running process (dict "root" $ "env" <its env values> "own" <names>):
connections, the blob store, the metrics port, the shutdown's time; then config and its own. */}}
{{- define "voxlog.env" -}}
{{- $v := .root.Values -}}
{{ include "voxlog.connectionEnv" .root }}
- name: VOXLOG_BLOB_DIR
  value: {{ $v.blobs.mountPath | quote }}
# The metrics port answers without a key and its series name tenants: bound to the pod network's address
# only (not a second network's interface, which no NetworkPolicy covers), where the NetworkPolicy applies.
- name: VOXLOG_METRICS_HOST
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: VOXLOG_METRICS_PORT
  value: {{ $v.metrics.port | toString | quote }}
- name: VOXLOG_SHUTDOWN_TIMEOUT_S
  value: {{ $v.shutdownTimeoutSeconds | toString | quote }}
{{- include "voxlog.extraEnv" . }}
{{- end -}}

{{/* Volumes of every process: the blob store, the credentials (for the SASL password's file), Kafka's TLS
files, PostgreSQL's CA. */}}
{{- define "voxlog.volumes" -}}
- name: blobs
  persistentVolumeClaim:
    claimName: {{ include "voxlog.blobClaim" . }}
{{- if include "voxlog.saslOn" . }}
- name: credentials
  secret:
    secretName: {{ include "voxlog.secretName" . }}
    items:
      - key: kafka-sasl-password
        path: kafka-sasl-password
{{- end }}
{{- if .Values.kafka.tls.secretName }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.secretName }}
{{- end }}
{{- if .Values.postgres.caSecretName }}
- name: postgres-tls
  secret:
    secretName: {{ .Values.postgres.caSecretName }}
{{- end }}
{{- end -}}

{{- define "voxlog.volumeMounts" -}}
- name: blobs
  mountPath: {{ .Values.blobs.mountPath }}
{{- if include "voxlog.saslOn" . }}
- name: credentials
  mountPath: /etc/voxlog/credentials
  readOnly: true
{{- end }}
{{- if .Values.kafka.tls.secretName }}
- name: kafka-tls
  mountPath: /etc/voxlog/kafka-tls
  readOnly: true
{{- end }}
{{- if .Values.postgres.caSecretName }}
- name: postgres-tls
  mountPath: /etc/voxlog/postgres-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Pod annotations: Prometheus's scrape annotations, and the credentials' checksum so that a changed
Secret made by the chart restarts the pods. */}}
{{- define "voxlog.podAnnotations" -}}
{{- if .Values.metrics.scrapeAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | toString | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- if not .Values.secrets.existingSecret }}
checksum/credentials: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end -}}

{{/* Readiness from the process's own /readyz on the metrics port (the API's is on its own port). */}}
{{- define "voxlog.metricsReadiness" -}}
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
{{- end -}}
