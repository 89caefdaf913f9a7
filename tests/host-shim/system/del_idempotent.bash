# DEL succeeds whatever is already gone: the pod netns (deleted with the VF in
# it), the attachment (never added), the allocation record, the DPU's answer.
source "$(dirname "$0")/lib.bash"

step "DEL of something never added"
expect_ok del --container nope --netns /run/netns/nope --ifname eth0
hostshim_assert_clean || fail "state appeared"

step "DEL after the pod netns was deleted"
pod=$(hostshim_pod_netns_add p1)
expect_ok add --container c1 --netns "$pod" --ifname eth0
ip netns del "$(pod_ns "$pod")"
expect_ok del --container c1 --netns "$pod" --ifname eth0
# A veth VF dies with the netns (a real VF would come back to the host); put it back.
hostshim_repair_vfs || fail "repair"
hostshim_assert_clean || fail "DEL after netns deletion left state"

step "DEL with an empty CNI_NETNS"
pod=$(hostshim_pod_netns_add p2)
expect_ok add --container c2 --netns "$pod" --ifname eth0
expect_ok del --container c2 --netns "" --ifname eth0
hostshim_assert_clean || fail "DEL without netns left state"

step "DEL when the allocation record is already gone"
expect_ok add --container c3 --netns "$pod" --ifname eth0
rm -f "$HOSTSHIM_STATE_DIR"/vfs/pf0vf0.json
expect_ok del --container c3 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "DEL without record left state"

step "DEL while the DPU is down: success, VF home, record freed"
expect_ok add --container c4 --netns "$pod" --ifname eth0
hostshim_dpu_control "/test/down?seconds=4&mode=refuse"
t0=$(now_ms)
expect_ok del --container c4 --netns "$pod" --ifname eth0
echo "DEL with the DPU down took $(( $(now_ms) - t0 )) ms"
hostshim_wait_returns || fail "the VF did not come home"  # DEL answers before the VF is home
hostshim_list_records | matches c4 && fail "record kept"
ip -n "$HOST_NETNS" link show p0v0 >/dev/null || fail "VF not home"
# Read while it is down: once back, host-shim's reconnect sweep may release c4 at once.
hostshim_list_dpu_attachments_while_down | matches "^POD c4/eth0 vf0 " ||
  fail "expected the DPU to still hold c4 (it was down): $(hostshim_list_dpu_attachments_while_down)"
hostshim_dpu_control /test/up
step "once the DPU is back its stale attachment goes, and that VF serves the next ADD"
# Whichever comes first releases c4: host-shim's reconnect sweep, or this ADD
# (the DPU answers that VF is taken; host-shim detaches what it holds there and
# attaches again; in-process in hostshim_service, where the order is fixed).
expect_ok add --container c5 --netns "$pod" --ifname eth0 --device 0000:3b:00.2
hostshim_list_dpu_attachments | matches "c4/eth0" && fail "stale c4 attachment not cleared"
hostshim_list_dpu_attachments | matches "^POD c5/eth0 vf0 " || fail "the DPU lacks c5 on VF 0: $(hostshim_list_dpu_attachments)"
expect_ok del --container c5 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "left state"
echo PASS
