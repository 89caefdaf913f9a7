# Resident memory of host-shim with 110 attachments (the Kubernetes
# pods-per-node maximum). Prints the figure; asserts the 30 MB target.
HOSTSHIM_NUM_VFS=111
HOSTSHIM_POD_CIDR=10.244.0.0/22
source "$(dirname "$0")/lib.bash"
# Wait for the clients only: host-shim and the fake DPU are children of this shell too.
pids=()

rss() { awk '/VmRSS/ {print $2}' "/proc/$HOSTSHIM_PID/status"; }
N=110
echo "host-shim VmRSS idle: $(rss) kB"
for (( i = 0; i < N; i++ )); do hostshim_pod_netns_add "p$i" >/dev/null || fail "netns"; done
t0=$(now_ms)
for (( b = 0; b < N; b += 10 )); do
  for (( i = b; i < b + 10 && i < N; i++ )); do
    hostshim_client add --container "c$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-p$i" --ifname eth0 >"$TEST_DIR/a$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"; pids=()
done
echo "$N ADDs (10 at a time) in $(( $(now_ms) - t0 )) ms"
for (( i = 0; i < N; i++ )); do jq -e .result "$TEST_DIR/a$i" >/dev/null || fail "ADD $i: $(cat "$TEST_DIR/a$i")"; done
kb=$(rss)
echo "host-shim VmRSS with $N attachments: $kb kB ($(( kb / 1024 )) MB)"
echo "checkpoint size: $(stat -c %s "$HOSTSHIM_STATE_DIR/checkpoint.pb") bytes"
# Sanitizer builds carry shadow memory: the figure is printed, not judged.
if [ -z "${DPU_SANITIZE:-}" ]; then
  [ "$kb" -lt 30720 ] || fail "VmRSS $kb kB is over 30 MB"
fi
for (( b = 0; b < N; b += 10 )); do
  for (( i = b; i < b + 10 && i < N; i++ )); do
    hostshim_client del --container "c$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-p$i" --ifname eth0 >/dev/null 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"; pids=()
done
hostshim_assert_clean || fail "left state"
echo PASS
