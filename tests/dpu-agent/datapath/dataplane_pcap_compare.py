#!/usr/bin/env python3
"""Compares what dpu-dataplane transmitted (DIR/<port>-out.pcap) with the
expected packets (DIR/<port>-expected.pcap) byte for byte, in order.
One field is masked: the outer UDP source port of Geneve packets, which the
sender derives from its inner flow hash (RFC 8926 §3.3); it is checked to be
in the ephemeral range 49152-65535 instead.
  dataplane_pcap_compare.py DIR PORT...
"""
import os
import sys

from scapy.all import rdpcap
from scapy.layers.inet import IP, UDP


def masked(pkt):
    raw = bytearray(bytes(pkt))
    if pkt.haslayer(IP) and pkt.haslayer(UDP) and pkt[UDP].dport == 6081:
        off = len(raw) - len(bytes(pkt[UDP]))
        sport = int.from_bytes(raw[off:off + 2], "big")
        if sport and not (49152 <= sport <= 65535):
            return None, f"Geneve source port {sport} outside 49152-65535"
        raw[off:off + 2] = b"\0\0"
    return bytes(raw), None


def main():
    d = sys.argv[1]
    failures = 0
    for port in sys.argv[2:]:
        got = rdpcap(os.path.join(d, port + "-out.pcap"))
        want = rdpcap(os.path.join(d, port + "-expected.pcap"))
        if len(got) != len(want):
            print(f"{port}: {len(got)} packets sent, {len(want)} expected")
            failures += 1
        for i, (g, w) in enumerate(zip(got, want)):
            gb, err = masked(g)
            wb, _ = masked(w)
            if err:
                print(f"{port} packet {i}: {err}")
                failures += 1
            elif gb != wb:
                print(f"{port} packet {i} differs:\n  got      {bytes(g).hex()}\n  expected {bytes(w).hex()}")
                g.show2()
                failures += 1
        if len(got) == len(want) and not failures:
            print(f"{port}: {len(got)} packets as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
