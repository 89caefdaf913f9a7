#!/usr/bin/env bash
# The hardware check (dpu-offload-hw-check) on ports without rte_flow — net_null
# as the uplink, two net_ring ports as the VF representors: it must run to the
# end, report every kind the device could take as "refused by the device" with
# the PMD's answer to rte_flow_validate, the kinds that stay in software by
# design as such, and the insertion rate as not measured — and never crash.
#   hw_check_test.sh [EMULATOR ARGS...] HW_CHECK_BINARY   (the arm64 build runs it under qemu)
set -euo pipefail
bin=("$@")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
prefix=dpu-hwcheck-test-$$
set +e
"${bin[@]}" --rate-flows 100 -- --no-huge --no-pci -m 256 --file-prefix "$prefix" --no-shconf --no-telemetry \
  --log-level '*:error' --vdev=net_null0 --vdev=net_ring0 --vdev=net_ring1 >"$out" 2>&1
rc=$?
set -e
cat "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$rc" -eq 0 ] || fail "exit status $rc (expected 0: the check ran)"

device_kinds=(vf_to_vf vf_to_vf_ipv6 vf_to_geneve geneve_to_vf nat nat_ipv6 drop)
design_kinds=(esp geneve_ipv6_underlay)
for k in "${device_kinds[@]}"; do
  grep -qE "^    verdict:  $k: refused by the device: " "$out" || fail "$k is not reported as refused by the device"
done
for k in "${design_kinds[@]}"; do
  grep -qE "^    verdict:  $k: software by design$" "$out" || fail "$k is not reported as software by design"
done
# Every kind has exactly one verdict, and the device's own answer is quoted.
[ "$(grep -c '^    verdict:' "$out")" -eq $(( ${#device_kinds[@]} + ${#design_kinds[@]} )) ] || fail "a kind without a verdict"
[ "$(grep -c '^    rte_flow_validate: refused' "$out")" -eq ${#device_kinds[@]} ] ||
  fail "rte_flow_validate's refusal is not reported for every device kind"
grep -q "^  port 0: root jump rule for port 0 (group 0 -> 1) not installed: rte_flow_create" "$out" ||
  fail "the uplink's root jump refusal is not reported"
grep -q "^counters (COUNT) after traffic: no rule installed$" "$out" || fail "counters line missing"
grep -q "^  not measured: the device refused the first rule: " "$out" || fail "insertion rate not reported as not measured"
grep -qE "^summary: 9 kinds: 0 offloaded, 7 refused by the device, 2 software by design, 0 not translated$" "$out" ||
  fail "summary line"
# Bad arguments are refused with the usage, not by the EAL.
if "${bin[@]}" --vf 1 -- --no-huge >/dev/null 2>&1; then fail "a single --vf was accepted"; fi
if "${bin[@]}" --rate-flows x -- --no-huge >/dev/null 2>&1; then fail "--rate-flows x was accepted"; fi
echo "hw-check on net_null/net_ring: every kind refused or kept in software, as expected"
