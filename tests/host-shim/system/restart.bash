# host-shim killed with SIGKILL (and stopped with SIGTERM) keeps its records
# and checkpoint; after the restart CHECK and DEL still work.
source "$(dirname "$0")/lib.bash"

for i in 1 2; do
  pod=$(hostshim_pod_netns_add "p$i")
  expect_ok add --container "c$i" --netns "$pod" --ifname eth0
done
prev1=$(hostshim_client add --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0 | jq -c .result)

step "kill -9 and restart"
old=$HOSTSHIM_PID
hostshim_restart -9 || fail "restart"
[ "$old" != "$HOSTSHIM_PID" ] || fail "same pid"
[ "$(hostshim_list_records | grep -c '"owner":"dpu-test/c')" = 2 ] || fail "records: $(hostshim_list_records)"
expect_ok check --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0 --prev-result "$prev1"
expect_ok del --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0

step "SIGTERM: clean shutdown, restart"
hostshim_stop || fail "stop"
[ -S "$HOSTSHIM_SOCKET" ] && fail "socket left after SIGTERM"
grep -q "stopped" "$HOSTSHIM_LOG" || fail "no clean stop in the log"
hostshim_start || fail "start"
expect_ok del --container c2 --netns "/run/netns/$HOSTSHIM_ENV_ID-p2" --ifname eth0
hostshim_assert_clean || fail "left state"

step "an ADD cut short by a crash is undone at the next start"
# A checkpointed attachment that was never plumbed is what a crash between
# the snapshot and the end of ADD leaves; host-shim must undo it at start.
pod=$(hostshim_pod_netns_add p3)
expect_ok add --container c3 --netns "$pod" --ifname eth0
hostshim_stop -9
python3 - "$HOSTSHIM_STATE_DIR/checkpoint.pb" <<'PY' || fail "cannot edit the checkpoint"
import sys
# Flip HostAttachment.plumbed (field 12, varint 1 -> 0) in the one attachment.
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
i = b.find(bytes([0x60, 0x01]))
assert i >= 0
b[i + 1] = 0
open(p, 'wb').write(bytes(b))
PY
hostshim_start || fail "start"
ip -n "$(pod_ns "$pod")" link show eth0 >/dev/null 2>&1 && fail "the unfinished ADD's VF stayed in the pod"
hostshim_assert_clean || fail "unfinished ADD not undone"
echo PASS
