# The DPU reboots (new boot id, state lost): host-shim replays every
# attachment; where the DPU now answers another address, the pod is re-plumbed.
source "$(dirname "$0")/lib.bash"

for i in 0 1 2; do
  pod=$(hostshim_pod_netns_add "p$i")
  expect_ok add --container "c$i" --netns "$pod" --ifname eth0
done
# Free the first address so the replay hands out different ones.
expect_ok del --container c0 --netns "/run/netns/$HOSTSHIM_ENV_ID-p0" --ifname eth0
before=$(hostshim_list_dpu_attachments | sort)
echo "before: $before"
mac1=$(ip -n "$HOSTSHIM_ENV_ID-p1" -o link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')

step "reboot the DPU"
boot_before=$(_hostshim_dpu_get /v1/health | jq -r .bootId)
hostshim_dpu_control /test/reboot || fail "reboot"
# Not "the DPU's list is empty now": host-shim's 200 ms health poll may have
# replayed already (always so with the real agent, which is back only when it
# answers). The new boot id and the new addresses below show the state was lost.
[ "$(_hostshim_dpu_get /v1/health | jq -r .bootId)" != "$boot_before" ] || fail "the boot id did not change"
replayed() { [ "$(hostshim_list_dpu_attachments | grep -c '^POD')" = 2 ] && hostshim_list_dpu_attachments | matches '^MANAGEMENT'; }
_hostshim_wait 10 replayed || fail "no replay: $(hostshim_list_dpu_attachments)"
after=$(hostshim_list_dpu_attachments | sort)
echo "after: $after"
[ "$after" != "$before" ] || fail "the DPU answered the old addresses again: it kept its state"
for i in 1 2; do
  ip=$(hostshim_list_dpu_attachments | awk -v c="c$i/eth0" '$2 == c {print $4}')
  ip -n "$HOSTSHIM_ENV_ID-p$i" -o addr show dev eth0 | matches "inet $ip " ||
    fail "pod $i not re-plumbed to $ip: $(ip -n "$HOSTSHIM_ENV_ID-p$i" -o addr show dev eth0)"
  [ "$(ip -n "$HOSTSHIM_ENV_ID-p$i" -o addr show dev eth0 | grep -c 'inet ')" = 1 ] || fail "pod $i has stale addresses"
  ip -n "$HOSTSHIM_ENV_ID-p$i" route show default | matches "dev eth0" || fail "pod $i lost its default route"
done
mac1b=$(ip -n "$HOSTSHIM_ENV_ID-p1" -o link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
[ "$mac1" = "$mac1b" ] || fail "pod 1's MAC changed ($mac1 -> $mac1b)"
prev=$(hostshim_client add --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0 | jq -c .result)
expect_ok check --container c1 --netns "/run/netns/$HOSTSHIM_ENV_ID-p1" --ifname eth0 --prev-result "$prev"
grep -q "boot id changed" "$HOSTSHIM_LOG" || fail "no replay logged"

for i in 1 2; do expect_ok del --container "c$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-p$i" --ifname eth0; done
hostshim_assert_clean || fail "left state"
echo PASS
