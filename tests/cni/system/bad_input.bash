#!/usr/bin/env bash
# Bad input, through the real runtime library (libcni via cnidriver) where the
# runtime lets it through, else straight to the dpu-cni binary as a runtime
# would exec it: each case gets the spec's code and a details text, and leaves
# nothing behind (no allocation record, no fake-DPU attachment, every VF home).
source "$(dirname "$0")/common.bash"
cni_env_up

plain=$(cni_conflist plain 1.0.0 "$(dpu_plugin_json)")
pod=$(hostshim_pod_netns_add pod1)
conf_json=$(echo "$(dpu_plugin_json)" | jq -c '. + {cniVersion:"1.0.0", name:"dpunet"}')

# The binary as the runtime execs it: a controlled environment, the config on stdin.
plugin() {  # plugin STDIN VAR=VALUE...
  local input=$1; shift
  printf '%s' "$input" | hostshim_exec env -i PATH=/usr/bin:/bin "$@" "$DPU_CNI"
}

# Malformed JSON: libcni refuses to load such a file itself, so the binary gets it directly.
expect_code 6 "malformed JSON" plugin '{"cniVersion":"1.0.0","name":' \
  CNI_COMMAND=ADD CNI_CONTAINERID=c1 CNI_NETNS="$pod" CNI_IFNAME=eth0 CNI_PATH=/x
expect_clean "malformed JSON"

# Unknown cniVersion through libcni (it passes the version on; the plugin refuses).
future=$(cni_conflist future 9.0.0 "$(dpu_plugin_json)")
expect_code 1 "unknown cniVersion 9.0.0" drv add -conf "$future" -netns "$pod" -id c2
expect_clean "unknown cniVersion"

# Missing environment: no CNI_CONTAINERID / CNI_IFNAME, no CNI_NETNS on ADD.
expect_code 4 "missing CNI_CONTAINERID and CNI_IFNAME" plugin "$conf_json" CNI_COMMAND=ADD CNI_NETNS="$pod" CNI_PATH=/x
expect_code 4 "missing CNI_NETNS on ADD" plugin "$conf_json" CNI_COMMAND=ADD CNI_CONTAINERID=c3 CNI_IFNAME=eth0
expect_code 4 "missing CNI_COMMAND" plugin "$conf_json" CNI_CONTAINERID=c3 CNI_IFNAME=eth0
expect_clean "missing environment"

# A deviceID outside the pool: host-shim's decision, passed on by dpu-cni.
expect_code 7 "deviceID outside the VF pool" drv add -conf "$plain" -netns "$pod" -id c4 -device 0000:3b:1f.7
expect_clean "deviceID outside the pool"
# The management port's VF is reserved: never handed to a pod.
mgmt_pci=$(fake_sysfs_vf_pci $((HOSTSHIM_NUM_VFS - 1)))
out=$(drv add -conf "$plain" -netns "$pod" -id c4b -device "$mgmt_pci" 2>/dev/null)
if [ $? != 0 ] && [ -n "$(echo "$out" | jq -r '.details')" ]; then
  pass "reserved VF $mgmt_pci refused: code $(echo "$out" | jq -r .code) ($(echo "$out" | jq -r .details))"
else fail "reserved VF handed out: $out"; fi
drv del -conf "$plain" -netns "$pod" -id c4b -device "$mgmt_pci" >/dev/null 2>&1
expect_clean "reserved VF"
# A malformed deviceID never reaches host-shim.
expect_code 7 "malformed deviceID" drv add -conf "$plain" -netns "$pod" -id c4c -device eth7
expect_clean "malformed deviceID"

# An ifname over 15 characters: libcni refuses it itself (code 4, before exec);
# the binary refuses it the same way when called directly.
expect_code 4 "ifname of 16 characters through libcni" drv add -conf "$plain" -netns "$pod" -id c5 -ifname sixteen-chars-xx
expect_code 4 "ifname of 16 characters, binary" plugin "$conf_json" \
  CNI_COMMAND=ADD CNI_CONTAINERID=c5 CNI_NETNS="$pod" CNI_IFNAME=sixteen-chars-xx CNI_PATH=/x
expect_clean "long ifname"

# A netns path that does not exist.
expect_code 4 "netns that does not exist" drv add -conf "$plain" -netns "/run/netns/$HOSTSHIM_ENV_ID-nope" -id c6
expect_clean "missing netns"

# Fields of ours with the wrong type, and ipam (addresses come from the DPU).
badmtu=$(cni_conflist badmtu 1.0.0 "$(dpu_plugin_json '"mtu":"1500"')")
expect_code 7 "mtu as a string" drv add -conf "$badmtu" -netns "$pod" -id c8
ipam=$(cni_conflist ipam 1.0.0 "$(dpu_plugin_json '"ipam":{"type":"host-local","subnet":"10.1.0.0/24"}')")
expect_code 2 "ipam section" drv add -conf "$ipam" -netns "$pod" -id c9
expect_clean "bad fields"
# Refusals made before host-shim is asked go where the configuration's logFile says, not to stderr.
grep -q "refused ADD c8: invalid network configuration: mtu" "$CNI_DIR/dpu-cni.log" &&
  ! grep -q refused "$CNI_DIR/last.stderr" && pass "the refusals are in the plugin's logFile, not on stderr" ||
  fail "refusal not in $CNI_DIR/dpu-cni.log (or on stderr): $(tail -n 3 "$CNI_DIR/dpu-cni.log"; cat "$CNI_DIR/last.stderr")"

# stdin over 256 KiB, and JSON nested past 64 levels, through libcni (which passes both on).
big=$(cni_conflist big 1.0.0 "$(dpu_plugin_json "\"pad\":\"$(head -c 300000 /dev/zero | tr '\0' x)\"")")
expect_code 6 "a 300 KB network configuration" drv add -conf "$big" -netns "$pod" -id c8b
deep=$(cni_conflist deep 1.0.0 "$(dpu_plugin_json "\"nest\":$(printf '[%.0s' $(seq 80))$(printf ']%.0s' $(seq 80))")")
expect_code 6 "a configuration nested 81 levels deep" drv add -conf "$deep" -netns "$pod" -id c8c
expect_clean "oversized input"

# host-shim down: ADD 11 (try again later), STATUS 50, DEL 11 (the runtime retries).
hostshim_stop
expect_code 11 "ADD with host-shim down" drv add -conf "$plain" -netns "$pod" -id c10
expect_code 50 "STATUS with host-shim down" drv status -conf "$plain"
expect_code 11 "DEL with host-shim down" drv del -conf "$plain" -netns "$pod" -id c10
hostshim_start || fail "host-shim restart"
expect_clean "host-shim down"

# An ifname that already exists in the pod: host-shim refuses and undoes the ADD
# (last: a failed undo here would leave a VF out for every later case).
ip -n "$(basename "$pod")" link add eth9 type veth peer name eth9peer
out=$(drv add -conf "$plain" -netns "$pod" -id c7 -ifname eth9 2>/dev/null)
if [ $? != 0 ] && [ -n "$(echo "$out" | jq -r '.details')" ]; then
  pass "ifname already in the pod refused: code $(echo "$out" | jq -r .code) ($(echo "$out" | jq -r .details))"
else fail "ifname clash: $out"; fi
drv del -conf "$plain" -netns "$pod" -id c7 -ifname eth9 >/dev/null 2>&1
expect_clean "ifname clash"

finish
