# overlay-pcap refuses bad input with exit status 1 and a message that says what
# to fix, and writes no output file; dropped packets give exit status 3.
source "$(dirname "$0")/common.bash" "$@"
make_inner_pcap "$scratch/inner.pcap"

# refuse MESSAGE_PART ARGS...: exit 1, the message on stderr, no output written.
refuse() {
  local want=$1
  shift
  rm -f "$scratch/out.pcap"
  set +e
  local msg
  msg=$("$pcaptool" "$@" 2>&1)
  local rc=$?
  set -e
  expect "refused ($want): exit status" "$rc" "1"
  expect "refused ($want): says so" "$(grep -c -- "$want" <<<"$msg")" "1"
  expect "refused ($want): no output file" "$([ -e "$scratch/out.pcap" ] && echo written || echo none)" "none"
}

in=(-i "$scratch/inner.pcap" -o "$scratch/out.pcap")
refuse "unknown operation" frobnicate "${in[@]}"
refuse "--vni is required" geneve-encap "${in[@]}" --src-ip 1.1.1.1 --dst-ip 2.2.2.2
refuse "--vni must be a number from 0 to 16777215" geneve-encap "${in[@]}" --vni 16777216 --src-ip 1.1.1.1 --dst-ip 2.2.2.2
refuse "not an IPv4 or IPv6 address" geneve-encap "${in[@]}" --vni 1 --src-ip 1.1.1 --dst-ip 2.2.2.2
refuse "both be IPv4 or both IPv6" geneve-encap "${in[@]}" --vni 1 --src-ip 1.1.1.1 --dst-ip fd00::2
refuse "OVN ingress port key must be a number from 0 to 32767" geneve-encap "${in[@]}" --vni 1 --src-ip 1.1.1.1 --dst-ip 2.2.2.2 --ovn-option 32768:1
refuse "malformed Geneve option" geneve-encap "${in[@]}" --vni 1 --src-ip 1.1.1.1 --dst-ip 2.2.2.2 --option 1:1:abcdef
refuse "does not apply to this operation" geneve-decap "${in[@]}" --vni 1
refuse "20 bytes (AES-128-GCM) or 36 (AES-256-GCM), got 16" esp-encrypt "${in[@]}" --spi 0x1001 --key 000102030405060708090a0b0c0d0e0f
refuse "is not hex" esp-encrypt "${in[@]}" --spi 0x1001 --key 000102030405060708090a0b0c0d0e0fa0a1a2zz
refuse "--mode must be transport or tunnel" esp-encrypt "${in[@]}" --spi 0x1001 --key 000102030405060708090a0b0c0d0e0fa0a1a2a3 --mode sideways
refuse "need --mode tunnel" esp-encrypt "${in[@]}" --spi 0x1001 --key 000102030405060708090a0b0c0d0e0fa0a1a2a3 --tunnel-src 1.1.1.1
refuse "enable ESN for a 64-bit space" esp-encrypt "${in[@]}" --spi 0x1001 --key 000102030405060708090a0b0c0d0e0fa0a1a2a3 --seq 0x100000000
refuse "--backend must be ipsec-mb or openssl" esp-decrypt "${in[@]}" --spi 0x1001 --key 000102030405060708090a0b0c0d0e0fa0a1a2a3 --backend fastest
echo "not a capture" > "$scratch/garbage.pcap"
refuse "cannot read capture" geneve-decap -i "$scratch/garbage.pcap" -o "$scratch/out.pcap"

# Plain frames are not Geneve: each is reported and the exit status is 3.
set +e
msg=$("$pcaptool" geneve-decap "${in[@]}" 2>&1)
rc=$?
set -e
expect "non-Geneve input: exit status 3" "$rc" "3"
expect "non-Geneve input: every packet reported with its reason" \
  "$(grep -c 'dropped: not a Geneve packet' <<<"$msg")" "$(ts -r "$scratch/inner.pcap" -T fields -e frame.number | wc -l)"
done_checks
