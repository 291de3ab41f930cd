{{/*
Names, labels and the pieces more than one template needs.
*/}}

{{- define "grpo-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Release-scoped name of every object; cut to leave room for the suffixes below ("-cleanup").
*/}}
{{- define "grpo-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "grpo-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "grpo-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "grpo-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "grpo-operator.labels" -}}
helm.sh/chart: {{ include "grpo-operator.chart" . }}
{{ include "grpo-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: grpo-operator
{{- end }}

{{- define "grpo-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "grpo-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "grpo-operator.cleanupName" -}}
{{- printf "%s-cleanup" (include "grpo-operator.fullname" .) }}
{{- end }}

{{/*
The operator image: a digest wins over the tag; the tag defaults to the chart's appVersion.
*/}}
{{- define "grpo-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
A Kubernetes quantity as a plain number (512Mi -> 536870912, 100m -> 0.1), for comparing two of
them; values.schema.json has already checked the form.
*/}}
{{- define "grpo-operator.quantityValue" -}}
{{- $text := toString . }}
{{- $number := regexFind "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)" $text }}
{{- $suffix := trimPrefix $number $text }}
{{- if regexMatch "^[eE]" $suffix }}
{{- float64 $text }}
{{- else }}
{{- $scale := dict "" 1.0 "n" 1e-9 "u" 1e-6 "m" 1e-3 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- mulf (float64 $number) (get $scale $suffix) }}
{{- end }}
{{- end }}

{{/*
A container's requests against its limits: the API server refuses a pod whose request is above
its limit only when the ReplicaSet or Job makes it, after the install has "succeeded"; the chart
refuses the values instead. Call with (list "values.path" .Values.x.resources).
*/}}
{{- define "grpo-operator.checkResources" -}}
{{- $path := index . 0 }}
{{- $resources := index . 1 | default dict }}
{{- $limits := $resources.limits | default dict }}
{{- range $name, $request := $resources.requests | default dict }}
{{- if hasKey $limits $name }}
{{- $limit := get $limits $name }}
{{- if gt (float64 (include "grpo-operator.quantityValue" $request)) (float64 (include "grpo-operator.quantityValue" $limit)) }}
{{- fail (printf "%s.requests.%s (%v) is above %s.limits.%s (%v): a container may not request more than its limit" $path $name $request $path $name $limit) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The namespaces the operator watches: none listed means the whole cluster.
*/}}
{{- define "grpo-operator.watchNamespaces" -}}
{{- if .Values.rbac.clusterWide }}
{{- if .Values.rbac.namespaces }}
{{- fail "rbac.namespaces lists the namespaces of a namespaced install: set rbac.clusterWide=false with it (clusterWide watches every namespace)" }}
{{- end }}
{{- list | toJson }}
{{- else }}
{{- if not .Values.rbac.namespaces }}
{{- fail "rbac.namespaces must list at least one namespace when rbac.clusterWide is false" }}
{{- end }}
{{- .Values.rbac.namespaces | uniq | toJson }}
{{- end }}
{{- end }}

{{/*
The operator's settings file (operator/grpo_operator/config.py, camelCase keys). Profiles are
merged per accelerator and per key over the operator's built-in ones.
*/}}
{{- define "grpo-operator.settings" -}}
{{- $settings := deepCopy .Values.settings }}
{{- $_ := set $settings "namespaces" (include "grpo-operator.watchNamespaces" . | fromJsonArray) }}
{{- $_ = set $settings "profiles" .Values.profiles }}
{{- $_ = set $settings "leaseName" (include "grpo-operator.fullname" .) }}
{{- $operator := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace)) "podSelector" (dict "matchLabels" (merge (include "grpo-operator.selectorLabels" . | fromYaml) (dict "app.kubernetes.io/component" "operator"))) }}
{{- $_ = set $settings "rayClients" (append (.Values.settings.rayClients | default list) $operator) }}
{{- $_ = set $settings "leaseNamespace" .Release.Namespace }}
{{- toYaml $settings }}
{{- end }}

{{/*
The pod and container hardening shared by the operator and the cleanup hook.
*/}}
{{- define "grpo-operator.podSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- with .Values.podSecurityContext }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "grpo-operator.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
What the operator does with the API, and nothing more. Shared by the ClusterRole and the
per-namespace Roles. Every rule says why it exists.
*/}}
{{- define "grpo-operator.operatorRules" -}}
# GRPOJobs: watched and read by the reconciler. The operator never writes a job's spec or
# metadata (no annotations, no finalizer), only its status (next rule).
- apiGroups: ["grpo.dev"]
  resources: ["grpojobs"]
  verbs: ["get", "list", "watch"]
# GRPOJob status: phase, conditions, attempt and outputs are the operator's to write. Holding
# get/patch here is also what lets it grant the same to each job's trainer Role.
- apiGroups: ["grpo.dev"]
  resources: ["grpojobs/status"]
  verbs: ["get", "patch"]
# Children carry an owner reference with blockOwnerDeletion; clusters that enable the
# OwnerReferencesPermissionEnforcement admission plugin require update on the owner's finalizers.
- apiGroups: ["grpo.dev"]
  resources: ["grpojobs/finalizers"]
  verbs: ["update"]
# One KubeRay RayJob per attempt: server-side applied (create + patch), followed through its
# events (list/watch), and deleted when an attempt is replaced or the job is suspended.
- apiGroups: ["ray.io"]
  resources: ["rayjobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# The resolved job spec the trainer reads, server-side applied.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "patch"]
{{- if .Values.rbac.checkSecrets }}
# The Secrets a job names (hub credentials, the W&B key, env valueFrom): read once before its
# first RayJob, only to see that each exists and holds the key named, so a missing one is a
# condition on the job instead of a pod stuck in ContainerCreating. Values are never kept or logged.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
# The checkpoint claim: created once, read for its access modes, never changed or deleted.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "create"]
# Each job's trainer identity, server-side applied.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create", "patch"]
# The trainer's Role (get/patch on its own job's status) and its RoleBinding, server-side applied.
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "create", "patch"]
# Each job's NetworkPolicy (its Ray pods reachable only from each other, KubeRay and the
# operator), server-side applied.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "create", "patch"]
{{- if .Values.rbac.clusterWide }}
# A job's priorityClassName must name a PriorityClass, or KubeRay's pods are refused forever:
# looked up before anything is created (namespaced installs grant nothing cluster-wide and skip it).
- apiGroups: ["scheduling.k8s.io"]
  resources: ["priorityclasses"]
  verbs: ["get"]
# Likewise a job's workloadPriorityClass must name a Kueue WorkloadPriorityClass, or Kueue never
# admits its Workload and the job reads Queued for ever: looked up (by name, never listed) before
# its first RayJob. Without Kueue installed the rule grants nothing and the check is skipped.
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloadpriorityclasses"]
  verbs: ["get"]
{{- end }}
# Events on GRPOJobs for every phase change and invalid spec; kopf posts new ones only. Listed
# (Warning ones) while an attempt's pods do not start: the kubelet's FailedMount, KubeRay's
# FailedToCreateHeadPod (Pod Security) are the reasons the job's status then carries.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "list"]
# An attempt's pods, listed by label while its Ray cluster has not started: their scheduling and
# container states say why (unschedulable, image pull back-off).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
{{- end }}

{{/*
The GRPOJob status fields only the operator may write (status.OPERATOR_STATUS_FIELDS in
operator/grpo_operator/api/v1alpha1/status.py; tests/unit/chart holds the two together).
*/}}
{{- define "grpo-operator.operatorStatusFields" -}}
{{- list "phase" "conditions" "attempt" "failedAttempts" "rayJobName" "rayClusterName" "dashboardURL" "startTime" "completionTime" "observedGeneration" "eta" | toJson }}
{{- end }}

{{/*
Leader election: the operator's Lease, in the release namespace only.
*/}}
{{- define "grpo-operator.leaderRules" -}}
# Create the Lease the first time a replica starts (create cannot be limited to a name).
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
# Read, renew and take over this release's Lease, and no other.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "grpo-operator.fullname" . | quote }}]
  verbs: ["get", "update"]
{{- end }}

{{/*
What the pre-delete hook needs: delete the release's GRPOJobs and watch their RayJobs go.
*/}}
{{- define "grpo-operator.cleanupRules" -}}
# Find and delete the GRPOJobs the release watches.
- apiGroups: ["grpo.dev"]
  resources: ["grpojobs"]
  verbs: ["list", "delete"]
# Wait until the garbage collector and KubeRay have removed their RayJobs.
- apiGroups: ["ray.io"]
  resources: ["rayjobs"]
  verbs: ["list"]
{{- end }}

{{/*
The cleanup hook's supporting objects exist only while the hook runs, and before its Job.
*/}}
{{- define "grpo-operator.cleanupHook" -}}
helm.sh/hook: pre-delete
helm.sh/hook-weight: "-5"
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
