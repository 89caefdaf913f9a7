# lab/lib/pods.bash — pods created the way a container runtime creates them:
# `ip netns add`, then dpu-cni ADD with the CNI environment and the node's
# conflist, run in the node's host netns (where a kubelet would run it). The
# runtime is the libcni driver tests/tools/cnidriver when built (libcni 1.1.2:
# conflist, result cache), else dpu-cni executed directly with CNI_* variables
# (DL_CNI_RUNTIME=cnidriver|exec forces one). Sourced by lab/lib/lab.bash.
#
# A pod is known by its node and name: netns NAME-nN-pod-POD, container id
# NAME-nN-POD, interface eth0, record $DL_DIR/pods/nN-POD.
#
# Functions (public):
#   dl_node_ref REF             "node2" or "2" -> 2 (fails for a node the lab does not have)
#   dl_target_ns TARGET         namespace of TARGET: fabric | external | nodeN/host | nodeN/dpu | nodeN/POD
#   dl_pod_add N POD            create the pod; prints its IPv4 address (DL_POD_IP=A: ask for A,
#                               the runtime's `ips` capability)
#   dl_pod_del N POD            CNI DEL, then delete its netns (idempotent)
#   dl_pod_ip N POD             its IPv4 address on eth0 (no prefix)
#   dl_pod_ip6 N POD            its global IPv6 address on eth0 (dual stack; empty when it has none)
#   dl_pods                     "N POD" per existing pod
#   dl_mgmt_ip N / dl_mgmt_ip6 N  the host management port's address (dpu-mgmt), IPv4 / IPv6
#   dl_cni N VERB POD           run the runtime's VERB (add, del, check) for the pod, output on stdout

dl_node_ref() {
  local ref=${1#node}
  if ! [[ "$ref" =~ ^[0-9]+$ ]] || [ ! -d "$DL_DIR/n$ref" ]; then
    dl_die "no node '$1' in lab $DL_NAME (nodes: $(cd "$DL_DIR" 2>/dev/null && ls -d n[0-9]* 2>/dev/null | sed 's/^n/node/' | tr '\n' ' '))"
    return 1
  fi
  echo "$ref"
}

dl_target_ns() {
  local t=$1 n rest
  if [ "$t" = fabric ]; then dl_fabric_ns; return; fi
  if [ "$t" = external ]; then dl_external_ns; return; fi
  [[ "$t" == */* ]] || { dl_die "target '$t' must be fabric, nodeN/host, nodeN/dpu, nodeN/POD or external"; return 1; }
  n=$(dl_node_ref "${t%%/*}") || return 1
  rest=${t#*/}
  case $rest in
    host|dpu) dl_node_ns "$n" "$rest" ;;
    *) [ -f "$DL_DIR/pods/n$n-$rest" ] || { dl_die "no pod '$rest' on node$n"; return 1; }
       dl_pod_ns "$n" "$rest" ;;
  esac
}

_dl_runtime() {
  local r=${DL_CNI_RUNTIME:-}
  if [ -z "$r" ]; then
    if [ -x "$(dl_bin cnidriver)" ]; then r=cnidriver; else r=exec; fi
  fi
  echo "$r"
}

dl_cni() {
  local n=$1 verb=$2 pod=$3 d=$DL_DIR/n$1 host
  host=$(dl_node_ns "$n" host)
  local id=$DL_NAME-n$n-$pod netns=/run/netns/$(dl_pod_ns "$n" "$pod")
  # What kubelet passes: the pod's identity (namespace "default" and the lab
  # pod's name, unless the kubelet stand-in gives the Kubernetes pod's).
  local args="IgnoreUnknown=1;K8S_POD_NAMESPACE=${DL_K8S_NAMESPACE:-default};K8S_POD_NAME=${DL_K8S_NAME:-$pod}"
  [ -n "${DL_K8S_UID:-}" ] && args+=";K8S_POD_UID=$DL_K8S_UID"
  args+=";K8S_POD_INFRA_CONTAINER_ID=$id"
  if [ "$(_dl_runtime)" = cnidriver ]; then
    mkdir -p "$DL_DIR/cni-bin" "$d/cni-cache"
    ln -sfn "$(readlink -f "$(dl_bin dpu-cni)")" "$DL_DIR/cni-bin/dpu-cni"
    ip netns exec "$host" "$(dl_bin cnidriver)" "$verb" -path "$DL_DIR/cni-bin" -cachedir "$d/cni-cache" \
      -conf "$d/dpunet.conflist" -netns "$netns" -id "$id" -ifname eth0 -args "$args" ${DL_POD_IP:+-ips "$DL_POD_IP"}
  else
    # A plain network config: the conflist's plugin with its name and version
    # (and, with DL_POD_IP, the runtime's `ips` capability argument).
    jq -c --arg ip "${DL_POD_IP:-}" '.plugins[0] + {cniVersion: .cniVersion, name: .name}
      + (if $ip == "" then {} else {runtimeConfig: {ips: [$ip]}} end)' "$d/dpunet.conflist" |
      ip netns exec "$host" env CNI_COMMAND="${verb^^}" CNI_CONTAINERID="$id" CNI_NETNS="$netns" \
        CNI_IFNAME=eth0 CNI_ARGS="$args" CNI_PATH="$(dirname "$(dl_bin dpu-cni)")" "$(dl_bin dpu-cni)"
  fi
}

dl_pod_add() {
  local n=$1 pod=$2 ns out
  # (A '.' only in Kubernetes mode's NAMESPACE.NAME, which the kubelet stand-in makes.)
  if ! [[ "$pod" =~ ^[a-z0-9][a-z0-9-]{0,30}$ || ( -n "${DL_K8S_NAME:-}" && "$pod" =~ ^[a-z0-9][a-z0-9-]{0,62}\.[a-z0-9][a-z0-9.-]{0,62}$ ) ]] ||
     [ "$pod" = host ] || [ "$pod" = dpu ]; then
    dl_die "pod name '$pod' must be 1-31 characters of a-z, 0-9 and '-' (and not host or dpu)"; return 1
  fi
  [ -f "$DL_DIR/pods/n$n-$pod" ] && { dl_die "pod $pod already exists on node$n"; return 1; }
  ns=$(dl_pod_ns "$n" "$pod")
  mkdir -p "$DL_DIR/pods"
  dl_record netns "$ns"
  ip netns add "$ns" || { dl_die "cannot create netns $ns"; return 1; }
  ip -n "$ns" link set lo up
  if ! out=$(dl_cni "$n" add "$pod" 2>&1); then
    ip netns del "$ns" 2>/dev/null
    dl_node_repair_vfs "$n" >/dev/null 2>&1
    dl_die "CNI ADD of pod $pod on node$n failed: $out"; return 1
  fi
  echo "$out" > "$DL_DIR/pods/n$n-$pod"
  dl_pod_ip "$n" "$pod"
}

dl_pod_del() {
  local n=$1 pod=$2 ns out
  ns=$(dl_pod_ns "$n" "$pod")
  if [ -f "$DL_DIR/pods/n$n-$pod" ] || [ -e "/run/netns/$ns" ]; then
    # DEL is idempotent; it returns the VF to the host netns before the netns goes.
    # (A pod of another namespace is deleted with the identity it was added with.)
    local meta k8s_ns="${DL_K8S_NAMESPACE:-}" k8s_name="${DL_K8S_NAME:-}"
    meta=$(_dl_pod_meta "$n" "$pod")
    [ -f "$meta" ] && { k8s_ns=$(jq -r .namespace "$meta"); k8s_name=$(jq -r .name "$meta"); }
    if ! out=$(DL_K8S_NAMESPACE=$k8s_ns DL_K8S_NAME=$k8s_name dl_cni "$n" del "$pod" 2>&1); then
      echo "dpu-lab: warning: CNI DEL of pod $pod on node$n failed: $out" >&2
    fi
  fi
  ip netns del "$ns" 2>/dev/null
  rm -f "$DL_DIR/pods/n$n-$pod" "$DL_DIR/services/pod-ports/n$n-$pod"
  dl_pod_meta_del "$n" "$pod"  # its cluster file entry (policy.bash)
  return 0
}

dl_pod_ip() {
  ip -n "$(dl_pod_ns "$1" "$2")" -4 -o addr show dev eth0 scope global 2>/dev/null |
    awk '{split($4, a, "/"); print a[1]; exit}'
}

dl_pod_ip6() {
  ip -n "$(dl_pod_ns "$1" "$2")" -6 -o addr show dev eth0 scope global 2>/dev/null |
    awk '{split($4, a, "/"); print a[1]; exit}'
}

dl_mgmt_ip6() {
  ip -n "$(dl_node_ns "$1" host)" -6 -o addr show dev dpu-mgmt scope global 2>/dev/null |
    awk '{split($4, a, "/"); print a[1]; exit}'
}

dl_mgmt_ip() {
  ip -n "$(dl_node_ns "$1" host)" -4 -o addr show dev dpu-mgmt scope global 2>/dev/null |
    awk '{split($4, a, "/"); print a[1]; exit}'
}

dl_pods() {
  local f b
  for f in "$DL_DIR"/pods/n*; do
    [ -e "$f" ] || continue
    b=${f##*/}; b=${b#n}
    echo "${b%%-*} ${b#*-}"
  done
}
