# CHECK compares the live interface with prevResult and names what changed.
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
