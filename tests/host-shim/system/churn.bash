# 20 pods cycling ADD → DEL concurrently (3 cycles each) while host-shim
# returns VFs in the background: every ADD succeeds, no VF is ever held by two
# pods at once (the [ADD answered, DEL sent] windows of one VF never overlap),
# a returning VF is never handed out, and nothing is left behind.
HOSTSHIM_NUM_VFS=41
HOSTSHIM_DPU_TIMEOUT_MS=${HOSTSHIM_DPU_TIMEOUT_MS:-10000}
source "$(dirname "$0")/lib.bash"

N=20; CYCLES=3
for (( i = 0; i < N; i++ )); do hostshim_pod_netns_add "p$i" >/dev/null || fail "netns"; done
worker() {  # worker I: CYCLES x (ADD, check eth0, DEL); one line per held window
  local i=$1 c out pci ns="$HOSTSHIM_ENV_ID-p$i" t_add t_del
  for (( c = 0; c < CYCLES; c++ )); do
    out=$(hostshim_client add --container "w$i-$c" --netns "/run/netns/$ns" --ifname eth0 2>&1) ||
      { echo "ERR ADD w$i-$c: $out"; return; }
    t_add=$(date +%s%N)
    pci=$(jq -r '.result.interfaces[0].pciId' <<<"$out")
    ip -n "$ns" -o link show eth0 | grep "$(jq -r '.result.interfaces[0].mac' <<<"$out")" >/dev/null ||
      echo "ERR w$i-$c: eth0 missing or with another MAC"
    t_del=$(date +%s%N)
    out=$(hostshim_client del --container "w$i-$c" --netns "/run/netns/$ns" --ifname eth0 2>&1) ||
      { echo "ERR DEL w$i-$c: $out"; return; }
    echo "$pci $t_add $t_del w$i-$c"
  done
}
step "$N pods x $CYCLES ADD/DEL cycles at once"
pids=()
t0=$(now_ms)
for (( i = 0; i < N; i++ )); do worker "$i" > "$TEST_DIR/w$i.out" & pids+=($!); done
wait "${pids[@]}"
echo "done in $(( $(now_ms) - t0 )) ms"
cat "$TEST_DIR"/w*.out > "$TEST_DIR/all"
grep ERR "$TEST_DIR/all" && fail "operations failed"
[ "$(wc -l < "$TEST_DIR/all")" = $(( N * CYCLES )) ] || fail "expected $(( N * CYCLES )) cycles: $(wc -l < "$TEST_DIR/all")"
# Per VF, sorted by ADD time, each window must end before the next begins.
overlap=$(sort -k1,1 -k2,2n "$TEST_DIR/all" |
  awk '$1 == pci && $2 < end {print "VF " $1 " held by " who " and " $4} {pci = $1; end = $3; who = $4}')
[ -z "$overlap" ] || fail "double allocation: $overlap"
echo "$(awk '{print $1}' "$TEST_DIR/all" | sort -u | wc -l) distinct VFs used"
hostshim_assert_clean || fail "left state"
echo PASS
