# Open vSwitch 3.1 with DPDK for bench/datapath.sh: a private ovsdb-server and
# ovs-vswitchd-dpdk (Debian's openvswitch-switch-dpdk, not the system's
# alternative) in their own network namespace and run directory, one PMD core
# (CPU 1), the control threads on CPU 0. Sourced by bench/datapath.sh; needs
# its `py`, `out`, `sample` and `rate`.
# A case's ports are removed when it is done: a PMD thread with no port to
# poll sleeps, so OVS can run through the whole benchmark and leave the core
# to the other forwarders between its turns (ovs_idle_check shows it does).
#   ovs_start DIR NETNS; ovs_idle_check; ovs_case SCENARIO PCAP SECONDS; ovs_slowpath PCAP SECONDS;
#   ovs_newconn PROTO PCAP SAMPLES; ovs_stop
OVS_VSWITCHD_DPDK=${OVS_VSWITCHD_DPDK:-/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk}
ovs_dir=
ovs_netns=

ovs_vsctl() { ovs-vsctl --db="unix:$ovs_dir/db.sock" --timeout=30 "$@"; }
ovs_appctl() { ovs-appctl -t "$ovs_dir/vswitchd.ctl" "$@"; }
ovs_flows() { local br=$1; shift; for f in "$@"; do ovs-ofctl add-flow "unix:$ovs_dir/$br.mgmt" "$f"; done; }

ovs_start() {
  ovs_dir=$1 ovs_netns=$2
  mkdir -p "$ovs_dir"
  export OVS_RUNDIR=$ovs_dir OVS_LOGDIR=$ovs_dir OVS_DBDIR=$ovs_dir OVS_SYSCONFDIR=$ovs_dir
  ip netns add "$ovs_netns"
  ip -n "$ovs_netns" link set lo up
  ovsdb-tool create "$ovs_dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
  ip netns exec "$ovs_netns" ovsdb-server --remote="punix:$ovs_dir/db.sock" --pidfile="$ovs_dir/ovsdb.pid" \
    --unixctl="$ovs_dir/ovsdb.ctl" --log-file="$ovs_dir/ovsdb.log" --detach "$ovs_dir/conf.db"
  ovs_vsctl --no-wait init
  ovs_vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
    "other_config:dpdk-extra=--no-huge --no-pci -m 2048 --legacy-mem --file-prefix=dpu-bench-ovs-$$" \
    other_config:dpdk-lcore-mask=0x1 other_config:pmd-cpu-mask=0x2 \
    other_config:n-handler-threads=1 other_config:n-revalidator-threads=1 \
    other_config:max-idle=120000 other_config:flow-limit=1000000
  ip netns exec "$ovs_netns" "$OVS_VSWITCHD_DPDK" "unix:$ovs_dir/db.sock" --pidfile="$ovs_dir/vswitchd.pid" \
    --unixctl="$ovs_dir/vswitchd.ctl" --log-file="$ovs_dir/vswitchd.log" --detach
  ovs_vsctl add-br br-int -- set bridge br-int datapath_type=netdev fail_mode=secure
  ovs_vsctl add-br br-phy -- set bridge br-phy datapath_type=netdev other-config:hwaddr=02:00:00:00:01:00
  ovs_vsctl add-port br-int gnv0 -- set Interface gnv0 type=geneve options:remote_ip=192.168.100.2 \
    options:key=flow ofport_request=10
  ip -n "$ovs_netns" addr add 192.168.100.1/24 dev br-phy
  ip -n "$ovs_netns" link set br-phy up
  ovs_appctl tnl/neigh/set br-phy 192.168.100.2 02:00:00:00:02:00 >/dev/null
  ovs-ofctl add-tlv-map "unix:$ovs_dir/br-int.mgmt" "{class=0x102,type=0x80,len=4}->tun_metadata0"
  ovs_appctl upcall/set-flow-limit 1000000 >/dev/null
}

ovs_stop() {
  [ -n "$ovs_dir" ] || return 0
  for p in vswitchd ovsdb; do
    [ -f "$ovs_dir/$p.pid" ] && kill "$(cat "$ovs_dir/$p.pid")" 2>/dev/null
  done
  sleep 1
  ip netns del "$ovs_netns" 2>/dev/null || true
  ovs_dir=
}

ovs_unplug() { ovs_vsctl --if-exists del-port in0 -- --if-exists del-port out0; }

# CPU time of the PMD threads over one second, in % of a core: about 100
# while it polls a port, about 0 without one.
ovs_pmd_busy() {
  local pid a b
  pid=$(cat "$ovs_dir/vswitchd.pid")
  ticks() { cat /proc/"$pid"/task/*/stat 2>/dev/null | awk '$2 ~ /^\(pmd/ {t += $14 + $15} END {print t + 0}'; }
  a=$(ticks); sleep 1; b=$(ticks)
  echo $(((b - a) * 100 / $(getconf CLK_TCK)))
}

# Fails when the PMD spins with no port: it would then take the forwarding
# core from testpmd and dpu-dataplane during their turns.
ovs_idle_check() {
  local busy
  busy=$(ovs_pmd_busy)
  echo "OVS PMD without ports: ${busy} % of a core"
  [ "$busy" -lt 20 ] || { echo "ovs_dpdk: the PMD spins without ports; the benchmark would be unfair" >&2; return 1; }
}

# The dpdk ports of one case: in0 reads the pcap, out0 is net_null.
ovs_ports() {  # in_bridge out_bridge pcap
  ovs_unplug
  ovs-ofctl del-flows "unix:$ovs_dir/br-int.mgmt"
  ovs-ofctl del-flows "unix:$ovs_dir/br-phy.mgmt"
  ovs_appctl dpctl/del-flows >/dev/null 2>&1 || true
  ovs_vsctl add-port "$1" in0 -- set Interface in0 type=dpdk ofport_request=1 \
    "options:dpdk-devargs=net_pcap_in$RANDOM,rx_pcap=$3,infinite_rx=1"
  ovs_vsctl add-port "$2" out0 -- set Interface out0 type=dpdk ofport_request=2 \
    "options:dpdk-devargs=net_null_out$RANDOM,no-rx=1"
}

ovs_tx() {  # live tx packets of out0 (dpctl/show -s reads the netdev's counters)
  ovs_appctl dpctl/show -s | awk '/port [0-9]+: out0/ {p=1; next} p && /TX packets:/ {sub("packets:", "", $2); print $2; exit}'
}

# OVN's load balancer pipeline for 10.96.0.20:PORT → 10.244.2.7:PORT+8000 on
# node 2 (datapath_pcaps.py's service): conntrack with NAT in the LB zone; a
# new connection committed with its DNAT, an established one translated by
# the first ct; then the encap case's Geneve push.
ovs_lb_flows() {  # proto port...
  local router=0a:58:0a:f4:00:01 proto=$1 p
  shift
  for p in "$@"; do
    ovs_flows br-int "table=0,in_port=1,$proto,nw_dst=10.96.0.20,tp_dst=$p,actions=ct(table=1,zone=1,nat)" \
      "table=1,ct_state=+new+trk,$proto,nw_dst=10.96.0.20,tp_dst=$p,actions=ct(commit,zone=1,nat(dst=10.244.2.7:$((p + 8000)))),resubmit(,2)"
  done
  ovs_flows br-int "table=1,ct_state=+est+trk,actions=resubmit(,2)" \
    "table=2,ip,actions=dec_ttl,mod_dl_src:$router,mod_dl_dst:$router,set_field:2->tun_id,set_field:0x18000->tun_metadata0,output:10"
  ovs_flows br-phy "in_port=LOCAL,actions=output:2"
}

ovs_case() {  # scenario pcap seconds → rate (datapath.sh)
  local router=0a:58:0a:f4:00:01
  case $1 in
    local)
      ovs_ports br-int br-int "$2"
      ovs_flows br-int "in_port=1,ip,actions=dec_ttl,mod_dl_src:$router,mod_dl_dst:0a:58:0a:f4:01:06,output:2" ;;
    encap)
      ovs_ports br-int br-phy "$2"
      ovs_flows br-int "in_port=1,ip,actions=dec_ttl,mod_dl_src:$router,mod_dl_dst:$router,set_field:2->tun_id,set_field:0x18000->tun_metadata0,output:10"
      ovs_flows br-phy "in_port=LOCAL,actions=output:2" ;;
    decap)
      ovs_ports br-phy br-int "$2"
      ovs_flows br-phy "actions=NORMAL"
      ovs_flows br-int "in_port=10,tun_id=1,tun_metadata0=0x70001,ip,actions=mod_dl_src:$router,mod_dl_dst:0a:58:0a:f4:01:05,output:2" ;;
    service)
      # OVN's load balancer (datapath_pcaps.py's service: 10.96.0.20:80/81 to 10.244.2.7:8080/8081 on node 2):
      # conntrack with NAT in the LB zone; a new connection committed with its DNAT, an established one
      # translated by the first ct; then the encap case's Geneve push. Two datapath passes per packet.
      ovs_ports br-int br-phy "$2"
      ovs_lb_flows tcp 80 81
      # Every connection committed before the measurement (its first packet is an upcall and a commit).
      sleep 2 ;;
  esac
  sleep 2
  local a b pid
  pid=$(cat "$ovs_dir/vswitchd.pid")
  a="$(sample "$pid" '^pmd' "$ovs_dir/tx" ovs_tx) $(cat "$ovs_dir/tx")"
  sleep "$3"
  b="$(sample "$pid" '^pmd' "$ovs_dir/tx" ovs_tx) $(cat "$ovs_dir/tx")"
  if [ "$1" = service ]; then  # that OVS did track and translate: its connections and a datapath flow
    echo "OVS conntrack: $(ovs_appctl dpctl/ct-stats-show zone=1 | tr -s ' \n' ' ')" >&2
    echo "OVS datapath flow: $(ovs_appctl dpctl/dump-flows | grep -m1 'ct(zone=1,nat)' | sed 's/.*actions://')" >&2
  fi
  ovs_unplug
  [ "$1" != service ] || ovs_appctl dpctl/flush-conntrack >/dev/null  # the next case starts with none
  rate "$a" "$b"
}

ovs_slowpath() {  # pcap seconds → datapath flows installed per second
  local router=0a:58:0a:f4:00:01
  ovs_vsctl --if-exists del-port in0 -- --if-exists del-port out0
  ovs-ofctl del-flows "unix:$ovs_dir/br-int.mgmt"
  ovs_vsctl add-port br-int out0 -- set Interface out0 type=dpdk ofport_request=2 \
    "options:dpdk-devargs=net_null_out$RANDOM,no-rx=1"
  # One OpenFlow rule per flow of the pcap, exact on both UDP ports (as our
  # flow cache is exact): a packet that matches one un-wildcards both ports,
  # so each flow is its own megaflow and its first packet an upcall. (A single
  # wildcard rule would give one megaflow for all; OVS's port prefix tracking
  # defeats rules that only exclude ports.)
  $py -c "
for i in range(50000):
    print(f'priority=10,in_port=1,udp,tp_src={1024 + i % 50000},tp_dst={2000 + i // 50000},'
          'actions=dec_ttl,mod_dl_src:$router,mod_dl_dst:0a:58:0a:f4:01:06,output:2')" > "$ovs_dir/slowpath.flows"
  ovs-ofctl add-flows "unix:$ovs_dir/br-int.mgmt" "$ovs_dir/slowpath.flows"
  ovs_vsctl add-port br-int in0 -- set Interface in0 type=dpdk ofport_request=1 \
    "options:dpdk-devargs=net_pcap_in$RANDOM,rx_pcap=$1,infinite_rx=1"
  local best=0 prev_t prev_c t c i
  prev_t=$(date +%s.%N); prev_c=0
  for i in $(seq $(($2 * 2 + 6))); do
    sleep 0.5
    t=$(date +%s.%N)
    c=$(ovs_appctl upcall/show | awk -F'[()]' '/flows +:/ {split($2, a, " "); print a[2]; exit}')
    best=$(echo "$prev_t $prev_c $t ${c:-0} $best" | awk '{r = ($4 - $2) / ($3 - $1); print (r > $5 ? r : $5)}')
    prev_t=$t; prev_c=${c:-0}
  done
  ovs_unplug
  printf "%.0f\n" "$best"
}

# New connections per second: the load balancer pipeline above on the ten
# service ports of datapath_pcaps.py's newconn pcaps, every packet a new
# connection that ct(commit,nat) commits; the pcap read once (no infinite_rx).
# The rules and the output port go in before the input port, so the first
# packet already meets them. Samples "wall-time pmd-on-CPU-ns connections"
# into SAMPLES (datapath.sh's newconn_sample) until the count stops moving.
ovs_newconn() {  # proto pcap samples
  ovs_unplug
  ovs-ofctl del-flows "unix:$ovs_dir/br-int.mgmt"
  ovs-ofctl del-flows "unix:$ovs_dir/br-phy.mgmt"
  ovs_appctl dpctl/del-flows >/dev/null 2>&1 || true
  ovs_appctl dpctl/flush-conntrack >/dev/null
  ovs_lb_flows "$1" $(seq 80 89)
  ovs_vsctl add-port br-phy out0 -- set Interface out0 type=dpdk ofport_request=2 \
    "options:dpdk-devargs=net_null_out$RANDOM,no-rx=1"
  ovs_vsctl add-port br-int in0 -- set Interface in0 type=dpdk ofport_request=1 \
    "options:dpdk-devargs=net_pcap_in$RANDOM,rx_pcap=$2"
  newconn_sample "$(cat "$ovs_dir/vswitchd.pid")" '^pmd' "$3" ovs_appctl dpctl/ct-get-nconns
  echo "OVS datapath flow: $(ovs_appctl dpctl/dump-flows | grep -m1 'ct(commit' | sed 's/.*actions://')" >&2
  ovs_unplug
  ovs_appctl dpctl/flush-conntrack >/dev/null
}
