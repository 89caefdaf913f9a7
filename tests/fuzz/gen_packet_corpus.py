#!/usr/bin/python3
"""Writes the seed corpus of fuzz_packet (tests/fuzz/corpus/packet/): valid
frames of every kind the parser knows, taken from the golden packets
(tests/overlay/golden/packets.golden), a segment-routed IPv6 packet, and
malformed frames near the parser's limits. Deterministic; crash regressions
found by fuzzing are added to the folder by hand (named crash-*) and are not
touched by this script.

Usage: gen_packet_corpus.py <corpus folder>
"""

import os
import sys

from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrSegmentRouting, PadN
from scapy.layers.l2 import Ether

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "overlay", "golden", "packets.golden")

VALID = [
    "eth_ipv4_udp", "eth_ipv4_tcp_options", "eth_ipv4_options_udp", "vlan_ipv4_icmp_echo", "qinq_ipv4_udp",
    "eth_ipv4_udp_nocsum", "eth_ipv6_ext_udp", "eth_ipv6_ah_tcp", "eth_ipv6_frag_first_udp",
    "eth_ipv6_icmpv6_echo", "arp_request", "vlan_arp_request", "icmpv6_ns", "icmpv6_ns_dad", "big_ipv4_tcp",
    "ipv4_frag_later_udp",
]


def golden():
    packets = {}
    with open(GOLDEN) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, hexbytes = line.split()
                packets[name] = bytes.fromhex(hexbytes)
    return packets


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_packet_corpus.py <corpus folder>")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = golden()
    seeds = {name: g[name] for name in VALID}

    seeds["ipv6_srh_udp"] = raw(
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
        / IPv6(src="fd00::1", dst="fd00::50", hlim=64, tc=0, fl=0)
        / IPv6ExtHdrSegmentRouting(addresses=["fd00::99", "fd00::50"], segleft=1, lastentry=1, tag=0)
        / IPv6ExtHdrDestOpt(autopad=0, options=[PadN(optdata=b"\x00" * 4)])
        / UDP(sport=1, dport=2) / b"srh")
    seeds["padded_ipv4_udp"] = g["eth_ipv4_udp"] + bytes(9)

    udp4 = bytearray(g["eth_ipv4_udp"])
    bad = bytearray(udp4)
    bad[14] = 0x4F  # IHL beyond the frame
    seeds["bad_ihl"] = bytes(bad)
    bad = bytearray(g["qinq_ipv4_udp"])
    bad[20:22] = b"\x81\x00"  # a third VLAN tag
    seeds["three_vlans"] = bytes(bad)
    bad = bytearray(g["eth_ipv6_ext_udp"])
    bad[55] = 40  # hop-by-hop longer than the payload
    seeds["ext_too_long"] = bytes(bad)
    seeds["truncated_tcp"] = g["eth_ipv4_tcp_options"][:50]

    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
