# tshark dissects our Geneve down to each option, with valid outer checksums,
# for IPv4 and IPv6 underlays; our decap restores the original frames exactly.
source "$(dirname "$0")/common.bash" "$@"
make_inner_pcap "$scratch/inner.pcap"
n=$(ts -r "$scratch/inner.pcap" -T fields -e frame.number | wc -l)

# IPv4 underlay, OVN option plus a second, non-critical option, zero UDP checksum.
"$pcaptool" geneve-encap -i "$scratch/inner.pcap" -o "$scratch/g4.pcap" --vni 0x123456 \
  --src-ip 192.168.100.1 --dst-ip 192.168.100.2 --ovn-option 5:7 --option 0x0103:0x01:deadbeefcafef00d
fields=(-T fields -E separator='|' -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE)
out=$(ts -r "$scratch/g4.pcap" "${fields[@]}" -e geneve.version -e geneve.vni -e geneve.proto_type \
  -e geneve.flags.critical -e geneve.flags.oam -e geneve.option.class -e geneve.option.type | sort -u)
expect "IPv4: version, VNI, protocol, C bit, O bit, option classes and types" "$out" \
  "0|0x123456|0x6558|1|0|0x0102,0x0103|0x80,0x01"
out=$(ts -r "$scratch/g4.pcap" -T fields -e udp.dstport | cut -d, -f1 | sort -u)
expect "outer UDP destination port 6081" "$out" "6081"
out=$(ts -r "$scratch/g4.pcap" -Y 'geneve.option.class == 0x0102' -T fields -e geneve.option.unknown.data | sort -u)
expect "OVN option data (ingress key 5, egress key 7), then the second option's" "$out" "00050007,deadbeefcafef00d"
out=$(ts -r "$scratch/g4.pcap" -T fields -e ip.checksum.status -e udp.checksum.status -o ip.check_checksum:TRUE \
  -o udp.check_checksum:TRUE -Y 'ip.version == 4' | awk '{print $1}' | cut -d, -f1 | sort -u)
expect "IPv4 outer header checksum good" "$out" "1"
out=$(ts -r "$scratch/g4.pcap" -Y '_ws.malformed || geneve.option.length.invalid || geneve.version.unknown' -T fields -e frame.number | wc -l)
expect "no malformed Geneve" "$out" "0"
out=$(ts -r "$scratch/g4.pcap" -T fields -e udp.srcport | cut -d, -f1 | awk '$1 < 49152 || $1 > 65535' | wc -l)
expect "outer source ports in 49152-65535" "$out" "0"
out=$(ts -r "$scratch/g4.pcap" -T fields -e udp.srcport | cut -d, -f1 | sort -u | wc -l)
expect "distinct inner flows get distinct source ports" "$out" "$n"
out=$(ts -r "$scratch/g4.pcap" -Y 'icmp.type == 8' -T fields -e ip.src | sort -u)
expect "inner frames dissected through the tunnel" "$out" "192.168.100.1,10.244.1.5"

# IPv6 underlay, UDP checksum computed (mandatory over IPv6) and verified by tshark.
"$pcaptool" geneve-encap -i "$scratch/inner.pcap" -o "$scratch/g6.pcap" --vni 77 \
  --src-ip fd00:100::1 --dst-ip fd00:100::2 --ovn-option 32767:65535
out=$(ts -r "$scratch/g6.pcap" -o udp.check_checksum:TRUE -T fields -e udp.checksum.status | cut -d, -f1 | sort -u)
expect "IPv6 outer UDP checksum good" "$out" "1"
out=$(ts -r "$scratch/g6.pcap" -T fields -e geneve.vni -e geneve.option.unknown.data | sort -u)
expect "IPv6: VNI 77 and maximal OVN keys" "$out" "$(printf '0x00004d\t7fffffff')"

# IPv4 underlay with the UDP checksum on request, and the 252-byte option maximum.
big=$(printf 'ab%.0s' $(seq 124))   # 124 data bytes: 128 on the wire
big2=$(printf 'cd%.0s' $(seq 120))  # 120 data bytes: 124 on the wire, 252 in all
"$pcaptool" geneve-encap -i "$scratch/inner.pcap" -o "$scratch/gbig.pcap" --vni 1 --udp-checksum \
  --src-ip 192.168.100.1 --dst-ip 192.168.100.2 --option 0x0200:0x01:"$big" --option 0x0201:0x02:"$big2"
out=$(ts -r "$scratch/gbig.pcap" -o udp.check_checksum:TRUE -T fields -e udp.checksum.status | cut -d, -f1 | sort -u)
expect "IPv4 outer UDP checksum (when on) good" "$out" "1"
out=$(ts -r "$scratch/gbig.pcap" -T fields -e geneve.option.class -e geneve.option.length | sort -u)
expect "options of 128 and 124 bytes (the 252-byte maximum) dissected" "$out" "$(printf '0x0200,0x0201\t252,128,124')"

# Our decap gives back the original frames, byte for byte.
for g in g4 g6 gbig; do
  "$pcaptool" geneve-decap -i "$scratch/$g.pcap" -o "$scratch/$g-dec.pcap" --understand 0x0200:0x01 \
    --understand 0x0201:0x02 > "$scratch/$g-dec.txt"
  expect "$g decap restores every frame" "$(ts -r "$scratch/$g-dec.pcap" -x | md5sum)" "$(ts -r "$scratch/inner.pcap" -x | md5sum)"
done
done_checks
