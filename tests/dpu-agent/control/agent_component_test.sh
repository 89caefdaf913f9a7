#!/bin/bash
# Component test of dpu-agent: the real daemon with a cluster file and the
# fake dataplane (tests/fakes/fake-dataplane), driven through its REST API
# with curl (JSON bodies) and protoc --encode/--decode (protobuf bodies).
# Proves: attach/detach/list/health over HTTP; 409/413/400 answers; kill -9 and
# restart keep attachments, IPs and the boot id and resync the dataplane with
# no change; a dataplane restart is resynced; adding/removing a node in the
# cluster file is one Delta each; services and slices in the cluster file reach
# the model (a slice change as one Delta), a bad service is named in the log and
# a metric; a bad cluster file keeps the last good state.
# No root needed: unix sockets in a temp dir and one loopback TCP port.
#
# usage: agent_component_test.sh DPU_AGENT FAKE_DATAPLANE PROTO_DIR
set -euo pipefail
AGENT=$1 FAKE=$2 PROTO=$3
source "$(dirname "$(readlink -f "$0")")/../../support/shell.bash"
# The Arm build runs them under the emulator (its words first).
AGENT=("${EMULATOR[@]}" "$AGENT") FAKE=("${EMULATOR[@]}" "$FAKE")
for tool in curl jq protoc; do
  command -v $tool >/dev/null || skip_test "$tool is not installed"
done

DIR=$(mktemp -d /tmp/dpu-agent-component.XXXXXX)
AGENT_PID="" FAKE_PID="" TLS_PID=""
cleanup() {
  [ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null || true
  [ -n "$TLS_PID" ] && kill -9 "$TLS_PID" 2>/dev/null || true
  [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- agent log" >&2; tail -n 30 "$DIR/agent.log" >&2 || true
  echo "--- fake dataplane history" >&2; jq -c '.history[]' "$DIR/dp.json" >&2 || true
  exit 1
}
eventually() {  # eventually "description" 'shell condition' (re-evaluated each time)
  local what=$1 cond=$2
  for _ in $(seq 1 600); do  # 30 s: a loaded CI machine starts daemons slowly
    if eval "$cond" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  fail "timed out waiting for: $what"
}

# 10000-19000 with TLS_PORT (+1000) and its metrics (+1001): below Linux's
# ephemeral ports (32768 and up), so no outgoing connection holds them, and
# below the IPsec component test's (21000 and up), which runs beside it.
PORT=$((10000 + $$ % 8000))
# The cluster file replaced at once, written beside it and renamed, as a
# deployment replaces it (a ConfigMap's files swap the same way): the agent
# polls it, and a file written in place could be read half-written (on a
# slow machine, emptied between the truncation and the write).
put_cluster() { cat > "$DIR/cluster.yaml.tmp" && mv "$DIR/cluster.yaml.tmp" "$DIR/cluster.yaml"; }
add_cluster() { { cat "$DIR/cluster.yaml"; cat; } | put_cluster; }
cat > "$DIR/cluster.yaml" <<YAML
nodes:
  - {name: node-a, tunnelIP: 192.168.50.1, podCIDR: 10.244.1.0/24}
  - {name: node-b, tunnelIP: 192.168.50.2, podCIDR: 10.244.2.0/24}
YAML
write_config() {
cat > "$DIR/agent.yaml" <<YAML
nodeName: node-a
tunnelIP: 192.168.50.1
representors:
  - {pf: 0, vfCount: 8, name: "pf0vf{vf}"}
podCIDR: 10.244.1.0/24
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
underlayMTU: 1500
clusterSource: {type: file, path: $DIR/cluster.yaml}
api: {address: 127.0.0.1, port: $PORT}
dataplaneSocket: $DIR/dp.sock
stateDir: $DIR/state
YAML
}
write_config
URL="http://127.0.0.1:$PORT"

# A bad config fails at start and names the field.
sed 's/underlayMTU: 1500/underlayMTU: 100/' "$DIR/agent.yaml" > "$DIR/bad.yaml"
if "${AGENT[@]}" --config "$DIR/bad.yaml" 2>"$DIR/bad.log"; then fail "a bad config started"; fi
grep -q "config.underlayMTU" "$DIR/bad.log" || fail "bad config error does not name the field: $(cat "$DIR/bad.log")"

# A Kubernetes source whose kubeconfig is missing fails at start, saying so.
sed "s|^clusterSource:.*|clusterSource: {type: kubernetes, kubernetes: {kubeconfig: $DIR/no-kubeconfig}}|" "$DIR/agent.yaml" > "$DIR/kube.yaml"
if "${AGENT[@]}" --config "$DIR/kube.yaml" 2>"$DIR/kube.log"; then fail "an agent with a missing kubeconfig started"; fi
grep -q "no-kubeconfig\|not built" "$DIR/kube.log" || fail "missing kubeconfig error: $(cat "$DIR/kube.log")"

"${FAKE[@]}" --socket "$DIR/dp.sock" --dump "$DIR/dp.json" --restart-file "$DIR/dp.restart" \
  --operator-socket "$DIR/op.sock" --port-unavailable "$DIR/dp.unavailable" 2>"$DIR/fake.log" &
FAKE_PID=$!

start_agent() {
  for attempt in 1 2 3 4 5; do
    "${AGENT[@]}" --config "$DIR/agent.yaml" 2>>"$DIR/agent.log" &
    AGENT_PID=$!
    for _ in $(seq 1 100); do
      if curl -sf "$URL/readyz" >/dev/null 2>&1; then return 0; fi
      kill -0 "$AGENT_PID" 2>/dev/null || break
      sleep 0.05
    done
    if grep -q "cannot listen" "$DIR/agent.log"; then  # port taken: try another
      PORT=$((PORT + 1)); URL="http://127.0.0.1:$PORT"; write_config; : > "$DIR/agent.log"; continue
    fi
    fail "agent did not become ready"
  done
  fail "no free port"
}
start_agent
dump() { jq -c "$1" "$DIR/dp.json"; }
history_len() { jq '.history | length' "$DIR/dp.json"; }
last_objects() { jq -c '.history[-1].objects' "$DIR/dp.json"; }
ports() { jq '.model.ports | length' "$DIR/dp.json"; }
remotes() { jq '.model.remote_nodes | length' "$DIR/dp.json"; }

# --- attach with JSON
post_json() { curl -s -o "$DIR/out.json" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "$URL$1"; }
code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"default","name":"web-1","uid":"u1"},"sandboxId":"sb1","ifname":"eth0","pfIndex":0,"vfIndex":3}')
[ "$code" = 200 ] || fail "attach answered $code: $(cat "$DIR/out.json")"
ID1=$(jq -r .attachment.id "$DIR/out.json")
IP1=$(jq -r '.attachment.ips[0].address' "$DIR/out.json")
BOOT=$(jq -r .bootId "$DIR/out.json")
[ "$IP1" = "10.244.1.3/24" ] || fail "first pod got $IP1"
[ "$(jq -r .attachment.mac "$DIR/out.json")" = "0a:58:0a:f4:01:03" ] || fail "MAC not derived from the IP"
eventually "the port reaches the dataplane" 'test "$(ports)" = 1'
[ "$(dump '.history[-1].objects')" = "[\"+port:$ID1\"]" ] || fail "attach was not one Delta adding one port: $(dump '.history[-1]')"

# --- the same again: the same answer
code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"default","name":"web-1","uid":"u1"},"sandboxId":"sb1","ifname":"eth0","pfIndex":0,"vfIndex":3}')
[ "$code" = 200 ] && [ "$(jq -r .attachment.id "$DIR/out.json")" = "$ID1" ] || fail "retried attach was not idempotent"

# --- attach with protobuf (protoc as the client)
printf 'kind: POD\npod { namespace: "default" name: "web-2" }\nsandbox_id: "sb2"\nifname: "eth0"\npf_index: 0\nvf_index: 4\n' |
  protoc --encode=dpu.attach.v1.AttachRequest -I "$PROTO" dpu/attach/v1/attach.proto > "$DIR/req.bin"
code=$(curl -s -o "$DIR/out.bin" -w '%{http_code}' -H 'Content-Type: application/x-protobuf' --data-binary @"$DIR/req.bin" "$URL/v1/attachments")
[ "$code" = 200 ] || fail "protobuf attach answered $code"
protoc --decode=dpu.attach.v1.AttachResponse -I "$PROTO" dpu/attach/v1/attach.proto < "$DIR/out.bin" > "$DIR/out.txt"
grep -q 'address: "10.244.1.4/24"' "$DIR/out.txt" || fail "protobuf answer: $(cat "$DIR/out.txt")"
grep -q 'representor: "pf0vf4"' "$DIR/out.txt" || fail "protobuf answer lacks the representor"

# --- refusals
code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"default","name":"web-3"},"sandboxId":"sb3","ifname":"eth0","pfIndex":0,"vfIndex":3}')
[ "$code" = 409 ] && [ "$(jq -r .holder "$DIR/out.json")" = "$ID1" ] || fail "VF conflict answered $code $(cat "$DIR/out.json")"
code=$(post_json /v1/attachments '{"kind":"POD","vfIndex":"three"}')
[ "$code" = 400 ] || fail "wrongly typed body answered $code"
code=$(post_json /v1/attachments '{"kind":')
[ "$code" = 400 ] || fail "malformed body answered $code"
head -c 100000 /dev/zero | tr '\0' 'a' > "$DIR/big"
code=$(curl -s -o "$DIR/out.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$DIR/big" "$URL/v1/attachments")
[ "$code" = 413 ] || fail "oversized body answered $code"
code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"default","name":"web-3"},"sandboxId":"sb3","ifname":"eth0","pfIndex":0,"vfIndex":99}')
[ "$code" = 400 ] && grep -q "out of range" "$DIR/out.json" || fail "VF out of range answered $code"
# A requested MAC the dataplane would refuse: 400 at attach, the reason named, nothing held.
for mac in 0a:58:a9:fe:00:01 00:00:00:00:00:00 ff:ff:ff:ff:ff:ff 0a:58:0a:f4:01:03; do
  code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"default","name":"web-6"},"sandboxId":"sb6","ifname":"eth0","pfIndex":0,"vfIndex":6,"requestedMac":"'$mac'"}')
  [ "$code" = 400 ] && grep -q "requested_mac (runtimeConfig.mac): mac $mac is" "$DIR/out.json" ||
    fail "requested MAC $mac answered $code $(cat "$DIR/out.json")"
done
[ "$(ports)" = 2 ] || fail "a refused MAC reached the dataplane"

# --- the dataplane's state of each attachment (what CHECK reads)
state_of() { curl -s -H 'Accept: application/json' "$URL/v1/attachments/$1" | jq -r .attachment.dataplaneState; }
eventually "web-1 is programmed" 'test "$(state_of "$ID1")" = programmed'
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/attachments/att-none")" = 404 ] || fail "GET of an unknown attachment"
# The dataplane cannot open web-1's representor (PORT_UNAVAILABLE): the agent
# learns it by polling Status, the attachment says why, the node stays ready.
echo "$ID1 pf0vf3: no such netdev (retrying in 1s)" > "$DIR/dp.unavailable"
eventually "web-1's port is unavailable" 'state_of "$ID1" | grep -q "^port unavailable: pf0vf3: no such netdev"'
curl -sf "$URL/readyz" >/dev/null || fail "one unavailable port made the agent unready"
curl -s "$URL/metrics" > "$DIR/metrics.txt"
grep -q '^dpu_agent_dataplane_problems{kind="port",state="port_unavailable"} 1$' "$DIR/metrics.txt" ||
  fail "problems metric: $(grep dpu_agent_dataplane_problems "$DIR/metrics.txt")"
grep -q "^dpu_agent_dataplane_object_problem{kind=\"port\",name=\"$ID1\",state=\"port_unavailable\"} 1$" "$DIR/metrics.txt" ||
  fail "per-object problem metric missing"
grep -q '^dpu_agent_attachments_by_dataplane_state{state="port_unavailable"} 1$' "$DIR/metrics.txt" ||
  fail "attachments by state: $(grep dpu_agent_attachments_by_dataplane_state "$DIR/metrics.txt")"
: > "$DIR/dp.unavailable"
eventually "web-1 is programmed again" 'test "$(state_of "$ID1")" = programmed'
# This node's port keys are published for the others (the OVN egress key).
published_keys() { jq -c .portKeys "$DIR/cluster.yaml.d/node-a.json" 2>/dev/null; }
eventually "the port keys are published" 'test "$(published_keys)" = "{\"10.244.1.3\":1,\"10.244.1.4\":2}"'

# --- a third pod, then detach it: its address is not reused
code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"default","name":"web-5"},"sandboxId":"sb5","ifname":"eth0","pfIndex":0,"vfIndex":5}')
ID5=$(jq -r .attachment.id "$DIR/out.json"); IP5=$(jq -r '.attachment.ips[0].address' "$DIR/out.json")
code=$(curl -s -o "$DIR/out.json" -w '%{http_code}' -X DELETE -H 'Accept: application/json' "$URL/v1/attachments/$ID5")
[ "$code" = 200 ] && [ "$(jq -r .found "$DIR/out.json")" = true ] || fail "detach by id answered $code"
eventually "the detached port leaves the dataplane" 'test "$(ports)" = 2'

LIST_BEFORE=$(curl -s -H 'Accept: application/json' "$URL/v1/attachments" | jq -S .)

# --- kill -9 and restart: same attachments, IPs and boot id; the resync changes nothing
GEN_BEFORE=$(dump .generation)
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
HLEN=$(history_len)
start_agent
LIST_AFTER=$(curl -s -H 'Accept: application/json' "$URL/v1/attachments" | jq -S .)
[ "$LIST_BEFORE" = "$LIST_AFTER" ] || fail "attachments changed across kill -9: $LIST_BEFORE vs $LIST_AFTER"
[ "$(curl -s -H 'Accept: application/json' "$URL/v1/health" | jq -r .bootId)" = "$BOOT" ] || fail "boot id changed across kill -9"
eventually "the restarted agent resyncs" 'test "$(history_len)" -ge $((HLEN + 2))'
[ "$(dump '.history[-1].request')" = '"full_sync"' ] || fail "no full sync after the agent restart"
[ "$(last_objects)" = "[]" ] || fail "the resync after kill -9 changed something: $(last_objects)"
[ "$(dump .generation)" -gt "$GEN_BEFORE" ] || fail "generation did not move forward"
code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"default","name":"web-6"},"sandboxId":"sb6","ifname":"eth0","pfIndex":0,"vfIndex":6}')
IP6=$(jq -r '.attachment.ips[0].address' "$DIR/out.json")
[ "$IP6" != "$IP5" ] && [ "$IP6" != "$IP1" ] || fail "an address was handed out twice across the restart ($IP6)"

# --- the dataplane restarts: the agent notices and programs it again
INSTANCE=$(dump .instance_id)
touch "$DIR/dp.restart"
eventually "the fake dataplane restarts" 'test "$(dump .instance_id)" != "$INSTANCE"'
eventually "the agent reprograms the restarted dataplane" 'test "$(ports)" = 3'
[ "$(dump '.history[-1].request')" = '"full_sync"' ] || fail "no full sync after the dataplane restart"

# --- one node added: one Delta with one remote node; removed: one delete
add_cluster <<YAML
  - {name: node-c, tunnelIP: 192.168.50.3, podCIDR: 10.244.3.0/24}
YAML
eventually "node-c reaches the dataplane" 'test "$(remotes)" = 2'
[ "$(dump '.history[-1].request')" = '"delta"' ] && [ "$(last_objects)" = '["+remote:node-c"]' ] ||
  fail "adding a node was not one Delta adding one remote node: $(dump '.history[-1]')"
[ "$(dump '.model.remote_nodes[] | select(.name=="node-c") | .subnets[0].datapath_key')" = 4 ] || fail "node-c datapath key"
sed -i '/node-c/d' "$DIR/cluster.yaml"
eventually "node-c leaves the dataplane" 'test "$(remotes)" = 1'
[ "$(dump '.history[-1].request')" = '"delta"' ] && [ "$(last_objects)" = '["-remote:node-c"]' ] ||
  fail "removing a node was not one Delta deleting it: $(dump '.history[-1]')"

# --- services: compiled into the model, a slice change sent as a Delta of
# services alone, a bad service left out with the reason in the log and a
# metric. (The fake dataplane does not keep services: what the agent compiles
# is checked in services_compile_test.cpp, the dataplane's use of it in lab_services.)
NODES=$(cat "$DIR/cluster.yaml")
HLEN=$(history_len)
add_cluster <<YAML
services:
  - {name: web, clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: http}]}
  - {name: bad, clusterIP: 127.0.0.10, ports: [{port: 80}]}
endpointSlices:
  - {name: web-1, service: web, ports: [{name: http, port: 8080}],
     endpoints: [{addresses: [10.244.1.5], nodeName: node-a}, {addresses: [10.244.2.5], nodeName: node-b}]}
YAML
service_metrics() { curl -s "$URL/metrics" | grep -E '^dpu_agent_service(s|_refused)' | tr '\n' ' '; }
eventually "the agent holds service web and refuses service bad" \
  'test "$(service_metrics)" = "dpu_agent_services 1 dpu_agent_service_refused{service=\"default/bad\"} 1 "'
grep -q "service default/bad is left out of the dataplane: cluster_ips 127.0.0.10 is a loopback address" "$DIR/agent.log" ||
  fail "no log line for the refused service"
eventually "the dataplane acknowledges the service" 'test "$(history_len)" -gt "$HLEN"'
HLEN=$(history_len)
sed -i 's/addresses: \[10.244.2.5\]/addresses: [10.244.2.6]/' "$DIR/cluster.yaml"
eventually "the slice change reaches the dataplane" 'test "$(history_len)" -gt "$HLEN"'
[ "$(dump ".history[$HLEN].request")" = '"delta"' ] && [ "$(dump ".history[$HLEN].objects")" = '[]' ] ||
  fail "a slice change was not a Delta of services alone: $(dump ".history[$HLEN]")"
echo "$NODES" | put_cluster
eventually "the services leave the model" 'test "$(service_metrics)" = "dpu_agent_services 0 "'

# The barrier after a refused cluster file: the file as it was before it, with one
# more node (node-c), written at once. The source reads the files in order and
# the dataplane gets the model's changes in order, in Deltas of what differs, so
# the next Delta after HLEN must be node-c's alone: a change the refused file
# had made would come in an earlier Delta or in that one. Then node-c goes again.
C_NODE="  - {name: node-c, tunnelIP: 192.168.50.3, podCIDR: 10.244.3.0/24}"
barrier_node_c() {  # WHAT: the barrier file is $DIR/cluster.yaml.new
  mv "$DIR/cluster.yaml.new" "$DIR/cluster.yaml"
  eventually "node-c reaches the dataplane after $1" 'test "$(history_len)" -gt "$HLEN"'
  [ "$(history_len)" = $((HLEN + 1)) ] && [ "$(dump ".history[$HLEN].request")" = '"delta"' ] &&
    [ "$(dump ".history[$HLEN].objects")" = '["+remote:node-c"]' ] ||
    fail "$1 changed the dataplane: the Deltas since are $(dump ".history[$HLEN:]")"
  grep -v 'name: node-c,' "$DIR/cluster.yaml" > "$DIR/cluster.yaml.new" && mv "$DIR/cluster.yaml.new" "$DIR/cluster.yaml"
  eventually "node-c leaves the dataplane after $1" 'test "$(remotes)" = 1'
}

# --- NetworkPolicy: a pod the cluster file's policy selects is attached with
# its PortPolicy in the Delta of its port; a policy change is a Delta of that
# PortPolicy alone; a bad policy is refused with its field, logged and
# counted, the other one kept; a detach takes the port and its PortPolicy.
add_cluster <<YAML
namespaces:
  - {name: shop, labels: {team: payments}}
pods:
  - {namespace: shop, name: db, nodeName: node-a, labels: {app: db}}
  - {namespace: shop, name: web, nodeName: node-b, ips: [10.244.2.7], labels: {app: web}}
networkPolicies:
  - {namespace: shop, name: db, podSelector: {matchLabels: {app: db}},
     ingress: [{from: [{podSelector: {matchLabels: {app: web}}}], ports: [{port: 5432}]}]}
YAML
policy_metrics() { curl -s "$URL/metrics" | grep -E '^dpu_agent_(port_policies|networkpolicy_refused)' | tr '\n' ' '; }
eventually "the agent reads the policy" \
  'curl -s "$URL/metrics" | matches "dpu_agent_cluster_events_total{source=\"file\",kind=\"networkpolicy\"} 1"'
HLEN=$(history_len)
code=$(post_json /v1/attachments '{"kind":"POD","pod":{"namespace":"shop","name":"db"},"sandboxId":"sbdb","ifname":"eth0","pfIndex":0,"vfIndex":5}')
[ "$code" = 200 ] || fail "attach of shop/db answered $code: $(cat "$DIR/out.json")"
IDDB=$(jq -r .attachment.id "$DIR/out.json")
eventually "the db port reaches the dataplane" 'test "$(history_len)" -gt "$HLEN"'
[ "$(dump ".history[$HLEN].objects")" = "[\"+port:$IDDB\",\"+port-policy:$IDDB\"]" ] ||
  fail "the attach was not one Delta with the port and its PortPolicy: $(dump ".history[$HLEN]")"
[ "$(dump ".model.port_policies[] | select(.port == \"$IDDB\") | [.pod, .ingress.isolated, .ingress.rules[0].peers[0], .ingress.rules[0].port_first]")" = \
  '["shop/db",true,"10.244.2.7/32",5432]' ] || fail "db's PortPolicy: $(dump .model.port_policies)"
eventually "the metric counts one port with rules" 'test "$(policy_metrics)" = "dpu_agent_port_policies 1 "'
HLEN=$(history_len)
sed -i 's/ports: \[{port: 5432}\]/ports: [{port: 5433}]/' "$DIR/cluster.yaml"
eventually "the policy change reaches the dataplane" 'test "$(history_len)" -gt "$HLEN"'
[ "$(dump ".history[$HLEN].objects")" = "[\"~port-policy:$IDDB\"]" ] ||
  fail "a policy change was not a Delta of that PortPolicy alone: $(dump ".history[$HLEN]")"
# A bad policy: the file source refuses it while reading (the whole file, as
# any bad object: the last good state stays in force), naming the policy's
# field; the policies in force and the dataplane are unchanged. (Refusals the
# compiler makes itself are reported as dpu_agent_networkpolicy_refused:
# policy_model_test.cpp.)
HLEN=$(history_len)
malformed() { curl -s "$URL/metrics" | awk '/^dpu_agent_cluster_malformed_objects_total/ { print $2 }'; }
BAD_BEFORE=$(malformed)
add_cluster <<YAML
  - {namespace: shop, name: bad, podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.1.0.0/24]}}]}]}
YAML
eventually "the bad policy is refused and counted" 'test "$(malformed)" -gt "$BAD_BEFORE"'
grep -q "networkPolicies\[1\].ingress\[0\].from\[0\].ipBlock.except\[0\]: '10.1.0.0/24' is not a strict subset" "$DIR/agent.log" ||
  fail "no log line naming the refused policy's field"
[ "$(policy_metrics)" = "dpu_agent_port_policies 1 " ] || fail "a refused policy changed the agent's policies: $(policy_metrics)"
awk -v c="$C_NODE" '/name: bad, podSelector/ { next } { print } /^  - \{name: node-b,/ { print c }' "$DIR/cluster.yaml" \
  > "$DIR/cluster.yaml.new"
barrier_node_c "a refused policy"
[ "$(policy_metrics)" = "dpu_agent_port_policies 1 " ] || fail "the policies after a refused one: $(policy_metrics)"
HLEN=$(history_len)
code=$(curl -s -o "$DIR/out.json" -w '%{http_code}' -X DELETE -H 'Accept: application/json' "$URL/v1/attachments/$IDDB")
[ "$code" = 200 ] || fail "detach of shop/db answered $code"
eventually "the detach reaches the dataplane" 'test "$(history_len)" -gt "$HLEN"'
[ "$(dump ".history[$HLEN].objects")" = "[\"-port:$IDDB\",\"-port-policy:$IDDB\"]" ] ||
  fail "the detach was not one Delta removing the port and its PortPolicy: $(dump ".history[$HLEN]")"
echo "$NODES" | put_cluster
eventually "the policies leave the agent" 'test "$(policy_metrics)" = "dpu_agent_port_policies 0 "'

# --- a bad cluster file keeps the last good state
HLEN=$(history_len)
BAD_BEFORE=$(malformed)
echo "nodes: [{name: node-b, tunnelIP: nope}]" | put_cluster
eventually "the bad file is reported" 'test "$(malformed)" -gt "$BAD_BEFORE"'
curl -sf "$URL/readyz" >/dev/null || fail "a bad cluster file made the agent unready"
printf '%s\n%s\n' "$NODES" "$C_NODE" > "$DIR/cluster.yaml.new"
barrier_node_c "a bad cluster file"

# --- the fake dataplane's operator API lists the programmed ports (dpuctl's view)
printf 'ports {}\n' | protoc --encode=dpu.dataplane.v1.OperatorRequest -I "$PROTO" dpu/dataplane/v1/dataplane.proto > "$DIR/op.bin"
/usr/bin/python3 - "$DIR/op.sock" "$DIR/op.bin" > "$DIR/op.out" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = open(sys.argv[2], "rb").read()
s.sendall(struct.pack(">I", len(body)) + body)
n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
sys.stdout.buffer.write(s.recv(n, socket.MSG_WAITALL) if n else b"")
PY
protoc --decode=dpu.dataplane.v1.OperatorReply -I "$PROTO" dpu/dataplane/v1/dataplane.proto < "$DIR/op.out" > "$DIR/op.txt"
[ "$(grep -c 'logical_port:' "$DIR/op.txt")" = 3 ] || fail "operator ports: $(cat "$DIR/op.txt")"

# --- metrics
curl -s "$URL/metrics" > "$DIR/metrics.txt"
for m in dpu_agent_attachments dpu_agent_ipam_addresses_used dpu_agent_cluster_watch_restarts_total \
         dpu_agent_api_request_duration_seconds_bucket dpu_agent_datapath_programming_duration_seconds_bucket; do
  grep -q "^$m" "$DIR/metrics.txt" || fail "metric $m missing"
done
grep -q '^dpu_agent_attachments 3$' "$DIR/metrics.txt" || fail "attachments gauge: $(grep ^dpu_agent_attachments "$DIR/metrics.txt")"
prog_sum=$(awk '/^dpu_agent_datapath_programming_duration_seconds_sum/ {print $2}' "$DIR/metrics.txt")
prog_n=$(awk '/^dpu_agent_datapath_programming_duration_seconds_count/ {print $2}' "$DIR/metrics.txt")
echo "datapath programming (fake fsyncs its dump per change): $prog_n acknowledgements, mean $(awk "BEGIN {printf \"%.2f\", 1000*$prog_sum/$prog_n}") ms"

# --- mTLS: with cert, key and clientCA the API is HTTPS and wants a client certificate
if command -v openssl >/dev/null; then
  ( cd "$DIR"
    newkey() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -subj "/CN=$2" "${@:3}" 2>/dev/null; }
    newkey ca test-ca -x509 -days 1 -out ca.pem
    newkey server 127.0.0.1 -out server.csr
    printf 'subjectAltName=IP:127.0.0.1\n' > san.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile san.ext -out server.pem 2>/dev/null
    # The host's certificate names the node the agent serves (nodeName node-a);
    # another node's, from the same CA, is refused.
    newkey client node-a -out client.csr
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -out client.pem 2>/dev/null
    newkey other host-b -out other.csr
    printf 'subjectAltName=DNS:node-b\n' > other.ext
    openssl x509 -req -in other.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile other.ext -out other.pem 2>/dev/null )
  TLS_PORT=$((PORT + 1000))
  tls_up() { curl -sf --cacert "$DIR/ca.pem" --cert "$DIR/client.pem" --key "$DIR/client.key" "https://127.0.0.1:$TLS_PORT/healthz"; }
  # Another test may hold the port (they run side by side): then the next two.
  for attempt in 1 2 3 4 5; do
    sed -e "s|^api:.*|api: {address: 127.0.0.1, port: $TLS_PORT, tls: {cert: $DIR/server.pem, key: $DIR/server.key, clientCA: $DIR/ca.pem}}|" \
        -e "s|^stateDir:.*|stateDir: $DIR/state-tls|" -e "s|^dataplaneSocket:.*|dataplaneSocket: $DIR/none.sock|" \
        "$DIR/agent.yaml" > "$DIR/tls.yaml"
    METRICS_PORT=$((TLS_PORT + 1))
    echo "metrics: {listen: \"127.0.0.1:$METRICS_PORT\"}" >> "$DIR/tls.yaml"
    "${AGENT[@]}" --config "$DIR/tls.yaml" 2>"$DIR/tls.log" &
    TLS_PID=$!
    wait_for 10 tls_up && break
    kill -0 "$TLS_PID" 2>/dev/null || ! grep -q "cannot listen" "$DIR/tls.log" ||
      { wait "$TLS_PID" 2>/dev/null || true; TLS_PORT=$((TLS_PORT + 2)); continue; }
    fail "timed out waiting for: the HTTPS API answers a client with a certificate; its log: $(tail -n 5 "$DIR/tls.log")"
  done
  if curl -sf --cacert "$DIR/ca.pem" "https://127.0.0.1:$TLS_PORT/healthz" >/dev/null 2>&1; then
    fail "the HTTPS API answered a client without a certificate"
  fi
  if curl -sf --cacert "$DIR/ca.pem" --cert "$DIR/other.pem" --key "$DIR/other.key" "https://127.0.0.1:$TLS_PORT/healthz" >/dev/null 2>&1; then
    fail "the HTTPS API answered a client whose certificate names another node"
  fi
  grep -q "expected one naming the host node 'node-a'.*presented CN=host-b, DNS:node-b" "$DIR/tls.log" ||
    fail "no log line names the expected and the presented identity: $(grep 'client certificate' "$DIR/tls.log")"
  code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$DIR/ca.pem" --cert "$DIR/client.pem" --key "$DIR/client.key" "https://127.0.0.1:$TLS_PORT/readyz")
  [ "$code" = 503 ] || fail "readyz without a dataplane answered $code"
  # The metrics listener (metrics.listen): the API's TLS, /metrics only.
  mcurl() { curl -s --cacert "$DIR/ca.pem" --cert "$DIR/client.pem" --key "$DIR/client.key" "$@"; }
  # It opens just after the API listener: wait for it the same way.
  metrics_up() { mcurl "https://127.0.0.1:$METRICS_PORT/metrics" | grep -q '^dpu_agent_attachments '; }
  eventually "the metrics listener serves /metrics over mTLS" metrics_up
  if curl -sf --cacert "$DIR/ca.pem" "https://127.0.0.1:$METRICS_PORT/metrics" >/dev/null 2>&1; then
    fail "the metrics listener answered a scraper without a client certificate"
  fi
  for path in /v1/attachments /v1/health; do
    code=$(mcurl -o /dev/null -w '%{http_code}' "https://127.0.0.1:$METRICS_PORT$path")
    [ "$code" = 404 ] || fail "the metrics listener answered $path with $code, not 404 (the attach API must not be there)"
  done
  code=$(mcurl -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' -d '{}' \
         "https://127.0.0.1:$METRICS_PORT/v1/attachments")
  [ "$code" = 404 ] || fail "the metrics listener took an attach (HTTP $code)"
  kill -TERM "$TLS_PID"; wait "$TLS_PID" || fail "TLS agent did not exit cleanly"
  TLS_PID=""
else
  echo "note: openssl missing, mTLS not tested"
fi

# --- graceful stop
kill -TERM "$AGENT_PID"; wait "$AGENT_PID" || fail "agent did not exit cleanly on SIGTERM"
AGENT_PID=""
echo "PASS"
