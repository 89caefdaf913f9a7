#!/usr/bin/env bash
# The real kubectl's generator and edit commands against fake_kube_apiserver
# (its own process, HTTPS on loopback with a certificate made here, an admin
# token; kubectl sends no token over plain HTTP): `kubectl create
# namespace` and `kubectl create service clusterip|nodeport|externalname`
# (which send protobuf bodies through client-go's typed clients), `kubectl
# label` and `annotate` (patches), `kubectl delete` of a Service and of a
# Namespace (which terminates and goes). Each result is read back with kubectl
# -o json and checked field by field. No root needed.
#   fake_kube_kubectl_test.sh FAKE_KUBE_APISERVER
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/../support/shell.bash"
FAKE=$1
for tool in kubectl jq openssl; do command -v "$tool" >/dev/null || skip_test "$tool is not installed (scripts/install-deps.sh)"; done

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
"$FAKE" --port 0 --cert "$dir/server.crt" --key "$dir/server.key" --token admin-token --controllers > "$dir/fake.out" 2> "$dir/fake.err" &
pid=$!
for _ in $(seq 1 200); do grep -q '^listening ' "$dir/fake.out" && break; sleep 0.05; done
url=$(sed -n 's/^listening //p' "$dir/fake.out")
[[ "$url" == https://* ]] || { echo "FAIL: fake_kube_apiserver did not start: $(cat "$dir/fake.err")" >&2; exit 1; }
cat > "$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "$url", certificate-authority: $dir/ca.crt}}]
users: [{name: admin, user: {token: admin-token}}]
contexts: [{name: fake, context: {cluster: fake, user: admin}}]
current-context: fake
EOF
k() { kubectl --kubeconfig "$dir/kubeconfig" --cache-dir "$dir/cache" --request-timeout 20s "$@"; }
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

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo PASS
