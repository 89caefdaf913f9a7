#!/usr/bin/env bash
# Lab e2e, NetworkPolicy through the real daemons on the upstream netpol
# harness's shape (docs/policy.md "The lab"): namespaces x, y, z (labelled
# ns=<name>) with pods a, b, c each (labelled pod=<name>; a and c on node1,
# b on node2), each serving TCP and UDP on 80 and 81 (who_server.py) and
# answering SCTP INITs on both (sctp_raw.py: the kernel has no SCTP), with
# container ports named serve-<port>-<proto>, and a service per pod.
# Proves:
#  - every upstream case of tests/dpu-agent/policy/netpol_cases.h (the
#    netpol-cases tool prints its states and matrices, with this lab's pod
#    addresses for the ipBlock cases): at each check the cluster file is set
#    to that state (policies, namespace and pod labels — updates and
#    deletions included), and all 72 ordered pairs of distinct pods are probed
#    through the pod IPs and through the ClusterIPs, one prober per source pod
#    probing every destination at once; the whole matrix must equal the
#    expected one (both printed on a mismatch), over TCP, UDP, SCTP and
#    ICMP (echo, to pod IPs: a ClusterIP forwards only its ports);
#  - node and management-port traffic under deny-all in x: a node's host
#    reaches its own x pods (kubelet probes), the other node's host does not;
#    an x pod cannot reach the node through the management port (egress), a
#    y pod can.
source "$(dirname "$0")/common.bash" npol
PY=/usr/bin/python3
[ -x "$PY" ] || skip_test "Debian's python3 (/usr/bin/python3) is not installed (scripts/install-deps.sh)"
CASES=$DPU_BUILD_DIR/tests/dpu-agent/policy/netpol-cases
[ -x "$CASES" ] || { echo "FAIL: $CASES is not built (cmake --build --preset release --target netpol-cases)" >&2; exit 1; }
lab_test_up 2 0

NSS=(x y z) PODS=(a b c)
ALL=()
declare -A IP SVC NODE
for ns in "${NSS[@]}"; do dl_ns_add "$ns" "ns=$ns" || fail "ns add $ns"; done
for ns in "${NSS[@]}"; do
  for p in "${PODS[@]}"; do
    n=1; [ "$p" = b ] && n=2
    ports=()
    for port in 80 81; do for proto in tcp udp sctp; do ports+=(--port "serve-$port-$proto:$port/$proto"); done; done
    ip=$(dl_pod_add_labelled "$n" "$p" --ns "$ns" --labels "pod=$p" "${ports[@]}") && [ -n "$ip" ] ||
      { echo "FAIL: pod add $ns/$p" >&2; exit 1; }
    IP[$ns/$p]=$ip NODE[$ns/$p]=$n
    ALL+=("$ns/$p")
    dl_spawn "$DL_DIR/who-$ns.$p.pid" "$(dl_pod_ns "$n" "$ns.$p")" "$DL_DIR/who-$ns.$p.log" \
      "$PY" "$LAB_TESTS/who_server.py" "$ns/$p" 80,81 80,81 || fail "server in $ns/$p"
    dl_spawn "$DL_DIR/sctp-$ns.$p.pid" "$(dl_pod_ns "$n" "$ns.$p")" "$DL_DIR/sctp-$ns.$p.log" \
      "$PY" "$LAB_TESTS/sctp_raw.py" answer 80,81 "$ns/$p" || fail "SCTP answerer in $ns/$p"
    dl_service_add "$ns-$p" --port tcp/80 --port tcp/81 --port udp/80 --port udp/81 --port sctp/80 --port sctp/81 \
      --backends "node$n/$ns.$p" >/dev/null ||
      fail "service $ns-$p"
    SVC[$ns/$p]=$(dl_service_ip "$ns-$p")
  done
done
for n in 1 2; do
  dl_spawn "$DL_DIR/who-host$n.pid" "$(dl_node_ns "$n" host)" "$DL_DIR/who-host$n.log" \
    "$PY" "$LAB_TESTS/who_server.py" "node$n" 80 80 || fail "server on node$n's host"
done
pass "9 pods in x, y, z with servers and services ($(elapsed))"

# The cluster file's policy state: STATE is one check of netpol-cases (its
# policies, namespace labels and pod labels). Written at once, then waited
# for: every agent has reloaded the file, and its dataplane has acknowledged
# what the reload changed in the agent's model.
objects=$DL_DIR/services
relists() { dl_metrics "$1" agent | awk '/^dpu_agent_cluster_relists_total/ { v = $2 } END { print v + 0 }'; }
# What the agent changed in its model and its dataplane has not acknowledged:
# 0 once the dataplane forwards with every change made so far.
unacked() {
  dl_metrics "$1" agent | awk '/^dpu_agent_model_changes_unacknowledged / { v = $2 } END { print (v == "" ? -1 : v + 0) }'
}
_acked() { [ "$(unacked "$1")" = 0 ]; }
set_state() {
  local state=$1 before=() n k f out
  for n in 1 2; do before[$n]=$(relists "$n"); done
  rm -rf "$objects/netpols" && mkdir -p "$objects/netpols" || return 1
  while IFS= read -r out; do
    k=$(jq -r '"\(.namespace).\(.name)"' <<< "$out")
    echo "$out" > "$objects/netpols/$k"
  done < <(jq -c '.policies[]' <<< "$state")
  for ns in "${NSS[@]}"; do
    jq -c --arg n "$ns" '{name: $n, labels: .namespaces[$n]}' <<< "$state" > "$objects/namespaces/$ns"
  done
  for k in "${ALL[@]}"; do
    f=$objects/pod-meta/n${NODE[$k]}-${k/\//.}
    out=$(jq -c --argjson l "$(jq -c --arg k "$k" '.pods[$k]' <<< "$state")" '.labels = $l' "$f") && echo "$out" > "$f"
  done
  local old; old=$(cat "$DL_DIR/cluster.yaml")
  dl_compose_cluster_file || return 1
  [ "$old" != "$(cat "$DL_DIR/cluster.yaml")" ] || return 0
  _reloaded() { [ "$(relists "$1")" -gt "$2" ]; }
  for n in 1 2; do
    dl_wait 10 _reloaded "$n" "${before[$n]}" || { echo "node$n's agent did not reload the cluster file in 10 s" >&2; return 1; }
  done
  # The reload put its changes in the model before it was counted: once
  # nothing in the model is unacknowledged, the dataplane has them.
  for n in 1 2; do
    dl_wait 10 _acked "$n" ||
      { echo "node$n's dataplane did not acknowledge the reload's changes in 10 s ($(unacked "$n") pending)" >&2; return 1; }
  done
}

# vias PROTO: how pods are reached: their IPs and their ClusterIPs, but a
# ClusterIP forwards only its service's ports, so ICMP goes to pod IPs only.
vias() { if [ "$1" = icmp ]; then echo pod; else echo pod svc; fi; }

# PROTO PORT [FROM|TO|VIA...]: probes every ordered pair of distinct pods
# through pod IPs and ClusterIPs (or only the cells given), one prober per
# source pod; prints "FROM TO pod|svc 0|1" a line.
probe_all() {
  local proto=$1 port=$2 src dst via ip out=$DL_DIR/probe only=" ${*:3} "
  mkdir -p "$out"
  rm -f "$out"/*.targets "$out"/*.result
  for src in "${ALL[@]}"; do
    for dst in "${ALL[@]}"; do
      [ "$src" = "$dst" ] && continue
      for via in $(vias "$proto"); do
        [ "$only" = "  " ] || [[ "$only" == *" $src|$dst|$via "* ]] || continue
        if [ $via = pod ]; then ip=${IP[$dst]}; else ip=${SVC[$dst]}; fi
        echo "$src|$dst|$via $ip $port $proto" >> "$out/${src/\//.}.targets"
      done
    done
    [ -s "$out/${src/\//.}.targets" ] || continue
    ip netns exec "$(dl_pod_ns "${NODE[$src]}" "${src/\//.}")" "$PY" "$LAB_TESTS/netpol_probe.py" \
      "$out/${src/\//.}.targets" 1.5 > "$out/${src/\//.}.result" 2>&1 &
  done
  wait
  cat "$out"/*.result | tr '|' ' '
}

# CASE CHECK-INDEX STATE: probes the check's protocol and port and compares
# the matrix; prints both on a mismatch.
compare() {
  local name=$1 i=$2 state=$3 proto port pname results want got bad=0 a b via ways
  proto=$(jq -r .protocol <<< "$state") port=$(jq -r .port <<< "$state")
  case $proto in 6) pname=tcp ;; 17) pname=udp ;; 132) pname=sctp ;; 1) pname=icmp ;; *) SKIPPED=$(( SKIPPED + 1 )); return 0 ;; esac
  ways=$(vias "$pname")
  results=$(probe_all "$pname" "$port")
  declare -A seen=() expect=()
  while read -r a b via got; do seen[$a,$b,$via]=$got; done <<< "$results"
  while read -r a b want; do expect[$a,$b]=$want; done < <(jq -r '.allowed | to_entries[] | .key as $a
    | .value | to_entries[] | "\($a) \(.key) \(if .value then 1 else 0 end)"' <<< "$state")
  # An allowed connection whose SYN (or datagram) the slow path dropped over
  # its budget, with 144 new connections at once, or that a loaded machine
  # left unanswered past the deadline, is probed again, up to 3 more times;
  # a denied one that passed is never retried: that is a failure.
  local again round
  for round in 1 2 3; do
    again=()
    for a in "${ALL[@]}"; do for b in "${ALL[@]}"; do for via in $ways; do
      [ "$a" != "$b" ] && [ "${expect[$a,$b]}" = 1 ] && [ "${seen[$a,$b,$via]:-0}" = 0 ] && again+=("$a|$b|$via")
    done; done; done
    [ ${#again[@]} -gt 0 ] || break
    RETRIED=$(( RETRIED + ${#again[@]} ))
    while read -r a b via got; do seen[$a,$b,$via]=$got; done <<< "$(probe_all "$pname" "$port" "${again[@]}")"
  done
  local table="         " row
  for b in "${ALL[@]}"; do table+=" $b"; done
  table+=$'\n'
  for a in "${ALL[@]}"; do
    row="$a  "
    for b in "${ALL[@]}"; do
      if [ "$a" = "$b" ]; then row+="  ·  "; continue; fi
      want=${expect[$a,$b]}
      local cell="" c
      for via in $ways; do
        got=${seen[$a,$b,$via]:-?}
        if [ "$got" != "$want" ]; then c=X; bad=1; elif [ "$got" = 1 ]; then c=.; else c=-; fi
        cell+=$c
      done
      row+="  $cell "
    done
    table+="$row"$'\n'
  done
  if [ $bad = 0 ]; then
    if [ "$pname" = icmp ]; then
      pass "netpol: $name [$i] icmp: 72 pairs (pod IP) as expected"
    else
      pass "netpol: $name [$i] $pname/$port: 72 pairs x (pod IP, ClusterIP) as expected"
    fi
  else
    fail "netpol: $name [$i] $pname/$port: the matrix differs (row from, column to; per cell pod IP then ClusterIP: . allowed, - denied, X not as expected)"
    echo "$table" >&2
    echo "expected (1 allowed):" >&2
    jq -r --argjson all "$(printf '%s\n' "${ALL[@]}" | jq -R . | jq -s .)" \
      '.allowed as $m | $all[] as $a | "\($a)  " + ([$all[] as $b | if $a == $b then "·" elif $m[$a][$b] then "1" else "0" end] | join("  "))' \
      <<< "$state" >&2
  fi
}

ips_json=$(for k in "${ALL[@]}"; do printf '%s\n%s\n' "$k" "${IP[$k]}"; done | jq -Rn '[inputs] | [range(0; length; 2) as $i | {(.[$i]): .[$i + 1]}] | add')
cases=$("$CASES" "$ips_json") || { echo "FAIL: netpol-cases" >&2; exit 1; }
SKIPPED=0 RETRIED=0
ncases=$(jq length <<< "$cases")
for (( c = 0; c < ncases; c++ )); do
  name=$(jq -r ".[$c].name" <<< "$cases")
  nchecks=$(jq ".[$c].checks | length" <<< "$cases")
  for (( i = 0; i < nchecks; i++ )); do
    state=$(jq -c ".[$c].checks[$i]" <<< "$cases")
    set_state "$state" || { fail "netpol: $name [$i]: the state could not be set"; continue; }
    compare "$name" "$i" "$state"
  done
done
[ "$SKIPPED" = 0 ] || fail "$SKIPPED checks of a protocol this lab cannot probe (netpol-cases: only TCP, UDP, SCTP and ICMP)"
pass "$ncases upstream cases; $RETRIED allowed probes needed another try ($(elapsed))"

# The node and the management port under deny-all (ingress and egress) in x.
deny_all='{"policies": [{"namespace": "x", "name": "deny-all", "podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}],
  "namespaces": {"x": {"ns": "x"}, "y": {"ns": "y"}, "z": {"ns": "z"}},
  "pods": {"x/a": {"pod": "a"}, "x/b": {"pod": "b"}, "x/c": {"pod": "c"}, "y/a": {"pod": "a"}, "y/b": {"pod": "b"},
           "y/c": {"pod": "c"}, "z/a": {"pod": "a"}, "z/b": {"pod": "b"}, "z/c": {"pod": "c"}}}'
set_state "$deny_all" || fail "deny-all in x"
host_probe() {  # FROM-NETNS IP -> 1 or 0
  echo "k $2 80 tcp" > "$DL_DIR/probe/host.targets"
  ip netns exec "$1" "$PY" "$LAB_TESTS/netpol_probe.py" "$DL_DIR/probe/host.targets" 1.5 | awk '{ print $2 }'
}
check "node1's host reaches its own pod x/a (its kubelet's probes)" [ "$(host_probe "$(dl_node_ns 1 host)" "${IP[x/a]}")" = 1 ]
check "node2's host reaches its own pod x/b" [ "$(host_probe "$(dl_node_ns 2 host)" "${IP[x/b]}")" = 1 ]
check "node2's host does not reach x/a on node1 (ingress)" [ "$(host_probe "$(dl_node_ns 2 host)" "${IP[x/a]}")" = 0 ]
check "x/a does not reach node1 through the management port (egress)" \
  [ "$(host_probe "$(dl_pod_ns 1 x.a)" "$(dl_mgmt_ip 1)")" = 0 ]
check "y/a reaches node1 through the management port" [ "$(host_probe "$(dl_pod_ns 1 y.a)" "$(dl_mgmt_ip 1)")" = 1 ]
check "node1's host reaches y/b on node2 (not isolated)" [ "$(host_probe "$(dl_node_ns 1 host)" "${IP[y/b]}")" = 1 ]
finish
