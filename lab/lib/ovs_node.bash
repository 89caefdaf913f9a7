# lab/lib/ovs_node.bash — an Open vSwitch userspace node in a dpu-lab: the
# interop peer of issue 6. A third kind of node on the lab's fabric, run by
# Debian's openvswitch-switch (ovsdb-server + ovs-vswitchd, datapath_type
# netdev, no DPDK, no kernel module), that speaks OVN's Geneve framing with
# our DPUs: VNI = the destination subnet's logical datapath key, the OVN option
# (class 0x0102, type 0x80, 4 bytes: 15-bit ingress port key, 16-bit egress
# port key). It joins the cluster through the file cluster source (a publish
# file next to the lab's cluster file), so every agent programs a tunnel to it
# as to any node. Sourced after lab/lib/lab.bash (it uses the dl_* functions).
#
#   source lab/lib/lab.bash; source lab/lib/ovs_node.bash
#   dl_init t$$; dl_up 2 1
#   ovs_node_up "$DL_NAME"                 # node 3: 192.168.100.3, 10.244.3.0/24, namespace ns1
#   ovs_node_exec 1 ping -c1 "$(dl_pod_ip 1 pod1)"
#   ovs_node_down "$DL_NAME"               # before dl_down (which would also clean it up)
#
# The node, with N its number on the fabric (default: the lab's last node + 1):
#   netns           LAB-ovsN (the switch), LAB-ovsN-nsI (namespaces behind it, I = 1..COUNT)
#   underlay        veth "up0" in LAB-ovsN <-> port "ovsN" of the fabric bridge; up0 is a port of
#                   bridge br-phy, and the tunnel IP 192.168.100.N/24 sits on br-phy's internal
#                   port (OVS userspace tunnelling: ovs-router and tnl/arp learn from it)
#   overlay         bridge br-int (fail-mode secure): Geneve port gnv0 (ofport 1, remote_ip=flow,
#                   key=flow), namespace I on port "nsI" (ofport 10+I), eth0 10.244.N.(9+I)/24,
#                   gateway 10.244.N.1 answered by an ARP responder flow, MTU underlay - 58 (1442)
#   logical keys    namespace I is logical port key 100+I (the OVN ingress key it sends), and the
#                   node publishes its keys (portKeys in its publish file) as our nodes do. As OVN,
#                   it sends egress = the destination port's key (read from our nodes' publish
#                   files when the flows are programmed; the router key 0x8000 only for an address
#                   without one) and accepts only its own port's key: 0x8000 is OVN's _MC_flood
#                   group (ovn lib/mcast-group-index.h), so a packet from us with it is dropped here.
#   daemons         own db/run/log/etc under $DL_DIR/ovs/ (OVS_RUNDIR, OVS_DBDIR, OVS_LOGDIR,
#                   OVS_SYSCONFDIR), started in LAB-ovsN with the lab's dl_spawn, never the system
#                   service; other_config:dpdk-init=false
#   cluster         $DL_DIR/cluster.yaml.d/ovsN.json {name ovsN, tunnelIP, podCIDRs, portKeys}
# Everything is recorded with dl_record and named after the lab, so dl_down
# removes it too when ovs_node_down was not called (a failed test).
#
# Functions (public):
#   ovs_node_up LAB [N] [COUNT]   build and start the node, join the cluster, program the flows
#                                 toward every lab node; waits until every agent has the tunnel
#   ovs_node_down LAB             stop and remove the node (idempotent); the lab stays up
#   ovs_node_flows                (re)program br-int for the lab's current nodes and their published
#                                 port keys (call again after pods come or go on them)
#   ovs_node_port_key M IP        the port key lab node M publishes for IP (empty: none)
#   ovs_node_number               N;  ovs_node_ns I: namespace I's netns;  ovs_node_ip I: its IPv4 address
#   ovs_node_exec I CMD...        run CMD in namespace I
#   ovs_node_tunnel_ip / ovs_node_vni   the node's tunnel IP / the VNI our DPUs send it (its key)
#   ovs_node_ctl vsctl|ofctl|appctl ARGS...   the node's ovs-vsctl / ovs-ofctl (on br-int) / ovs-appctl
#   ovs_node_datapath_key CIDR    the logical datapath key of a pod subnet, as dpu-agent computes
#                                 it (control/src/logical_model.cpp datapathKeyFor, cluster 10.244.0.0/16)
#   ovs_node_remote_nodes M       how many remote nodes lab node M's agent programs (its metric)
#   ovs_node_assert_gone          fail, naming what is left, if anything of the node remains

OVS_NODE_CLUSTER_CIDR=10.244.0.0/16   # the lab's clusterCIDRs (lab/lib/daemons.bash)
OVS_NODE_ROUTER_MAC=0a:58:a9:fe:00:01  # dpu-agent's distributed router MAC (control/logical_model.h kRouterMac)
OVS_NODE_ROUTER_KEY=0x8000             # egress key of the distributed router (dpu-agent/model/include/model/model.h)
# The pod MTU our agents hand out: underlay - (Ethernet 14 + IPv4 20 + UDP 8 + Geneve 8 + OVN option 8).
OVS_NODE_MTU=$(( ${DL_UNDERLAY_MTU:-1500} - 58 ))
OVS_NODE_SCHEMA=${OVS_NODE_SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}

_ovs_dir() { echo "$DL_DIR/ovs"; }
_ovs_n() { sed -n 's/^OVS_N=//p' "$(_ovs_dir)/node.env" 2>/dev/null; }
_ovs_count() { sed -n 's/^OVS_COUNT=//p' "$(_ovs_dir)/node.env" 2>/dev/null; }
_ovs_switch_ns() { echo "$DL_NAME-ovs$1"; }
# The daemons' and tools' environment, one VAR=value a line (for mapfile).
_ovs_env() {
  local d
  d=$(_ovs_dir)
  printf '%s\n' "OVS_RUNDIR=$d/run" "OVS_DBDIR=$d/db" "OVS_LOGDIR=$d/log" "OVS_SYSCONFDIR=$d/etc"
}

ovs_node_number() { _ovs_n; }
ovs_node_ns() { echo "$DL_NAME-ovs$(_ovs_n)-ns$1"; }
ovs_node_ip() { local n; n=$(_ovs_n); echo "10.244.$n.$(( 9 + $1 ))"; }
ovs_node_exec() { local i=$1; shift; ip netns exec "$(ovs_node_ns "$i")" "$@"; }
ovs_node_tunnel_ip() { dl_tunnel_ip "$(_ovs_n)"; }
ovs_node_vni() { ovs_node_datapath_key "$(dl_pod_cidr "$(_ovs_n)")"; }

ovs_node_ctl() {
  local which=$1 d; shift
  d=$(_ovs_dir)
  case $which in
    vsctl) ovs-vsctl --db="unix:$d/run/db.sock" --timeout=10 "$@" ;;
    # OpenFlow 1.3: replace-flows needs table ids, which OpenFlow 1.0 lacks.
    ofctl)
      local cmd=$1 env_vars; shift
      mapfile -t env_vars < <(_ovs_env)
      env "${env_vars[@]}" ovs-ofctl -O OpenFlow13 "$cmd" "unix:$d/run/br-int.mgmt" "$@" ;;
    appctl) ovs-appctl --timeout=10 -t "$d/run/ovs-vswitchd.ctl" "$@" ;;
    *) dl_die "ovs_node_ctl: '$which' is not vsctl, ofctl or appctl"; return 1 ;;
  esac
}

# shellcheck disable=SC2086  # splitting the address at its dots is the point
_ovs_ip2int() { local IFS=.; set -- $1; echo $(( ($1 << 24) | ($2 << 16) | ($3 << 8) | $4 )); }

ovs_node_datapath_key() {
  local sub=$1 cc=$OVS_NODE_CLUSTER_CIDR
  [[ "$sub" =~ ^([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)/([0-9]+)$ ]] || { dl_die "'$sub' is not an IPv4 CIDR"; return 1; }
  local sa=${BASH_REMATCH[1]} sl=${BASH_REMATCH[2]}
  [[ "$cc" =~ ^([0-9.]+)/([0-9]+)$ ]] || return 1
  local ca=${BASH_REMATCH[1]} cl=${BASH_REMATCH[2]} s c
  s=$(_ovs_ip2int "$sa"); c=$(_ovs_ip2int "$ca")
  # In the first cluster CIDR, at most 20 index bits: key = index + 1 (datapathKeyFor).
  if [ "$sl" -lt "$cl" ] || [ $(( sl - cl )) -gt 20 ] || [ $(( (s ^ c) >> (32 - cl) )) -ne 0 ]; then
    dl_die "subnet $sub is not a subnet of $cc: its datapath key is a hash this helper does not compute"; return 1
  fi
  echo $(( ((s >> (32 - sl)) & ((1 << (sl - cl)) - 1)) + 1 ))
}

# The gateway MAC of the node's subnet: 0a:58 + the gateway IPv4, as our agents build pod MACs.
# shellcheck disable=SC2086
_ovs_gw_mac() { local IFS=.; set -- $1; printf '0a:58:%02x:%02x:%02x:%02x' "$1" "$2" "$3" "$4"; }
# Whole frames on the veths OVS reads with af_packet: no partial checksums, no TSO.
_ovs_no_offload() { ip netns exec "$1" ethtool -K "$2" tx off >/dev/null 2>&1 || true; }
_ovs_mac_of() { ip -n "$1" -o link show "$2" | sed -n 's|.*link/ether \([0-9a-f:]*\).*|\1|p'; }

ovs_node_up() {
  local lab=$1 n=${2:-} count=${3:-1} d i last
  if [ "${DL_NAME:-}" != "$lab" ]; then dl_init "$lab" || return 1; fi
  dl_exists || { dl_die "lab $lab is not up (dl_up first)"; return 1; }
  local tool
  for tool in ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ovs-appctl; do
    command -v "$tool" >/dev/null || { dl_die "$tool is not installed (Debian: openvswitch-switch)"; return 1; }
  done
  [ -r "$OVS_NODE_SCHEMA" ] || { dl_die "no OVS schema at $OVS_NODE_SCHEMA (openvswitch-switch)"; return 1; }
  d=$(_ovs_dir)
  [ -e "$d" ] && { dl_die "lab $lab has an OVS node already (ovs_node_down $lab first)"; return 1; }
  last=$(dl_nodes | tail -n 1)
  [ -n "$n" ] || n=$(( ${last:-0} + 1 ))
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then
    dl_die "OVS node number must be 1..250, not '$n'"; return 1
  fi
  [ -d "$DL_DIR/n$n" ] && { dl_die "node $n is a DPU node of lab $lab: pick another number for the OVS node"; return 1; }
  if ! [[ "$count" =~ ^[0-9]+$ ]] || [ "$count" -lt 1 ] || [ "$count" -gt 9 ]; then
    dl_die "namespaces behind the OVS node: 1..9, not '$count'"; return 1
  fi
  mkdir -p "$d/run" "$d/db" "$d/log" "$d/etc" || return 1
  printf 'OVS_N=%s\nOVS_COUNT=%s\n' "$n" "$count" > "$d/node.env"
  _ovs_wires_up "$n" "$count" || return 1
  _ovs_daemons_up "$n" || return 1
  _ovs_bridges_up "$n" "$count" || return 1
  ovs_node_flows || return 1
  _ovs_join_cluster "$n" || return 1
  dl_log "ovs$n: Open vSwitch $(ovs-vswitchd --version | sed -n '1s/.* //p') userspace node, tunnel $(dl_tunnel_ip "$n"), $count namespace(s) from $(ovs_node_ip 1)"
}

_ovs_wires_up() {
  local n=$1 count=$2 sw fab i ns
  sw=$(_ovs_switch_ns "$n"); fab=$(dl_fabric_ns)
  dl_record netns "$sw"
  ip netns add "$sw" || { dl_die "cannot create netns $sw"; return 1; }
  ip -n "$sw" link set lo up
  ip link add up0 netns "$sw" type veth peer name "ovs$n" netns "$fab" || return 1
  _ovs_no_offload "$sw" up0
  _ovs_no_offload "$fab" "ovs$n"
  ip -n "$fab" link set "ovs$n" master fabric || return 1
  ip -n "$fab" link set "ovs$n" up
  ip -n "$sw" link set up0 up
  for (( i = 1; i <= count; i++ )); do
    ns=$DL_NAME-ovs$n-ns$i
    dl_record netns "$ns"
    ip netns add "$ns" || { dl_die "cannot create netns $ns"; return 1; }
    ip -n "$ns" link set lo up
    ip link add eth0 netns "$ns" type veth peer name "ns$i" netns "$sw" || return 1
    _ovs_no_offload "$ns" eth0
    _ovs_no_offload "$sw" "ns$i"
    ip -n "$sw" link set "ns$i" up
    ip -n "$ns" link set eth0 mtu "$OVS_NODE_MTU" up
    ip -n "$ns" addr add "10.244.$n.$(( 9 + i ))/24" dev eth0 || return 1
    ip -n "$ns" route add default via "10.244.$n.1" dev eth0 || return 1
  done
}

_ovs_daemons_up() {
  local n=$1 d sw env_vars
  d=$(_ovs_dir); sw=$(_ovs_switch_ns "$n")
  mapfile -t env_vars < <(_ovs_env)
  ovsdb-tool create "$d/db/conf.db" "$OVS_NODE_SCHEMA" || { dl_die "ovsdb-tool create failed"; return 1; }
  dl_spawn "$d/ovsdb-server.pid" "$sw" "$d/log/ovsdb-server.stderr" env "${env_vars[@]}" \
    ovsdb-server "$d/db/conf.db" --remote="punix:$d/run/db.sock" --unixctl="$d/run/ovsdb-server.ctl" \
    --log-file="$d/log/ovsdb-server.log" --no-chdir -vconsole:err || return 1
  dl_wait 10 test -S "$d/run/db.sock" || { dl_die "ovs$n: ovsdb-server did not open $d/run/db.sock"; return 1; }
  ovs_node_ctl vsctl --no-wait init || return 1
  ovs_node_ctl vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=false \
    external_ids:system-id="$DL_NAME-ovs$n" || return 1
  dl_spawn "$d/ovs-vswitchd.pid" "$sw" "$d/log/ovs-vswitchd.stderr" env "${env_vars[@]}" \
    ovs-vswitchd "unix:$d/run/db.sock" --unixctl="$d/run/ovs-vswitchd.ctl" \
    --log-file="$d/log/ovs-vswitchd.log" --no-chdir -vconsole:err || return 1
  dl_wait 10 ovs_node_ctl appctl version || { dl_die "ovs$n: ovs-vswitchd does not answer on $d/run/ovs-vswitchd.ctl"; return 1; }
}

_ovs_bridges_up() {
  local n=$1 count=$2 sw i
  sw=$(_ovs_switch_ns "$n")
  ovs_node_ctl vsctl add-br br-phy -- set bridge br-phy datapath_type=netdev \
    -- add-port br-phy up0 || return 1
  ip -n "$sw" addr add "$(dl_tunnel_ip "$n")/24" dev br-phy || return 1
  ip -n "$sw" link set br-phy up
  ovs_node_ctl vsctl add-br br-int -- set bridge br-int datapath_type=netdev fail-mode=secure \
    -- add-port br-int gnv0 -- set interface gnv0 type=geneve options:remote_ip=flow options:key=flow \
    ofport_request=1 || return 1
  for (( i = 1; i <= count; i++ )); do
    ovs_node_ctl vsctl add-port br-int "ns$i" -- set interface "ns$i" ofport_request=$(( 10 + i )) || return 1
  done
  # The OVN option as tun_metadata0: 32 bits, ingress key << 16 | egress key.
  ovs_node_ctl ofctl add-tlv-map "{class=0x0102,type=0x80,len=4}->tun_metadata0" || return 1
  # ovs-router learns the underlay route from the kernel once br-phy has its address.
  dl_wait 10 _ovs_has_route "$(dl_tunnel_ip "$n")" ||
    { dl_die "ovs$n: ovs-router has no route for the fabric: $(ovs_node_ctl appctl ovs/route/show)"; return 1; }
}

ovs_node_port_key() {
  jq -r --arg ip "$2" '.portKeys[$ip] // empty' "$DL_DIR/cluster.yaml.d/$(dl_node_name "$1").json" 2>/dev/null
}

_ovs_has_route() { ovs_node_ctl appctl ovs/route/show | grep -q "dev br-phy SRC $1\$"; }

ovs_node_flows() {
  local n count d sw gw gw_mac vni i j m peer cidr key mac ip f
  n=$(_ovs_n); count=$(_ovs_count)
  [ -n "$n" ] || { dl_die "lab $DL_NAME has no OVS node"; return 1; }
  d=$(_ovs_dir); sw=$(_ovs_switch_ns "$n"); f=$d/flows.txt
  gw=10.244.$n.1; gw_mac=$(_ovs_gw_mac "$gw")
  vni=$(ovs_node_vni) || return 1
  : > "$f"
  for (( i = 1; i <= count; i++ )); do
    mac=$(_ovs_mac_of "$(ovs_node_ns "$i")" eth0); ip=$(ovs_node_ip "$i"); key=$(( 100 + i ))
    # The ARP responder, as our DPUs answer (pipeline.cpp): the gateway and every
    # other address of the subnet get the gateway MAC (neighbours are reached
    # routed); a request for the sender's own address (a probe) gets nothing.
    cat >> "$f" <<EOF
table=0,priority=210,in_port=$(( 10 + i )),arp,arp_op=1,arp_tpa=$ip actions=drop
table=0,priority=200,in_port=$(( 10 + i )),arp,arp_op=1,arp_tpa=10.244.$n.0/24,arp_spa=$ip,arp_sha=$mac,dl_src=$mac actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],mod_dl_src:$gw_mac,load:0x2->NXM_OF_ARP_OP[],move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:$gw_mac->arp_sha,move:NXM_OF_ARP_TPA[]->NXM_NX_REG0[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],move:NXM_NX_REG0[]->NXM_OF_ARP_SPA[],in_port
EOF
    # Local delivery, from any namespace of this node or from the tunnel.
    for (( j = 1; j <= count; j++ )); do
      [ "$i" = "$j" ] && continue
      echo "table=0,priority=100,in_port=$(( 10 + j )),ip,dl_src=$(_ovs_mac_of "$(ovs_node_ns "$j")" eth0),nw_src=$(ovs_node_ip "$j"),nw_dst=$ip actions=dec_ttl,mod_dl_src:$gw_mac,mod_dl_dst:$mac,output:$(( 10 + i ))" >> "$f"
    done
    for m in $(dl_nodes); do
      peer=$(dl_tunnel_ip "$m"); cidr=$(dl_pod_cidr "$m")
      local peer_vni; peer_vni=$(ovs_node_datapath_key "$cidr") || return 1
      # To node m's DPU: VNI = its subnet's datapath key, OVN option ingress = our port key,
      # egress = the destination port's key as node m publishes it (a flow per address),
      # the distributed router's for any other address of its subnet.
      local to dst dst_key
      to="dec_ttl,mod_dl_src:$gw_mac,mod_dl_dst:$OVS_NODE_ROUTER_MAC,set_field:$peer->tun_dst,set_field:$peer_vni->tun_id"
      while read -r dst dst_key; do
        [ -n "$dst" ] || continue
        echo "table=0,priority=110,in_port=$(( 10 + i )),ip,dl_src=$mac,nw_src=$ip,nw_dst=$dst actions=$to,set_field:$(printf '0x%04x%04x' "$key" "$dst_key")->tun_metadata0,output:1" >> "$f"
      done < <(jq -r '.portKeys // {} | to_entries[] | select(.key | test(":") | not) | "\(.key) \(.value)"' \
                 "$DL_DIR/cluster.yaml.d/$(dl_node_name "$m").json" 2>/dev/null)
      echo "table=0,priority=100,in_port=$(( 10 + i )),ip,dl_src=$mac,nw_src=$ip,nw_dst=$cidr actions=$to,set_field:$(printf '0x%04x%04x' "$key" $(( OVS_NODE_ROUTER_KEY )))->tun_metadata0,output:1" >> "$f"
      # From node m's DPU: only its own subnet, on our VNI, to this port's key (as OVN: the
      # router key is a flood group here, not accepted).
      echo "table=0,priority=100,in_port=1,tun_src=$peer,tun_id=$vni,tun_metadata0=$(printf '0x%x' "$key")/0xffff,ip,nw_src=$cidr,nw_dst=$ip actions=mod_dl_src:$gw_mac,mod_dl_dst:$mac,output:$(( 10 + i ))" >> "$f"
    done
  done
  echo "table=0,priority=0 actions=drop" >> "$f"
  ovs_node_ctl ofctl replace-flows "$f" || { dl_die "ovs$n: ovs-ofctl replace-flows $f failed"; return 1; }
}

_ovs_join_cluster() {
  local n=$1 pub=$DL_DIR/cluster.yaml.d m want got i keys=""
  mkdir -p "$pub" || return 1
  for (( i = 1; i <= $(_ovs_count); i++ )); do keys+="${keys:+, }\"$(ovs_node_ip "$i")\": $(( 100 + i ))"; done
  printf '{"name": "ovs%s", "tunnelIP": "%s", "podCIDRs": ["%s"], "portKeys": {%s}}\n' "$n" "$(dl_tunnel_ip "$n")" \
    "$(dl_pod_cidr "$n")" "$keys" > "$pub/.ovs$n.json.tmp" && mv "$pub/.ovs$n.json.tmp" "$pub/ovs$n.json" || return 1
  want=$(dl_nodes | wc -l)  # the other DPU nodes and the OVS node
  for m in $(dl_nodes); do
    if ! dl_wait 10 _ovs_agent_sees "$m" "$want"; then
      got=$(_ovs_agent_metric "$m" dpu_agent_remote_nodes)
      dl_die "node$m's agent has ${got:-?} remote nodes, not $want: it did not pick up ovs$n from $pub"; return 1
    fi
  done
}

_ovs_agent_metric() {
  dl_agent_curl "$1" /metrics -s --max-time 1 |
    awk -v m="$2" '$1 == m {print $2; exit}'
}
ovs_node_remote_nodes() { _ovs_agent_metric "$1" dpu_agent_remote_nodes; }
_ovs_agent_sees() { [ "$(ovs_node_remote_nodes "$1")" = "$2" ]; }

ovs_node_down() {
  local lab=$1 d n count i
  if [ "${DL_NAME:-}" != "$lab" ]; then dl_init "$lab" || return 1; fi
  d=$(_ovs_dir)
  n=$(_ovs_n); count=$(_ovs_count)
  [ -n "$n" ] || { [ -d "$d" ] && rm -rf "$d"; return 0; }
  # Leave the cluster first: the agents remove the tunnel.
  rm -f "$DL_DIR/cluster.yaml.d/ovs$n.json" "$DL_DIR/cluster.yaml.d/.ovs$n.json.tmp"
  dl_proc_stop "$d/ovs-vswitchd.pid"
  dl_proc_stop "$d/ovsdb-server.pid"
  # The fabric port first (netns deletion frees its veths asynchronously).
  ip -n "$(dl_fabric_ns)" link del "ovs$n" 2>/dev/null
  for (( i = 1; i <= ${count:-0}; i++ )); do ip netns del "$DL_NAME-ovs$n-ns$i" 2>/dev/null; done
  ip netns del "$(_ovs_switch_ns "$n")" 2>/dev/null
  rm -rf "$d"
  return 0
}

ovs_node_assert_gone() {
  local left=() ns pid
  for ns in $(ip netns list | awk '{print $1}' | grep "^$DL_NAME-ovs"); do left+=("netns $ns"); done
  local cmd
  for pid in $(grep -laF "$DL_DIR/ovs/" /proc/[0-9]*/cmdline 2>/dev/null | sed 's|/proc/\([0-9]*\)/cmdline|\1|'); do
    [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
    # Still there (the grep above names the directory too, and is gone by now).
    cmd=$({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null)
    [ -n "$cmd" ] && left+=("process $pid: $cmd")
  done
  ip -n "$(dl_fabric_ns)" -o link show 2>/dev/null | grep -q ' ovs[0-9]*@' && left+=("fabric port $(ip -n "$(dl_fabric_ns)" -o link show | grep -o ' ovs[0-9]*@' | tr -d ' @')")
  [ -e "$DL_DIR/ovs" ] && left+=("state dir $DL_DIR/ovs")
  ls "$DL_DIR"/cluster.yaml.d/ovs*.json >/dev/null 2>&1 && left+=("publish file $(ls "$DL_DIR"/cluster.yaml.d/ovs*.json)")
  if [ ${#left[@]} -gt 0 ]; then
    printf 'ovs_node: lab %s left behind: %s\n' "$DL_NAME" "${left[@]}" >&2
    return 1
  fi
}
