# CHECK compares the live interface with prevResult and names what changed, and
# fails while the DPU's dataplane does not forward for the pod (with its reason);
# an ADD asking for a reserved or taken MAC is refused with code 7.
source "$(dirname "$0")/lib.bash"

pod=$(hostshim_pod_netns_add p1)
ns=$(pod_ns "$pod")
expect_ok add --container c1 --netns "$pod" --ifname eth0
prev=$(jq -c .result <<<"$OUT")
ip=$(jq -r '.result.ips[0].address' <<<"$OUT")

step "CHECK right after ADD: ok, and cheap"
t0=$(now_ms)
expect_ok check --container c1 --netns "$pod" --ifname eth0 --prev-result "$prev"
echo "CHECK took $(( $(now_ms) - t0 )) ms (including the client's start)"
expect_ok check --container c1 --netns "$pod" --ifname eth0

step "the DPU's dataplane does not forward for it: CHECK fails with the reason, then passes again"
id=$(_hostshim_dpu_get /v1/attachments | jq -r '[.attachments[] | select(.kind == "POD")][0].id')
hostshim_dpu_control "/test/dataplane-state?id=$id&state=representor-missing"
dataplane_says_no() {
  call check --container c1 --netns "$pod" --ifname eth0
  [ $RC = 1 ] && [ "$(jq -r .error.code <<<"$OUT")" = 102 ]
}
_hostshim_wait 5 dataplane_says_no || fail "CHECK did not fail with code 102: $OUT"
jq -r .error.details <<<"$OUT" | matches "does not forward for attachment $id: .*representor-missing" ||
  fail "the reason is not named: $OUT"
hostshim_dpu_control "/test/dataplane-state?id=$id&state=programmed"
dataplane_says_yes() { call check --container c1 --netns "$pod" --ifname eth0; [ $RC = 0 ]; }
_hostshim_wait 5 dataplane_says_yes || fail "CHECK still fails once the dataplane forwards: $OUT"

step "ADD asking for the router's MAC (runtimeConfig.mac): code 7, the reason named, nothing held"
pod2=$(hostshim_pod_netns_add p2)
expect_code 7 add --container c2 --netns "$pod2" --ifname eth0 --mac 0a:58:a9:fe:00:01
jq -r .error.details <<<"$OUT" | matches "is the router MAC" || fail "the reason is not named: $OUT"
expect_code 7 add --container c2 --netns "$pod2" --ifname eth0 --mac "$(jq -r '.interfaces[0].mac' <<<"$prev")"
jq -r .error.details <<<"$OUT" | matches "is in use on this node" || fail "the MAC in use is not named: $OUT"
[ "$(_hostshim_dpu_get /v1/attachments | jq '[.attachments[] | select(.kind == "POD")] | length')" = 1 ] ||
  fail "a refused ADD left an attachment"

step "a changed MTU"
ip -n "$ns" link set eth0 mtu 1300
expect_code 102 check --container c1 --netns "$pod" --ifname eth0 --prev-result "$prev"
jq -r .error.details <<<"$OUT" | matches "MTU 1300" || fail "MTU not named: $OUT"
ip -n "$ns" link set eth0 mtu 1400
expect_ok check --container c1 --netns "$pod" --ifname eth0 --prev-result "$prev"

step "a removed address"
ip -n "$ns" addr del "$ip" dev eth0
expect_code 102 check --container c1 --netns "$pod" --ifname eth0 --prev-result "$prev"
jq -r .error.details <<<"$OUT" | matches "lacks address $ip" || fail "address not named: $OUT"

step "CHECK of an unknown attachment: code 3"
expect_code 3 check --container nope --netns "$pod" --ifname eth0 --prev-result "$prev"

expect_ok del --container c1 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "left state"
echo PASS
