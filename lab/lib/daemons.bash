# lab/lib/daemons.bash — the real daemons of each lab node: dpu-dataplane and
# dpu-agent in the DPU netns, host-shim in the host netns; their generated
# configs, logs and state, all under $DL_DIR/nN/, and the shared cluster file
# $DL_DIR/cluster.yaml (the agents' cluster source; each agent also publishes
# itself in $DL_DIR/cluster.yaml.d/). Sourced by lab/lib/lab.bash.
#
# Per node N, in $DL_DIR/nN/:
#   dataplane.yaml dataplane.log dataplane.pid dataplane.sock (programming) dpuctl.sock (operator)
#   dataplane-standby.pid, dataplane.sock.lock and .slot-a/.slot-b (with DL_DP_STANDBY=1, below)
#   agent.yaml agent.log agent.pid agent-state/
#   tls/ (scripts/make-tls.sh: ca.pem, the agent's server.pem, the host's NODE.pem;
#         host-shim and the agent speak mutual TLS, as a real node does)
#   host-shim.json host-shim.log host-shim.pid host-shim.sock host-shim-state/
#
# Functions (public; DAEMON is dataplane, agent or host-shim):
#   dl_write_cluster_file N...       the cluster file listing the nodes N... (rewrite to add/remove nodes;
#                                    the lab's services stay, see services.bash)
#   dl_node_configs N NUMVFS         write the three configs of node N
#   dl_daemon_start N DAEMON         start it and wait until it is ready (see _dl_ready_*)
#   dl_daemon_stop N DAEMON [-9]     stop it (SIGTERM, or SIGKILL with -9)
#   dl_daemon_pid N DAEMON           its pid (empty when not running)
#   dl_node_start N / dl_node_stop N all three, in dependency order
#   dl_dpuctl N ARGS...              dpuctl against node N's dataplane
#   dl_agent_api N METHOD PATH [JSON]  curl the agent's REST API (JSON), body on stdout
#   dl_agent_curl N PATH [CURL ARGS...] curl the agent's API with the host's client certificate
#   dl_metrics N dataplane|agent     node N's Prometheus text (dataplane: its own endpoint)
#   dl_wipe_dpu_state N              remove the agent's state and the dataplane's tables (a DPU "reboot" wipes them)
# Binaries come from $DPU_BUILD_DIR (see dl_bin).
#
# DL_DP_STANDBY=1: each node runs a warm standby dataplane beside the active
# one (dpu-dataplane --standby, takeover.h: EAL and the mbuf pool ready, it
# takes over by itself the instant the active one exits). The lab supervises
# the pair as systemd or the DaemonSet would: dl_daemon_start N dataplane
# after the active one died adopts the standby that took over (its pid file
# becomes dataplane.pid) and starts the next standby; a planned stop
# (dl_daemon_stop N dataplane) stops the standby first, a crash
# (dl_daemon_stop N dataplane -9) kills only the active one.

dl_bin() {
  case $1 in
    dataplane) echo "$DPU_BUILD_DIR/dpu-agent/datapath/dpu-dataplane" ;;
    agent) echo "$DPU_BUILD_DIR/dpu-agent/control/dpu-agent" ;;
    host-shim) echo "$DPU_BUILD_DIR/host-shim/host-shim" ;;
    dpuctl) echo "$DPU_BUILD_DIR/dpu-agent/dpuctl/dpuctl" ;;
    dpu-cni) echo "$DPU_BUILD_DIR/cni/dpu-cni" ;;
    cnidriver) echo "$DPU_BUILD_DIR/tests/tools/cnidriver" ;;
    *) dl_die "no binary '$1'"; return 1 ;;
  esac
}

dl_check_binaries() {
  local b missing=()
  for b in dataplane agent host-shim dpuctl dpu-cni; do
    [ -x "$(dl_bin $b)" ] || missing+=("$(dl_bin $b)")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    dl_die "not built: ${missing[*]} (build with: cmake --build $DPU_BUILD_DIR --target dpu-dataplane dpu-agent host-shim dpuctl dpu-cni; or set DPU_BUILD_DIR)"
    return 1
  fi
}

dl_write_cluster_file() {
  local n
  {
    echo "# The lab's cluster (file ClusterSource), shared by every node's dpu-agent."
    echo "nodes:"
    for n in "$@"; do
      if dl_dual_stack; then
        echo "  - {name: $(dl_node_name "$n"), tunnelIP: $(dl_tunnel_ip "$n"), podCIDRs: [$(dl_pod_cidrs "$n")]}"
      else
        echo "  - {name: $(dl_node_name "$n"), tunnelIP: $(dl_tunnel_ip "$n"), podCIDR: $(dl_pod_cidr "$n")}"
      fi
    done
  } > "$DL_DIR/cluster.nodes.yaml" && dl_compose_cluster_file  # + the services (services.bash)
}

dl_node_configs() {
  local n=$1 vfs=$2 d=$DL_DIR/n$1
  local last=$(( vfs - 1 ))
  # One lab CA (as one cluster has), each node's certificates in its own
  # directory: the agent's server certificate and its host's client one.
  if [ ! -s "$d/tls/server.pem" ]; then
    mkdir -p "$d/tls" &&
      { [ -s "$DL_DIR/tls-ca/ca.pem" ] ||
          bash "$DL_SOURCE_DIR/scripts/make-tls.sh" "$DL_DIR/tls-ca" --server-ip "$DL_LINK_DPU_IP" --days 2; } &&
      cp "$DL_DIR/tls-ca/ca.pem" "$DL_DIR/tls-ca/ca.key" "$d/tls/" &&
      bash "$DL_SOURCE_DIR/scripts/make-tls.sh" "$d/tls" --server-ip "$DL_LINK_DPU_IP" --days 2 "$(dl_node_name "$n")" ||
      return 1
  fi
  lab_dataplane_config "$n" "${DL_BACKEND:-af_xdp}" "$DL_NAME-dp$n" "$d/dataplane.sock" "$d/dpuctl.sock" 1 pf0hpf |
    sed "s/^tunnel_ip: .*/tunnel_ip: $(dl_tunnel_ip "$n")/" > "$d/dataplane.yaml" || return 1
  echo "metrics: {listen: \"$DL_LINK_DPU_IP:$DL_METRICS_PORT\"}" >> "$d/dataplane.yaml"
  # The cluster: the shared file, or (Kubernetes mode) the API with the
  # ServiceAccount's token, the pod CIDR coming from the Node.
  local source="{type: file, path: $DL_DIR/cluster.yaml}" cidr="podCIDR: $(dl_pod_cidr "$n")"
  dl_dual_stack && cidr="podCIDRs: [$(dl_pod_cidrs "$n")]"
  if dl_kube_enabled; then
    source="{type: kubernetes, kubernetes: {kubeconfig: $DL_DIR/kube/agent.kubeconfig}}"
    cidr="# podCIDRs: from Node $(dl_node_name "$n")'s spec.podCIDRs"
  fi
  # The node network: the node IP and the gateway of each family.
  local node_ips gateways=$DL_NODE_GATEWAY
  node_ips="$(dl_node_ip "$n")/24"
  dl_dual_stack && { node_ips+=", $(dl_node_ip6 "$n")/64"; gateways+=", $DL_NODE_ROUTER6"; }
  local json_cidrs json_services
  json_cidrs=$(sed 's/[^, ][^, ]*/"&"/g' <<< "$(dl_cluster_cidrs)")
  json_services=$(sed 's/[^, ][^, ]*/"&"/g' <<< "$(dl_service_cidrs)")
  cat > "$d/agent.yaml" <<YAML
# dpu-agent of lab $DL_NAME node $n (generated by lab/dpu-lab)
nodeName: $(dl_node_name "$n")
tunnelIP: $(dl_tunnel_ip "$n")
uplink: uplink0
representors:
  - {pf: 0, vfCount: $vfs, name: "pf0vf{vf}"}
$cidr
clusterCIDRs: [$(dl_cluster_cidrs)]
serviceCIDRs: [$(dl_service_cidrs)]
underlayMTU: ${DL_UNDERLAY_MTU:-1500}
northSouth: {nodeIPs: [$node_ips], gateways: [$gateways]}
ipsec: $(dl_ipsec_config "$n")
clusterSource: $source
api:
  address: $DL_LINK_DPU_IP
  port: $DL_API_PORT
  tls: {cert: $d/tls/server.pem, key: $d/tls/server.key, clientCA: $d/tls/ca.pem}
dataplaneSocket: $d/dataplane.sock
stateDir: $d/agent-state
log: {level: info, file: $d/agent.log}
YAML
  cat > "$d/host-shim.json" <<JSON
{
  "socket": "$d/host-shim.sock",
  "stateDir": "$d/host-shim-state",
  "sysfsRoot": "$d/sysfs",
  "pfs": [{"name": "$DL_PF", "index": 0, "vfs": "0-$last", "reservedVfs": "$last"}],
  "dpu": {"url": "https://$DL_LINK_DPU_IP:$DL_API_PORT", "timeoutMs": 2000, "healthIntervalMs": 500,
          "caFile": "$d/tls/ca.pem", "certFile": "$d/tls/$(dl_node_name "$n").pem",
          "keyFile": "$d/tls/$(dl_node_name "$n").key"},
  "managementPort": {"pf": 0, "vf": $last, "ifname": "dpu-mgmt",
                     "clusterCidrs": [$json_cidrs], "serviceCidrs": [$json_services]},
  "log": {"file": "$d/host-shim.log", "level": "info"}
}
JSON
  cat > "$d/dpunet.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "dpunet", "plugins": [
  {"type": "dpu-cni", "socket": "$d/host-shim.sock", "logFile": "$d/dpu-cni.log", "logLevel": "info",
   "capabilities": {"mac": true, "deviceID": true, "ips": true}}]}
JSON
}

dl_daemon_pid() {
  local f=$DL_DIR/n$1/$2.pid
  dl_proc_alive "$f" && cat "$f"
  return 0
}

# Ready: the process in dataplane.pid is the active one (it wrote its pid into
# the active lock once its sockets were open; a takeover's stale socket file
# from the dead process does not count). Bash builtins only: polled every 10 ms.
_dl_ready_dataplane() {
  local d=$DL_DIR/n$1 pid owner
  { read -r pid < "$d/dataplane.pid" && read -r owner < "$d/dataplane.sock.lock"; } 2>/dev/null || return 1
  [ -n "$pid" ] && [ "$owner" = "$pid" ] && test -S "$d/dataplane.sock"
}
# Warm: the standby in dataplane-standby.pid holds a slot and waits (it wrote "PID standby" into its slot file).
_dl_warm_standby() {
  local d=$DL_DIR/n$1 pid slot line
  { read -r pid < "$d/dataplane-standby.pid"; } 2>/dev/null || return 1
  for slot in a b; do
    { read -r line < "$d/dataplane.sock.slot-$slot"; } 2>/dev/null || continue
    [ "$line" = "$pid standby" ] && return 0
  done
  return 1
}

# Starts node N's standby dataplane; with "wait", until it is warm.
dl_dataplane_standby() {
  local n=$1 d=$DL_DIR/n$1
  dl_spawn "$d/dataplane-standby.pid" "$(dl_node_ns "$n" dpu)" "$d/dataplane.log" "$(dl_bin dataplane)" \
    --config "$d/dataplane.yaml" --standby || return 1
  [ "${2:-}" = wait ] || return 0
  dl_wait 30 _dl_warm_standby "$n" && return 0
  dl_die "node $n: the standby dataplane is not warm after 30 s; its log:"
  tail -n 20 "$d/dataplane.log" >&2; return 1
}
# Ready: the cluster file is synced and the dataplane programmed.
_dl_ready_agent() {
  dl_agent_curl "$1" /readyz -sf --max-time 1
}
# Ready: host-shim answers on its socket and its management port is up (which
# takes a healthy DPU: the port is attached from the first good health poll on).
_dl_ready_host_shim() {
  test -S "$DL_DIR/n$1/host-shim.sock" &&
    [ -n "$(ip -n "$(dl_node_ns "$1" host)" -4 -o addr show dev dpu-mgmt scope global 2>/dev/null)" ]
}

dl_daemon_start() {
  local n=$1 which=$2 d=$DL_DIR/n$1 ns log
  if dl_proc_alive "$d/$which.pid"; then dl_die "node $n: $which runs already (pid $(cat "$d/$which.pid"))"; return 1; fi
  case $which in
    dataplane)
      ns=$(dl_node_ns "$n" dpu); log=$d/dataplane.log
      if dl_proc_alive "$d/dataplane-standby.pid"; then
        # The standby took over (or does so now) by itself: it is the active one.
        mv "$d/dataplane-standby.pid" "$d/dataplane.pid"
      else
        dl_record dpdk "$DL_NAME-dp$n"
        rm -f "$d/dataplane.sock" "$d/dpuctl.sock"
        dl_spawn "$d/dataplane.pid" "$ns" "$log" "$(dl_bin dataplane)" --config "$d/dataplane.yaml" || return 1
      fi ;;
    agent)
      ns=$(dl_node_ns "$n" dpu); log=$d/agent.stderr
      dl_spawn "$d/agent.pid" "$ns" "$log" "$(dl_bin agent)" --config "$d/agent.yaml" || return 1 ;;
    host-shim)
      ns=$(dl_node_ns "$n" host); log=$d/host-shim.stderr
      # Ready means this host-shim created its socket: clear a stale one left by a killed one.
      dl_proc_alive "$d/host-shim.pid" || rm -f "$d/host-shim.sock"
      dl_spawn "$d/host-shim.pid" "$ns" "$log" "$(dl_bin host-shim)" --config "$d/host-shim.json" || return 1 ;;
    *) dl_die "unknown daemon '$which' (dataplane, agent or host-shim)"; return 1 ;;
  esac
  local i
  # Every 10 ms: a restart (faults_dataplane_test.sh) measures when the daemon is ready.
  for (( i = 0; i < 1500; i++ )); do
    if "_dl_ready_${which//-/_}" "$n" >/dev/null 2>&1; then
      # The next standby (not waited for: its EAL start would only delay the caller).
      [ "$which" = dataplane ] && [ "${DL_DP_STANDBY:-0}" = 1 ] && ! dl_proc_alive "$d/dataplane-standby.pid" &&
        { dl_dataplane_standby "$n" || return 1; }
      return 0
    fi
    if (( i % 10 == 9 )) && ! dl_proc_alive "$d/$which.pid"; then
      dl_die "node $n: $which exited during start; its log:"
      tail -n 20 "$log" "$d/$which.log" >&2 2>/dev/null; return 1
    fi
    sleep 0.01
  done
  dl_die "node $n: $which is not ready after 15 s; its log:"
  tail -n 20 "$log" "$d/$which.log" >&2 2>/dev/null
  return 1
}

dl_daemon_stop() {
  # A planned stop of the dataplane stops its standby first (or it would take
  # over); SIGKILL is a crash of the active one alone.
  [ "$2" = dataplane ] && [ "${3:-}" != -9 ] && dl_proc_stop "$DL_DIR/n$1/dataplane-standby.pid"
  dl_proc_stop "$DL_DIR/n$1/$2.pid" "${3:-}"
}

dl_node_start() {
  dl_daemon_start "$1" dataplane && dl_daemon_start "$1" agent && dl_daemon_start "$1" host-shim
}

dl_node_stop() {
  dl_daemon_stop "$1" host-shim; dl_daemon_stop "$1" agent; dl_daemon_stop "$1" dataplane
}

# A reboot clears /run (tmpfs), where a DPU keeps the dataplane's connection
# and affinity tables and its NAT-T ports beside its sockets: the lab's are
# files in the node's directory.
dl_wipe_dpu_state() { rm -rf "$DL_DIR/n$1/agent-state" "$DL_DIR/n$1/dataplane.sock".{conntrack,affinity,natt-ports}; }

dl_dpuctl() {
  local n=$1; shift
  ip netns exec "$(dl_node_ns "$n" dpu)" "$(dl_bin dpuctl)" --socket "$DL_DIR/n$n/dpuctl.sock" "$@"
}

dl_agent_api() {
  local n=$1 method=$2 path=$3 body=${4:-}
  local args=(-s --max-time 5 -X "$method" -H 'Accept: application/json')
  [ -n "$body" ] && args+=(-H 'Content-Type: application/json' -d "$body")
  dl_agent_curl "$n" "$path" "${args[@]}"
}

# The agent's API as node N's host-shim reaches it: https, the lab CA, the
# host's client certificate (from inside the DPU netns, where the address is).
dl_agent_curl() {
  local n=$1 path=$2 t=$DL_DIR/n$1/tls node
  shift 2
  node=$(dl_node_name "$n")
  ip netns exec "$(dl_node_ns "$n" dpu)" curl --cacert "$t/ca.pem" --cert "$t/$node.pem" --key "$t/$node.key" \
    "$@" "https://$DL_LINK_DPU_IP:$DL_API_PORT$path"
}

dl_metrics() {
  if [ "$2" = agent ]; then dl_agent_curl "$1" /metrics -sf --max-time 3; return; fi
  ip netns exec "$(dl_node_ns "$1" dpu)" curl -sf --max-time 3 "http://$DL_LINK_DPU_IP:$DL_METRICS_PORT/metrics"
}
