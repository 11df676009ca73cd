{{/* <release>-<suffix>: every object's name, as kustomize's namePrefix gave them before. */}}
{{- define "slurmpod.name" -}}
{{- printf "%s-%s" .root.Release.Name .suffix | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The PodDisruptionBudget API the server serves. `helm template` lists every API it knows whatever
the version, so the kube version decides there (`--kube-version 1.20.2` renders policy/v1beta1). */}}
{{- define "slurmpod.pdbApiVersion" -}}
{{- if and (.Capabilities.APIVersions.Has "policy/v1") (semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version) -}}
policy/v1
{{- else -}}
policy/v1beta1
{{- end -}}
{{- end -}}

{{/* Labels of every object; selectors use the same name and instance. */}}
{{- define "slurmpod.labels" -}}
app.kubernetes.io/name: slurmpod
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* An image of Slinky's {repository, tag, digest} shape: a set digest wins. */}}
{{- define "slurmpod.image" -}}
{{- $img := .image -}}
{{- if not $img.repository -}}{{- fail (printf "%s.repository: must be set" .field) -}}{{- end -}}
{{- if $img.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" (toString $img.digest)) -}}
{{- fail (printf "%s.digest: %q is not sha256:<64 hex digits>" .field (toString $img.digest)) -}}
{{- end -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- if not $img.tag -}}{{- fail (printf "%s.tag: must be set when digest is empty" .field) -}}{{- end -}}
{{- printf "%s:%s" $img.repository (toString $img.tag) -}}
{{- end -}}
{{- end -}}

{{- define "slurmpod.secretName" -}}
{{- $s := index .root.Values.secrets .key -}}
{{- if and $s $s.name -}}{{ $s.name }}{{- else -}}{{ include "slurmpod.name" (dict "root" .root "suffix" .default) }}{{- end -}}
{{- end -}}

{{/* Pod-level settings every role shares. */}}
{{- define "slurmpod.podCommon" -}}
terminationGracePeriodSeconds: {{ .grace }}
{{- if .serviceAccount }}
# The controller's daemons use the API (values topology.apiAccess, k8sSync.enabled, nodesets' autoscaling).
serviceAccountName: {{ .serviceAccount }}
automountServiceAccountToken: true
{{- else }}
# Pods never talk to the API server; no Service env vars (Slurm uses DNS).
automountServiceAccountToken: false
{{- end }}
enableServiceLinks: false
# The runtime's default seccomp profile for every container (docs/security.md).
# Ref: https://kubernetes.io/docs/tutorials/security/seccomp/
securityContext:
  seccompProfile: {type: RuntimeDefault}
# Bare pod names resolve through the headless Service: <release>-slurm.<namespace>.svc.cluster.local.
# Ref: https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/#pod-dns-config
dnsConfig:
  searches:
    - {{ include "slurmpod.name" (dict "root" .root "suffix" "slurm") }}.{{ .root.Release.Namespace }}.svc.cluster.local
{{- end -}}

{{/* The env contract of every role (slurmpod/well_known.py). */}}
{{- define "slurmpod.env" -}}
# Ref: https://kubernetes.io/docs/concepts/workloads/pods/downward-api/
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
- name: POD_UID
  valueFrom: {fieldRef: {fieldPath: metadata.uid}}
- name: NODE_NAME
  valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
- name: HOST_IP
  valueFrom: {fieldRef: {fieldPath: status.hostIP}}
- name: SLURMPOD_CPU_LIMIT
  valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}
- name: SLURMPOD_MEMORY_LIMIT
  valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}
- name: SLURMPOD_CPU_REQUEST
  valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}
- name: SLURMPOD_MEMORY_REQUEST
  valueFrom: {resourceFieldRef: {resource: requests.memory, divisor: 1Mi}}
- name: SLURMPOD_CLUSTER_NAME
  valueFrom: {fieldRef: {fieldPath: "metadata.labels['app.kubernetes.io/instance']"}}
# $(VAR) expands variables defined above.
# Ref: https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/
- name: SLURMPOD_CONTROLLER
  value: $(SLURMPOD_CLUSTER_NAME)-controller-0
- name: SLURMPOD_GRACE_SECONDS
  value: {{ .grace | toString | quote }}  # = terminationGracePeriodSeconds
- name: SLURMPOD_LOG_FORMAT
  value: json
# munge | slurm: which key the entrypoint installs and which daemons it runs.
# Ref: https://kubernetes.io/docs/tasks/configure-pod-container/configure-pod-configmap/#define-container-environment-variables-using-configmap-data
- name: SLURMPOD_AUTH
  valueFrom: {configMapKeyRef: {name: {{ include "slurmpod.name" (dict "root" .root "suffix" "cluster") }}, key: auth}}
{{- end -}}

{{- define "slurmpod.probes" -}}
# Ready = the Slurm node is usable; live = the daemons answer.
readinessProbe:
  exec: {command: [slurmpod, probe, ready]}
  periodSeconds: 10
  timeoutSeconds: 8
  failureThreshold: 3
livenessProbe:
  exec: {command: [slurmpod, probe, live]}
  initialDelaySeconds: 60
  periodSeconds: 30
  timeoutSeconds: 10
  failureThreshold: 3
{{- end -}}

{{- define "slurmpod.keyMounts" -}}
- name: podinfo
  mountPath: /etc/podinfo
  readOnly: true
- name: munge-key
  mountPath: /run/secrets/slurmpod/munge
  readOnly: true
- name: slurm-key
  mountPath: /run/secrets/slurmpod/slurm
  readOnly: true
{{- end -}}

{{- define "slurmpod.keyVolumes" -}}
- name: podinfo
  downwardAPI:
    items:
      - path: labels
        fieldRef: {fieldPath: metadata.labels}
      - path: annotations
        fieldRef: {fieldPath: metadata.annotations}
# Only the key of the cluster's auth type is needed; a missing optional Secret mounts as an
# empty directory. Ref: https://kubernetes.io/docs/concepts/storage/volumes/#secret
- name: munge-key
  secret:
    secretName: {{ include "slurmpod.secretName" (dict "root" .root "key" "munge" "default" "munge") }}
    defaultMode: 0400
    optional: true
- name: slurm-key
  secret:
    secretName: {{ include "slurmpod.secretName" (dict "root" .root "key" "slurmKey" "default" "slurm-key") }}
    defaultMode: 0400
    optional: true
{{- end -}}


{{/* auth/jwt's key (restapi.enabled): slurmctld and slurmdbd install it for SlurmUser at start. */}}
{{- define "slurmpod.jwtVolume" -}}
- name: jwt-key
  secret:
    secretName: {{ include "slurmpod.secretName" (dict "root" . "key" "jwtKey" "default" "jwt-key") }}
    defaultMode: 0400
{{- end -}}


{{/* Users from the site's directory (docs/directory.md): SSSD on the roles `sssd.roles` names, with the
site's sssd.conf from the Secret `sssd.secretName` (data key sssd.conf) and, when set, the LDAPS CA bundle
from the ConfigMap `sssd.caConfigMap`. Called with (dict "root" $ "role" ROLE); nothing when off. */}}
{{- define "slurmpod.sssdOn" -}}
{{- $s := .root.Values.sssd -}}
{{- if not (kindIs "bool" $s.enabled) }}{{ fail (printf "sssd.enabled: %q: must be true or false" (toString $s.enabled)) }}{{ end -}}
{{- if not (kindIs "bool" $s.mkhomedir) }}{{ fail (printf "sssd.mkhomedir: %q: must be true or false" (toString $s.mkhomedir)) }}{{ end -}}
{{- if not (kindIs "slice" $s.roles) }}{{ fail (printf "sssd.roles: %q: must be a list of login, worker, controller, restapi" (toString $s.roles)) }}{{ end -}}
{{- range $s.roles }}{{ if not (has . (list "login" "worker" "controller" "restapi")) }}{{ fail (printf "sssd.roles: %q: must be login, worker, controller or restapi" (toString .)) }}{{ end }}{{ end -}}
{{- if $s.enabled -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$" (toString $s.secretName)) }}{{ fail (printf "sssd.secretName: %q: must name the Secret holding sssd.conf (a DNS subdomain name)" (toString $s.secretName)) }}{{ end -}}
{{- if and $s.caConfigMap (not (regexMatch "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$" (toString $s.caConfigMap))) }}{{ fail (printf "sssd.caConfigMap: %q: must be a ConfigMap name (a DNS subdomain name)" (toString $s.caConfigMap)) }}{{ end -}}
{{- if has .role $s.roles }}on{{ end -}}
{{- end -}}
{{- end -}}

{{- define "slurmpod.sssdEnv" -}}
{{- if and (include "slurmpod.sssdOn" .) (has .role (list "login" "worker")) }}
- name: SLURMPOD_SSSD_MKHOMEDIR
  value: {{ .root.Values.sssd.mkhomedir | toString | quote }}
{{- end -}}
{{- end -}}

{{- define "slurmpod.sssdMounts" -}}
{{- if include "slurmpod.sssdOn" . }}
- name: sssd-conf
  mountPath: /run/secrets/slurmpod/sssd
  readOnly: true
{{- if .root.Values.sssd.caConfigMap }}
- name: ldap-ca
  mountPath: /etc/slurmpod/ldap-ca
  readOnly: true
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Not optional: a release that asks for SSSD never starts a pod without it. */}}
{{- define "slurmpod.sssdVolumes" -}}
{{- if include "slurmpod.sssdOn" . }}
- name: sssd-conf
  secret:
    secretName: {{ .root.Values.sssd.secretName }}
    defaultMode: 0400
    items: [{key: sssd.conf, path: sssd.conf}]
{{- if .root.Values.sssd.caConfigMap }}
- name: ldap-ca
  configMap:
    name: {{ .root.Values.sssd.caConfigMap }}
    defaultMode: 0444
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A worker nodeset's StatefulSet: `<release>-worker` for nodeset `workers`, `<release>-worker-<name>` else.
Called with (dict "root" $ "name" NODESET). */}}
{{- define "slurmpod.workerName" -}}
{{- include "slurmpod.name" (dict "root" .root "suffix" (ternary "worker" (printf "worker-%s" .name) (eq .name "workers"))) -}}
{{- end -}}

{{/* A nodeset's autoscaling (values nodesets.<name>.autoscaling, docs/autoscaling.md), checked and with
its defaults, as JSON for fromJson. Called with (dict "name" NODESET "ns" NODESET_VALUES); fails naming
the key of a bad value. */}}
{{- define "slurmpod.autoscaling" -}}
{{- $a := .ns.autoscaling | default dict -}}
{{- $where := printf "nodesets.%s.autoscaling" .name -}}
{{- if not (kindIs "map" $a) }}{{ fail (printf "%s: %q: must be a mapping" $where (toString $a)) }}{{ end -}}
{{- range $key, $_ := $a -}}
{{- if not (has $key (list "enabled" "mode" "minReplicas" "maxReplicas" "idleSeconds" "step")) -}}
{{- fail (printf "%s.%s: unknown key (allowed: enabled, mode, minReplicas, maxReplicas, idleSeconds, step)" $where $key) -}}
{{- end -}}
{{- end -}}
{{- $out := dict "enabled" false "mode" "slurmpod" "minReplicas" 0 "maxReplicas" 4 "idleSeconds" 300 "step" 1 -}}
{{- if hasKey $a "enabled" -}}
{{- if not (kindIs "bool" $a.enabled) }}{{ fail (printf "%s.enabled: %q: must be true or false" $where (toString $a.enabled)) }}{{ end -}}
{{- $_ := set $out "enabled" $a.enabled -}}
{{- end -}}
{{- if hasKey $a "mode" -}}
{{- if not (has (toString $a.mode) (list "slurmpod" "keda")) }}{{ fail (printf "%s.mode: %q: must be slurmpod or keda" $where (toString $a.mode)) }}{{ end -}}
{{- $_ := set $out "mode" (toString $a.mode) -}}
{{- end -}}
{{- range $key, $low := dict "minReplicas" 0 "maxReplicas" 1 "idleSeconds" 0 "step" 1 -}}
{{- if hasKey $a $key -}}
{{- $v := toString (index $a $key) -}}
{{- if not (and (regexMatch "^[0-9]{1,6}$" $v) (ge (atoi $v) $low)) -}}
{{- fail (printf "%s.%s: %q: must be a whole number >= %d" $where $key $v $low) -}}
{{- end -}}
{{- $_ := set $out $key (atoi $v) -}}
{{- end -}}
{{- end -}}
{{- if gt $out.minReplicas $out.maxReplicas -}}
{{- fail (printf "%s.minReplicas: %d: must not exceed maxReplicas (%d)" $where $out.minReplicas $out.maxReplicas) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* A nodeset's /dev/shm (values nodesets.<name>.sharedMemory, docs/task-environment.md#shared-memory-devshm),
checked and with its defaults, as JSON for fromJson. Called with (dict "name" NODESET "ns" NODESET_VALUES);
fails naming the key of a bad value. sizeLimit is a Kubernetes quantity of bytes, or "" for none.
Ref: https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/ */}}
{{- define "slurmpod.sharedMemory" -}}
{{- $m := .ns.sharedMemory | default dict -}}
{{- $where := printf "nodesets.%s.sharedMemory" .name -}}
{{- if not (kindIs "map" $m) }}{{ fail (printf "%s: %q: must be a mapping" $where (toString $m)) }}{{ end -}}
{{- range $key, $_ := $m -}}
{{- if not (has $key (list "enabled" "sizeLimit")) -}}
{{- fail (printf "%s.%s: unknown key (allowed: enabled, sizeLimit)" $where $key) -}}
{{- end -}}
{{- end -}}
{{- $out := dict "enabled" true "sizeLimit" "" -}}
{{- if hasKey $m "enabled" -}}
{{- if not (kindIs "bool" $m.enabled) }}{{ fail (printf "%s.enabled: %q: must be true or false" $where (toString $m.enabled)) }}{{ end -}}
{{- $_ := set $out "enabled" $m.enabled -}}
{{- end -}}
{{- if hasKey $m "sizeLimit" -}}
{{- $v := "" -}}
{{- if not (kindIs "invalid" $m.sizeLimit) }}{{ $v = toString $m.sizeLimit }}{{ end -}}
{{- if not (regexMatch "^([1-9][0-9]{0,14}(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?)?$" $v) -}}
{{- fail (printf "%s.sizeLimit: %q: must be a size such as 64Gi or 512Mi (whole number, binary or decimal suffix), or empty" $where $v) -}}
{{- end -}}
{{- $_ := set $out "sizeLimit" $v -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The StatefulSets slurmpod's autoscaler sets the replicas of (enabled nodesets with autoscaling on in
mode slurmpod), comma-separated; "" when none. */}}
{{- define "slurmpod.autoscaled" -}}
{{- $names := list -}}
{{- range $name, $ns := .Values.nodesets -}}
{{- if $ns.enabled -}}
{{- $a := include "slurmpod.autoscaling" (dict "name" $name "ns" $ns) | fromJson -}}
{{- if and $a.enabled (eq $a.mode "slurmpod") -}}
{{- $names = append $names (include "slurmpod.workerName" (dict "root" $ "name" $name)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* Fails naming .field unless .value is a whole number (not a string) from .min to .max. */}}
{{- define "slurmpod.wholeNumber" -}}
{{- $v := .value -}}
{{- if not (and (or (kindIs "int64" $v) (kindIs "float64" $v)) (regexMatch "^[0-9]+$" (toString $v))
      (ge (int64 $v) (int64 .min)) (le (int64 $v) (int64 .max))) -}}
{{- fail (printf "%s: %q: must be a whole number, %d to %d" .field (toString $v) (int64 .min) (int64 .max)) -}}
{{- end -}}
{{- end -}}

{{/* A nodeset's pod count while its autoscaling is off (values nodesets.<name>.replicas), checked: a whole
number up to 65000, MaxNodeCount's own bound. Called with (dict "name" NODESET "ns" VALUES). */}}
{{- define "slurmpod.replicas" -}}
{{- include "slurmpod.wholeNumber" (dict "field" (printf "nodesets.%s.replicas" .name) "value" .ns.replicas "min" 0 "max" 65000) -}}
{{- int64 .ns.replicas -}}
{{- end -}}

{{/* The most Slurm nodes the nodesets can bring (each one's maxReplicas while autoscaling is on, its
replicas otherwise), and slurm.conf MaxNodeCount: values cluster.maxNodes, or 1024 or that total when
larger. Slurm refuses a dynamic node past MaxNodeCount. Ref: https://slurm.schedmd.com/slurm.conf.html#OPT_MaxNodeCount */}}
{{- define "slurmpod.maxNodes" -}}
{{- $total := 0 -}}
{{- range $name, $ns := .Values.nodesets -}}
{{- if $ns.enabled -}}
{{- $a := include "slurmpod.autoscaling" (dict "name" $name "ns" $ns) | fromJson -}}
{{- $total = add $total (ternary (int64 $a.maxReplicas) (int64 (include "slurmpod.replicas" (dict "name" $name "ns" $ns))) $a.enabled) -}}
{{- end -}}
{{- end -}}
{{- $set := .Values.cluster.maxNodes -}}
{{- if kindIs "invalid" $set -}}
{{- if gt (int64 $total) 65000 -}}
{{- fail (printf "nodesets: %d pods together, more than Slurm's 65000 nodes (MaxNodeCount)" (int64 $total)) -}}
{{- end -}}
{{- max 1024 $total -}}
{{- else -}}
{{- include "slurmpod.wholeNumber" (dict "field" "cluster.maxNodes" "value" $set "min" 1 "max" 65000) -}}
{{- if lt (int64 $set) (int64 $total) -}}
{{- fail (printf "cluster.maxNodes: %d: below the nodesets' pods together (%d): not all of them could register as Slurm nodes" (int64 $set) (int64 $total)) -}}
{{- end -}}
{{- int64 $set -}}
{{- end -}}
{{- end -}}

{{/* Fails naming .field unless .labels is a map of string values (a label value is a string; `1` unquoted is not). */}}
{{- define "slurmpod.stringLabels" -}}
{{- if not (kindIs "map" (.labels | default dict)) }}{{ fail (printf "%s: %q: must be a map of labels" .field (toString .labels)) }}{{ end -}}
{{- range $k, $v := .labels }}
{{- if not (and (kindIs "string" $v) (regexMatch "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$" $v)) -}}
{{- fail (printf "%s.%s: %q: must be a label value: a quoted string of letters, digits, - _ . (63 at most)" $.field $k (toString $v)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A nodeset's extra environment for slurmd and the steps it starts (values nodesets.<name>.slurmd.env,
a mapping NAME: value), as container env entries after the chart's own. Called with (dict "root" $
"name" NODESET "env" MAPPING). A name must be a shell variable name, not SLURMPOD_* and none of the names
slurmpod.env sets; a value is a string, number or boolean on one line. Kubernetes expands $(NAME) in a value; $$ is
a literal $. Ref: https://kubernetes.io/docs/tasks/inject-data-application/define-environment-variable-container/ */}}
{{- define "slurmpod.slurmdEnv" -}}
{{- $where := printf "nodesets.%s.slurmd.env" .name -}}
{{- $ours := list -}}
{{- range include "slurmpod.env" (dict "root" .root "grace" 0) | fromYamlArray }}{{ $ours = append $ours .name }}{{ end -}}
{{- $env := .env | default dict -}}
{{- if not (kindIs "map" $env) }}{{ fail (printf "%s: %q: must be a mapping of NAME: value" $where (toString $env)) }}{{ end -}}
{{- range $key := keys $env | sortAlpha }}
{{- $value := get $env $key -}}
{{- if not (regexMatch "^[A-Za-z_][A-Za-z0-9_]{0,127}$" $key) -}}
{{- fail (printf "%s: %q: a name must be letters, digits and _, not starting with a digit" $where $key) -}}
{{- end -}}
{{- if or (hasPrefix "SLURMPOD_" $key) (has $key $ours) -}}
{{- fail (printf "%s.%s: set by the chart itself (its values set it)" $where $key) -}}
{{- end -}}
{{- if not (or (kindIs "string" $value) (kindIs "bool" $value) (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value)) -}}
{{- fail (printf "%s.%s: must be a string, number or boolean" $where $key) -}}
{{- end -}}
{{- if regexMatch "[\\x00-\\x1f\\x7f]" (toString $value) -}}
{{- fail (printf "%s.%s: %q: no control characters (line breaks included)" $where $key (toString $value)) -}}
{{- end }}
- {name: {{ $key }}, value: {{ toString $value | quote }}}
{{- end -}}
{{- end -}}
