#!/usr/bin/env bash
# lab/lib/kubelet.bash — the kubelet stand-in of a lab in Kubernetes mode
# (lab/lib/kube.bash): one process for every node of the lab, started by
# dl_kubelet_start, stopped by dl_down. It does, for the lab's nodes, what a kubelet and its container
# runtime do to a pod's network, and nothing else (no containers run: a pod is
# a netns):
#   - a pod scheduled on a lab node (spec.nodeName nodeN, not hostNetwork) gets
#     a netns and dpu-cni ADD with K8S_POD_NAMESPACE, K8S_POD_NAME and
#     K8S_POD_UID in CNI_ARGS, so the agent's "pod scheduled on this node"
#     check sees the real pod; then its status gets phase Running, podIP(s),
#     hostIP and Ready (which the fake's EndpointSlice controller reads). A
#     failed ADD is logged and retried 2 s later, as a kubelet retries a
#     sandbox.
#   - a pod being deleted (deletionTimestamp), gone, or recreated with another
#     uid gets dpu-cni DEL and its netns removed; a pod being deleted is then
#     deleted with grace 0 and its uid as precondition (what a kubelet does once
#     the pod has stopped), so `kubectl delete pod` returns.
# It polls the pod list every 0.5 s with curl (cheaper than a watch in bash and
# enough for a lab). State: $DL_DIR/kubelet/pods/NS.NAME ("N UID"), log:
# $DL_DIR/kubelet/kubelet.log.
#   bash lab/lib/kubelet.bash DL_DIR/lab.env
set -uo pipefail
env_file=$1
lab_dir=$(dirname "$env_file")
DPU_BUILD_DIR=$(sed -n 's/^DPU_BUILD_DIR=//p' "$env_file")
DL_POD_CIDR_LEN=$(sed -n 's/^DL_POD_CIDR_LEN=//p' "$env_file")
DL_DUAL_STACK=$(sed -n 's/^DL_DUAL_STACK=//p' "$env_file")
DL_RUN_DIR=$(dirname "$lab_dir")
DL_QUIET=1
export DPU_BUILD_DIR DL_POD_CIDR_LEN DL_DUAL_STACK DL_RUN_DIR
source "$(dirname "$(readlink -f "$0")")/lab.bash"
dl_init "$(basename "$lab_dir")" || exit 2
state=$DL_DIR/kubelet/pods
mkdir -p "$state"
log() { echo "$(date +%H:%M:%S.%3N) $*"; }
trap 'log "stopping"; exit 0' TERM INT

declare -A retry_at=()
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

set_running() {  # NS NAME N IP
  local body ip6=""
  # Dual stack: both of the pod's addresses, IPv4 first (the cluster's first family), as a kubelet reports them.
  dl_dual_stack && ip6=$(dl_pod_ip6 "$3" "$1.$2")
  body=$(jq -nc --arg ip "$4" --arg ip6 "$ip6" --arg host "$(dl_tunnel_ip "$3")" --arg t "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    '{status: {phase: "Running", podIP: $ip, podIPs: ([{ip: $ip}] + (if $ip6 == "" then [] else [{ip: $ip6}] end)),
      hostIP: $host, hostIPs: [{ip: $host}], startTime: $t,
      conditions: [{type: "Initialized", status: "True", lastTransitionTime: $t},
                   {type: "Ready", status: "True", lastTransitionTime: $t},
                   {type: "ContainersReady", status: "True", lastTransitionTime: $t},
                   {type: "PodScheduled", status: "True", lastTransitionTime: $t}]}}')
  DL_KUBE_CTYPE=application/merge-patch+json dl_kube_api PATCH "/api/v1/namespaces/$1/pods/$2/status" "$body" |
    jq -e '.status.phase == "Running"' >/dev/null
}

plumb() {  # NS NAME UID N
  local ns=$1 name=$2 uid=$3 n=$4 key=$1.$2 ip
  local t
  t=$(now_ms)
  [ "${retry_at[$key]:-0}" -le "$t" ] || return 0
  if ip=$(DL_K8S_NAMESPACE=$ns DL_K8S_NAME=$name DL_K8S_UID=$uid dl_pod_add "$n" "$key" 2>&1); then
    echo "$n $uid" > "$state/$key"
    unset "retry_at[$key]"
    log "pod $ns/$name on node$n: CNI ADD gave $ip"
    set_running "$ns" "$name" "$n" "$ip" || log "pod $ns/$name: could not set its status"
  else
    retry_at[$key]=$(( t + 2000 ))
    log "pod $ns/$name on node$n: CNI ADD failed (retry in 2 s): $ip"
  fi
}

unplumb() {  # KEY (a record of $state)
  local key=$1 n uid ns name
  read -r n uid < "$state/$key"
  ns=${key%%.*} name=${key#*.}
  DL_K8S_NAMESPACE=$ns DL_K8S_NAME=$name DL_K8S_UID=$uid dl_pod_del "$n" "$key"
  rm -f "$state/$key"
  log "pod $ns/$name on node$n (uid $uid): CNI DEL done"
}

touch "$DL_DIR/kubelet/ready"
log "kubelet stand-in for lab $DL_NAME running"
while :; do
  list=$(dl_kube_api GET /api/v1/pods)
  if ! jq -e '.items | type == "array"' <<< "$list" >/dev/null 2>&1; then
    log "cannot list pods: ${list:0:300}"
    sleep 0.5  # the retry pause of a failed list (API server down), not a wait for a condition
    continue
  fi
  rows=$(jq -r '.items[] | [.metadata.namespace, .metadata.name, .metadata.uid, (.spec.nodeName // "-"),
           (if .metadata.deletionTimestamp then "deleting" else "live" end), (.spec.hostNetwork // false | tostring)]
           | @tsv' <<< "$list")
  declare -A live=() deleting=()
  while IFS=$'\t' read -r ns name uid node phase hostnet; do
    [ -n "$ns" ] || continue
    [[ "$node" =~ ^node([0-9]+)$ ]] && [ -d "$DL_DIR/n${BASH_REMATCH[1]}" ] || continue
    [ "$hostnet" = false ] || continue
    n=${BASH_REMATCH[1]}
    if [ "$phase" = live ]; then live[$ns.$name]="$n $uid"; else deleting[$ns.$name]="$uid"; fi
  done <<< "$rows"
  # Tear down first: a pod recreated under the same name has a new uid.
  for f in "$state"/*; do
    [ -e "$f" ] || continue
    key=${f##*/}
    [ "${live[$key]:-}" = "$(cat "$f")" ] || unplumb "$key"
  done
  for key in "${!deleting[@]}"; do
    [ -e "$state/$key" ] && continue
    ns=${key%%.*} name=${key#*.}
    out=$(dl_kube_api DELETE "/api/v1/namespaces/$ns/pods/$name" \
      "$(jq -nc --arg uid "${deleting[$key]}" '{kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds: 0,
        preconditions: {uid: $uid}}')")
    log "pod $ns/$name: stopped, deleted with grace 0: $(jq -r '.status // .kind // empty' <<< "$out" 2>/dev/null)"
  done
  for key in "${!live[@]}"; do
    [ -e "$state/$key" ] && continue
    read -r n uid <<< "${live[$key]}"
    plumb "${key%%.*}" "${key#*.}" "$uid" "$n"
  done
  unset live deleting
  sleep 0.5  # the period of this poll loop: each round reads the pod list again
done
