#!/usr/bin/env bash
# Component test of the real dpu-dataplane binary on net_pcap ports: a
# scripted programming session (dataplane_client.py) sends node 1's model; the
# uplink and the hot-plugged representors read scapy-built packets
# (dataplane_pcap_packets.py) and what they transmit must equal the expected
# packets byte for byte (dataplane_pcap_compare.py). Then dpuctl must show the
# ports, the drop reasons and the flows, and, after a delta adds a service,
# that service and the connection table the config sized (dpuctl services,
# conntrack, their bad arguments); SIGTERM must stop the process cleanly
# and remove its sockets. Also: a bad config fails naming the field, and
# dpuctl explains a missing socket. DPU_OFFLOAD=rte_flow runs the same with the
# rte_flow backend, which net_pcap ports refuse flow by flow: every flow stays
# in software, shows the device's reason, and the packets are the same.
#   dataplane_pcap_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
py=${DPU_SCAPY_PYTHON:-/usr/bin/python3}
dataplane=$build/dpu-agent/datapath/dpu-dataplane
dpuctl=$build/dpu-agent/dpuctl/dpuctl
dir=$(mktemp -d /tmp/dpu-dp-pcap.XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "--- dataplane log" >&2; cat "$dir/dp.log" >&2 || true; exit 1; }

export DPU_PROTO_PY=$dir/py
"$py" "$here/dataplane_pcap_packets.py" "$dir" 2>/dev/null

cat > "$dir/dp.yaml" <<YAML
eal: {memory_mb: 128, file_prefix: dpu-pcap-$$, log_level: "*:warning"}
workers: 1
mbuf_pool_size: 2047
mbuf_cache_size: 64
idle_sleep_us: 100
uplink: {devargs: "net_pcap_uplink,rx_pcap=$dir/uplink-in.pcap,tx_pcap=$dir/uplink-out.pcap"}
representors: {mode: template, devargs: "net_pcap_{name},rx_pcap=$dir/{name}-in.pcap,tx_pcap=$dir/{name}-out.pcap"}
tunnel_ip: 192.168.100.1
uplink_mac: "02:00:00:00:01:00"
next_hops: [{peer: 192.168.100.2, mac: "02:00:00:00:02:00"}]
flow_cache: {entries: 1024}
conntrack: {max_entries: 5000, affinity_entries: 100, timeouts: {tcp_established_s: 3600}}
offload: ${DPU_OFFLOAD:-none}
sockets: {programming: $dir/program.sock, operator: $dir/operator.sock}
YAML

# A bad configuration fails at start, naming the field, and creates nothing.
sed 's/^workers: 1/workers: 0/' "$dir/dp.yaml" > "$dir/bad.yaml"
set +e
"$dataplane" --config "$dir/bad.yaml" > "$dir/bad.log" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "bad config: exit code $rc, expected 2"
grep -q "config.workers" "$dir/bad.log" || fail "bad config: message does not name config.workers: $(cat "$dir/bad.log")"
[ ! -e "$dir/program.sock" ] || fail "bad config left a socket behind"
# --check-config checks the conntrack ranges too, naming the field and the range.
sed 's/max_entries: 5000/max_entries: 0/' "$dir/dp.yaml" > "$dir/bad-ct.yaml"
set +e
"$dataplane" --config "$dir/bad-ct.yaml" --check-config > "$dir/bad-ct.log" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "bad conntrack config: --check-config exit code $rc, expected 2"
grep -q "config.conntrack.max_entries: must be between 1 and 67108864, not 0" "$dir/bad-ct.log" ||
  fail "bad conntrack config: $(cat "$dir/bad-ct.log")"

# dpuctl without a dataplane: exit 1 and a hint.
set +e
"$dpuctl" --socket "$dir/operator.sock" ports > "$dir/dpuctl.err" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || fail "dpuctl on a missing socket: exit code $rc"
grep -q "is dpu-dataplane running" "$dir/dpuctl.err" || fail "dpuctl gives no hint: $(cat "$dir/dpuctl.err")"

"$dataplane" --config "$dir/dp.yaml" > "$dir/dp.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$dir/program.sock" ] && break; sleep 0.05; done
[ -S "$dir/program.sock" ] || fail "no programming socket"

"$py" "$here/dataplane_client.py" --socket "$dir/program.sock" --model "$dir/model.json" > "$dir/client.log" ||
  fail "programming refused: $(cat "$dir/client.log")"

# Wait until every input packet has been received (the pcap ports stop at the end of their file).
want_vf1=$("$py" -c "import json;print(json.load(open('$dir/counts.json'))['pf0vf1'])")
want_up=$("$py" -c "import json;print(json.load(open('$dir/counts.json'))['uplink'])")
for _ in $(seq 100); do
  "$dpuctl" --socket "$dir/operator.sock" ports > "$dir/ports.txt"
  awk -v a="$want_vf1" -v b="$want_up" '$2=="pf0vf1" && $5==a {x=1} $2=="uplink" && $5==b {y=1} END {exit !(x && y)}' \
    "$dir/ports.txt" && break
  sleep 0.05
done
cat "$dir/ports.txt"
awk -v a="$want_vf1" '$2=="pf0vf1" && $5==a {x=1} END {exit !x}' "$dir/ports.txt" || fail "pf0vf1 did not receive $want_vf1"

"$dpuctl" --socket "$dir/operator.sock" stats > "$dir/stats.txt"
cat "$dir/stats.txt"
for reason in PortSecurityIp PortSecurityMac UnknownVni UnknownTunnelPeer WrongTunnelDestination Truncated; do
  awk -v r="$reason" '$1==r && $2==1 {x=1} END {exit !x}' "$dir/stats.txt" || fail "stats: $reason is not 1"
done
# Offload runs off the lcores every ~100 ms: wait until no flow is still
# pending (a loaded machine may need several rounds).
for _ in $(seq 100); do
  "$dpuctl" --socket "$dir/operator.sock" dump-flows > "$dir/flows.txt"
  grep -q "offload pending" "$dir/flows.txt" || break
  sleep 0.05
done
cat "$dir/flows.txt"
grep -q "nw_dst=10.244.2.7.*packets:2,.*dp:sw(.*actions:.*geneve_encap(.*remote=192.168.100.2" "$dir/flows.txt" ||
  fail "dump-flows: no encap flow for 10.244.2.7 with 2 packets"
grep -q "nw_src=10.244.1.5,nw_dst=10.244.1.6.*packets:3," "$dir/flows.txt" || fail "dump-flows: no local flow with 3 packets"
if [ "${DPU_OFFLOAD:-none}" = rte_flow ]; then
  grep -q "dp:sw(rte_flow" "$dir/flows.txt" || fail "dump-flows does not show the rte_flow refusal"
else
  grep -q "dp:sw(" "$dir/flows.txt" || fail "dump-flows does not say why flows run in software"
  ! grep -q "dp:hw" "$dir/flows.txt" || fail "a flow claims to be in hardware without offload"
fi
"$dpuctl" --socket "$dir/operator.sock" --json dump-flows | "$py" -c "import json,sys; d=json.load(sys.stdin); assert len(d['flows'])>=3, d"

# Services: a delta adds one (the packets are all in by now, so it changes
# none of them); dpuctl shows it as the dataplane balances it, and the
# connection table with the capacity the config gave.
cat > "$dir/delta.json" <<JSON
{"base_generation": 1, "generation": 2, "upsert_services": [{"name": "default/web", "cluster_ips": ["10.96.0.10"],
 "affinity_timeout_s": 600, "ports": [{"name": "http", "protocol": "TCP", "port": 80, "backends": [
  {"ip": "10.244.1.5", "port": 8080, "local": true, "ready": true, "serving": true},
  {"ip": "10.244.2.7", "port": 8080, "ready": true, "serving": true},
  {"ip": "10.244.2.8", "port": 8080, "serving": true, "terminating": true}]}]}]}
JSON
"$py" "$here/dataplane_client.py" --socket "$dir/program.sock" --delta "$dir/delta.json" > "$dir/delta.log" ||
  fail "the service delta was refused: $(cat "$dir/delta.log")"
"$dpuctl" --socket "$dir/operator.sock" services > "$dir/services.txt" || fail "dpuctl services failed"
cat "$dir/services.txt"
awk '$1=="default/web" && $2=="http" && $3=="cluster-ip" && $4=="10.96.0.10:80" && $5=="tcp" && $6=="cluster" &&
     $7=="10m00s" && $8=="2/3" && $9>0 && $10==0 {x=1} END {exit !x}' "$dir/services.txt" ||
  fail "dpuctl services: no row for default/web's cluster IP with 2 of 3 backends usable"
grep -Eq "^default/web +http +10.244.2.8:8080 +unused +remote +0.0%" "$dir/services.txt" ||
  fail "dpuctl services: the terminating backend is not shown unused while others are ready"
"$dpuctl" --socket "$dir/operator.sock" --json services |
  "$py" -c "import json,sys; s=json.load(sys.stdin)['services'][0]; t=sum(b['share'] for b in s['backends']);
assert abs(t-1)<1e-6 and s['maglev_size']>0, s" || fail "dpuctl --json services: the Maglev shares do not add up to 1"
"$dpuctl" --socket "$dir/operator.sock" conntrack --protocol tcp --port 80 > "$dir/conntrack.txt" ||
  fail "dpuctl conntrack failed"
cat "$dir/conntrack.txt"
grep -q "^no connections match" "$dir/conntrack.txt" || fail "dpuctl conntrack: connections without traffic"
grep -q "tracked 0 of at most 5000 " "$dir/conntrack.txt" || fail "dpuctl conntrack: not the config's max_entries"
# Bad arguments: exit 2 naming the argument, nothing asked of the dataplane.
for args in "conntrack --port 0" "conntrack --port 65536" "conntrack --address 10.96.0" "conntrack --protocol icmp4" \
            "conntrack --limit 0" "conntrack --port" "services --port 80" "ports --address 10.0.0.1"; do
  set +e
  # shellcheck disable=SC2086
  "$dpuctl" --socket "$dir/operator.sock" $args > "$dir/bad.out" 2> "$dir/bad.err"
  rc=$?
  set -e
  option=$(echo "$args" | grep -o -- "--[a-z]*")
  [ $rc -eq 2 ] || fail "dpuctl $args: exit code $rc, expected 2"
  grep -q -- "^dpuctl: $option" "$dir/bad.err" || fail "dpuctl $args does not name $option: $(head -1 "$dir/bad.err")"
done

kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=
[ $rc -eq 0 ] || fail "dpu-dataplane exited with $rc after SIGTERM"
[ ! -e "$dir/program.sock" ] && [ ! -e "$dir/operator.sock" ] || fail "sockets left behind after SIGTERM"

"$py" "$here/dataplane_pcap_compare.py" "$dir" pf0vf1 pf0vf2 uplink 2>/dev/null || fail "output packets differ"
echo "PASS"
