#!/usr/bin/env bash
# Lab e2e: Kubernetes mode (lab/lib/kube.bash), driven with the real kubectl as
# an operator drives a cluster. 2 nodes; every dpu-agent runs the Kubernetes
# source against the fake API server with the ServiceAccount token and the
# RBAC of manifests/base/agent-rbac; pods are plumbed by the kubelet stand-in.
# Proves:
#   - each agent publishes its tunnel IP on its Node, and learns the other
#     node from the API (not from a cluster file: there is none);
#   - pods made with `kubectl apply` are scheduled by the API server onto the
#     nodes their nodeSelector names, plumbed through dpu-cni with their
#     Kubernetes identity, get an address of their node's spec.podCIDR (which
#     `kubectl get pod` shows) and reach each other across nodes;
#   - the agent refuses a CNI ADD for a pod the API schedules elsewhere;
#   - a Service and a NetworkPolicy applied with kubectl reach both agents
#     without error (counted per kind); the Service, with the EndpointSlice
#     the API server made for it, takes a pod on the other node to pod a
#     through its cluster IP; the policy is enforced (the allowed port only),
#     follows `kubectl label pod` of the client and `kubectl delete`;
#   - `dpu-lab ipsec enable` works in Kubernetes mode: the rollout reads each node's published mode from its
#     Node's annotations; both Nodes end up advertising mode on, b still reaches pod a through the Service,
#     and node2 sends it under its outbound SA;
#   - `kubectl delete pod` runs the CNI DEL: the agent drops the attachment and
#     releases the address, the pod's netns goes and its VF returns;
#   - the agents needed no grant the manifests lack (the fake's RBAC denials).
source "$(dirname "$0")/common.bash" kube
for _tool in kubectl openssl; do command -v "$_tool" >/dev/null || skip_test "$_tool is not installed"; done
export DL_KUBE=1 DL_IPSEC_GRACE=2
lab_test_up 2 0
k() { dl_kubectl "$@"; }
metric() {  # N NAME LABEL-SUBSTRING: the value of the agent's series (0 when absent)
  dl_metrics "$1" agent | awk -v n="$2" -v l="$3" '$1 ~ "^"n"[{ ]" || $1 == n { if (index($1, l)) { print $2; f=1; exit } }
    END { if (!f) print 0 }'
}
annotation_is() { [ "$(k get node "$1" -o jsonpath='{.metadata.annotations.dpu-cni\.io/tunnel-ip}')" = "$2" ]; }
check "node1's agent published its tunnel IP on Node node1" dl_wait 20 annotation_is node1 "$(dl_tunnel_ip 1)"
check "node2's agent published its tunnel IP on Node node2" dl_wait 20 annotation_is node2 "$(dl_tunnel_ip 2)"
remote_nodes() { [ "$(metric "$1" dpu_agent_remote_nodes "")" = 1 ]; }
both_remote() { remote_nodes 1 && remote_nodes 2; }
check "each agent knows the other node from the API" dl_wait 20 both_remote
used2_before=$(metric 2 dpu_agent_ipam_addresses_used "10.244.2.0/24")
vfs2_before=$(dl_node_vfs_home 2)

pod() {  # NAME NODE LABEL
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, labels: {app: $3}}
spec:
  nodeSelector: {kubernetes.io/hostname: $2}
  containers: [{name: main, image: registry.k8s.io/pause:3.10}]
EOF
}
out=$( { pod a node1 web; echo ---; pod b node2 client; } | k apply -f - 2>&1) && pass "kubectl apply: $out" ||
  fail "kubectl apply of two pods: $out"
ip_a=$(dl_kube_pod_wait default a 60) || fail "pod a is not Running with an IP after 60 s: $(tail -n 5 "$DL_DIR/kubelet/kubelet.log")"
ip_b=$(dl_kube_pod_wait default b 60) || fail "pod b is not Running with an IP after 60 s: $(tail -n 5 "$DL_DIR/kubelet/kubelet.log")"
[ "$(k get pod a -o jsonpath='{.spec.nodeName}')/$(k get pod b -o jsonpath='{.spec.nodeName}')" = node1/node2 ] &&
  pass "the scheduler put a on node1 and b on node2" || fail "pods scheduled on $(k get pods -o wide 2>&1)"
[[ "$ip_a" == 10.244.1.* && "$ip_b" == 10.244.2.* ]] && pass "addresses from the Nodes' pod CIDRs: a $ip_a, b $ip_b" ||
  fail "pod addresses a '$ip_a', b '$ip_b' are not in 10.244.1.0/24 and 10.244.2.0/24"
[ -n "$ip_a" ] && [ "$(dl_pod_ip 1 default.a)" = "$ip_a" ] && pass "pod a's eth0 has the address kubectl shows" ||
  fail "pod a's eth0 has '$(dl_pod_ip 1 default.a)', kubectl shows '$ip_a'"
attached() { dl_agent_api "$1" GET /v1/attachments | jq -e --arg name "$2" '[.. | objects | select(.namespace? == "default" and .name? == $name)] | length > 0' >/dev/null; }
check "node1's agent holds the attachment of pod default/a" attached 1 a
check "node2's agent holds the attachment of pod default/b" attached 2 b
check "a (node1) reaches b (node2)" dl_reachable node1/default.a "$ip_b" 10
check "b (node2) reaches a (node1)" dl_reachable node2/default.b "$ip_a" 10

# A pod the API schedules on node1 is refused on node2 (the identity is checked, not trusted).
if out=$(DL_K8S_NAMESPACE=default DL_K8S_NAME=a dl_pod_add 2 default.a 2>&1); then
  fail "node2 plumbed pod default/a, which is scheduled on node1: $out"
else
  grep -q "scheduled on node 'node1'" <<< "$out" && pass "node2 refuses pod default/a: $(grep -o "pod default/a is scheduled[^\"]*" <<< "$out" | head -1)" ||
    fail "the refusal does not say where the pod is scheduled: $out"
fi

# A Service and a NetworkPolicy: the agents receive them.
svc1=$(metric 1 dpu_agent_cluster_events_total 'kind="service"'); np1=$(metric 1 dpu_agent_cluster_events_total 'kind="networkpolicy"')
svc2=$(metric 2 dpu_agent_cluster_events_total 'kind="service"'); np2=$(metric 2 dpu_agent_cluster_events_total 'kind="networkpolicy"')
out=$(k apply -f - 2>&1 <<EOF
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-client, namespace: default}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: 8080, protocol: TCP}]}]
EOF
) && pass "kubectl apply of a Service and a NetworkPolicy: $out" || fail "kubectl apply of a Service and a NetworkPolicy: $out"
slice_has_a() { k get endpointslices -l kubernetes.io/service-name=web -o json | jq -e --arg ip "$ip_a" '[.items[].endpoints[]?.addresses[]] | index($ip) != null' >/dev/null; }
check "the Service's EndpointSlice lists pod a ($ip_a), Ready as the kubelet stand-in reported" dl_wait 20 slice_has_a
received() {
  [ "$(metric 1 dpu_agent_cluster_events_total 'kind="service"')" -gt "$svc1" ] &&
  [ "$(metric 1 dpu_agent_cluster_events_total 'kind="networkpolicy"')" -gt "$np1" ] &&
  [ "$(metric 2 dpu_agent_cluster_events_total 'kind="service"')" -gt "$svc2" ] &&
  [ "$(metric 2 dpu_agent_cluster_events_total 'kind="networkpolicy"')" -gt "$np2" ]
}
for _ in $(seq 1 100); do received && break; sleep 0.2; done
check "both agents received the Service and the NetworkPolicy" received
check "neither agent found a malformed object" test "$(metric 1 dpu_agent_cluster_malformed_objects_total '')$(metric 2 dpu_agent_cluster_malformed_objects_total '')" = 00
check "the agents stay ready" dl_wait 5 _dl_ready_agent 1

# The Service through the datapath: pod a serves on its targetPort, b (the
# other node) reaches it through the cluster IP the API server gave.
vip=$(k get service web -o jsonpath='{.spec.clusterIP}')
mkdir -p "$DL_DIR/www-a" && echo a > "$DL_DIR/www-a/index.html"
dl_spawn "$DL_DIR/www-a.pid" "$(dl_pod_ns 1 default.a)" "$DL_DIR/www-a.log" \
  /usr/bin/python3 -m http.server 8080 --directory "$DL_DIR/www-a" || fail "could not start a web server in pod a"
through_vip() { [ "$(dl_exec node2/default.b curl -s --max-time 2 "http://$vip/")" = a ]; }
denied_vip() { ! through_vip; }
check "b (node2) reaches pod a through Service web's cluster IP $vip:80" dl_wait 20 through_vip
n1=$(metric 1 dpu_agent_services dpu_agent_services) n2=$(metric 2 dpu_agent_services dpu_agent_services)
[ "$n1" -ge 1 ] && [ "$n2" -ge 1 ] && pass "both agents hold services in their model ($n1, $n2)" ||
  fail "services in the agents' models: node1 $n1, node2 $n2"

# The NetworkPolicy through the datapath, driven with kubectl: web-from-client
# lets b (app=client) reach a (app=web) on 8080 only; a label change of b and
# the policy's deletion take effect on the next connections.
dl_spawn "$DL_DIR/www-a81.pid" "$(dl_pod_ns 1 default.a)" "$DL_DIR/www-a81.log" \
  /usr/bin/python3 -m http.server 8081 --directory "$DL_DIR/www-a" || fail "could not start a second web server in pod a"
serves() { [ "$(dl_exec node1/default.a curl -s --max-time 2 "http://127.0.0.1:$1/")" = a ]; }
check "pod a serves on 8081 (asked from inside the pod)" dl_wait 20 serves 8081
direct() { [ "$(dl_exec node2/default.b curl -s --max-time 2 "http://$ip_a:$1/")" = a ]; }
denied() { ! direct "$1"; }
check "b reaches a directly on 8080, which web-from-client allows" dl_wait 20 direct 8080
check "b cannot reach a on 8081, which no policy allows" denied 8081
out=$(k label pod b app=other --overwrite 2>&1) || fail "kubectl label pod b app=other: $out"
check "after kubectl label pod b app=other, b cannot reach a on 8080" dl_wait 10 denied 8080
check "and not through the cluster IP either" denied_vip
out=$(k label pod b app=client --overwrite 2>&1) || fail "kubectl label pod b app=client: $out"
check "labelled app=client again, b reaches a on 8080" dl_wait 10 direct 8080
out=$(k delete networkpolicy web-from-client 2>&1) && pass "kubectl delete networkpolicy: $out" ||
  fail "kubectl delete networkpolicy web-from-client: $out"
check "with the policy deleted, b reaches a on 8081" dl_wait 10 direct 8081

# IPsec turned on node by node (docs/ipsec.md "Rollout"), the published modes read from the Nodes.
out=$(dl_ipsec_enable 2>&1) && pass "dpu-lab ipsec enable in Kubernetes mode" ||
  fail "dpu-lab ipsec enable in Kubernetes mode: $(tail -n 3 <<< "$out" | tr '\n' ' ')"
for n in node1 node2; do
  mode=$(k get node $n -o jsonpath='{.metadata.annotations.dpu-cni\.io/ipsec-mode}')
  [ "$mode" = on ] && pass "Node $n advertises ipsec-mode on" || fail "Node $n advertises ipsec-mode '$mode'"
done
esp_sent() { dl_dpuctl 2 --json ipsec | jq '[.ipsec.sas[] | select(.state.direction == "OUTBOUND") | .state.packets | tonumber] | add // 0'; }
sent0=$(esp_sent)
check "b (node2) still reaches pod a through the Service with IPsec on" dl_wait 20 through_vip
sent1=$(esp_sent)
[ "$sent1" -gt "$sent0" ] && dl_dpuctl 2 ipsec | grep -q 'encryption: on' &&
  pass "node2 encrypts: its outbound SA carried the request ($sent0 -> $sent1 packets)" ||
  fail "node2's outbound SA: $sent0 -> $sent1 packets; $(dl_dpuctl 2 ipsec | head -n 1)"

# kubectl delete pod: the kubelet stand-in runs the CNI DEL, then the pod goes.
used2_with_b=$(metric 2 dpu_agent_ipam_addresses_used "10.244.2.0/24")
[ "$used2_with_b" -gt "$used2_before" ] && pass "node2's IPAM counts b's address ($used2_with_b in use)" ||
  fail "node2's IPAM does not count pod b's address ($used2_with_b in use, $used2_before before)"
out=$(k delete pod b --timeout=60s 2>&1) && pass "kubectl delete pod b: $out" || fail "kubectl delete pod b: $out"
k get pod b >/dev/null 2>&1 && fail "pod b is still in the API"
gone() { ! attached 2 b; }
check "node2's agent dropped pod b's attachment" dl_wait 10 gone
released() { [ "$(metric 2 dpu_agent_ipam_addresses_used "10.244.2.0/24")" = "$used2_before" ]; }
check "node2's agent released b's address ($ip_b): $used2_before in use, as before the pod" dl_wait 10 released
check "pod b's netns is gone" bash -c "! ip netns list | grep -q '^$(dl_pod_ns 2 default.b) '"
vf_home() { [ "$(dl_node_vfs_home 2)" = "$vfs2_before" ]; }
check "pod b's VF is back in node2's host netns" dl_wait 10 vf_home
check "pod a still reaches node2's management port" dl_reachable node1/default.a "$(dl_mgmt_ip 2)" 10

denials=$(dl_kube_api GET /fake/rbac | jq -c '.denials')
[ "$denials" = "[]" ] && pass "the agents needed no grant manifests/base/agent-rbac lacks" ||
  fail "RBAC denied the agents: $denials"
finish
