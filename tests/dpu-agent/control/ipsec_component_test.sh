#!/bin/bash
# Component test of dpu-agent's IPsec keys mode: three real agents sharing a
# cluster file, each with its own fake dataplane (tests/fakes/fake-dataplane,
# which installs and reports SAs as the programming API says; node-c's says it
# does not install SAs). No root needed: unix sockets, loopback ports.
#
# Proves:
#  - each agent makes its key pair (keys.json, mode 0600), publishes key and
#    epoch in its publish file once its dataplane holds the inbound SAs, and
#    node-c, whose dataplane installs no SA, publishes no key;
#  - the SAs the agents program are exactly those ipsec_keys.py (an
#    independent implementation of docs/ipsec.md) computes from the two key
#    files and the PSK: each outbound SA is the other's inbound SA;
#  - a rotation (SIGUSR1): the new epoch's inbound SA first, then its
#    publication, the peer's switch, the switch of the rotating node on the
#    peer's first packet, the old epoch retired after the grace period;
#  - kill -9 of an agent: the resync changes nothing; a dataplane restart: the
#    outbound SA starts above everything it may have sent;
#  - no key (SA keys, private keys; raw, hex or base64) in any log, checkpoint,
#    state file, publish file, metrics page or fake dataplane dump.
#
# usage: ipsec_component_test.sh DPU_AGENT FAKE_DATAPLANE PYTHON IPSEC_KEYS_PY
set -euo pipefail
AGENT=$1 FAKE=$2 PY=$3 KEYS_PY=$4
source "$(dirname "$(readlink -f "$0")")/../../support/shell.bash"
# The Arm build runs them under the emulator (its words first).
AGENT=("${EMULATOR[@]}" "$AGENT") FAKE=("${EMULATOR[@]}" "$FAKE")
for tool in curl jq; do
  command -v $tool >/dev/null || skip_test "$tool is not installed"
done
"$PY" -c 'import cryptography.hazmat.primitives.asymmetric.x25519' 2>/dev/null ||
  skip_test "$PY has no cryptography module (Debian package python3-cryptography)"

DIR=$(mktemp -d /tmp/dpu-ipsec-component.XXXXXX)
declare -A AGENT_PID FAKE_PID PORT
cleanup() {
  for n in "${!AGENT_PID[@]}"; do kill -9 "${AGENT_PID[$n]}" 2>/dev/null || true; done
  for n in "${!FAKE_PID[@]}"; do kill "${FAKE_PID[$n]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for n in node-a node-b node-c; do
    echo "--- $n agent log" >&2; tail -n 25 "$DIR/$n/agent.log" >&2 || true
  done
  echo "--- node-a fake dataplane SAs" >&2; jq -c '.model.ipsec_sas' "$DIR/node-a/dp.json" >&2 || true
  exit 1
}
# eventually "description" CONDITION... (a command, re-run until it succeeds; 10 s)
eventually() {
  local what=$1; shift
  wait_for 10 "$@" || fail "timed out waiting for: $what"
}

GRACE=5
BASE_PORT=$((21000 + $$ % 15000))
"$PY" -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode())' > "$DIR/psk"
chmod 0400 "$DIR/psk"
cat > "$DIR/cluster.yaml" <<YAML
nodes: []
YAML

i=0
for n in node-a node-b node-c; do
  i=$((i + 1))
  mkdir -p "$DIR/$n"
  PORT[$n]=$((BASE_PORT + i))
  cat > "$DIR/$n/agent.yaml" <<YAML
nodeName: $n
tunnelIP: 192.168.50.$i
representors:
  - {pf: 0, vfCount: 4, name: "pf0vf{vf}"}
podCIDR: 10.244.$i.0/24
clusterCIDRs: [10.244.0.0/16]
underlayMTU: 1500
ipsec:
  mode: keys
  pskFile: $DIR/psk
  gracePeriodSeconds: $GRACE
  rotationPeriodSeconds: 0
clusterSource: {type: file, path: $DIR/cluster.yaml}
api: {address: 127.0.0.1, port: ${PORT[$n]}}
dataplaneSocket: $DIR/$n/dp.sock
stateDir: $DIR/$n/state
log: {level: debug}
YAML
done

start_fake() {  # start_fake NODE [fake options...]
  local n=$1; shift
  "${FAKE[@]}" --socket "$DIR/$n/dp.sock" --dump "$DIR/$n/dp.json" --restart-file "$DIR/$n/dp.restart" \
    --ipsec-traffic "$DIR/$n/traffic" "$@" 2>>"$DIR/$n/fake.log" &
  FAKE_PID[$n]=$!
}
start_agent() {
  local n=$1
  "${AGENT[@]}" --config "$DIR/$n/agent.yaml" 2>>"$DIR/$n/agent.log" &
  AGENT_PID[$n]=$!
  eventually "$n's agent answers" curl -sf "http://127.0.0.1:${PORT[$n]}/healthz"
}
for n in node-a node-b; do : > "$DIR/$n/traffic"; start_fake $n; done
: > "$DIR/node-c/traffic"; start_fake node-c --no-ipsec
for n in node-a node-b node-c; do start_agent $n; done

pub() { jq -r ".$2 // empty" "$DIR/cluster.yaml.d/$1.json" 2>/dev/null; }
sas() { jq -c "[.model.ipsec_sas[]? | $2]" "$DIR/$1/dp.json" 2>/dev/null; }
# The SA of node $1 towards (or from) node $2 in direction $3, field $4.
sa_field() { jq -r "[.model.ipsec_sas[]? | select(.remote_node==\"$2\" and .direction==\"$3\")] | .[${5:-0}].$4 // empty" "$DIR/$1/dp.json" 2>/dev/null; }
published_epoch_is() { [ "$(pub "$1" ipsecEpoch)" = "$2" ]; }
has_outbound_to() { [ -n "$(sa_field "$1" "$2" OUTBOUND name)" ]; }

# --- first start: keys made, published once installed
for n in node-a node-b; do
  eventually "$n publishes epoch 1" published_epoch_is $n 1
  [ "$(stat -c %a "$DIR/$n/state/ipsec/keys.json")" = 600 ] || fail "$n's key file is not mode 0600"
  [ "$(stat -c %a "$DIR/$n/state/ipsec")" = 700 ] || fail "$n's IPsec state directory is not mode 0700"
done
eventually "node-a has an outbound SA to node-b" has_outbound_to node-a node-b
eventually "node-b has an outbound SA to node-a" has_outbound_to node-b node-a
# node-c's dataplane installs no SA: no key of its own is published; it still
# installs nothing and the others hold no SA for it.
c_published() { [ -n "$(pub node-c tunnelIP)" ]; }
eventually "node-c publishes its entry" c_published
[ -z "$(pub node-c ipsecPublicKey)" ] || fail "node-c published an IPsec key although its dataplane installs no SA"
curl -s "http://127.0.0.1:${PORT[node-c]}/metrics" | matches '^dpu_agent_ipsec_dataplane_support 0$' ||
  fail "node-c's metrics do not say its dataplane lacks IPsec"
[ -z "$(sa_field node-a node-c OUTBOUND name)" ] || fail "node-a holds an SA for node-c, which advertises no key"
grep -q "does not install IPsec SAs" "$DIR/node-c/agent.log" || fail "node-c's log does not say why it publishes no key"

# --- the SAs are the documented derivation's, both ways
derive() {
  "$PY" "$KEYS_PY" "node-a=$DIR/node-a/state/ipsec/keys.json" "node-b=$DIR/node-b/state/ipsec/keys.json" --psk "$DIR/psk"
}
derive > "$DIR/derived-1.txt"
cat "$DIR/derived-1.txt" >> "$DIR/all-derived.txt"
check_sa() {  # check_sa FROM TO SENDER_EPOCH RECEIVER_EPOCH: FROM's outbound and TO's inbound are the derivation's
  local from=$1 to=$2 se=$3 re=$4 line spi keysha
  line=$(jq -c "select(.from==\"$from\" and .to==\"$to\" and .sender_epoch==$se and .receiver_epoch==$re)" "$DIR/derived-$5.txt")
  [ -n "$line" ] || fail "ipsec_keys.py computed no SA $from->$to $se/$re"
  spi=$(jq -r .spi <<< "$line")
  keysha=$("$PY" -c 'import hashlib,sys; print(hashlib.sha256(bytes.fromhex(sys.argv[1])).hexdigest()[:16])' "$(jq -r .key <<< "$line")")
  jq -e --arg n "$to/out/$spi" --arg k "$keysha" \
    '.model.ipsec_sas[] | select(.name==$n and .key_sha256==$k and .direction=="OUTBOUND")' "$DIR/$from/dp.json" >/dev/null ||
    fail "$from's outbound SA to $to is not $to/out/$spi with the derived key: $(sas $from '{name,key_sha256}')"
  jq -e --arg n "$from/in/$spi" --arg k "$keysha" \
    '.model.ipsec_sas[] | select(.name==$n and .key_sha256==$k and .direction=="INBOUND")' "$DIR/$to/dp.json" >/dev/null ||
    fail "$to's inbound SA from $from is not $from/in/$spi with the derived key: $(sas $to '{name,key_sha256}')"
}
check_sa node-a node-b 1 1 1
check_sa node-b node-a 1 1 1
cp "$DIR/node-a/state/ipsec/keys.json" "$DIR/keys-node-a-epoch1.json"  # outside the scanned trees
[ "$(jq '[.model.ipsec_sas[]] | length' "$DIR/node-a/dp.json")" = 2 ] || fail "node-a holds $(sas node-a .name), not 2 SAs"

# --- rotation on node-a
kill -USR1 "${AGENT_PID[node-a]}"
eventually "node-a publishes epoch 2" published_epoch_is node-a 2
grep -q "every inbound SA is installed; publishing it" "$DIR/node-a/agent.log" || fail "node-a's log does not show the install step"
# node-b learned it and sends with it at once; node-a still sends with epoch 1.
published_at=$(date +%s%N)
b_sends_epoch2() { [ "$(sa_field node-b node-a OUTBOUND remote_epoch)" = 2 ]; }
eventually "node-b sends to node-a's epoch 2" b_sends_epoch2
# node-a may send with epoch 2 only once node-b showed it knows it, or the
# grace period after the publication ended (on a machine slow enough to get here that late).
[ "$(sa_field node-a node-b OUTBOUND local_epoch)" = 1 ] || [ $(( ($(date +%s%N) - published_at) / 1000000 )) -ge $((GRACE * 1000)) ] ||
  fail "node-a switched its outbound before any evidence"
derive > "$DIR/derived-2.txt"
cat "$DIR/derived-2.txt" >> "$DIR/all-derived.txt"
check_sa node-b node-a 1 2 2
# node-b's first packet on it reaches node-a (simulated in node-a's fake dataplane).
spi=$(sa_field node-b node-a OUTBOUND spi)
echo "node-b/in/$(printf %08x "$spi") 3" > "$DIR/node-a/traffic"
a_sends_epoch2() { [ "$(sa_field node-a node-b OUTBOUND local_epoch)" = 2 ]; }
eventually "node-a switches to epoch 2 on node-b's first packet" a_sends_epoch2
check_sa node-a node-b 2 1 2
if grep -q "node node-b sent on our epoch 2" "$DIR/node-a/agent.log"; then
  echo "node-a switched on node-b's first packet"
elif grep -q "sending to node node-b with epoch 2 (published" "$DIR/node-a/agent.log"; then
  echo "note: node-a switched when the grace period ended, before the first packet was reported (a slow run)"
else
  fail "node-a's log does not say why it switched"
fi
# The old epoch goes after the grace period, with its private key.
epoch1_gone() { ! jq -e '.keys[] | select(.epoch == 1)' "$DIR/node-a/state/ipsec/keys.json" >/dev/null; }
eventually "node-a retires epoch 1" epoch1_gone
inbound_count() { jq "[.model.ipsec_sas[] | select(.direction==\"INBOUND\")] | length" "$DIR/$1/dp.json"; }
one_inbound() { [ "$(inbound_count node-a)" = 1 ]; }
eventually "node-a keeps one inbound SA" one_inbound
curl -s "http://127.0.0.1:${PORT[node-a]}/metrics" > "$DIR/metrics-a.txt"
grep -q '^dpu_agent_ipsec_epoch{state="current"} 2$' "$DIR/metrics-a.txt" || fail "metrics: $(grep ipsec_epoch "$DIR/metrics-a.txt")"
grep -q '^dpu_agent_ipsec_rotations_total 1$' "$DIR/metrics-a.txt" || fail "metrics: rotations"

# --- kill -9 and restart of node-a's agent: the resync changes nothing
kill -9 "${AGENT_PID[node-a]}"; wait "${AGENT_PID[node-a]}" 2>/dev/null || true
hlen=$(jq '.history | length' "$DIR/node-a/dp.json")
start_agent node-a
resynced() { [ "$(jq '.history | length' "$DIR/node-a/dp.json")" -gt "$hlen" ] && [ "$(jq -r '.history[-1].request' "$DIR/node-a/dp.json")" = full_sync ]; }
eventually "node-a's agent resyncs" resynced
[ "$(jq -c '.history[-1].objects' "$DIR/node-a/dp.json")" = "[]" ] ||
  fail "the resync after kill -9 changed: $(jq -c '.history[-1].objects' "$DIR/node-a/dp.json")"

# --- node-a's dataplane restarts: its outbound SA starts above what it may have sent
limit_before=$(sa_field node-a node-b OUTBOUND sequence_limit)
touch "$DIR/node-a/dp.restart"
restarted() { [ "$(sa_field node-a node-b OUTBOUND initial_sequence)" = "$((limit_before + 1))" ]; }
eventually "node-a's new dataplane gets the outbound SA above its mark ($limit_before)" restarted
[ "$(sa_field node-a node-b OUTBOUND local_epoch)" = 2 ] || fail "the outbound SA's epoch changed across the dataplane restart"

# --- no key anywhere but the programming socket
curl -s "http://127.0.0.1:${PORT[node-a]}/metrics" >> "$DIR/metrics-a.txt"
curl -s "http://127.0.0.1:${PORT[node-b]}/metrics" > "$DIR/metrics-b.txt"
"$PY" - "$DIR" <<'PY' || fail "a key leaked (see above)"
import base64, json, os, sys
d = sys.argv[1]
secrets = set()
for line in open(os.path.join(d, "all-derived.txt")):
    secrets.add(bytes.fromhex(json.loads(line)["key"]))
# The private keys of every epoch: the key files now, and node-a's as it was
# before epoch 1 retired.
for path in [os.path.join(d, n, "state", "ipsec", "keys.json") for n in ("node-a", "node-b", "node-c")] + \
            [os.path.join(d, "keys-node-a-epoch1.json")]:
    for k in json.load(open(path))["keys"]:
        secrets.add(base64.b64decode(k["privateKey"]))
forms = []
for s in secrets:
    forms += [s, s.hex().encode(), s.hex().upper().encode(), base64.b64encode(s), base64.b64encode(s).rstrip(b"=")]
scanned, leaks = 0, []
for n in ("node-a", "node-b", "node-c"):
    for root, _, files in os.walk(os.path.join(d, n)):
        for f in files:
            p = os.path.join(root, f)
            if f == "keys.json" or f.endswith(".sock") or os.path.islink(p):
                continue  # the key file is where private keys live
            data = open(p, "rb").read()
            scanned += 1
            leaks += [(p, form[:6]) for form in forms if form in data]
for p in [os.path.join(d, "metrics-a.txt"), os.path.join(d, "metrics-b.txt")] + \
         [os.path.join(d, "cluster.yaml.d", f) for f in os.listdir(os.path.join(d, "cluster.yaml.d"))]:
    data = open(p, "rb").read()
    scanned += 1
    leaks += [(p, form[:6]) for form in forms if form in data]
for p, f in leaks:
    print("LEAK:", p, f, file=sys.stderr)
needed = {"agent.log", "agent-checkpoint.pb", "sa-state.json", "dp.json"}
seen = {f for n in ("node-a", "node-b") for _, _, fs in os.walk(os.path.join(d, n)) for f in fs}
assert needed <= seen, needed - seen
print(f"no key in {scanned} files ({len(secrets)} secrets, {len(forms)} forms each searched)")
sys.exit(1 if leaks else 0)
PY

for n in node-a node-b node-c; do
  kill -TERM "${AGENT_PID[$n]}"; wait "${AGENT_PID[$n]}" || fail "$n's agent did not exit cleanly on SIGTERM"
  unset "AGENT_PID[$n]"
done
echo "PASS"
