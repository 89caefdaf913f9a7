# The host management port: the reserved VF stays in the host netns, renamed,
# with the DPU's address and routes to the cluster and service CIDRs; the DPU
# knows it as a MANAGEMENT attachment; pods never get it, even when they ask.
source "$(dirname "$0")/lib.bash"

mgmt=$(hostshim_list_dpu_attachments | grep '^MANAGEMENT') || fail "no MANAGEMENT attachment on the fake DPU"
echo "$mgmt"
echo "$mgmt" | matches " vf7 10.244.1.2/24" || fail "management attachment: $mgmt"
ip -n "$HOST_NETNS" -o addr show dev dpu-mgmt | matches "inet 10.244.1.2/24" || fail "dpu-mgmt address"
ip -n "$HOST_NETNS" -o link show dpu-mgmt | matches "link/ether 0a:58:0a:f4:01:02" || fail "dpu-mgmt MAC"
ip -n "$HOST_NETNS" -o link show dpu-mgmt | matches "[<,]UP[,>]" || fail "dpu-mgmt is down"
ip -n "$HOST_NETNS" route show 10.244.0.0/16 | matches "via 10.244.1.1 dev dpu-mgmt" || fail "no cluster route"
ip -n "$HOST_NETNS" route show 10.96.0.0/12 | matches "via 10.244.1.1 dev dpu-mgmt" || fail "no service route"
hostshim_list_records | matches '"owner":"management"' || fail "management VF not recorded"

step "a management port that loses its address is plumbed again"
ip -n "$HOST_NETNS" addr flush dev dpu-mgmt
has_addr() { ip -n "$HOST_NETNS" -o addr show dev dpu-mgmt | matches "inet 10.244.1.2/24"; }
_hostshim_wait 5 has_addr || fail "dpu-mgmt was not repaired"
ip -n "$HOST_NETNS" route show 10.96.0.0/12 | matches "dev dpu-mgmt" || fail "service route not repaired"

step "pods never get the management VF"
for i in 0 1 2 3 4 5 6; do
  pod=$(hostshim_pod_netns_add "p$i")
  expect_ok add --container "c$i" --netns "$pod" --ifname eth0
  [ "$(jq -r '.result.interfaces[0].pciId' <<<"$OUT")" != 0000:3b:01.1 ] || fail "a pod got the management VF"
done
pod=$(hostshim_pod_netns_add p7)
expect_code 101 add --container c7 --netns "$pod" --ifname eth0
ip -n "$HOST_NETNS" link show dpu-mgmt >/dev/null || fail "dpu-mgmt left the host"

step "a restart keeps the management port as it is"
# The restarted host-shim plumbs the management port again after its first
# health poll and logs it; the checks below look at what that left.
plumbed() { grep -c "management port dpu-mgmt up with" "$HOSTSHIM_LOG" || true; }
before=$(plumbed)
hostshim_restart || fail "restart"
replumbed() { [ "$(plumbed)" -gt "$before" ]; }
_hostshim_wait 10 replumbed || fail "the restarted host-shim did not set up the management port: $(tail -n 5 "$HOSTSHIM_LOG")"
ip -n "$HOST_NETNS" -o addr show dev dpu-mgmt | matches "inet 10.244.1.2/24" || fail "dpu-mgmt address lost"
[ "$(hostshim_list_dpu_attachments | grep -c '^MANAGEMENT')" = 1 ] || fail "management attached twice"
for i in 0 1 2 3 4 5 6; do expect_ok del --container "c$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-p$i" --ifname eth0; done
hostshim_assert_clean || fail "left state"
echo PASS
