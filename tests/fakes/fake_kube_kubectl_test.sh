#!/usr/bin/env bash
# The real kubectl against fake_kube_apiserver (its own process, HTTPS on
# loopback with a certificate made here, static tokens; kubectl sends no
# token over plain HTTP), with RBAC on: the ClusterRole and binding of
# manifests/base/agent-rbac, and an admin in system:masters. As the admin:
#   - the generator commands (protobuf bodies through client-go's typed
#     clients): `kubectl create namespace`, `kubectl create service
#     clusterip|nodeport|externalname`, and a refused nodePort;
#   - `kubectl label`, `annotate`, `label KEY-`, `get -l`, and `kubectl
#     delete` of a Service and of a Namespace (which terminates and goes);
#   - for each of Namespaces, Nodes, Pods, Services, EndpointSlices and
#     NetworkPolicies: `kubectl apply` (create), `kubectl get -o json`,
#     `kubectl label`, `kubectl apply` of a changed manifest (update) and
#     `kubectl delete`, each read back with kubectl and checked field by field.
# As the dpu-agent ServiceAccount: what its ClusterRole grants works (get and
# list of the six kinds, annotating a Node), everything else is refused with
# the real server's 403 (create, delete, patch of other kinds, Secrets), and
# the fake's denial list holds exactly those refusals. No root needed.
#   fake_kube_kubectl_test.sh FAKE_KUBE_APISERVER
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/../support/shell.bash"
FAKE=$1
for tool in kubectl jq openssl curl; do command -v "$tool" >/dev/null || skip_test "$tool is not installed (scripts/install-deps.sh)"; done
rbac=$(dirname "$(readlink -f "$0")")/../../manifests/base/agent-rbac

dir=$(mktemp -d /tmp/fake-kube-kubectl.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$(( FAILURES + 1 )); }
pass() { echo "ok: $*"; }

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=fake-kube-ca -keyout "$dir/ca.key" -out "$dir/ca.crt" \
  >/dev/null 2>&1 &&
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1 &&
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 1 \
  -extfile <(echo subjectAltName=IP:127.0.0.1) -out "$dir/server.crt" >/dev/null 2>&1 ||
  { echo "FAIL: openssl could not make the server certificate" >&2; exit 1; }
# kube-apiserver's static token file: the admin, and the agent's ServiceAccount.
cat > "$dir/tokens.csv" <<EOF
admin-token,kubernetes-admin,uid-admin,"system:masters,system:authenticated"
agent-token,system:serviceaccount:dpu-cni:dpu-agent,uid-agent,"system:serviceaccounts,system:serviceaccounts:dpu-cni,system:authenticated"
EOF
"$FAKE" --port 0 --cert "$dir/server.crt" --key "$dir/server.key" --token-auth-file "$dir/tokens.csv" \
  --rbac "$rbac/clusterrole.yaml" --rbac "$rbac/clusterrolebinding.yaml" --controllers > "$dir/fake.out" 2> "$dir/fake.err" &
pid=$!
for _ in $(seq 1 200); do grep -q '^listening ' "$dir/fake.out" && break; sleep 0.05; done
url=$(sed -n 's/^listening //p' "$dir/fake.out")
[[ "$url" == https://* ]] || { echo "FAIL: fake_kube_apiserver did not start: $(cat "$dir/fake.err")" >&2; exit 1; }
for user in admin agent; do
  cat > "$dir/$user.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "$url", certificate-authority: $dir/ca.crt}}]
users: [{name: $user, user: {token: $user-token}}]
contexts: [{name: fake, context: {cluster: fake, user: $user}}]
current-context: fake
EOF
done
k() { kubectl --kubeconfig "$dir/admin.kubeconfig" --cache-dir "$dir/cache" --request-timeout 20s "$@"; }
as_agent() { kubectl --kubeconfig "$dir/agent.kubeconfig" --cache-dir "$dir/cache-agent" --request-timeout 20s "$@"; }
# run WHAT CMD...: the command must succeed (its output is shown when it does not)
run() {
  local what=$1 out; shift
  if out=$("$@" 2>&1); then pass "$what: $out"; else fail "$what: $out"; return 1; fi
}
# expect WHAT JQ-FILTER JSON: the JSON (not empty: a failed get) must make the filter print true
expect() {
  if [ -n "$3" ] && jq -e "$2" <<< "$3" >/dev/null 2>&1; then pass "$1"; else fail "$1: $2 on $(jq -c . <<< "$3" 2>/dev/null || echo "$3")"; fi
}

run "kubectl create namespace" k create namespace team-a
expect "the namespace is Active" '.status.phase == "Active" and .metadata.uid != null' "$(k get namespace team-a -o json)"

run "kubectl create service clusterip" k -n team-a create service clusterip web --tcp=80:8080 --tcp=443:https
svc=$(k -n team-a get service web -o json)
expect "clusterip: ports with a numbered and a named target port, selector app=web, a cluster IP allocated" \
  '.spec.type == "ClusterIP" and .spec.selector == {"app": "web"} and
   ([.spec.ports[] | [.port, .targetPort, .protocol]] == [[80, 8080, "TCP"], [443, "https", "TCP"]]) and
   (.spec.clusterIP | test("^10\\.(9[6-9]|1[01][0-9])\\."))' "$svc"
run "kubectl create service clusterip --clusterip=None" k -n team-a create service clusterip db --clusterip=None --tcp=5432
expect "headless: clusterIP None" '.spec.clusterIP == "None"' "$(k -n team-a get service db -o json)"
run "kubectl create service nodeport" k -n team-a create service nodeport np --tcp=80:8080 --node-port=30080
expect "nodeport: type NodePort, nodePort 30080" '.spec.type == "NodePort" and .spec.ports[0].nodePort == 30080' \
  "$(k -n team-a get service np -o json)"
run "kubectl create service externalname" k -n team-a create service externalname ext --external-name=db.example.com
expect "externalname: the name, no cluster IP" '.spec.type == "ExternalName" and .spec.externalName == "db.example.com" and
  ((.spec.clusterIP // "") == "")' "$(k -n team-a get service ext -o json)"
# The server refuses what is wrong, as the real one does (and nothing is stored).
if out=$(k -n team-a create service nodeport np2 --tcp=80:8080 --node-port=80 2>&1); then
  fail "a nodePort outside 30000-32767 was accepted"
else
  pass "a nodePort outside the range is refused: $out"
fi
k -n team-a get service np2 >/dev/null 2>&1 && fail "the refused service np2 was stored"

run "kubectl label" k -n team-a label service web tier=frontend
run "kubectl label a namespace" k label namespace team-a env=test
run "kubectl label --overwrite" k -n team-a label service web tier=backend --overwrite
run "kubectl annotate" k -n team-a annotate service web owner=netops
svc=$(k -n team-a get service web -o json)
expect "labels and annotations applied" '.metadata.labels.tier == "backend" and .metadata.annotations.owner == "netops"' "$svc"
expect "the namespace label" '.metadata.labels.env == "test"' "$(k get namespace team-a -o json)"
run "kubectl label KEY- removes it" k -n team-a label service web tier-
expect "the label is gone" '(.metadata.labels // {}) | has("tier") | not' "$(k -n team-a get service web -o json)"
run "kubectl get -l" k -n team-a get services -l app=web -o name

run "kubectl delete service" k -n team-a delete service web
k -n team-a get service web >/dev/null 2>&1 && fail "the deleted service is still there"
# kubectl waits until the namespace has terminated (its services go with it).
run "kubectl delete namespace" k delete namespace team-a --timeout=60s
k get namespace team-a >/dev/null 2>&1 && fail "the deleted namespace is still there"
[ "$(k get services -A -o json | jq '[.items[] | select(.metadata.namespace == "team-a")] | length')" = 0 ] &&
  pass "the namespace's services went with it" || fail "services of the deleted namespace are left"

# ---- each kind the agent watches: apply, get, label, apply a change, delete ----
manifest() {  # manifest 1|2 [KIND]: the objects (2 changes one field of each), or only those of KIND
  local port=80 addr=10.244.9.5 np=8080 unsched=false
  [ "$1" = 2 ] && port=81 addr=10.244.9.6 np=8443 unsched=true
  cat <<EOF | awk -v kind="${2:-}" 'BEGIN { RS = "---\n"; ORS = "" } kind == "" || $0 ~ ("\nkind: " kind "\n") { print "---\n" $0 }'
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {owner: netops}}
---
apiVersion: v1
kind: Node
metadata: {name: node-x, labels: {kubernetes.io/hostname: node-x}}
spec: {podCIDR: 10.244.9.0/24, podCIDRs: [10.244.9.0/24], unschedulable: $unsched}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team-b, labels: {app: web}}
spec:
  nodeName: node-x
  containers: [{name: main, image: registry.k8s.io/pause:3.10}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team-b}
spec:
  selector: {app: web}
  ports: [{name: http, port: $port, targetPort: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-manual, namespace: team-b, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [$addr], conditions: {ready: true}}]
ports: [{name: http, port: 8080, protocol: TCP}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-in, namespace: team-b}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress: [{ports: [{port: $np, protocol: TCP}]}]
EOF
}
kinds="namespaces,nodes,pods,services,endpointslices,networkpolicies"
objects=(namespace/team-b node/node-x pod/web service/web endpointslice/web-manual networkpolicy/web-in)
got() { k -n team-b get "$1" -o json; }
run "kubectl apply creates one object of each kind" k apply -f <(manifest 1)
expect "Namespace applied, Active" '.status.phase == "Active" and .metadata.labels.owner == "netops"' "$(got namespace/team-b)"
expect "Node applied" '.spec.podCIDR == "10.244.9.0/24" and (.spec.unschedulable // false) == false' "$(got node/node-x)"
expect "Pod applied, bound to node-x" '.spec.nodeName == "node-x" and .metadata.labels.app == "web"' "$(got pod/web)"
expect "Service applied: port 80, a cluster IP" '.spec.ports[0].port == 80 and (.spec.clusterIP | test("^10\\."))' \
  "$(got service/web)"
expect "EndpointSlice applied" '.addressType == "IPv4" and .endpoints[0].addresses == ["10.244.9.5"]' \
  "$(got endpointslice/web-manual)"
expect "NetworkPolicy applied" '.spec.podSelector.matchLabels.app == "web" and .spec.ingress[0].ports[0].port == 8080' \
  "$(got networkpolicy/web-in)"
for o in "${objects[@]}"; do
  run "kubectl label $o" k -n team-b label "$o" stage=one
  expect "$o carries the label" '.metadata.labels.stage == "one"' "$(got "$o")"
done
run "kubectl apply of a changed manifest updates each kind" k apply -f <(manifest 2)
expect "Node updated, its label kept" '.spec.unschedulable == true and .metadata.labels.stage == "one"' "$(got node/node-x)"
expect "Service updated to port 81, its label kept" '.spec.ports[0].port == 81 and .metadata.labels.stage == "one"' \
  "$(got service/web)"
expect "EndpointSlice updated" '.endpoints[0].addresses == ["10.244.9.6"] and .metadata.labels.stage == "one"' \
  "$(got endpointslice/web-manual)"
expect "NetworkPolicy updated to port 8443" '.spec.ingress[0].ports[0].port == 8443 and .metadata.labels.stage == "one"' \
  "$(got networkpolicy/web-in)"
labelled=$(k get -A -l stage=one "$kinds" -o name 2>&1)
[ "$(wc -l <<< "$labelled")" = 6 ] && pass "kubectl get -A -l finds the six labelled objects" ||
  fail "kubectl get -A -l stage=one: $labelled"

# ---- as the agent: what its ClusterRole grants, and 403 for the rest ----
for kind in ${kinds//,/ }; do
  out=$(as_agent get "$kind" -A -o name 2>&1) && [ -n "$out" ] && pass "as dpu-agent: kubectl get $kind -A" ||
    fail "as dpu-agent: kubectl get $kind -A: $out"
done
run "as dpu-agent: kubectl annotate node (patch of nodes is granted)" as_agent annotate node node-x dpu-cni.io/tunnel-ip=192.0.2.9
forbidden() {  # WHAT CMD...: kubectl must fail with the real server's 403
  local what=$1 out; shift
  if out=$("$@" 2>&1); then fail "as dpu-agent: $what was allowed: $out"
  elif grep -q 'Error from server (Forbidden)' <<< "$out" &&
       grep -q 'is forbidden: User "system:serviceaccount:dpu-cni:dpu-agent" cannot' <<< "$out"; then
    pass "as dpu-agent: $what is refused: $out"
  else fail "as dpu-agent: $what failed, but not with 403: $out"; fi
}
forbidden "kubectl create namespace" as_agent create namespace evil
forbidden "kubectl delete node" as_agent delete node node-x
forbidden "kubectl label pod (patch of pods)" as_agent -n team-b label pod web stage2=two
forbidden "kubectl delete networkpolicy" as_agent -n team-b delete networkpolicy web-in
forbidden "kubectl apply of a changed Service" as_agent apply -f <(manifest 1 Service)
forbidden "reading Secrets" as_agent get --raw /api/v1/namespaces/dpu-cni/secrets
denials=$(curl -s --max-time 10 --cacert "$dir/ca.crt" -H "Authorization: Bearer admin-token" "$url/fake/rbac" | jq -c '.denials')
[ "$(jq length <<< "$denials")" = 6 ] && pass "the fake recorded exactly those six refusals" || fail "denials: $denials"

for o in networkpolicy/web-in endpointslice/web-manual service/web; do
  run "kubectl delete $o" k -n team-b delete "$o"
  k -n team-b get "$o" >/dev/null 2>&1 && fail "$o is still there after kubectl delete"
done
# No kubelet runs node-x: the pod goes as an operator removes one whose node is gone.
run "kubectl delete pod (no kubelet: --force)" k -n team-b delete pod web --grace-period=0 --force
run "kubectl delete node" k delete node node-x
run "kubectl delete namespace" k delete namespace team-b --timeout=60s
for o in "${objects[@]}"; do k -n team-b get "$o" >/dev/null 2>&1 && fail "$o is still there"; done

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo PASS
