#!/usr/bin/env bash
# How the DPU agent learns the name of the host it serves, in each shape of
# docs/install-kubernetes.md, with the real dpu-agent on the agent.yaml the
# rendered overlay's ConfigMap holds, against fake Kubernetes API servers
# that enforce the RBAC of the same rendering:
#   (a) overlays/dpu-nodes (and (c) overlays/openshift, the same file): the
#       label dpu-cni.io/host-node on the DPU's own Node, read with the
#       pod's in-cluster token; the agent waits, saying how to set the label,
#       until an operator sets it, then publishes its tunnel IP on that host;
#   (b) overlays/dpu-cluster: the label on its Node in the DPU cluster (the
#       in-cluster token there, whose RBAC grants only "get nodes"), the
#       cluster view and the publishing in the host cluster (the kubeconfig
#       of the dpu-cni-host-cluster Secret, the host cluster's RBAC);
#   systemd: a literal nodeName (every lab node runs so; here --check-config).
# Neither API server may have refused a request, and each grant of the DPU
# cluster's role was used. Root: a private network namespace holds the
# host<->DPU address the attach API binds, and a private mount namespace the
# pod's paths (/etc/dpu-cni, /var/run/secrets, /var/lib/dpu-agent).
#   node_name_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
if [ -z "${DPU_NODE_NAME_TEST_INNER:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network and mount namespaces)"; exit 77; }
  for t in kubectl node openssl curl jq unshare ip; do
    command -v "$t" >/dev/null || { echo "FAIL: $t is not installed (scripts/install-deps.sh)"; exit 1; }
  done
  exec unshare -mn --propagation private env DPU_NODE_NAME_TEST_INNER=1 bash "$0" "$@"
fi

FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$(( FAILURES + 1 )); }
pass() { echo "ok: $*"; }
poll() {  # SECONDS CMD...: until CMD succeeds, every 100 ms
  local end=$(( SECONDS + $1 )); shift
  until "$@" >/dev/null 2>&1; do [ "$SECONDS" -ge "$end" ] && return 1; sleep 0.1; done
}
work=$(mktemp -d /tmp/dpu-node-name.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# The pod's world: its addresses on a veth (192.168.100.2 on the host<->DPU link, the
# node address 192.0.2.10) and its paths, private to this namespace.
ip link set lo up
ip link add dpu0 type veth peer name dpu1 && ip link set dpu1 up && ip addr add 192.168.100.2/24 dev dpu0 && ip addr add 192.0.2.10/24 dev dpu0 &&
  ip link set dpu0 up || { echo "FAIL: cannot make the test interface"; exit 1; }
mkdir -p "$work/etc" && cp -a /etc/. "$work/etc/" && mount --bind "$work/etc" /etc &&
  mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib || { echo "FAIL: cannot make the private mounts"; exit 1; }

# Certificates: the fake API servers' (127.0.0.1) and the agent's attach API (192.168.100.2).
pki=$work/pki
mkdir -p "$pki"
(cd "$pki" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=test-ca -keyout ca.key -out ca.crt &&
  for pair in "api 127.0.0.1" "agent 192.168.100.2"; do
    set -- $pair
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr" &&
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -out "$1.crt" \
      -extfile <(echo "subjectAltName=IP:$2") || exit 1
  done) >/dev/null 2>&1 || { echo "FAIL: openssl could not make the certificates"; exit 1; }

# fake_api NAME RENDERED: a fake API server with the RBAC of RENDERED; its URL in $work/NAME.url.
fake_api() {
  local name=$1 out=$work/$1
  mkdir -p "$out"
  printf '%s\n' "admin-$name,kubernetes-admin,uid-admin,\"system:masters,system:authenticated\"" \
    "agent-$name,system:serviceaccount:dpu-cni:dpu-agent,uid-agent,\"system:serviceaccounts,system:serviceaccounts:dpu-cni,system:authenticated\"" \
    > "$out/tokens.csv"
  "$build/tests/fakes/fake_kube_apiserver" --port 0 --cert "$pki/api.crt" --key "$pki/api.key" \
    --token-auth-file "$out/tokens.csv" --rbac "$2" > "$out/api.out" 2> "$out/api.err" &
  pids+=($!)
  poll 10 grep -q '^listening ' "$out/api.out" || { echo "FAIL: fake_kube_apiserver $name: $(cat "$out/api.err")"; exit 1; }
  sed -n 's/^listening //p' "$out/api.out" > "$work/$name.url"
}
api() {  # api NAME METHOD PATH [JSON]: as that server's admin
  local args=(-s --max-time 10 -X "$2" --cacert "$pki/ca.crt" -H "Authorization: Bearer admin-$1") ctype=application/json
  [ "$2" = PATCH ] && ctype=application/merge-patch+json
  [ -n "${4:-}" ] && args+=(-H "Content-Type: $ctype" --data-binary "$4")
  curl "${args[@]}" "$(cat "$work/$1.url")$3"
}
node_json() {  # NAME LABELS-JSON
  jq -nc --arg n "$1" --argjson l "$2" '{apiVersion: "v1", kind: "Node", metadata: {name: $n, labels: $l},
    spec: {podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"]}}'
}
annotation() { api "$1" GET /api/v1/nodes/node1 | jq -r '.metadata.annotations["dpu-cni.io/tunnel-ip"] // empty'; }
published() { [ "$(annotation "$1")" = 192.0.2.10 ]; }
no_denials() {  # NAME: the fake refused nothing
  local d
  d=$(api "$1" GET /fake/rbac | jq -c .denials)
  [ "$d" = "[]" ] && pass "$2: the $1 API server refused no request of the agent" || fail "$2: $1 refused: $d"
}

# The pod's files: the ConfigMap (as rendered), its TLS Secret, the in-cluster token of SERVER.
pod_files() {  # RENDER_DIR SERVER
  rm -rf /etc/dpu-cni /run/secrets /var/lib/dpu-agent /run/dpu-cni
  mkdir -p /etc/dpu-cni/config /etc/dpu-cni/tls /run/secrets/kubernetes.io/serviceaccount /run/dpu-cni
  cp "$1"/configmaps/dpu-cni-dpu-config-*/agent.yaml /etc/dpu-cni/config/
  cp "$pki/agent.crt" /etc/dpu-cni/tls/tls.crt && cp "$pki/agent.key" /etc/dpu-cni/tls/tls.key && cp "$pki/ca.crt" /etc/dpu-cni/tls/ca.crt
  local sa=/run/secrets/kubernetes.io/serviceaccount
  echo -n "agent-$2" > $sa/token && cp "$pki/ca.crt" $sa/ca.crt && echo -n dpu-cni > $sa/namespace
}
# The agent as the DaemonSet runs it: the downward API's env, the in-cluster service env.
run_agent() {  # SERVER LOG
  local url
  url=$(cat "$work/$1.url")
  url=${url#https://}
  env DPU_NODE_NAME=node1-dpu DPU_TUNNEL_IP=192.0.2.10 DPU_POD_IP=192.0.2.10 \
    KUBERNETES_SERVICE_HOST=${url%:*} KUBERNETES_SERVICE_PORT=${url##*:} \
    "$build/dpu-agent/control/dpu-agent" --config /etc/dpu-cni/config/agent.yaml > "$2" 2>&1 &
  agent=$!
  pids+=("$agent")
}
stop_agent() { kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null; }

# ---- (a) and (c): the label on the DPU's own Node ----
for overlay in dpu-nodes openshift; do
  r=$work/render-$overlay
  node "$src/tests/deploy/render.js" "$src/manifests/overlays/$overlay" "$r" || { fail "$overlay does not render"; continue; }
  fake_api "$overlay" "$r/rendered.yaml"
  api "$overlay" POST /api/v1/nodes "$(node_json node1 '{"dpu-cni.io/host": "true", "dpu-cni.io/dpu-node": "node1-dpu"}')" >/dev/null
  api "$overlay" POST /api/v1/nodes "$(node_json node1-dpu '{"dpu-cni.io/dpu": "true"}')" >/dev/null
  pod_files "$r" "$overlay"
  grep -q '^nodeName: {fromNodeLabel: dpu-cni.io/host-node, node: "${DPU_NODE_NAME}"}' /etc/dpu-cni/config/agent.yaml &&
    pass "$overlay: agent.yaml reads the host's name from the label dpu-cni.io/host-node of its own Node" ||
    fail "$overlay: agent.yaml's nodeName: $(grep '^nodeName' /etc/dpu-cni/config/agent.yaml)"
  log=$work/agent-$overlay.log
  run_agent "$overlay" "$log"
  # Not labelled yet: it waits and says how to label.
  poll 20 grep -q "kubectl label node node1-dpu dpu-cni.io/host-node=<host node name>" "$log" &&
    pass "$overlay: unlabelled, the agent waits and says: $(grep -o 'no label.*' "$log" | head -1 | cut -c1-160)" ||
    fail "$overlay: the agent did not say how to label its Node: $(tail -5 "$log")"
  [ -z "$(annotation "$overlay")" ] || fail "$overlay: published before it knew its host"
  # As the install guide says: kubectl label node node1-dpu dpu-cni.io/host-node=node1
  api "$overlay" PATCH /api/v1/nodes/node1-dpu '{"metadata": {"labels": {"dpu-cni.io/host-node": "node1"}}}' >/dev/null
  poll 20 grep -q "this DPU serves node node1 (label dpu-cni.io/host-node of Node node1-dpu)" "$log" &&
    pass "$overlay: once labelled, the agent serves node1" || fail "$overlay: the agent did not resolve node1: $(tail -5 "$log")"
  poll 20 published "$overlay" && pass "$overlay: it published its tunnel IP on Node node1" ||
    fail "$overlay: Node node1's dpu-cni.io/tunnel-ip is '$(annotation "$overlay")'"
  stop_agent
  no_denials "$overlay" "$overlay"
done

# ---- (b): a separate DPU cluster ----
r=$work/render-dpu-cluster
rh=$work/render-host-cluster
node "$src/tests/deploy/render.js" "$src/manifests/overlays/dpu-cluster/dpu-cluster" "$r" &&
  node "$src/tests/deploy/render.js" "$src/manifests/overlays/dpu-cluster/host-cluster" "$rh" || fail "dpu-cluster does not render"
fake_api dpu "$r/rendered.yaml"
fake_api host "$rh/rendered.yaml"
api dpu POST /api/v1/nodes "$(node_json node1-dpu '{"dpu-cni.io/dpu": "true", "dpu-cni.io/host-node": "node1"}')" >/dev/null
api host POST /api/v1/nodes "$(node_json node1 '{"dpu-cni.io/host": "true"}')" >/dev/null
pod_files "$r" dpu
# The Secret dpu-cni-host-cluster, as install-kubernetes.md builds it: the host cluster's server, CA and agent token.
mkdir -p /etc/dpu-cni/host-cluster
cat > /etc/dpu-cni/host-cluster/kubeconfig <<EOF
apiVersion: v1
kind: Config
clusters: [{name: host, cluster: {server: "$(cat "$work/host.url")", certificate-authority-data: $(base64 -w0 "$pki/ca.crt")}}]
users: [{name: dpu-agent, user: {token: agent-host}}]
contexts: [{name: host, context: {cluster: host, user: dpu-agent}}]
current-context: host
EOF
grep -q 'kubeconfig: /etc/dpu-cni/host-cluster/kubeconfig' /etc/dpu-cni/config/agent.yaml &&
  grep -q 'inCluster: true' /etc/dpu-cni/config/agent.yaml &&
  pass "dpu-cluster: agent.yaml reads its host from the DPU cluster, watches the host cluster" ||
  fail "dpu-cluster: agent.yaml: $(grep -E '^nodeName|kubeconfig' /etc/dpu-cni/config/agent.yaml)"
log=$work/agent-dpu-cluster.log
run_agent dpu "$log"
poll 20 grep -q "this DPU serves node node1 (label dpu-cni.io/host-node of Node node1-dpu)" "$log" &&
  pass "dpu-cluster: the agent serves node1, from its Node in the DPU cluster" ||
  fail "dpu-cluster: the agent did not resolve node1: $(tail -5 "$log")"
poll 20 published host && pass "dpu-cluster: it published its tunnel IP on node1 in the host cluster" ||
  fail "dpu-cluster: node1's dpu-cni.io/tunnel-ip in the host cluster is '$(annotation host)'"
api dpu GET /api/v1/nodes/node1-dpu | jq -e '.metadata.annotations["dpu-cni.io/tunnel-ip"] == null' >/dev/null &&
  pass "dpu-cluster: nothing was published in the DPU cluster" || fail "dpu-cluster: the agent wrote to the DPU cluster"
stop_agent
no_denials dpu dpu-cluster
no_denials host dpu-cluster
unused=$(api dpu GET /fake/rbac | jq -c '[.grants[] | select(.role == "ClusterRole/dpu-agent-own-node" and (.used | not))]')
[ "$unused" = "[]" ] && pass "dpu-cluster: the DPU cluster's role (get nodes) was used, nothing more was asked" ||
  fail "dpu-cluster: grants of dpu-agent-own-node nothing used: $unused"

# ---- systemd: the name written in the config ----
out=$("$build/dpu-agent/control/dpu-agent" --config "$src/dpu-agent/control/examples/agent.yaml" --check-config 2>&1)
[[ "$out" == "configuration OK: node node-a,"* ]] && pass "systemd: a literal nodeName: $out" || fail "systemd: $out"

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo PASS
