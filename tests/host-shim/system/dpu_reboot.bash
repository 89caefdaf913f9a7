# The DPU reboots (new boot id, state lost): host-shim replays every
# attachment with its addresses, so the pods keep them; where the DPU cannot
# give them back (another pod CIDR), the pods are re-plumbed.
source "$(dirname "$0")/lib.bash"

for i in 0 1 2; do
  pod=$(hostshim_pod_netns_add "p$i")
  expect_ok add --container "c$i" --netns "$pod" --ifname eth0
done
# Free the first address: a fresh DPU would hand the replayed pods other ones.
expect_ok del --container c0 --netns "/run/netns/$HOSTSHIM_ENV_ID-p0" --ifname eth0
before=$(hostshim_list_dpu_attachments | awk '{print $1, $2, $4}' | sort)
echo "before: $before"
mac1=$(ip -n "$HOSTSHIM_ENV_ID-p1" -o link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
replayed() { [ "$(hostshim_list_dpu_attachments | grep -c '^POD')" = 2 ] && hostshim_list_dpu_attachments | matches '^MANAGEMENT'; }

# expect_pods_on PATTERN — pods 1 and 2 carry exactly the DPU's address for
# them (which matches PATTERN), their MAC and their default route.
expect_pods_on() {
  local i ip mac
  for i in 1 2; do
    ip=$(hostshim_list_dpu_attachments | awk -v c="c$i/eth0" '$2 == c {print $4}')
    [[ $ip == $1 ]] || fail "pod $i got $ip from the DPU, expected $1"
    ip -n "$HOSTSHIM_ENV_ID-p$i" -o addr show dev eth0 | matches "inet $ip " ||
      fail "pod $i not on $ip: $(ip -n "$HOSTSHIM_ENV_ID-p$i" -o addr show dev eth0)"
    [ "$(ip -n "$HOSTSHIM_ENV_ID-p$i" -o addr show dev eth0 | grep -c 'inet ')" = 1 ] || fail "pod $i has stale addresses"
    ip -n "$HOSTSHIM_ENV_ID-p$i" route show default | matches "via ${ip%.*}.1 dev eth0" || fail "pod $i lost its default route"
  done
  mac=$(ip -n "$HOSTSHIM_ENV_ID-p1" -o link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  [ "$mac1" = "$mac" ] || fail "pod 1's MAC changed ($mac1 -> $mac)"
}

step "reboot the DPU: the pods keep their addresses"
boot_before=$(_hostshim_dpu_get /v1/health | jq -r .bootId)
hostshim_dpu_control /test/reboot || fail "reboot"
# Not "the DPU's list is empty now": host-shim's 200 ms health poll may have
# replayed already (always so with the real agent, which is back only when it
# answers). The new boot id shows the state was lost.
[ "$(_hostshim_dpu_get /v1/health | jq -r .bootId)" != "$boot_before" ] || fail "the boot id did not change"
_hostshim_wait 10 replayed || fail "no replay: $(hostshim_list_dpu_attachments)"
after=$(hostshim_list_dpu_attachments | awk '{print $1, $2, $4}' | sort)
echo "after: $after"
[ "$after" = "$before" ] || fail "replayed pods did not keep their addresses"
expect_pods_on '10.244.1.*/24'
grep -q "boot id changed" "$HOSTSHIM_LOG" || fail "no replay logged"

if ! hostshim_dpu_mode_is agent; then
  step "the DPU comes back with another pod CIDR: the pods are re-plumbed"
  hostshim_dpu_control "/test/reboot?cidr=10.244.9.0%2F24" || fail "reboot with a new CIDR"
  moved() { replayed && hostshim_list_dpu_attachments | awk '$1 == "POD"' | matches ' 10\.244\.9\.'; }
  _hostshim_wait 10 moved || fail "no replay into the new CIDR: $(hostshim_list_dpu_attachments)"
  echo "after the CIDR change: $(hostshim_list_dpu_attachments | sort)"
  expect_pods_on '10.244.9.*/24'
  grep -q "cannot keep its address" "$HOSTSHIM_LOG" || fail "the fallback to a new address was not logged"
fi
prev=$(hostshim_client add --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0 | jq -c .result)
expect_ok check --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0 --prev-result "$prev"

for i in 1 2; do expect_ok del --container "c$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-p$i" --ifname eth0; done
hostshim_assert_clean || fail "left state"
echo PASS
