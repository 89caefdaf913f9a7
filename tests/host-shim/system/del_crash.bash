# host-shim killed with SIGKILL between answering DEL and the VF's return: the
# restart finishes the return from the checkpoint (the pod netns fd is gone; the
# VF is found by name in the recorded netns or through sysfs) and frees the
# record. A VF that is nowhere at the restart (a veth destroyed with its
# netns while no one held it) keeps a flagged record: never handed out (a
# deviceID ADD fails with code 11 naming the problem), retried by GC.
export HOSTSHIM_TEST_RETURN_DELAY_MS=4000
source "$(dirname "$0")/lib.bash"

link_mac() { ip -n "$HOST_NETNS" -o link show "$1" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }
mac0=$(link_mac p0v0); mac1=$(link_mac p0v1)

step "SIGTERM drains: the VF of an answered DEL is home once host-shim has stopped"
pod=$(hostshim_pod_netns_add p9)
mac3=$(link_mac p0v3)
expect_ok add --container c9 --netns "$pod" --ifname eth0 --device "$(fake_sysfs_vf_pci 3)"
expect_ok del --container c9 --netns "$pod" --ifname eth0
ip -n "$HOST_NETNS" link show p0v3 >/dev/null 2>&1 && fail "p0v3 came home before the stop: the test proves nothing"
hostshim_stop
grep -q "stopped" "$HOSTSHIM_LOG" || fail "no clean stop in the log"
[ "$(link_mac p0v3)" = "$mac3" ] || fail "p0v3 is not home with MAC $mac3 after SIGTERM: $(hostshim_list_vfs)"
hostshim_list_records | matches '"owner":"dpu-test/c9/eth0"' && fail "c9's record kept after SIGTERM"
hostshim_start || fail "start"

step "DEL answered, kill -9 before the return, restart finishes it"
for i in 0 1; do
  pod=$(hostshim_pod_netns_add "p$i")
  expect_ok add --container "c$i" --netns "$pod" --ifname eth0 --device "$(fake_sysfs_vf_pci $i)"
done
expect_ok del --container c0 --netns "/run/netns/$HOSTSHIM_ENV_ID-p0" --ifname eth0
expect_ok del --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0
[ "$(hostshim_list_records | grep -c '"returning":true')" = 2 ] || fail "records: $(hostshim_list_records)"
hostshim_stop -9
ip -n "$HOST_NETNS" link show p0v0 >/dev/null 2>&1 && fail "p0v0 came home before the kill: the test proves nothing"
unset HOSTSHIM_TEST_RETURN_DELAY_MS
hostshim_start || fail "restart"
hostshim_wait_returns 10 || fail "the restart did not finish the returns: $(hostshim_list_records)"
[ "$(link_mac p0v0)" = "$mac0" ] || fail "p0v0 came home with MAC $(link_mac p0v0), not $mac0"
[ "$(link_mac p0v1)" = "$mac1" ] || fail "p0v1 came home with MAC $(link_mac p0v1), not $mac1"
hostshim_assert_clean || fail "left state"

step "the VF is nowhere at the restart: flagged, never handed out, GC retries"
export HOSTSHIM_TEST_RETURN_DELAY_MS=4000
hostshim_restart || fail "restart"
pod=$(hostshim_pod_netns_add p2)
expect_ok add --container c2 --netns "$pod" --ifname eth0 --device "$(fake_sysfs_vf_pci 2)"
expect_ok del --container c2 --netns "$pod" --ifname eth0
hostshim_stop -9
ip netns del "$(pod_ns "$pod")"   # nobody holds it now: the veth dies with it
unset HOSTSHIM_TEST_RETURN_DELAY_MS
hostshim_start || fail "restart"
for (( i = 0; i < 100; i++ )); do hostshim_list_records | matches '"problem"' && break; sleep 0.05; done
hostshim_list_records |
  jq -s -e 'any(.[]; .owner == "dpu-test/c2/eth0" and .returning and ((.problem // "") | startswith("the VF is nowhere")))' >/dev/null ||
  fail "no flagged record: $(hostshim_list_records)"
grep -q "is stuck: the VF is nowhere" "$HOSTSHIM_LOG" || fail "not logged"
pod3=$(hostshim_pod_netns_add p3)
expect_code 11 add --container c3 --netns "$pod3" --ifname eth0 --device "$(fake_sysfs_vf_pci 2)"
jq -r .error.details <<<"$OUT" | matches "nowhere" || fail "the reason is not named: $OUT"
expect_ok add --container c3 --netns "$pod3" --ifname eth0
[ "$(jq -r '.result.interfaces[0].pciId' <<<"$OUT")" != "$(fake_sysfs_vf_pci 2)" ] || fail "the lost VF was handed out"
expect_ok del --container c3 --netns "$pod3" --ifname eth0
hostshim_repair_vfs || fail "repair"   # the VF is back (as a real VF would be, in the host netns)
expect_ok gc
hostshim_assert_clean || fail "GC did not finish the flagged return"
echo PASS
