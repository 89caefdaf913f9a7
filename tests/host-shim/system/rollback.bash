# A failing ADD undoes every step: the DPU refuses (nothing touched), the DPU
# is down (code 11), the ifname is taken in the pod netns (move refused), a
# step after the move fails (VF brought back with its original name, MAC and
# MTU; DPU detached; record freed). Against the fake and the real agent; the
# step after the move needs an answer (an MTU the VF refuses) only the fake
# can be told to give: the in-process test (hostshim_service) fails every
# step of ADD against both kinds of failure.
source "$(dirname "$0")/lib.bash"

orig_mac=$(ip -n "$HOST_NETNS" -o link show p0v0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
orig_mtu=$(ip -n "$HOST_NETNS" -o link show p0v0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')
ip -n "$HOST_NETNS" link set p0v0 mtu 1450
orig_mtu=1450

assert_vf0_home() {
  hostshim_wait_returns || fail "a DEL's return did not finish"  # DEL answers before the VF is home
  ip -n "$HOST_NETNS" -o link show p0v0 | matches "link/ether $orig_mac" || fail "p0v0 lost its MAC $orig_mac: $(ip -n "$HOST_NETNS" -o link show p0v0)"
  ip -n "$HOST_NETNS" -o link show p0v0 | matches "mtu $orig_mtu " || fail "p0v0 lost its MTU $orig_mtu"
  hostshim_assert_clean || fail "rollback left state"
}

pod=$(hostshim_pod_netns_add p1)
ns=$(pod_ns "$pod")

step "the DPU refuses the request as invalid (400, an MTU above the pod MTU): code 7, nothing left"
expect_code 7 add --container c1 --netns "$pod" --ifname eth0 --mtu 9000
jq -r .error.details <<<"$OUT" | matches "requested_mtu 9000" || fail "the DPU's reason is not passed on: $OUT"
assert_vf0_home

if hostshim_dpu_mode_is fake; then
  step "the DPU fails (500): code 11, nothing left"
  hostshim_dpu_control "/test/fail?count=1&status=500"
  expect_code 11 add --container c1 --netns "$pod" --ifname eth0
  assert_vf0_home
fi

step "the DPU is down: code 11, nothing left"
hostshim_dpu_control "/test/down?seconds=30&mode=refuse"
expect_code 11 add --container c1 --netns "$pod" --ifname eth0
hostshim_dpu_control /test/up
_hostshim_wait 10 hostshim_client status || fail "STATUS did not recover"
assert_vf0_home

step "ifname taken inside the pod netns: code 103, nothing left"
ip -n "$ns" link add eth0 type veth peer name eth0peer
expect_code 103 add --container c1 --netns "$pod" --ifname eth0
jq -r .error.details <<<"$OUT" | matches "already exists" || fail "collision not explained: $OUT"
assert_vf0_home
ip -n "$ns" link del eth0

if hostshim_dpu_mode_is fake; then
  step "a step after the move fails (MTU the device refuses): VF comes back"
  hostshim_dpu_control "/test/answer-mtu?mtu=70000"
  expect_code 103 add --container c1 --netns "$pod" --ifname eth0
  ip -n "$ns" link show eth0 >/dev/null 2>&1 && fail "eth0 stayed in the pod netns"
  assert_vf0_home
else
  echo "(skipped under the real agent: a step after the move fails only on an answer it never gives)"
fi

step "and the next ADD works"
expect_ok add --container c1 --netns "$pod" --ifname eth0
expect_ok del --container c1 --netns "$pod" --ifname eth0
assert_vf0_home
echo PASS
