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
export DL_RUN_DIR DPU_BUILD_DIR=${DPU_BUILD_DIR:-$src/build/release}
DL_RUN_DIR=$(mktemp -d /tmp/dpu-lab-cli.XXXXXX)
trap 'rm -rf "$DL_RUN_DIR"' EXIT

for f in "$lab" "$src/lab/demo" "$src"/lab/lib/{core,topology,daemons,pods,traffic,services,policy,lab}.bash; do
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

# Dual stack (DL_DUAL_STACK=1): the IPv6 addresses beside the IPv4 ones, and
# the service verbs writing a cluster IP and an EndpointSlice per family.
(
  source "$src/lab/lib/lab.bash"
  dl_init "q6" || exit 1
  [ "$(dl_pod_cidrs 2)" = 10.244.2.0/24 ] && [ "$(dl_cluster_cidrs)" = 10.244.0.0/16 ] &&
    [ "$(dl_service_cidrs)" = 10.96.0.0/12 ] || exit 1
  mkdir -p "$DL_DIR" && echo "nodes: []" > "$DL_DIR/cluster.nodes.yaml" || exit 1
  out=$(dl_service_add v4 --port tcp/80 --ip fd00:10:96::a 2>&1) && exit 1
  grep -q "lab q6 is IPv4 only (an IPv6 cluster IP needs a lab up --dual-stack)" <<< "$out" || exit 1
  export DL_DUAL_STACK=1
  [ "$(dl_pod_cidrs 2)" = "10.244.2.0/24, fd00:10:244:2::/64" ] && [ "$(dl_node_ip6 3)" = fd00:18::3 ] &&
    [ "$(dl_cluster_cidrs)" = "10.244.0.0/16, fd00:10:244::/48" ] &&
    [ "$(dl_service_cidrs)" = "10.96.0.0/12, fd00:10:96::/112" ] || exit 1
  f=$DL_DIR/cluster.yaml
  dl_service_add web --port tcp/80:8080 --backends "" || exit 1
  grep -qF '  - {namespace: default, name: web, type: ClusterIP, clusterIP: 10.96.0.10, clusterIPs: [10.96.0.10, "fd00:10:96::a"], ipFamilies: [IPv4, IPv6], ipFamilyPolicy: PreferDualStack, ports: [{name: tcp-80, protocol: TCP, port: 80, targetPort: 8080}]}' "$f" &&
    grep -qxF '  - {namespace: default, name: web-lab, service: web, addressType: IPv4, endpoints: [], ports: [{name: tcp-80, protocol: TCP, port: 8080}]}' "$f" &&
    grep -qxF '  - {namespace: default, name: web-lab-v6, service: web, addressType: IPv6, endpoints: [], ports: [{name: tcp-80, protocol: TCP, port: 8080}]}' "$f" || exit 1
  dl_service_add dns --port udp/53 --ip fd00:10:96::35 --ip 10.96.0.53 || exit 1
  [ "$(dl_service_ips dns)" = "10.96.0.53,fd00:10:96::35" ] && [ "$(dl_service_ip6 web)" = fd00:10:96::a ] || exit 1
  out=$(dl_service_add other --port tcp/80 --ip fd00:10:96::35 2>&1) && exit 1
  grep -q "cluster IP fd00:10:96::35 is service dns's" <<< "$out" || exit 1
  out=$(dl_service_add other --port tcp/80 --ip fd00:99::1 2>&1) && exit 1
  grep -q "must be an IPv6 address in the service CIDR fd00:10:96::/112" <<< "$out" || exit 1
  out=$(dl_service_add other --port tcp/80 --ip fd00:10:96::b --ip fd00:10:96::c 2>&1) && exit 1
  grep -q "one IPv6 cluster IP per service" <<< "$out" || exit 1
  # Replaced, it keeps both cluster IPs; the next one takes the next free IPv6 one.
  dl_service_add web --port tcp/81 || exit 1
  dl_service_add third --port tcp/80 || exit 1
  [ "$(dl_service_list)" = "dns 10.96.0.53,fd00:10:96::35 udp/53:53 
third 10.96.0.11,fd00:10:96::b tcp/80:80 
web 10.96.0.10,fd00:10:96::a tcp/81:81 " ] || exit 1
  # dpu-lab apply: a dual-stack Service's clusterIPs in its own order (IPv6
  # first here); the families a Service without cluster IPs asks for
  # (ipFamilyPolicy, ipFamilies), allocated as the API server does.
  if [ -x "$(dl_bin agent)" ]; then
    printf '%s\n' 'apiVersion: v1' 'kind: Service' 'metadata: {name: app}' \
      'spec: {ipFamilyPolicy: RequireDualStack, ipFamilies: [IPv6, IPv4], clusterIPs: ["fd00:10:96::50", 10.96.0.50], ports: [{port: 80}]}' \
      > "$DL_DIR/app.yaml"
    out=$(dl_apply "$DL_DIR/app.yaml") && [ "$out" = "service default/app created, cluster IP 10.96.0.50,fd00:10:96::50" ] &&
      [ "$(dl_service_list | grep '^app ')" = "app 10.96.0.50,fd00:10:96::50 tcp/80:80 " ] || exit 1
    grep -F '"name":"app",' "$f" | grep -qF '"clusterIPs":["fd00:10:96::50","10.96.0.50"],"ipFamilyPolicy":"RequireDualStack"' ||
      exit 1
    out=$(dl_apply "$DL_DIR/app.yaml") && [ "$out" = "service default/app unchanged, cluster IP 10.96.0.50,fd00:10:96::50" ] ||
      exit 1
    sed -i 's/fd00:10:96::50/fd00:10:96::51/' "$DL_DIR/app.yaml"
    out=$(dl_apply "$DL_DIR/app.yaml" 2>&1) && exit 1
    grep -q "its cluster IP is fd00:10:96::50 and cannot change to fd00:10:96::51" <<< "$out" || exit 1
    apply_one() {  # NAME SPEC → dl_apply's output
      printf '%s\n' 'apiVersion: v1' 'kind: Service' "metadata: {name: $1}" "spec: {$2, ports: [{port: 80}]}" \
        > "$DL_DIR/one.yaml"
      dl_apply "$DL_DIR/one.yaml" 2>&1
    }
    out=$(apply_one both 'ipFamilyPolicy: PreferDualStack') &&
      [ "$out" = "service default/both created, cluster IP 10.96.0.12,fd00:10:96::c" ] || exit 1
    out=$(apply_one six-first 'ipFamilyPolicy: RequireDualStack, ipFamilies: [IPv6]') &&
      [ "$out" = "service default/six-first created, cluster IP 10.96.0.13,fd00:10:96::d" ] || exit 1
    grep -F '"name":"six-first",' "$f" | grep -qF '"clusterIPs":["fd00:10:96::d","10.96.0.13"]' || exit 1
    out=$(apply_one single 'type: ClusterIP') && [ "$out" = "service default/single created, cluster IP 10.96.0.14" ] ||
      exit 1
    out=$(apply_one six 'ipFamilies: [IPv6]') && exit 1
    grep -q "Service default/six: the lab's services all have an IPv4 cluster IP: an IPv6 single-stack service" <<< "$out" ||
      exit 1
    out=$(apply_one bad 'ipFamilyPolicy: DualStack') && exit 1
    grep -q "ipFamilyPolicy: must be SingleStack, PreferDualStack or RequireDualStack" <<< "$out" || exit 1
  fi
) && pass "library: dual-stack addresses; service verbs write a cluster IP and an EndpointSlice per family" ||
  fail "library: dual stack"

# The NetworkPolicy verbs' arguments and the cluster file entries they write,
# without a lab: namespaces and their labels, a pod's labels and ports
# refused before anything is written.
(
  source "$src/lab/lib/lab.bash"
  dl_init "q3" || exit 1
  mkdir -p "$DL_DIR" && echo "nodes: []" > "$DL_DIR/cluster.nodes.yaml" || exit 1
  f=$DL_DIR/cluster.yaml
  out=$(dl_ns_add X 2>&1) && exit 1
  grep -q "namespace name 'X' must be a DNS label" <<< "$out" || exit 1
  out=$(dl_ns_add x team 2>&1) && exit 1
  grep -q "ns add x: label 'team' must be KEY=VALUE" <<< "$out" || exit 1
  out=$(dl_ns_add x "te am=a" 2>&1) && exit 1
  grep -q "label key 'te am' must be" <<< "$out" || exit 1
  out=$(dl_ns_add x team=-a 2>&1) && exit 1
  grep -q "label team: value '-a' must be" <<< "$out" || exit 1
  out=$(dl_ns_add x kubernetes.io/metadata.name=y 2>&1) && exit 1
  grep -q "is the namespace's name and cannot be set" <<< "$out" || exit 1
  [ ! -e "$DL_DIR/services/namespaces/x" ] || exit 1
  dl_ns_add x team=a example.com/tier=front || exit 1
  grep -qxF '  - {"name":"x","labels":{"team":"a","example.com/tier":"front"}}' "$f" || exit 1
  dl_label_ns x team- env=prod || exit 1
  grep -qxF '  - {"name":"x","labels":{"example.com/tier":"front","env":"prod"}}' "$f" || exit 1
  out=$(dl_label_ns x team 2>&1) && exit 1
  grep -q "'team' must be KEY=VALUE (set) or KEY- (remove)" <<< "$out" || exit 1
  dl_label_ns y a=b && grep -qxF '  - {"name":"y","labels":{"a":"b"}}' "$f" || exit 1
  # Pod arguments, checked before the pod's entry or its netns exist.
  [ "$(_dl_container_port http:80/tcp)" = "http TCP 80" ] && [ "$(_dl_container_port 81/udp)" = "- UDP 81" ] &&
    [ "$(_dl_container_port serve-82:82)" = "serve-82 TCP 82" ] || exit 1
  out=$(_dl_container_port http:0 2>&1) && exit 1
  grep -q "must be \[NAME:\]PORT\[/PROTO\] with PORT 1..65535" <<< "$out" || exit 1
  out=$(_dl_container_port http:80/icmp 2>&1) && exit 1
  grep -q "protocol must be tcp, udp or sctp" <<< "$out" || exit 1
  out=$(dl_pod_add_labelled 1 a --ns X 2>&1) && exit 1
  grep -q "namespace name 'X'" <<< "$out" || exit 1
  out=$(dl_pod_add_labelled 1 a --labels pod 2>&1) && exit 1
  grep -q -- "--labels: 'pod' must be KEY=VALUE" <<< "$out" || exit 1
  out=$(dl_pod_add_labelled 1 a --port x:80 --port x:81 2>&1) && exit 1
  grep -q "port name 'x' is given twice" <<< "$out" || exit 1
  out=$(dl_pod_add_labelled 1 a --frob 2>&1) && exit 1
  grep -q "unknown argument '--frob'" <<< "$out" || exit 1
  [ -z "$(ls -A "$DL_DIR/services/pod-meta" 2>/dev/null)" ] && ! grep -q "^pods:" "$f" || exit 1
  # The entries the lab writes for a pod, as the file source reads them.
  mkdir -p "$DL_DIR/services/pod-meta" "$DL_DIR/services/pod-ports" &&
    echo '{"namespace":"x","name":"a","nodeName":"node1","labels":{"pod":"a"},"ips":["10.244.1.3"]}' > "$DL_DIR/services/pod-meta/n1-x.a" &&
    printf 'serve-80-tcp TCP 80\n- UDP 81\n' > "$DL_DIR/services/pod-ports/n1-x.a" && dl_compose_cluster_file || exit 1
  grep -qxF '  - {"namespace":"x","name":"a","nodeName":"node1","labels":{"pod":"a"},"ips":["10.244.1.3"],"containers":[{"name":"lab","ports":[{"name":"serve-80-tcp","containerPort":80,"protocol":"TCP"},{"containerPort":81,"protocol":"UDP"}]}]}' "$f" || exit 1
  [ "$(_dl_pods_of_ns x)" = node1/x.a ] || exit 1
  out=$(_dl_delete_policy_object Namespace "" x 2>&1) && exit 1
  grep -q "namespace x still has pods node1/x.a: delete them first" <<< "$out"
) && pass "library: ns add, label ns, pod add arguments and the namespaces and pods entries" ||
  fail "library: NetworkPolicy verbs"

# dpu-lab apply/delete through the command line, without daemons (a lab
# state dir with its nodes' part of the cluster file): objects decoded by
# dpu-agent --decode, refusals naming the document, all or none.
agent_built=0
if [ -x "$DPU_BUILD_DIR/dpu-agent/control/dpu-agent" ]; then
  agent_built=1
  q=q4
  mkdir -p "$DL_RUN_DIR/$q" && echo "nodes: []" > "$DL_RUN_DIR/$q/cluster.nodes.yaml"
  ( source "$src/lab/lib/lab.bash"; dl_init $q && dl_service_add made --port tcp/80:8080 ) ||
    fail "service add before apply"
  cf=$DL_RUN_DIR/$q/cluster.yaml
  cp "$cf" "$DL_RUN_DIR/before.yaml"
  unchanged() { cmp -s "$cf" "$DL_RUN_DIR/before.yaml" && [ -z "$(ls -A "$DL_RUN_DIR/$q/services/applied" 2>/dev/null)" ]; }
  y=$DL_RUN_DIR/apply.yaml
  # As kubectl users write them: no namespace, no cluster IP, a named targetPort.
  good='apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-x1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
  - {addresses: [10.244.1.5], nodeName: node1, targetRef: {kind: Pod, name: web1}}
  - {addresses: [10.244.2.5], nodeName: node2, conditions: {ready: false}}'
  expect 2 "usage: dpu-lab apply FILE" bash "$lab" --name $q apply
  expect 1 "is not up" bash "$lab" --name "zz$$" apply "$y"
  expect 1 "apply $DL_RUN_DIR/none.yaml: cannot open" bash "$lab" --name $q apply "$DL_RUN_DIR/none.yaml"
  printf '%s\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n' \
    "$good" > "$y"
  expect 1 "document 3: Deployment default/web: apiVersion \"apps/v1\" kind \"Deployment\" is not an object the agent reads" \
    bash "$lab" --name $q apply "$y"
  expect 1 "document 4: Pod default/p: dpu-lab apply takes only Services and Namespaces .*, EndpointSlices .* and NetworkPolicies" bash "$lab" --name $q apply "$y"
  expect 1 "apply $y: nothing changed" bash "$lab" --name $q apply "$y"
  unchanged && pass "a file with refused kinds changed nothing" || fail "a refused apply changed the cluster file: $(cat "$cf")"
  printf '%s\n---\napiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: 0}]}\n' "$good" > "$y"
  expect 1 "document 3: Service default/bad: spec.ports\[0\].port" bash "$lab" --name $q apply "$y"
  printf '%s\n---\napiVersion: v1\nkind: Service\nmetadata: {name: out}\nspec: {clusterIP: 10.0.0.1, ports: [{port: 80}]}\n' "$good" > "$y"
  expect 1 "document 3: Service default/out: cluster IP 10.0.0.1 is not in the lab's service CIDR" bash "$lab" --name $q apply "$y"
  printf '%s\n---\napiVersion: v1\nkind: Service\nmetadata: {name: clash, namespace: x}\nspec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}\n' "$good" > "$y"
  expect 1 "Service x/clash: cluster IP 10.96.0.10 is service made's" bash "$lab" --name $q apply "$y"
  printf '%s\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: lone}\naddressType: IPv4\n' "$good" > "$y"
  expect 1 "EndpointSlice default/lone: metadata.labels\[kubernetes.io/service-name\] is required" bash "$lab" --name $q apply "$y"
  printf '%s\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: made-lab, labels: {kubernetes.io/service-name: made}}\naddressType: IPv4\n' "$good" > "$y"
  expect 1 "EndpointSlice default/made-lab: the name is that of the slice the lab wrote for service made" bash "$lab" --name $q apply "$y"
  printf 'a: [1, 2\n' > "$y"
  expect 1 "apply $y: .*not valid YAML" bash "$lab" --name $q apply "$y"
  unchanged && pass "refused files (bad field, cluster IP outside the CIDR or taken, a slice of no service or with the lab's slice's name, not YAML) changed nothing" ||
    fail "a refused apply changed the cluster file: $(cat "$cf")"

  # The good objects: written as the file source's entries, the cluster IP the first free one.
  printf '%s\n' "$good" > "$y"
  expect 0 "^service default/web created, cluster IP 10.96.0.11" bash "$lab" --name $q apply "$y"
  grep -qxF '  - {"namespace":"default","name":"web","type":"ClusterIP","clusterIPs":["10.96.0.11"],"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":"http"}],"sessionAffinity":"None","internalTrafficPolicy":"Cluster","externalTrafficPolicy":"Cluster","publishNotReadyAddresses":false}' "$cf" &&
    grep -qxF '  - {"namespace":"default","name":"web-x1","service":"web","addressType":"IPv4","endpoints":[{"addresses":["10.244.1.5"],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":"node1","targetRef":{"kind":"Pod","name":"web1","namespace":""}},{"addresses":["10.244.2.5"],"conditions":{"ready":false,"serving":true,"terminating":false},"nodeName":"node2"}],"ports":[{"name":"http","protocol":"TCP","port":8080}]}' "$cf" &&
    grep -q "^services:" "$cf" && grep -q "^endpointSlices:" "$cf" &&
    pass "apply wrote the Service and the EndpointSlice as cluster file entries" || fail "apply wrote: $(cat "$cf")"
  expect 0 "^web 10.96.0.11 tcp/80:http node1/web1,10.244.2.5=unready$" bash "$lab" --name $q service list
  expect 0 "service default/web: cluster IP 10.96.0.11, ports tcp/80:http, backends node1/web1,10.244.2.5=unready" \
    bash "$lab" --name $q status
  expect 0 "^service default/web unchanged, cluster IP 10.96.0.11" bash "$lab" --name $q apply "$y"
  # Changed: configured, the cluster IP kept; a NodePort gets free node ports around the one it gives.
  sed -i 's/selector: {app: web}/type: NodePort/; s/targetPort: http}/targetPort: http}, {name: b, port: 81, nodePort: 30000}/' "$y"
  expect 0 "^service default/web configured, cluster IP 10.96.0.11" bash "$lab" --name $q apply "$y"
  expect 0 "^web 10.96.0.11 tcp/80:http@30001,tcp/81:81@30000 " bash "$lab" --name $q service list
  out=$(cd "$DL_RUN_DIR" && source "$src/lab/lib/lab.bash" && dl_init $q && dl_service_add other --port tcp/80 --node-port 30001 2>&1) &&
    fail "service add took applied web's node port" || { grep -q "node port 30001 is service web's" <<< "$out" &&
    pass "service add refuses an applied service's node port" || fail "service add --node-port 30001: $out"; }
  # The Service made by `service add` replaced by an applied one of its name, its lab slice with it.
  printf 'apiVersion: v1\nkind: Service\nmetadata: {name: made}\nspec: {ports: [{port: 80, targetPort: 9090}]}\n' > "$DL_RUN_DIR/made.yaml"
  expect 0 "^service default/made configured, cluster IP 10.96.0.10 \(replaces the one dpu-lab service add made" \
    bash "$lab" --name $q apply "$DL_RUN_DIR/made.yaml"
  [ "$(grep -c 'name.*made' "$cf")" = 1 ] && grep -q '"name":"made".*"targetPort":9090' "$cf" &&
    pass "the applied Service replaced the one service add made, and its slice" || fail "after applying made: $(cat "$cf")"
  # delete: what the file names, absent ones said; the cluster file as before the applies, less 'made'.
  expect 0 "^service default/web deleted" bash "$lab" --name $q delete "$y"
  expect 0 "^endpointslice default/web-x1 not found" bash "$lab" --name $q delete "$y"
  expect 0 "^service default/made deleted" bash "$lab" --name $q delete "$DL_RUN_DIR/made.yaml"
  [ "$(cat "$cf")" = "nodes: []" ] && pass "delete removed them from the cluster file" || fail "after delete: $(cat "$cf")"
  printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n' > "$y"
  expect 1 "delete $y: nothing changed" bash "$lab" --name $q delete "$y"

  # Namespaces and NetworkPolicies: decoded as the Kubernetes source does,
  # written as the file source's entries; a bad policy refuses the whole file.
  np='apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {team: a}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {team: a}}, podSelector: {matchLabels: {pod: b}}}]
    ports: [{port: serve-80-tcp}, {protocol: UDP, port: 81}]'
  printf '%s\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: bad, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/33}}]}]\n' "$np" > "$y"
  cp "$cf" "$DL_RUN_DIR/before.yaml"
  expect 1 "document 3: NetworkPolicy x/bad: spec.ingress\[0\].from\[0\].ipBlock.cidr" bash "$lab" --name $q apply "$y"
  cmp -s "$cf" "$DL_RUN_DIR/before.yaml" && [ ! -e "$DL_RUN_DIR/$q/services/netpols" ] &&
    pass "a file with a bad NetworkPolicy changed nothing" || fail "a refused policy apply changed: $(cat "$cf")"
  printf '%s\n' "$np" > "$y"
  expect 0 "^namespace x created" bash "$lab" --name $q apply "$y"
  grep -qxF '  - {"name":"x","labels":{"team":"a"}}' "$cf" && grep -q '^networkPolicies:' "$cf" &&
    grep -qxF '  - {"egress":[],"ingress":[{"from":[{"namespaceSelector":{"matchLabels":{"team":"a"}},"podSelector":{"matchLabels":{"pod":"b"}}}],"ports":[{"port":"serve-80-tcp","protocol":"TCP"},{"port":81,"protocol":"UDP"}]}],"name":"allow-b","namespace":"x","podSelector":{"matchLabels":{"pod":"a"}},"policyTypes":["Ingress"]}' "$cf" &&
    pass "apply wrote the Namespace and the NetworkPolicy as cluster file entries" || fail "apply wrote: $(cat "$cf")"
  expect 0 "^networkpolicy x/allow-b unchanged" bash "$lab" --name $q apply "$y"
  expect 0 "^namespace x deleted \(with its network policies\)" bash "$lab" --name $q delete "$y"
  expect 0 "^networkpolicy x/allow-b not found" bash "$lab" --name $q delete "$y"
  [ "$(cat "$cf")" = "nodes: []" ] && pass "delete removed the namespace and its policies" || fail "after delete: $(cat "$cf")"
  expect 2 "usage: dpu-lab ns add NAME" bash "$lab" --name $q ns add
  expect 0 "" bash "$lab" --name $q ns add y env=dev
  expect 0 "" bash "$lab" --name $q label ns y env=prod
  grep -qxF '  - {"name":"y","labels":{"env":"prod"}}' "$cf" && pass "ns add and label ns through the command line" ||
    fail "ns add/label: $(cat "$cf")"
  expect 2 "give the pod as NODE/POD" bash "$lab" --name $q label pod a x=y
  if [ "$(id -u)" = 0 ]; then
    expect 2 "usage: dpu-lab ipsec enable\|disable\|rotate NODE\|status" bash "$lab" --name $q ipsec frob
    expect 2 "usage: dpu-lab ipsec rotate NODE" bash "$lab" --name $q ipsec rotate
  fi
fi

if [ "$(id -u)" = 0 ]; then
  expect 1 "is not up" bash "$lab" --name "zz$$" pod add node1 x
  expect 1 "nodes must be 1..50" bash "$lab" --name "zz$$" up --nodes 0
  expect 1 "pods-per-node must be 0..7" bash "$lab" --name "zz$$" up --pods-per-node 9
  expect 1 "not built: .*/nonexistent" env DPU_BUILD_DIR=/nonexistent bash "$lab" --name "zz$$" up
  expect 2 "unknown argument '--frob'" bash "$lab" --name "zz$$" up --frob
  expect 1 "is not up" bash "$lab" --name "zz$$" ipsec enable
  expect 2 "nat takes nodeN, not 'n2'" bash "$lab" --name "zz$$" up --ipsec --nat n2
  expect 1 "nat needs IPsec" bash "$lab" --name "zz$$" up --nat node2
  expect 1 "nat names node '3': give nodeN with N in 1[.][.]2" bash "$lab" --name "zz$$" up --ipsec --nat node3
  expect 1 "every node behind a NAT leaves none outside" bash "$lab" --name "zz$$" up --ipsec --nat node1 --nat node2
  expect 1 "DL_NAT_MODE [(]--nat-mode[)] must be static or masquerade" bash "$lab" --name "zz$$" up --ipsec --nat node2 --nat-mode full-cone
  if [ -e "$DL_RUN_DIR/zz$$" ] || [ -n "$(ip netns list | grep "^zz$$-")" ]; then fail "a refused up left state behind"
  else pass "refused ups left nothing behind"; fi
fi
[ "$FAILURES" = 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
# Everything else passed, but a test that left checks out is not a pass.
[ "$(id -u)" = 0 ] || skip_test "the up-time validation needs root (the other checks passed)"
[ $agent_built = 1 ] || skip_test "dpu-lab apply needs a built dpu-agent ($DPU_BUILD_DIR; the other checks passed)"
echo PASS
