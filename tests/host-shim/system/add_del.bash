# ADD plumbs a VF into the pod netns exactly as the DPU answered (address,
# MAC, MTU, default route, up); CHECK agrees; DEL returns it; bad input gets the
# right code and leaves nothing behind.
source "$(dirname "$0")/lib.bash"

step "ADD"
pod=$(hostshim_pod_netns_add p1)
expect_ok add --container c1 --netns "$pod" --ifname eth0 --pod default/web/uid-1
ip=$(jq -r '.result.ips[0].address' <<<"$OUT")
gw=$(jq -r '.result.ips[0].gateway' <<<"$OUT")
mac=$(jq -r '.result.interfaces[0].mac' <<<"$OUT")
[ "$(jq -r '.result.interfaces[0].pciId' <<<"$OUT")" = 0000:3b:00.2 ] || fail "pciId: $OUT"
[ "$(jq -r '.result.interfaces[0].sandbox' <<<"$OUT")" = "$pod" ] || fail "sandbox: $OUT"
ns=$(pod_ns "$pod")
ip -n "$ns" -o addr show dev eth0 | matches "inet $ip " || fail "eth0 lacks $ip: $(ip -n "$ns" addr)"
ip -n "$ns" -o link show eth0 | matches "link/ether $mac" || fail "eth0 MAC is not $mac"
ip -n "$ns" -o link show eth0 | matches "mtu 1400" || fail "eth0 MTU is not 1400"
ip -n "$ns" -o link show eth0 | matches "[<,]UP[,>]" || fail "eth0 is not up"
ip -n "$ns" route show default | matches "via $gw dev eth0" || fail "no default route via $gw: $(ip -n "$ns" route)"
ip -n "$HOST_NETNS" link show p0v0 >/dev/null 2>&1 && fail "p0v0 is still in the host netns"
hostshim_list_dpu_attachments | matches "^POD c1/eth0 vf0 $ip" || fail "the fake DPU lacks c1/eth0: $(hostshim_list_dpu_attachments)"
hostshim_list_records | matches '"owner":"dpu-test/c1/eth0"' || fail "no record for c1/eth0"

step "a repeated ADD answers the same"
expect_ok add --container c1 --netns "$pod" --ifname eth0
[ "$(jq -r '.result.ips[0].address' <<<"$OUT")" = "$ip" ] || fail "repeated ADD answered $OUT"

step "CHECK"
prev=$(hostshim_client add --container c1 --netns "$pod" --ifname eth0 | jq -c .result)
expect_ok check --container c1 --netns "$pod" --ifname eth0 --prev-result "$prev"

step "DEL, twice"
expect_ok del --container c1 --netns "$pod" --ifname eth0
expect_ok del --container c1 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "DEL left state"
ip -n "$ns" link show eth0 >/dev/null 2>&1 && fail "eth0 is still in the pod netns"

step "a deviceID picks that VF; a second ADD for it names the holder"
expect_ok add --container c2 --netns "$pod" --ifname eth0 --device 0000:3b:00.5
[ "$(jq -r '.result.interfaces[0].pciId' <<<"$OUT")" = 0000:3b:00.5 ] || fail "deviceID ignored: $OUT"
pod2=$(hostshim_pod_netns_add p2)
expect_code 101 add --container c3 --netns "$pod2" --ifname eth0 --device 0000:3b:00.5
jq -r .error.details <<<"$OUT" | matches "held by dpu-test/c2/eth0" || fail "no holder named: $OUT"
expect_ok del --container c2 --netns "$pod" --ifname eth0

step "bad input: right code, nothing left behind"
expect_code 4 add --container c4 --netns /run/netns/does-not-exist --ifname eth0
jq -r .error.details <<<"$OUT" | matches "does-not-exist" || fail "netns not named: $OUT"
expect_code 4 add --container c4 --netns "$pod" --ifname eth0123456789abc
expect_code 4 add --container "" --netns "$pod" --ifname eth0
expect_code 7 add --container c4 --netns "$pod" --ifname eth0 --device 0000:3b:01.1   # the management VF
jq -r .error.details <<<"$OUT" | matches "management" || fail "reserved VF not explained: $OUT"
expect_code 7 add --container c4 --netns "$pod" --ifname eth0 --device 0000:99:00.1
hostshim_assert_clean || fail "bad input left state"
echo PASS
