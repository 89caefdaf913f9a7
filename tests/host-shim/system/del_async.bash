# DEL answers once the VF is out of service, before the kernel's move home:
# right after DEL the pod has no usable interface (no eth0, the VF down and
# without addresses, the DPU attachment gone) and the VF's record is
# "returning" (never handed out); the VF then comes home with its original
# name, MAC and MTU. `ip netns del` right after DEL does not lose a veth VF
# (host-shim holds the namespace open). A deviceID ADD for a returning VF waits
# for it; DEL and GC of a returning attachment succeed and free nothing early.
# host-shim delays each return by 3 s here (HOSTSHIM_TEST_RETURN_DELAY_MS: room for the checks on a busy 2-core box) so
# the in-between state can be observed.
export HOSTSHIM_TEST_RETURN_DELAY_MS=3000
source "$(dirname "$0")/lib.bash"

link_field() {  # link_field NETNS LINK mac|mtu
  local line
  line=$(ip -n "$1" -o link show "$2" 2>/dev/null) || return 1
  case $3 in
    mac) sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p' <<<"$line" ;;
    mtu) sed -n 's/.* mtu \([0-9]*\).*/\1/p' <<<"$line" ;;
  esac
}
orig_mac=$(link_field "$HOST_NETNS" p0v0 mac); orig_mtu=$(link_field "$HOST_NETNS" p0v0 mtu)
orig_mac1=$(link_field "$HOST_NETNS" p0v1 mac)
[ -n "$orig_mac" ] && [ -n "$orig_mac1" ] && [ -n "$orig_mtu" ] || fail "cannot read p0v0/p0v1"
assert_home() {  # assert_home VFNAME MAC MTU
  ip -n "$HOST_NETNS" link show "$1" >/dev/null 2>&1 || fail "$1 is not home: $(hostshim_list_vfs)"
  [ "$(link_field "$HOST_NETNS" "$1" mac)" = "$2" ] || fail "$1 came home with MAC $(link_field "$HOST_NETNS" "$1" mac), not $2"
  [ "$(link_field "$HOST_NETNS" "$1" mtu)" = "$3" ] || fail "$1 came home with MTU $(link_field "$HOST_NETNS" "$1" mtu), not $3"
}

step "DEL answers before the VF is home; the pod has no usable interface"
pod=$(hostshim_pod_netns_add p1); ns=$(pod_ns "$pod")
expect_ok add --container c1 --netns "$pod" --ifname eth0 --device 0000:3b:00.2
t0=$(now_ms)
expect_ok del --container c1 --netns "$pod" --ifname eth0
del_ms=$(( $(now_ms) - t0 ))
echo "DEL answered in $del_ms ms"
[ $del_ms -lt $HOSTSHIM_TEST_RETURN_DELAY_MS ] || fail "DEL waited for the return ($del_ms ms)"
ip -n "$HOST_NETNS" link show p0v0 >/dev/null 2>&1 && fail "p0v0 is home already: the return was not deferred"
ip -n "$ns" link show eth0 >/dev/null 2>&1 && fail "eth0 still exists in the pod after DEL"
ip -n "$ns" -o link show p0v0 | matches '[<,]UP[,>]' && fail "the VF is still up in the pod"
[ -z "$(ip -n "$ns" -o addr show dev p0v0 scope global)" ] || fail "the VF keeps addresses in the pod"
hostshim_list_dpu_attachments | matches "c1/eth0" && fail "the DPU still holds c1"
hostshim_list_records | matches '"owner":"dpu-test/c1/eth0".*"returning":true' || fail "no returning record: $(hostshim_list_records)"
expect_code 3 check --container c1 --netns "$pod" --ifname eth0

step "DEL and GC of a returning attachment succeed and free nothing early"
expect_ok del --container c1 --netns "$pod" --ifname eth0
expect_ok gc
hostshim_list_records | matches '"owner":"dpu-test/c1/eth0".*"returning":true' || fail "the returning record was freed early"

step "a re-ADD into the same netns gets eth0 on another VF at once"
expect_ok add --container c1 --netns "$pod" --ifname eth0
pci=$(jq -r '.result.interfaces[0].pciId' <<<"$OUT")
[ "$pci" != 0000:3b:00.2 ] || fail "the returning VF was handed out"

step "the VF comes home with its original name, MAC and MTU"
hostshim_wait_returns 10 || fail "no return within 10 s"
assert_home p0v0 "$orig_mac" "$orig_mtu"
hostshim_list_records | matches '"pci":"0000:3b:00.2"' && fail "the record of the returned VF was kept"
expect_ok del --container c1 --netns "$pod" --ifname eth0

step "ip netns del right after DEL does not lose the VF"
pod3=$(hostshim_pod_netns_add p3)
expect_ok add --container c3 --netns "$pod3" --ifname eth0 --device 0000:3b:00.3
expect_ok del --container c3 --netns "$pod3" --ifname eth0
ip netns del "$(pod_ns "$pod3")" || fail "ip netns del"
hostshim_wait_returns 10 || fail "no return within 10 s"
assert_home p0v1 "$orig_mac1" "$orig_mtu"

step "a deviceID ADD for a returning VF waits for it"
expect_ok add --container c4 --netns "$pod" --ifname eth0 --device 0000:3b:00.4
expect_ok del --container c4 --netns "$pod" --ifname eth0
t0=$(now_ms)
expect_ok add --container c5 --netns "$pod" --ifname eth0 --device 0000:3b:00.4
echo "ADD of the returning VF answered after $(( $(now_ms) - t0 )) ms"
[ "$(jq -r '.result.interfaces[0].pciId' <<<"$OUT")" = 0000:3b:00.4 ] || fail "deviceID ignored: $OUT"
expect_ok del --container c5 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "left state"
echo PASS
