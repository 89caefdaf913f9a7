# host-shim reaches the DPU agent over https with mutual TLS: the fake DPU
# requires a client certificate from the env's CA, host-shim checks the DPU's
# certificate; ADD/DEL work; a host-shim without the client certificate is
# refused (STATUS 50 naming the TLS failure).
HOSTSHIM_TLS=mtls
source "$(dirname "$0")/lib.bash"

grep -q '"certFile"' "$HOSTSHIM_CONFIG" || fail "the config has no client certificate"
case "$FAKE_DPU_URL" in https://*) ;; *) fail "not https: $FAKE_DPU_URL" ;; esac
pod=$(hostshim_pod_netns_add p1)
expect_ok add --container c1 --netns "$pod" --ifname eth0
hostshim_list_dpu_attachments | matches "^POD c1/eth0" || fail "the fake DPU lacks c1"
expect_ok del --container c1 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "left state"

step "without the client certificate the DPU refuses host-shim"
hostshim_stop
jq 'del(.dpu.certFile, .dpu.keyFile)' "$HOSTSHIM_CONFIG" > "$TEST_DIR/nocert.json"
cp "$TEST_DIR/nocert.json" "$HOSTSHIM_CONFIG"
hostshim_start || fail "start"
expect_code 50 status
echo "STATUS: $(jq -r .error.details <<<"$OUT")"
expect_code 11 add --container c2 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "refused ADD left state"
echo PASS
