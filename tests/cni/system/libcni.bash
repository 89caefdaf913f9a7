#!/usr/bin/env bash
# dpu-cni driven by the real CNI runtime library (libcni 1.1.2 through
# tests/tools/cnidriver): ADD, CHECK, DEL (twice), GC and STATUS through
# dpu-cni → host-shim → fake DPU; result shapes for 1.0.0 and 0.4.0; the
# runtime's mac and deviceID capabilities; chained after it Debian's `tuning`
# and `bandwidth` (prevResult in and out, tuning's effect visible in the pod).
source "$(dirname "$0")/common.bash"
cni_env_up

plain=$(cni_conflist plain 1.0.0 "$(dpu_plugin_json)")

# --- VERSION and STATUS through the runtime's own calls
if drv version -conf "$plain" | matches '"1.1.0"'; then pass "VERSION lists 1.1.0"; else fail "VERSION"; fi
if drv status -conf "$plain" >/dev/null; then pass "STATUS ok"; else fail "STATUS"; fi

# --- ADD, CHECK, DEL, DEL again
pod1=$(hostshim_pod_netns_add pod1)
out=$(drv add -conf "$plain" -netns "$pod1" -id ctr1 -args "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1")
if [ $? = 0 ]; then pass "ADD"; else fail "ADD: $out"; fi
addr=$(echo "$out" | jq -r '.ips[0].address')
gw=$(echo "$out" | jq -r '.ips[0].gateway')
[ "$(echo "$out" | jq -r '.cniVersion')" = 1.0.0 ] || fail "result cniVersion: $out"
[ "$(echo "$out" | jq -r '.interfaces[0].name')" = eth0 ] || fail "result interface name: $out"
[ "$(echo "$out" | jq -r '.interfaces[0].sandbox')" = "$pod1" ] || fail "result sandbox: $out"
[ "$(echo "$out" | jq -r '.ips[0].interface')" = 0 ] || fail "result ips[0].interface: $out"
[ "$(echo "$out" | jq -r '.ips[0] | has("version")')" = false ] || fail "1.0.0 ips must not carry version: $out"
case $addr in 10.244.1.*/24) pass "address $addr from the DPU's pod CIDR";; *) fail "address '$addr'";; esac
if ip -n "$(basename "$pod1")" -o addr show dev eth0 | matches "inet $addr"; then pass "pod sees $addr on eth0"; else
  fail "pod eth0: $(ip -n "$(basename "$pod1")" addr)"; fi
if ip -n "$(basename "$pod1")" route show default | matches "via $gw"; then pass "default route via $gw"; else
  fail "pod routes: $(ip -n "$(basename "$pod1")" route)"; fi
grep -q "ADD ctr1/eth0 done" "$CNI_DIR/dpu-cni.log" && pass "logFile written" || fail "dpu-cni logFile"
if drv check -conf "$plain" -netns "$pod1" -id ctr1 >/dev/null; then pass "CHECK right after ADD"; else fail "CHECK"; fi
if drv del -conf "$plain" -netns "$pod1" -id ctr1 >/dev/null; then pass "DEL"; else fail "DEL"; fi
expect_clean "after DEL"
if drv del -conf "$plain" -netns "$pod1" -id ctr1 >/dev/null; then pass "second DEL succeeds"; else fail "second DEL"; fi
# DEL once the pod netns is gone (the runtime may delete it first).
drv add -conf "$plain" -netns "$pod1" -id ctr1b >/dev/null || fail "ADD ctr1b"
ip netns del "$(basename "$pod1")"
hostshim_repair_vfs
if drv del -conf "$plain" -netns "$pod1" -id ctr1b >/dev/null; then pass "DEL with the netns gone"; else fail "DEL, netns gone"; fi
expect_clean "after DEL with the netns gone"

# --- CNI 0.4.0 result shape, runtimeConfig mac and deviceID
old=$(cni_conflist old 0.4.0 "$(dpu_plugin_json)")
pod2=$(hostshim_pod_netns_add pod2)
vf2pci=$(fake_sysfs_vf_pci 2)
out=$(drv add -conf "$old" -netns "$pod2" -id ctr2 -mac 0a:58:0a:f4:01:63 -device "$vf2pci")
if [ $? = 0 ]; then pass "ADD 0.4.0 with mac and deviceID"; else fail "ADD 0.4.0: $out"; fi
[ "$(echo "$out" | jq -r '.ips[0].version')" = 4 ] || fail "0.4.0 ips carry version 4: $out"
[ "$(echo "$out" | jq -r '.cniVersion')" = 0.4.0 ] || fail "0.4.0 cniVersion: $out"
if hostshim_list_dpu_attachments | matches "vf2 "; then pass "deviceID $vf2pci chose VF 2"; else
  fail "deviceID: $(hostshim_list_dpu_attachments)"; fi
if ip -n "$(basename "$pod2")" link show eth0 | matches 0a:58:0a:f4:01:63; then pass "runtimeConfig mac applied"; else
  fail "mac: $(ip -n "$(basename "$pod2")" link show eth0)"; fi
drv check -conf "$old" -netns "$pod2" -id ctr2 -mac 0a:58:0a:f4:01:63 -device "$vf2pci" >/dev/null || fail "CHECK 0.4.0"
drv del -conf "$old" -netns "$pod2" -id ctr2 -mac 0a:58:0a:f4:01:63 -device "$vf2pci" >/dev/null || fail "DEL 0.4.0"
expect_clean "after the 0.4.0 pod"

# --- runtimeConfig.ips: the pod gets the address the runtime asks for; a second pod asking for it
# is refused with the reason, and its failed ADD leaves nothing behind.
podi=$(hostshim_pod_netns_add podi)
out=$(drv add -conf "$plain" -netns "$podi" -id ctri -ips 10.244.1.77/24)
if [ $? = 0 ] && [ "$(echo "$out" | jq -r '.ips[0].address')" = 10.244.1.77/24 ] &&
   ip -n "$(basename "$podi")" -o addr show dev eth0 | matches "inet 10.244.1.77/24"; then
  pass "runtimeConfig ips: the pod got 10.244.1.77"
else fail "ADD with ips: $out"; fi
podj=$(hostshim_pod_netns_add podj)
out=$(drv add -conf "$plain" -netns "$podj" -id ctrj -ips 10.244.1.77)
if [ $? != 0 ] && echo "$out" | matches "10.244.1.77 is held by"; then pass "a second pod asking for 10.244.1.77 is refused: $(echo "$out" | tail -n 1)"
else fail "second ADD asking for a held address: $out"; fi
drv del -conf "$plain" -netns "$podj" -id ctrj >/dev/null || fail "DEL of the refused pod"
drv del -conf "$plain" -netns "$podi" -id ctri >/dev/null || fail "DEL of the pod with ips"
expect_clean "after the ips pods"

# --- CNI 1.1.0 (libcni 1.1.2 cannot parse 1.1.0 results): the binary as a 1.1.0 runtime execs it.
pod2b=$(hostshim_pod_netns_add pod2b)
conf110=$(echo "$(dpu_plugin_json)" | jq -c '. + {cniVersion:"1.1.0", name:"dpunet"} | del(.capabilities)')
run110() {
  printf '%s' "$conf110" | hostshim_exec env -i CNI_COMMAND="$1" CNI_CONTAINERID=ctr2b CNI_NETNS="$pod2b" \
    CNI_IFNAME=net1 CNI_PATH=/usr/lib/cni "$DPU_CNI"
}
out=$(run110 ADD)
if [ $? = 0 ] && [ "$(echo "$out" | jq -r '.cniVersion')" = 1.1.0 ] &&
   [ "$(echo "$out" | jq -r '.interfaces[0].pciID')" = "$(fake_sysfs_vf_pci 0)" ] &&
   [ "$(echo "$out" | jq -r '.interfaces[0].mtu')" -gt 0 ]; then
  pass "1.1.0 result carries pciID and mtu: $(echo "$out" | jq -c '.interfaces[0]')"; else fail "1.1.0 ADD: $out"; fi
run110 DEL >/dev/null || fail "1.1.0 DEL"
expect_clean "after the 1.1.0 pod"

# --- GC: keep ctr3, collect ctr4; a second dpu-cni network (a Multus secondary
# network: ctr3's net1 and ctr4's net1 on "dpusecond") is another network's business
pod3=$(hostshim_pod_netns_add pod3)
pod4=$(hostshim_pod_netns_add pod4)
second="$CNI_DIR/second.conflist"
echo "{\"cniVersion\":\"1.0.0\",\"name\":\"dpusecond\",\"plugins\":[$(dpu_plugin_json)]}" > "$second"
drv add -conf "$plain" -netns "$pod3" -id ctr3 >/dev/null || fail "ADD ctr3"
drv add -conf "$plain" -netns "$pod4" -id ctr4 >/dev/null || fail "ADD ctr4"
drv add -conf "$second" -netns "$pod3" -id ctr3 -ifname net1 >/dev/null || fail "ADD ctr3 on dpusecond"
drv add -conf "$second" -netns "$pod4" -id ctr4 -ifname net1 >/dev/null || fail "ADD ctr4 on dpusecond"
if drv gc -conf "$plain" -valid ctr3/eth0 >/dev/null; then pass "GC"; else fail "GC"; fi
left=$(hostshim_list_dpu_attachments | grep '^POD ')
if echo "$left" | matches "ctr3/eth0" && ! echo "$left" | matches "ctr4/eth0"; then pass "GC kept ctr3, released ctr4"; else
  fail "after GC: $left"; fi
if echo "$left" | matches "ctr3/net1 .* dpusecond" && echo "$left" | matches "ctr4/net1 .* dpusecond" &&
   ip -n "$(basename "$pod4")" link show net1 >/dev/null 2>&1; then
  pass "GC of dpunet left dpusecond's attachments alone"
else fail "GC of dpunet touched dpusecond: $left"; fi
ip -n "$(basename "$pod4")" link show eth0 >/dev/null 2>&1 && fail "GC left eth0 in pod4"
if drv gc -conf "$second" -valid ctr3/net1 >/dev/null && ! hostshim_list_dpu_attachments | matches "ctr4/net1" &&
   hostshim_list_dpu_attachments | matches "ctr3/net1" && hostshim_list_dpu_attachments | matches "ctr3/eth0"; then
  pass "GC of dpusecond collected ctr4's net1 only"
else fail "GC of dpusecond: $(hostshim_list_dpu_attachments)"; fi
drv del -conf "$second" -netns "$pod3" -id ctr3 -ifname net1 >/dev/null || fail "DEL ctr3 on dpusecond"
drv del -conf "$second" -netns "$pod4" -id ctr4 -ifname net1 >/dev/null || fail "DEL ctr4 on dpusecond"
drv del -conf "$plain" -netns "$pod3" -id ctr3 >/dev/null || fail "DEL ctr3"
drv del -conf "$plain" -netns "$pod4" -id ctr4 >/dev/null || fail "DEL ctr4 after GC"
expect_clean "after GC and DEL"

# --- chained: dpu-cni, then tuning (promisc, a sysctl), then bandwidth (capability, no limits: passes prevResult on)
chain=$(cni_conflist chain 1.0.0 "$(dpu_plugin_json),
  {\"type\":\"tuning\",\"promisc\":true,\"sysctl\":{\"net.ipv4.conf.eth0.arp_notify\":\"1\"}},
  {\"type\":\"bandwidth\",\"capabilities\":{\"bandwidth\":true}}")
pod5=$(hostshim_pod_netns_add pod5)
out=$(drv add -conf "$chain" -netns "$pod5" -id ctr5)
if [ $? = 0 ]; then pass "chained ADD dpu-cni → tuning → bandwidth"; else fail "chained ADD: $out"; fi
[ "$(echo "$out" | jq -r '.interfaces[0].name')" = eth0 ] || fail "chained result lost our interface: $out"
[ "$(echo "$out" | jq -r '.ips | length')" -ge 1 ] || fail "chained result lost our ips: $out"
ns5=$(basename "$pod5")
if ip -n "$ns5" link show eth0 | matches PROMISC; then pass "tuning set promisc on our VF"; else
  fail "tuning promisc: $(ip -n "$ns5" link show eth0)"; fi
if [ "$(ip netns exec "$ns5" cat /proc/sys/net/ipv4/conf/eth0/arp_notify)" = 1 ]; then pass "tuning's sysctl in the pod"; else
  fail "tuning sysctl"; fi
drv del -conf "$chain" -netns "$pod5" -id ctr5 >/dev/null || fail "chained DEL"
expect_clean "after the chained pod"
# CHECK through dpu-cni → tuning (bandwidth's CHECK always looks for a host-side
# veth peer, which an SR-IOV VF does not have, so it stays out of this chain).
tuned=$(cni_conflist tuned 1.0.0 "$(dpu_plugin_json),
  {\"type\":\"tuning\",\"promisc\":true,\"capabilities\":{\"mac\":true}}")
pod5b=$(hostshim_pod_netns_add pod5b)
drv add -conf "$tuned" -netns "$pod5b" -id ctr5b -mac 0a:58:0a:f4:01:77 >/dev/null || fail "ADD dpu-cni → tuning"
if drv check -conf "$tuned" -netns "$pod5b" -id ctr5b -mac 0a:58:0a:f4:01:77 >/dev/null; then
  pass "chained CHECK dpu-cni → tuning"; else fail "chained CHECK dpu-cni → tuning"; fi
drv del -conf "$tuned" -netns "$pod5b" -id ctr5b -mac 0a:58:0a:f4:01:77 >/dev/null || fail "DEL dpu-cni → tuning"
expect_clean "after dpu-cni → tuning"

# dpu-cni second in a chain: prevResult in, merged out (interfaces after the loopback plugin's).
second=$(cni_conflist second 1.0.0 "{\"type\":\"loopback\"},$(dpu_plugin_json)")
pod6=$(hostshim_pod_netns_add pod6)
out=$(drv add -conf "$second" -netns "$pod6" -id ctr6)
if [ $? = 0 ] && [ "$(echo "$out" | jq -r '.interfaces[-1].name')" = eth0 ] &&
   [ "$(echo "$out" | jq -r '.ips[-1].interface')" = "$(( $(echo "$out" | jq -r '.interfaces | length') - 1 ))" ]; then
  pass "dpu-cni after loopback merges into prevResult"; else fail "second in chain: $out"; fi
drv check -conf "$second" -netns "$pod6" -id ctr6 >/dev/null || fail "CHECK second in chain"
drv del -conf "$second" -netns "$pod6" -id ctr6 >/dev/null || fail "DEL second in chain"
expect_clean "after dpu-cni second in a chain"

# bandwidth with limits needs a host-side veth peer in the result; a VF has none,
# so the ADD fails in bandwidth. The runtime then DELs, which must leave nothing.
limited=$(cni_conflist limited 1.0.0 "$(dpu_plugin_json),
  {\"type\":\"bandwidth\",\"ingressRate\":1000000,\"ingressBurst\":100000,\"egressRate\":1000000,\"egressBurst\":100000}")
pod7=$(hostshim_pod_netns_add pod7)
out=$(drv add -conf "$limited" -netns "$pod7" -id ctr7 2>&1)
if [ $? != 0 ] && echo "$out" | matches 'type="bandwidth"'; then
  pass "bandwidth with limits refused by bandwidth (no host veth for a VF)"; else fail "limited chain: $out"; fi
drv del -conf "$limited" -netns "$pod7" -id ctr7 >/dev/null || fail "DEL after the failed chain"
expect_clean "after a chain that failed in a later plugin"

finish
