#!/bin/bash
# `dpu-agent --decode FILE`: the Kubernetes objects of a kubectl-style YAML or
# JSON file decoded by the Kubernetes source's decoder and printed as JSON
# (what `dpu-lab apply FILE.yaml` programs). Proves: every kind the agent
# reads comes out with the API's defaults; an object of another kind and a
# malformed one are refused alone, named with their document and the field;
# stdin works; exit 0 when all decoded, 1 when some were refused, 2 when the
# file is not YAML/JSON or cannot be read. No root, no daemon.
#
# usage: agent_decode_test.sh DPU_AGENT
set -uo pipefail
AGENT=$1
source "$(dirname "$(readlink -f "$0")")/../../support/shell.bash"
command -v jq >/dev/null || skip_test "jq is not installed"
DIR=$(mktemp -d /tmp/dpu-agent-decode.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }
check() {  # check DESCRIPTION JQ-EXPRESSION (true on $DIR/out.json)
  if jq -e "$2" "$DIR/out.json" >/dev/null; then pass "$1"; else fail "$1: $2 on $(jq -c . "$DIR/out.json")"; fi
}

cat > "$DIR/apply.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {team: a}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: x, labels: {app: web}}
spec:
  type: NodePort
  clusterIP: 10.96.0.20
  ports:
    - {name: http, port: 80, targetPort: http, nodePort: 30080}
    - {name: dns, port: 53, protocol: UDP}
  sessionAffinity: ClientIP
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: x, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
  - {addresses: [10.244.1.5], nodeName: node1, conditions: {ready: false, terminating: true}}
ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: x}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-a, namespace: x}
spec:
  podSelector: {matchLabels: {app: web}}
  egress: [{to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: y}}}], ports: [{port: http}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad, namespace: x}
spec:
  podSelector: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {pod: a}}
spec: {containers: [{name: c, image: pause, ports: [{name: http, containerPort: 80}]}]}
EOF
run_built "$AGENT" --decode "$DIR/apply.yaml" > "$DIR/out.json" 2> "$DIR/err"; rc=$?
[ "$rc" = 1 ] && pass "exit 1 when an object is refused" || fail "exit $rc, expected 1: $(cat "$DIR/err")"
check "five objects decoded" '.objects | length == 5'
check "the Namespace with its labels and the name label" \
  '.objects[0] | .kind == "Namespace" and .labels.team == "a" and .labels["kubernetes.io/metadata.name"] == "x"'
check "the Service with its defaults (protocol, targetPort, affinity timeout, policies)" \
  '.objects[1] | .kind == "Service" and .type == "NodePort" and .ports[0].targetPort == "http" and .ports[0].nodePort == 30080
   and .ports[1] == {"name":"dns","protocol":"UDP","port":53,"targetPort":53} and .affinityTimeoutSeconds == 10800
   and .externalTrafficPolicy == "Cluster" and .clusterIPs == ["10.96.0.20"]'
check "the EndpointSlice with serving defaulted to true" \
  '.objects[2] | .serviceName == "web" and .endpoints[0].conditions == {"ready":false,"serving":true,"terminating":true}'
check "the NetworkPolicy with policyTypes defaulted (egress rules: Ingress and Egress) and a named port" \
  '.objects[3] | .policyTypes == ["Ingress","Egress"] and .egress[0].ports[0] == {"protocol":"TCP","port":"http"}
   and .egress[0].to[0].namespaceSelector.matchLabels["kubernetes.io/metadata.name"] == "y"'
check "the Pod with its container port" '.objects[4] | .kind == "Pod" and .ports == [{"name":"http","containerPort":80,"protocol":"TCP"}]'
check "each object names its document" '[.objects[].where | sub(".*apply.yaml "; "")] ==
  ["document 1", "document 2", "document 3", "document 5", "document 7"]'
check "the Deployment refused: not a kind the agent reads" \
  '.refused[0] | .kind == "Deployment" and .name == "web" and (.where | endswith("apply.yaml document 4"))
   and (.error | contains("not an object the agent reads"))'
check "the bad NetworkPolicy refused, naming the field" \
  '.refused[1] | .kind == "NetworkPolicy" and .namespace == "x" and .name == "bad"
   and (.error | contains("spec.podSelector.matchExpressions[0].values: must be empty for operator Exists"))'

# No namespace: "default", as kubectl applies it.
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n' > "$DIR/nons.yaml"
run_built "$AGENT" --decode "$DIR/nons.yaml" > "$DIR/out.json" 2> "$DIR/err"; rc=$?
[ "$rc" = 0 ] && pass "a Service without a namespace: exit 0" || fail "no namespace: exit $rc: $(cat "$DIR/err")"
check "a Service without a namespace is in default" '.objects[0] | .kind == "Service" and .namespace == "default"'

# JSON from stdin, every object good: exit 0.
jq -c '.' <<< '{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"y"}}]}' |
  run_built "$AGENT" --decode - > "$DIR/out.json" 2> "$DIR/err"; rc=$?
[ "$rc" = 0 ] && pass "stdin, a List: exit 0" || fail "stdin: exit $rc: $(cat "$DIR/err")"
check "the List's item decoded, with its document" \
  '.objects == [{"kind":"Namespace","name":"y","labels":{"kubernetes.io/metadata.name":"y"},"where":"stdin document 1 items[0]"}]
   and .refused == []'

# Not YAML, or no file: exit 2 with the reason.
printf 'a: [1, 2\n' > "$DIR/broken.yaml"
out=$(run_built "$AGENT" --decode "$DIR/broken.yaml" 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "not valid YAML" <<< "$out" && pass "bad YAML: exit 2: $out" || fail "bad YAML: exit $rc: $out"
out=$(run_built "$AGENT" --decode "$DIR/none.yaml" 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "none.yaml" <<< "$out" && pass "missing file: exit 2: $out" || fail "missing file: exit $rc: $out"

[ "$FAILURES" = 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo PASS
