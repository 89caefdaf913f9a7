# GC (CNI 1.1) releases the attachments of its network that are not in
# cni.dev/valid-attachments, and never another network's: one pod on two
# dpu-cni networks (Multus: eth0 on dpu-test, net1 on dpu-second). A DEL for a
# network that never had the attachment changes nothing. What only the DPU
# still holds (a DEL that could not reach it, an attach behind host-shim's
# back) is released by host-shim's reconcile: when the DPU is back, and by GC.
source "$(dirname "$0")/lib.bash"

for i in 1 2 3; do
  pod=$(hostshim_pod_netns_add "p$i")
  expect_ok add --container "c$i" --netns "$pod" --ifname eth0
done
p1="/run/netns/$HOSTSHIM_ENV_ID-p1"
expect_ok add --container c1 --netns "$p1" --ifname net1 --network dpu-second
hostshim_list_dpu_attachments | matches "^POD c1/net1 .* dpu-second$" || fail "the DPU lacks c1/net1 on dpu-second: $(hostshim_list_dpu_attachments)"

step "a DEL of another network's c1/eth0 changes nothing"
expect_ok del --container c1 --netns "$p1" --ifname eth0 --network dpu-second
ip -n "$HOSTSHIM_ENV_ID-p1" link show eth0 >/dev/null 2>&1 || fail "c1's eth0 (dpu-test) was taken away"
[ "$(hostshim_list_dpu_attachments | grep -c '^POD')" = 4 ] || fail "DPU: $(hostshim_list_dpu_attachments)"

step "GC of dpu-test keeps c2 and the other network's c1/net1"
expect_ok gc --valid c2/eth0
hostshim_list_records | matches '"owner":"dpu-test/c1/eth0"' && fail "c1 record kept"
hostshim_list_records | matches '"owner":"dpu-test/c3/eth0"' && fail "c3 record kept"
hostshim_list_records | matches '"owner":"dpu-test/c2/eth0"' || fail "c2 record released"
hostshim_list_records | matches '"owner":"dpu-second/c1/net1"' || fail "GC of dpu-test released dpu-second's c1/net1"
[ "$(hostshim_list_dpu_attachments | grep -c '^POD')" = 2 ] || fail "DPU: $(hostshim_list_dpu_attachments)"
hostshim_list_dpu_attachments | matches "^POD c1/net1 " || fail "the DPU lost dpu-second's c1/net1"
ip -n "$HOSTSHIM_ENV_ID-p1" link show eth0 >/dev/null 2>&1 && fail "c1's VF stayed in its pod"
ip -n "$HOSTSHIM_ENV_ID-p1" link show net1 >/dev/null 2>&1 || fail "c1's net1 was taken away"
ip -n "$HOSTSHIM_ENV_ID-p2" link show eth0 >/dev/null 2>&1 || fail "c2's VF was taken away"
expect_ok gc --network dpu-second --valid c1/net1
ip -n "$HOSTSHIM_ENV_ID-p1" link show net1 >/dev/null 2>&1 || fail "GC of dpu-second released its valid c1/net1"
expect_ok gc --network dpu-second
expect_ok gc
hostshim_assert_clean || fail "GC with an empty list left state"

step "what only the DPU still holds is released once it is back"
pod=$(hostshim_pod_netns_add p9)
expect_ok add --container c9 --netns "$pod" --ifname eth0
hostshim_dpu_control "/test/down?seconds=30&mode=refuse"
expect_ok del --container c9 --netns "$pod" --ifname eth0   # the DPU misses this detach
hostshim_dpu_control /test/up
gone() { ! hostshim_list_dpu_attachments | matches c9/eth0; }
_hostshim_wait 10 gone || fail "the DPU keeps c9's stale attachment: $(hostshim_list_dpu_attachments)"
_hostshim_wait 5 hostshim_client status || fail "STATUS did not recover"
grep -q "reconcile: the DPU agent released .*dpu-test/c9/eth0" "$HOSTSHIM_LOG" || fail "the release is not logged"

step "GC releases an attachment made on the DPU behind host-shim's back"
hostshim_dpu_attach_stray stray 3 || fail "cannot attach the stray"
hostshim_list_dpu_attachments | matches "^POD stray/eth0" || fail "no stray: $(hostshim_list_dpu_attachments)"
expect_ok gc
hostshim_assert_clean || fail "GC left the DPU's stray attachment"
echo PASS
