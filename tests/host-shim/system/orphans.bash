# An ADD that times out while the DPU agent hangs (SIGSTOP with the real
# agent) fails with code 11 within a few seconds, and leaves nothing once the
# agent resumes and works through the attach it had queued: the detach
# host-shim's rollback sent, its reconcile at the reconnect, or the agent's
# refusal of an attach given up on (whichever reaches the agent first). The runtime's retry then works, and
# an attach repeated for the same (network, sandbox, ifname) is one attachment.
HOSTSHIM_DPU_TIMEOUT_MS=1500
source "$(dirname "$0")/lib.bash"

pod=$(hostshim_pod_netns_add p1)

step "the agent hangs: ADD fails with 11 within 5 s, nothing left on the host"
hostshim_dpu_control "/test/down?seconds=60&mode=hang"
t0=$(now_ms)
expect_code 11 add --container c1 --netns "$pod" --ifname eth0
took=$(( $(now_ms) - t0 ))
echo "ADD with the agent hanging failed after $took ms: $(jq -r .error.msg <<<"$OUT")"
[ $took -lt 5000 ] || fail "ADD took $took ms"
[ -z "$(hostshim_list_records | grep -v '"owner":"management"')" ] || fail "records left: $(hostshim_list_records)"
ip -n "$(pod_ns "$pod")" link show eth0 >/dev/null 2>&1 && fail "eth0 left in the pod"

step "the agent resumes: the attach it had queued leaves no IP and no port"
hostshim_dpu_control /test/up
no_pods() { ! hostshim_list_dpu_attachments | matches '^POD '; }
# The agent got to the attach it had queued (made it, or refused it as given up on).
served() {
  if hostshim_dpu_mode_is agent; then
    grep -q "attached .* on pf0vf0 \|refusing the attach of dpu-test/c1/eth0" "$FAKE_DPU_LOG"
  else
    grep -q "served POST /v1/attachments after the hang" "$FAKE_DPU_LOG"
  fi
}
_hostshim_wait 15 served || fail "the agent never got to the queued attach: the test proves nothing"
# Then host-shim's undo (a detach sent while it hung), its reconcile or the
# agent's refusal leaves no attachment.
_hostshim_wait 10 no_pods || fail "the DPU keeps an attachment for a pod that does not exist: $(hostshim_list_dpu_attachments)"
grep -h "released .*c1/eth0\|refusing the attach of dpu-test/c1/eth0\|detached " "$HOSTSHIM_LOG" "$FAKE_DPU_LOG" | head -n 3
_hostshim_wait 10 hostshim_client status || fail "STATUS did not recover"
if hostshim_dpu_mode_is agent; then
  _hostshim_dpu_get /metrics | grep -q '^dpu_agent_reconcile_released_attachments_total' || fail "no reconcile metric"
fi

step "the runtime's retry works; the same ADD twice is one attachment"
expect_ok add --container c1 --netns "$pod" --ifname eth0
ip1=$(jq -r '.result.ips[0].address' <<<"$OUT")
expect_ok add --container c1 --netns "$pod" --ifname eth0
[ "$(jq -r '.result.ips[0].address' <<<"$OUT")" = "$ip1" ] || fail "the repeated ADD answered $OUT"
[ "$(hostshim_list_dpu_attachments | grep -c '^POD c1/eth0')" = 1 ] || fail "DPU: $(hostshim_list_dpu_attachments)"
expect_ok del --container c1 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "left state"
echo PASS
