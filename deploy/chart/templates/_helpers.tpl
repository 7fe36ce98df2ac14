{{/*
The name of every object, of the ServiceAccount and of the selector label; the official chart's
helper name, because the official default values refer to it by name (selectorLabels).
*/}}
{{- define "hcloud-cloud-controller-manager.name" -}}
{{- .Values.nameOverride | default "hcloud-cloud-controller-manager" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The pod labels the workload selects: selectorLabels, each value rendered through tpl. */}}
{{- define "hcloud-cloud-controller-manager.selectorLabels" -}}
{{- $lines := list -}}
{{- range $key, $value := .Values.selectorLabels -}}
{{- $lines = append $lines (printf "%s: %s" $key (tpl (toString $value) $ | quote)) -}}
{{- end -}}
{{- join "\n" $lines -}}
{{- end }}

{{/* Labels of the objects other than the pods. */}}
{{- define "hcloud-policy-ccm.labels" -}}
{{ include "hcloud-cloud-controller-manager.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end }}

{{/*
The image. The official CCM's images (from a values file written for the official chart) are
replaced by this chart's: they do not implement the policy gate or the plugins.
*/}}
{{- define "hcloud-policy-ccm.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $tag := tpl (toString (.Values.image.tag | default "")) . -}}
{{- $official := list "hetznercloud/hcloud-cloud-controller-manager" "docker.io/hetznercloud/hcloud-cloud-controller-manager" "quay.io/syself/hetzner-cloud-controller-manager" -}}
{{- if has $repo $official -}}
{{- $repo = "ghcr.io/policy-ccm/hcloud-policy-ccm" -}}
{{- $tag = "" -}}
{{- end -}}
{{- printf "%s:%s" $repo ($tag | default .Chart.AppVersion) -}}
{{- end }}

{{/* The secure port (args.secure-port, default 10258) that serves /healthz. */}}
{{- define "hcloud-policy-ccm.securePort" -}}
{{- $port := index .Values.args "secure-port" | default 10258 -}}
{{- int $port -}}
{{- end }}

{{/*
The RBAC rules of leader election on the Lease named by the argument: create cannot be limited by
name (RBAC sees no name on a create), get and update only that Lease; no list, watch or delete.
*/}}
{{- define "hcloud-policy-ccm.leaseRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{{ . | quote }}]
  verbs: [get, update]
{{- end }}

{{/* The namespace/name of the policy ConfigMap. */}}
{{- define "hcloud-policy-ccm.policyConfigMap" -}}
{{- printf "%s/%s" .Release.Namespace .Values.policy.configMap.name -}}
{{- end }}

{{/*
Render-time checks: a value this chart cannot honour fails `helm install`/`helm template` with a
message that names the value and the fix, instead of a CCM that exits at start-up.
*/}}
{{- define "hcloud-policy-ccm.validate" -}}
{{- if not (has .Values.kind (list "Deployment" "DaemonSet")) -}}
{{- fail (printf "kind: %q is not supported; set it to Deployment or DaemonSet" (toString .Values.kind)) -}}
{{- end -}}
{{- if and .Values.robot.enabled .Values.networking.enabled -}}
{{- $routes := dig "HCLOUD_NETWORK_ROUTES_ENABLED" "value" "" .Values.env | toString -}}
{{- if not (has $routes (list "false" "0" "f" "F" "FALSE" "False")) -}}
{{- fail "robot.enabled with networking.enabled: Robot and routes exclude each other (the CCM would exit with \"using routes with Robot is not supported\"); set env.HCLOUD_NETWORK_ROUTES_ENABLED.value=\"false\" or robot.enabled=false" -}}
{{- end -}}
{{- end -}}
{{- if not (has .Values.policy.mode (list "enforce" "dryrun")) -}}
{{- fail (printf "policy.mode: %q is not supported; set it to enforce or dryrun" (toString .Values.policy.mode)) -}}
{{- end -}}
{{- if not (has .Values.policy.failureMode (list "closed" "open")) -}}
{{- fail (printf "policy.failureMode: %q is not supported; set it to closed or open" (toString .Values.policy.failureMode)) -}}
{{- end -}}
{{- if not (or (kindIs "invalid" .Values.leaderElect) (kindIs "bool" .Values.leaderElect)) -}}
{{- fail (printf "leaderElect: %q is not supported; set it to true, false or null (the default: off for a one-replica Deployment, as the official chart)" (toString .Values.leaderElect)) -}}
{{- end -}}
{{- if and .Values.loadBalancerClass.only (not .Values.loadBalancerClass.name) -}}
{{- fail "loadBalancerClass.only without loadBalancerClass.name: name the class to serve (for example example.com/hetzner)" -}}
{{- end -}}
{{- if not .Values.policy.configMap.name -}}
{{- fail "policy.configMap.name: empty; name the ConfigMap of policies (default hcloud-ccm-policies)" -}}
{{- end -}}
{{- if and (not (kindIs "invalid" .Values.leaderElect)) (not (kindIs "invalid" (index .Values.args "leader-elect"))) -}}
{{- fail "args.leader-elect and leaderElect are both set; keep one (leaderElect, or args.leader-elect as in the official chart)" -}}
{{- end -}}
{{- range $flag, $value := dict "policy-configmap" "policy.configMap.name" "policy-dir" "policy.configMap" "policy-mode" "policy.mode" "policy-failure-mode" "policy.failureMode" "plugin-node-labels" "plugins.nodeLabels" "plugin-load-balancer-name" "plugins.loadBalancerName" "plugin-timeout" "plugins.timeout" "plugins-optional" "plugins.optional" "node-label-resync" "plugins.nodeLabelResync" "policy-audit-interval" "policy.auditInterval" "load-balancer-class" "loadBalancerClass.name" "load-balancer-class-only" "loadBalancerClass.only" -}}
{{- if not (kindIs "invalid" (index $.Values.args $flag)) -}}
{{- fail (printf "args.%s: the chart sets --%s; use %s instead" $flag $flag $value) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.plugins.volume .Values.plugins.initContainer -}}
{{- fail "plugins.volume and plugins.initContainer are both set; the init container fills an emptyDir: keep one" -}}
{{- end -}}
{{- with .Values.plugins.initContainer -}}
{{- if not (and .image .command) -}}
{{- fail "plugins.initContainer needs image and command (for example {image: registry.example/ccm-plugins:v1, command: [cp, /modules/plugin.wasm, /plugins/]})" -}}
{{- end -}}
{{- end -}}
{{- range $key := list "plugins.nodeLabels" "plugins.loadBalancerName" -}}
{{- $file := ternary $.Values.plugins.nodeLabels $.Values.plugins.loadBalancerName (eq $key "plugins.nodeLabels") -}}
{{- if and $file (contains "/" $file) -}}
{{- fail (printf "%s: %q is a path; give the file name under /plugins (for example labels.wasm.gz)" $key $file) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The pod template shared by the Deployment and the DaemonSet. */}}
{{- define "hcloud-policy-ccm.podTemplate" -}}
metadata:
  labels:
    {{- include "hcloud-cloud-controller-manager.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "hcloud-cloud-controller-manager.name" . }}
  {{- with .Values.image.pullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- /* A DaemonSet's pods take neither priorityClassName, dnsPolicy, dnsConfig nor affinity
  from the values, as the official chart's DaemonSet (docs/reference/differences.md, "Install
  and swap"): its own full.daemonset-values.yaml sets an affinity that no node matches. */}}
  {{- $deployment := eq .Values.kind "Deployment" }}
  {{- if not $deployment }}
  priorityClassName: system-cluster-critical
  dnsPolicy: Default
  {{- else }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . | quote }}
  {{- end }}
  dnsPolicy: {{ .Values.dnsPolicy }}
  {{- with .Values.dnsConfig }}
  dnsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- end }}
  {{- if .Values.networking.enabled }}
  hostNetwork: true
  {{- end }}
  {{- with .Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  # The CCM must run before any node is initialised, on control-plane nodes too.
  tolerations:
    - key: node.cloudprovider.kubernetes.io/uninitialized
      value: "true"
      effect: NoSchedule
    - key: CriticalAddonsOnly
      operator: Exists
    - key: node-role.kubernetes.io/master
      operator: Exists
      effect: NoSchedule
    - key: node-role.kubernetes.io/control-plane
      operator: Exists
      effect: NoSchedule
    # As the official chart: no operator (Equal, empty value), which matches this valueless taint.
    - key: node.kubernetes.io/not-ready
      effect: NoExecute
    {{- with .Values.additionalTolerations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with and $deployment .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.plugins.initContainer }}
  initContainers:
    # Copies the plugin modules into the plugins emptyDir (plugins.initContainer).
    - name: copy-plugins
      image: {{ .image | quote }}
      command:
        {{- toYaml .command | nindent 8 }}
      volumeMounts:
        - name: plugins
          mountPath: /plugins
      {{- with $.Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  {{- end }}
  containers:
    # The official chart's container name: overlays, `kubectl set image` and log queries that
    # name it keep working.
    - name: hcloud-cloud-controller-manager
      image: {{ include "hcloud-policy-ccm.image" . }}
      {{- /* The official chart's flags first, in its order (args by key, the network flags, the
      one-replica --leader-elect=false), so an overlay's index-based patch of the official
      manifests (args/6 is --cluster-cidr in ccm-networks.yaml) hits the same flag here; this
      chart's own flags follow. */}}
      args:
        {{- range $key, $value := .Values.args }}
        {{- if kindIs "bool" $value }}
        - {{ printf "--%s=%t" $key $value | quote }}
        {{- else if not (kindIs "invalid" $value) }}
        - {{ printf "--%s%s" $key (ternary "" (printf "=%v" $value) (eq (toString $value) "")) | quote }}
        {{- end }}
        {{- end }}
        {{- if .Values.networking.enabled }}
        - "--allocate-node-cidrs=true"
        - {{ printf "--cluster-cidr=%s" .Values.networking.clusterCIDR | quote }}
        {{- end }}
        {{- if kindIs "bool" .Values.leaderElect }}
        - {{ printf "--leader-elect=%t" .Values.leaderElect | quote }}
        {{- else if and $deployment (eq (int .Values.replicaCount) 1) }}
        - "--leader-elect=false"
        {{- end }}
        - {{ printf "--policy-configmap=%s" (include "hcloud-policy-ccm.policyConfigMap" .) | quote }}
        - {{ printf "--policy-mode=%s" .Values.policy.mode | quote }}
        - {{ printf "--policy-failure-mode=%s" .Values.policy.failureMode | quote }}
        {{- with .Values.plugins.nodeLabels }}
        - {{ printf "--plugin-node-labels=/plugins/%s" . | quote }}
        {{- end }}
        {{- with .Values.plugins.loadBalancerName }}
        - {{ printf "--plugin-load-balancer-name=/plugins/%s" . | quote }}
        {{- end }}
        {{- with .Values.plugins.timeout }}
        - {{ printf "--plugin-timeout=%s" . | quote }}
        {{- end }}
        {{- with .Values.plugins.nodeLabelResync }}
        - {{ printf "--node-label-resync=%s" . | quote }}
        {{- end }}
        {{- with .Values.policy.auditInterval }}
        - {{ printf "--policy-audit-interval=%s" . | quote }}
        {{- end }}
        {{- if .Values.plugins.optional }}
        - "--plugins-optional=true"
        {{- end }}
        {{- with .Values.loadBalancerClass.name }}
        - {{ printf "--load-balancer-class=%s" . | quote }}
        {{- end }}
        {{- if .Values.loadBalancerClass.only }}
        - "--load-balancer-class-only=true"
        {{- end }}
        {{- with include "hcloud-policy-ccm.admission.args" . | trim }}
        {{- . | nindent 8 }}
        {{- end }}
      env:
        {{- range $key, $value := .Values.env }}
        {{- if not (kindIs "invalid" $value) }}
        - name: {{ $key }}
          {{- tpl (toYaml $value) $ | nindent 10 }}
        {{- end }}
        {{- end }}
        {{- if .Values.networking.enabled }}
        - name: HCLOUD_NETWORK
          {{- tpl (toYaml .Values.networking.network) . | nindent 10 }}
        {{- end }}
        {{- if not .Values.monitoring.enabled }}
        - name: HCLOUD_METRICS_ENABLED
          value: "false"
        {{- end }}
        {{- if .Values.robot.enabled }}
        - name: ROBOT_ENABLED
          value: "true"
        {{- end }}
      ports:
        {{- $port := include "hcloud-policy-ccm.securePort" . | int }}
        {{- if gt $port 0 }}
        - name: https
          containerPort: {{ $port }}
          protocol: TCP
        {{- end }}
        {{- if .Values.monitoring.enabled }}
        - name: metrics
          containerPort: 8233
        {{- end }}
        {{- with include "hcloud-policy-ccm.admission.port" . | trim }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- /* No probes when the secure port listens on loopback only (args.bind-address): the
      kubelet probes the pod IP and would restart a healthy pod. */}}
      {{- $bind := index .Values.args "bind-address" | default "" | toString }}
      {{- $loopback := or (hasPrefix "127." $bind) (eq $bind "::1") (eq $bind "localhost") }}
      {{- if and .Values.probes.enabled (gt $port 0) (not $loopback) }}
      # /healthz is in the secure port's always-allowed paths: no token needed.
      livenessProbe:
        httpGet:
          path: /healthz
          port: {{ $port }}
          scheme: HTTPS
        initialDelaySeconds: 15
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 6
      readinessProbe:
        httpGet:
          path: /healthz
          port: {{ $port }}
          scheme: HTTPS
        periodSeconds: 10
        timeoutSeconds: 5
      {{- end }}
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: plugins
          mountPath: /plugins
          readOnly: true
        {{- with include "hcloud-policy-ccm.admission.volumeMount" . | trim }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: plugins
      {{- if .Values.plugins.volume }}
      {{- toYaml .Values.plugins.volume | nindent 6 }}
      {{- else if .Values.plugins.initContainer }}
      emptyDir: {}
      {{- else }}
      configMap:
        name: {{ .Values.plugins.configMap }}
        optional: true
      {{- end }}
    {{- with include "hcloud-policy-ccm.admission.volume" . | trim }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
