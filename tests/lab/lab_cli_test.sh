#!/usr/bin/env bash
# lab/dpu-lab's command line and the library's pure parts, without building a
# lab (no root needed; as root, also the up-time validation, without which the
# test reports itself skipped once the rest passed): every lab file
# parses; usage and exit codes; bad lab names, commands, node counts and a
# missing build are refused with a message naming what to fix — and leave
# nothing behind (no state dir, no namespace).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
source "$src/tests/support/shell.bash"
lab=$src/lab/dpu-lab
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$(( FAILURES + 1 )); }
pass() { echo "ok: $*"; }
export DL_RUN_DIR
DL_RUN_DIR=$(mktemp -d /tmp/dpu-lab-cli.XXXXXX)
trap 'rm -rf "$DL_RUN_DIR"' EXIT

for f in "$lab" "$src/lab/demo" "$src"/lab/lib/{core,topology,daemons,pods,traffic,services,lab}.bash; do
  bash -n "$f" 2>/dev/null && pass "parses: ${f#"$src"/}" || fail "bash -n ${f#"$src"/}: $(bash -n "$f" 2>&1)"
done

# expect RC PATTERN CMD... — CMD exits RC and its output matches PATTERN
expect() {
  local want=$1 pat=$2 out rc; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then fail "$*: exit $rc, expected $want: $out"
  elif ! grep -qE "$pat" <<< "$out"; then fail "$*: output does not match '$pat': $out"
  else pass "$* -> $want ($(head -n 1 <<< "$out" | cut -c1-90))"; fi
}
expect 0 '^usage: dpu-lab' bash "$lab" help
expect 2 '^usage: dpu-lab' bash "$lab"
expect 2 "lab name 'Bad-Name' must be" bash "$lab" --name Bad-Name status
expect 2 "lab name .* must be" bash "$lab" --name waytoolongname123 status
expect 0 "lab zz$$: down" bash "$lab" --name "zz$$" status
expect 2 "unknown command 'frobnicate'" bash "$lab" --name "zz$$" frobnicate

# The library's naming, without a lab.
(
  source "$src/lab/lib/lab.bash"
  dl_init "q1" || exit 1
  [ "$(dl_node_ns 2 dpu)" = q1-n2-dpu ] && [ "$(dl_pod_ns 1 web)" = q1-n1-pod-web ] &&
    [ "$(dl_fabric_ns)" = q1-fabric ] && [ "$(dl_tunnel_ip 3)" = 192.168.100.3 ] &&
    [ "$(dl_pod_cidr 2)" = 10.244.2.0/24 ] && [ "$(DL_POD_CIDR_LEN=27 dl_pod_cidr 2)" = 10.244.2.0/27 ] &&
    [ "$(fake_sysfs_vf_pci 6)" = 0000:3b:01.0 ] || exit 1
  out=$(dl_target_ns nowhere 2>&1) && exit 1
  grep -q "must be fabric, nodeN/host" <<< "$out" || exit 1
  out=$(dl_node_ref node7 2>&1) && exit 1
  grep -q "no node 'node7'" <<< "$out"
) && pass "library: namespace names, addresses, target parsing" || fail "library naming/parsing"

# The service verbs' arguments and the cluster file they write, without a lab
# (no pods: services without endpoints; the lab test gives them endpoints).
(
  source "$src/lab/lib/lab.bash"
  dl_init "q2" || exit 1
  mkdir -p "$DL_DIR" && echo "nodes: []" > "$DL_DIR/cluster.nodes.yaml" || exit 1
  [ "$(_dl_service_port tcp/80:8080)" = "TCP 80 8080" ] && [ "$(_dl_service_port 53/udp)" = "UDP 53 53" ] || exit 1
  out=$(_dl_service_port icmp/1 2>&1) && exit 1
  grep -q "protocol must be tcp, udp or sctp" <<< "$out" || exit 1
  out=$(_dl_service_port tcp/70000 2>&1) && exit 1
  grep -q "1..65535" <<< "$out" || exit 1
  # A target port by name (resolved per pod, lab_services_policies gives pods named ports).
  [ "$(_dl_service_port tcp/80:http)" = "TCP 80 http" ] || exit 1
  out=$(_dl_service_port tcp/80:web--1 2>&1) && exit 1
  grep -q "a port name must be 1-15 characters" <<< "$out" || exit 1
  out=$(_dl_service_port tcp/80:0 2>&1) && exit 1
  grep -q "target port must be 1..65535 or a port name" <<< "$out" || exit 1
  out=$(dl_service_add Web --port tcp/80 2>&1) && exit 1
  grep -q "service name 'Web' must be" <<< "$out" || exit 1
  out=$(dl_service_add web 2>&1) && exit 1
  grep -q "at least one --port" <<< "$out" || exit 1
  out=$(dl_service_add web --port tcp/80 --ip 192.168.1.1 2>&1) && exit 1
  grep -q "service CIDR 10.96.0.0/12" <<< "$out" || exit 1
  dl_service_add web --port tcp/80:8080 --port udp/53 --affinity 60 --backends "" || exit 1
  dl_service_add dns --port udp/53:5353 || exit 1
  [ "$(dl_service_ip web)" = 10.96.0.10 ] && [ "$(dl_service_ip dns)" = 10.96.0.11 ] || exit 1
  out=$(dl_service_add other --port tcp/80 --ip 10.96.0.10 2>&1) && exit 1
  grep -q "cluster IP 10.96.0.10 is service web's" <<< "$out" || exit 1
  out=$(dl_service_backends web node1/pod1 2>&1) && exit 1
  grep -q "no node 'node1'" <<< "$out" || exit 1
  f=$DL_DIR/cluster.yaml
  grep -q '^  - {namespace: default, name: web, type: ClusterIP, clusterIP: 10.96.0.10, ports: \[{name: tcp-80, protocol: TCP, port: 80, targetPort: 8080}, {name: udp-53, protocol: UDP, port: 53, targetPort: 53}\], sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}}$' "$f" &&
    grep -q '^  - {namespace: default, name: web-lab, service: web, addressType: IPv4, endpoints: \[\], ports: \[{name: tcp-80, protocol: TCP, port: 8080}, {name: udp-53, protocol: UDP, port: 53}\]}$' "$f" &&
    [ "$(dl_service_list)" = "dns 10.96.0.11 udp/53:5353 
web 10.96.0.10 tcp/80:8080,udp/53:53 " ] || exit 1
  # Node ports and the external traffic policy.
  out=$(dl_service_add np --port tcp/80 --node-port 8080 2>&1) && exit 1
  grep -q -- "--node-port must be 30000..32767, not '8080'" <<< "$out" || exit 1
  out=$(dl_service_add np --port tcp/80 --node-port x 2>&1) && exit 1
  grep -q -- "--node-port must be 30000..32767" <<< "$out" || exit 1
  out=$(dl_service_add np --port tcp/80 --node-port 30080 --etp local 2>&1) && exit 1
  grep -q -- "--etp must be Cluster or Local, not 'local'" <<< "$out" || exit 1
  out=$(dl_service_add np --port tcp/80 --etp Local 2>&1) && exit 1
  grep -q -- "--etp is only for a service with a --node-port" <<< "$out" || exit 1
  [ ! -e "$DL_DIR/services/np.svc" ] || exit 1
  dl_service_add np --port tcp/80:8080 --port udp/53 --node-port 30080 --etp Local || exit 1
  grep -q '^  - {namespace: default, name: np, type: NodePort, clusterIP: 10.96.0.12, ports: \[{name: tcp-80, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}, {name: udp-53, protocol: UDP, port: 53, targetPort: 53}\], externalTrafficPolicy: Local}$' "$f" || exit 1
  [ "$(dl_service_list | grep '^np ')" = "np 10.96.0.12 tcp/80:8080@30080,udp/53:53 " ] || exit 1
  out=$(dl_service_add np2 --port tcp/81 --node-port 30080 2>&1) && exit 1
  grep -q "node port 30080 is service np's" <<< "$out" || exit 1
  dl_service_del np || exit 1
  # Without endpoints, the slice holds only the ports given by number.
  dl_service_add named --port tcp/80:http --port udp/53 || exit 1
  grep -q '^  - {namespace: default, name: named, type: ClusterIP, clusterIP: 10.96.0.12, ports: \[{name: tcp-80, protocol: TCP, port: 80, targetPort: http}, {name: udp-53, protocol: UDP, port: 53, targetPort: 53}\]}$' "$f" &&
    grep -q '^  - {namespace: default, name: named-lab, service: named, addressType: IPv4, endpoints: \[\], ports: \[{name: udp-53, protocol: UDP, port: 53}\]}$' "$f" || exit 1
  dl_service_del named || exit 1
  dl_service_del web && dl_service_del web || exit 1
  [ "$(dl_service_list | wc -l)" = 1 ] && ! grep -q "name: web" "$f" || exit 1
  dl_service_del dns && [ "$(cat "$f")" = "nodes: []" ]
) && pass "library: service verbs check their arguments and write Services and EndpointSlices" ||
  fail "library: service verbs"

if [ "$(id -u)" = 0 ]; then
  expect 1 "is not up" bash "$lab" --name "zz$$" pod add node1 x
  expect 1 "nodes must be 1..50" bash "$lab" --name "zz$$" up --nodes 0
  expect 1 "pods-per-node must be 0..7" bash "$lab" --name "zz$$" up --pods-per-node 9
  expect 1 "not built: .*/nonexistent" env DPU_BUILD_DIR=/nonexistent bash "$lab" --name "zz$$" up
  expect 2 "unknown argument '--frob'" bash "$lab" --name "zz$$" up --frob
  if [ -e "$DL_RUN_DIR/zz$$" ] || [ -n "$(ip netns list | grep "^zz$$-")" ]; then fail "a refused up left state behind"
  else pass "refused ups left nothing behind"; fi
fi
[ "$FAILURES" = 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
# Everything else passed, but a test that left checks out is not a pass.
[ "$(id -u)" = 0 ] || skip_test "the up-time validation needs root (the other checks passed)"
echo PASS
