# GC releases every attachment not in cni.dev/valid-attachments.
source "$(dirname "$0")/lib.bash"

for i in 1 2 3; do
  pod=$(hostshim_pod_netns_add "p$i")
  expect_ok add --container "c$i" --netns "$pod" --ifname eth0
done
expect_ok gc --valid c2/eth0
hostshim_list_records | matches '"owner":"c1/eth0"' && fail "c1 record kept"
hostshim_list_records | matches '"owner":"c3/eth0"' && fail "c3 record kept"
hostshim_list_records | matches '"owner":"c2/eth0"' || fail "c2 record released"
[ "$(hostshim_list_dpu_attachments | grep -c '^POD')" = 1 ] || fail "DPU: $(hostshim_list_dpu_attachments)"
ip -n "$HOSTSHIM_ENV_ID-p1" link show eth0 >/dev/null 2>&1 && fail "c1's VF stayed in its pod"
ip -n "$HOSTSHIM_ENV_ID-p2" link show eth0 >/dev/null 2>&1 || fail "c2's VF was taken away"
expect_ok gc
hostshim_assert_clean || fail "GC with an empty list left state"

step "GC also detaches what only the DPU still holds"
pod=$(hostshim_pod_netns_add p9)
expect_ok add --container c9 --netns "$pod" --ifname eth0
hostshim_dpu_control "/test/down?seconds=3&mode=refuse"
expect_ok del --container c9 --netns "$pod" --ifname eth0   # the DPU misses this detach
hostshim_dpu_control /test/up
hostshim_list_dpu_attachments | matches c9/eth0 || fail "expected a stale attachment on the DPU"
_hostshim_wait 5 hostshim_client status || fail "STATUS did not recover"
expect_ok gc
hostshim_assert_clean || fail "GC left the DPU's stale attachment"
echo PASS
