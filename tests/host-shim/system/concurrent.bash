# 50 concurrent ADDs over a pool of 40 VFs: 40 succeed on 40 different VFs with
# 40 different addresses, 10 fail with "no free VF"; nothing is allocated twice;
# 50 concurrent DELs leave nothing behind.
HOSTSHIM_NUM_VFS=41
# The point here is allocation under contention, not the DPU timeout: 50
# requests at once on a loaded 2-core machine can keep the fake DPU busier
# than the production 1.5 s timeout allows (status_down.bash tests that path).
HOSTSHIM_DPU_TIMEOUT_MS=${HOSTSHIM_DPU_TIMEOUT_MS:-10000}
source "$(dirname "$0")/lib.bash"
# Wait for the clients only: host-shim and the fake DPU are children of this shell too.
pids=()

N=50
for (( i = 0; i < N; i++ )); do hostshim_pod_netns_add "p$i" >/dev/null || fail "netns"; done
step "$N concurrent ADDs"
t0=$(now_ms)
for (( i = 0; i < N; i++ )); do
  hostshim_client add --container "c$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-p$i" --ifname eth0 \
    >"$TEST_DIR/add$i.json" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"; pids=()
echo "$N concurrent ADDs done in $(( $(now_ms) - t0 )) ms"
ok=0; busy=0
for (( i = 0; i < N; i++ )); do
  if jq -e .result "$TEST_DIR/add$i.json" >/dev/null 2>&1; then ok=$(( ok + 1 ));
  elif [ "$(jq -r .error.code "$TEST_DIR/add$i.json")" = 101 ]; then busy=$(( busy + 1 ));
  else fail "ADD $i: $(cat "$TEST_DIR/add$i.json")"; fi
done
echo "succeeded $ok, no free VF $busy"
[ $ok = 40 ] && [ $busy = 10 ] || fail "expected 40 + 10"
dups=$(cat "$TEST_DIR"/add*.json | jq -r '.result.interfaces[0].pciId // empty' | sort | uniq -d)
[ -z "$dups" ] || fail "VFs handed out twice: $dups"
dups=$(cat "$TEST_DIR"/add*.json | jq -r '.result.ips[0].address // empty' | sort | uniq -d)
[ -z "$dups" ] || fail "addresses handed out twice: $dups"
[ "$(hostshim_list_records | grep -c '"owner":"dpu-test/c')" = 40 ] || fail "records: $(hostshim_list_records | wc -l)"
[ "$(hostshim_list_dpu_attachments | grep -c '^POD')" = 40 ] || fail "fake DPU attachments"

step "$N concurrent DELs"
t0=$(now_ms)
for (( i = 0; i < N; i++ )); do
  hostshim_client del --container "c$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-p$i" --ifname eth0 \
    >"$TEST_DIR/del$i.json" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"; pids=()
echo "$N concurrent DELs done in $(( $(now_ms) - t0 )) ms"
for (( i = 0; i < N; i++ )); do jq -e .result "$TEST_DIR/del$i.json" >/dev/null || fail "DEL $i: $(cat "$TEST_DIR/del$i.json")"; done
hostshim_assert_clean || fail "left state"
echo PASS
