{{/* The Deployment of a process that serves no traffic (projector, sweeper, workers): its readiness is
its own /readyz on the metrics port. (dict "root" $ "component" NAME "target" IMAGE-TARGET "values"
<its values> "own" <env entries the chart sets for it> "ownNames" <their names> "resources" <map>
"oneAtATime" <replace pods without a surge> "scaledByKeda" <no replica count> "extraVolumes" <its own volumes,
YAML> "extraMounts" <their mounts, YAML>) */}}
{{- define "voxlog.process" -}}
{{- $root := .root -}}
{{- $v := .values -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "voxlog.fullname" $root }}-{{ .component }}
  labels:
    {{- include "voxlog.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  {{- if not .scaledByKeda }}
  replicas: {{ $v.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "voxlog.selector" (dict "root" $root "component" .component) | nindent 6 }}
  {{- if .oneAtATime }}
  # Stop one, then start its successor: no second projector over the same partitions, no spare GPU needed.
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 0
      maxUnavailable: 1
  {{- end }}
  template:
    metadata:
      labels:
        {{- include "voxlog.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
      annotations:
        {{- include "voxlog.podAnnotations" $root | trim | nindent 8 }}
    spec:
      terminationGracePeriodSeconds: {{ add $root.Values.shutdownTimeoutSeconds 15 }}
      {{- with $root.Values.image.pullSecrets }}
      imagePullSecrets:
        {{- range . }}
        - name: {{ . }}
        {{- end }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "voxlog.image" (dict "root" $root "target" .target) }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: [voxlog, {{ .command }}]
          env:
            {{- with .own }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- include "voxlog.env" (dict "root" $root "env" $v.env "own" .ownNames) | nindent 12 }}
          ports:
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
          {{- include "voxlog.metricsReadiness" $root | nindent 10 }}
          {{- with .resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            {{- include "voxlog.volumeMounts" $root | nindent 12 }}
            {{- with .extraMounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        {{- include "voxlog.volumes" $root | nindent 8 }}
        {{- with .extraVolumes }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
