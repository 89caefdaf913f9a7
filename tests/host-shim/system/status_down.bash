# With the DPU agent down or unhealthy: STATUS answers 50 within 100 ms; ADD
# fails with 11 within a few seconds (never a long hang); all recovers.
HOSTSHIM_DPU_TIMEOUT_MS=1500
source "$(dirname "$0")/lib.bash"

status_ms() {
  local line
  line=$(hostshim_client status --time 2>&1 >/dev/null | awk '/elapsed_ms/ {print $2}')
  echo "${line%.*}"
}

expect_ok status
pod=$(hostshim_pod_netns_add p1)

step "the DPU hangs every request"
hostshim_dpu_control "/test/down?seconds=20&mode=hang"
t0=$(now_ms)
status_is_50() { [ "$(hostshim_client status | jq -r .error.code)" = 50 ]; }
# The health poll in flight has to reach its 1.5 s deadline first.
_hostshim_wait 8 status_is_50 || fail "STATUS never said 50"
echo "host-shim noticed the hanging DPU after $(( $(now_ms) - t0 )) ms"
expect_code 50 status
jq -r .error.details <<<"$OUT" | matches "unreachable" || fail "reason missing: $OUT"
# STATUS retries nothing: its advice says what happens instead.
jq -r .error.details <<<"$OUT" | matches "retries the ADD" && fail "STATUS details speak of an ADD: $OUT"
jq -r .error.details <<<"$OUT" | matches "STATUS reports the plugin available again" || fail "STATUS details: $OUT"
ms=$(status_ms)
echo "STATUS with the DPU hanging: ${ms} ms"
[ "$ms" -lt 100 ] || fail "STATUS took $ms ms"
t0=$(now_ms)
expect_code 11 add --container c1 --netns "$pod" --ifname eth0
took=$(( $(now_ms) - t0 ))
echo "ADD with the DPU hanging failed after $took ms: $(jq -r .error.msg <<<"$OUT")"
[ $took -lt 5000 ] || fail "ADD took $took ms"
hostshim_assert_clean || fail "failed ADD left state"
hostshim_dpu_control /test/up

step "the DPU refuses (503 at once)"
hostshim_dpu_control "/test/down?seconds=20&mode=refuse"
_hostshim_wait 8 status_is_50 || fail "STATUS never said 50"
expect_code 50 status
t0=$(now_ms)
expect_code 11 add --container c1 --netns "$pod" --ifname eth0
echo "ADD with the DPU refusing failed after $(( $(now_ms) - t0 )) ms"
hostshim_dpu_control /test/up

step "the DPU is gone (connection refused)"
hostshim_dpu_kill
_hostshim_wait 8 status_is_50 || fail "STATUS never said 50"
expect_code 50 status
echo "STATUS with the DPU gone: $(status_ms) ms"
t0=$(now_ms)
expect_code 11 add --container c1 --netns "$pod" --ifname eth0
echo "ADD with the DPU gone failed after $(( $(now_ms) - t0 )) ms"
hostshim_dpu_start || fail "the DPU side did not come back"
_hostshim_wait 10 hostshim_client status || fail "STATUS did not recover"

step "the DPU says it is not ready"
hostshim_dpu_control "/test/unhealthy?on=1"
_hostshim_wait 8 status_is_50 || fail "STATUS never said 50"
expect_code 50 status
jq -r .error.details <<<"$OUT" | matches "not ready" || fail "reason missing: $OUT"
hostshim_dpu_control "/test/unhealthy?on=0"
_hostshim_wait 5 hostshim_client status || fail "STATUS did not recover"
expect_ok add --container c1 --netns "$pod" --ifname eth0
expect_ok del --container c1 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "left state"
echo PASS
