#!/usr/bin/python3
"""Golden packets for the datapath Engine, built by scapy (an implementation
independent of ours): for each path, the packet injected and the packet the
engine must transmit. tests/dpu-agent/datapath/engine_test.cpp programs the
same model (same addresses, MACs, keys, DPDK port numbers) and compares byte
for byte. The Geneve source port is computed here from the flow key with an
independent XXH64 (overlay/flow_key.h), so the hash is checked too.

Usage: gen_engine.py <output file>
"""

import struct
import sys

from scapy.compat import raw
from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6PacketTooBig, IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

# The model of engine_test.cpp (baseModel) and its ring ports.
ROUTER_MAC = "0a:58:a9:fe:00:01"
MAC_A, MAC_B = "0a:58:0a:f4:01:05", "0a:58:0a:f4:01:06"
UPLINK_MAC, NEXT_HOP_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
REMOTE_POD_MAC = "0a:58:0a:f4:02:07"
PORT_UPLINK, PORT_A = 0, 2
POD_A, POD_B, GW = "10.244.1.5", "10.244.1.6", "10.244.1.1"
POD_A6, GW6 = "fd00:10:244:1::5", "fd00:10:244:1::1"
REMOTE_POD, REMOTE_POD6 = "10.244.2.7", "fd00:10:244:2::9"
TUNNEL_IP, PEER_TUNNEL_IP = "192.168.100.1", "192.168.100.2"
ROUTER_EGRESS_KEY = 0x8000
M64 = (1 << 64) - 1
P1, P2, P3, P4 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xxh_round(acc, lane):
    acc = (acc + lane * P2) & M64
    return (rotl(acc, 31) * P1) & M64


def xxh64_64(data, seed=0):
    assert len(data) == 64
    v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
    for off in (0, 32):
        for i in range(4):
            v[i] = xxh_round(v[i], struct.unpack_from("<Q", data, off + 8 * i)[0])
    h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
    for lane in v:
        h ^= xxh_round(0, lane)
        h = (h * P1 + P4) & M64
    h = (h + 64) & M64
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


def mac_bytes(m):
    return bytes(int(x, 16) for x in m.split(":"))


def flow_key_v4(in_port, frame):
    """overlay::FlowKey of an untagged IPv4 TCP/UDP frame, as its 64 bytes."""
    ip = frame[IP]
    l4 = ip.payload
    key = struct.pack("<II", in_port, 0) + mac_bytes(frame.dst) + mac_bytes(frame.src)
    key += struct.pack("<HHHBB", 0, 0, 0x0800, ip.proto, 0)
    key += raw(ip)[12:16] + bytes(12) + raw(ip)[16:20] + bytes(12)
    key += struct.pack("<HH", l4.sport, l4.dport)
    return key


def geneve_sport(key):
    h = xxh64_64(key)
    h32 = (h ^ (h >> 32)) & 0xFFFFFFFF
    return 0xC000 | ((h32 ^ (h32 >> 16)) & 0x3FFF)


def pattern(n, seed=0):
    return bytes((seed + 7 * i) & 0xFF for i in range(n))


def ovn(ingress, egress):
    return GeneveOptions(classid=0x0102, type=0x80, reserved=0, length=1,
                         data=ingress.to_bytes(2, "big") + egress.to_bytes(2, "big"))


def tunnel(src_mac, dst_mac, src_ip, dst_ip, sport, vni, ingress, egress, inner):
    return (Ether(src=src_mac, dst=dst_mac)
            / IP(src=src_ip, dst=dst_ip, version=4, ihl=5, tos=0, id=0, flags="DF", frag=0, ttl=64)
            / UDP(sport=sport, dport=6081, chksum=0)
            / GENEVE(version=0, optionlen=2, oam=0, critical=1, reserved=0, proto=0x6558, vni=vni,
                     reserved2=0, options=[ovn(ingress, egress)])
            / inner)


def ip4(**kw):
    fields = dict(id=0, ttl=64, tos=0, flags=0, frag=0)
    fields.update(kw)
    return IP(**fields)


def main():
    out = []

    def add(name, pkt):
        out.append(f"{name} {raw(pkt).hex()}")

    # Pod to pod on this node: routed through the gateway MAC, TTL decremented.
    body = UDP(sport=1234, dport=80) / Raw(pattern(18))
    add("local_in", Ether(dst=ROUTER_MAC, src=MAC_A) / ip4(src=POD_A, dst=POD_B) / body)
    add("local_out", Ether(dst=MAC_B, src=ROUTER_MAC) / ip4(src=POD_A, dst=POD_B, ttl=63) / body)

    # Pod to a remote node: Geneve to its tunnel IP, VNI 20 (its switch), OVN
    # option ingress = pod-a's key 1, egress = the router key.
    enc_in = Ether(dst=ROUTER_MAC, src=MAC_A) / ip4(src=POD_A, dst=REMOTE_POD) / TCP(
        sport=40000, dport=443, seq=1, ack=0, flags="S", window=8192) / Raw(pattern(10, 3))
    add("encap_in", enc_in)
    sport = geneve_sport(flow_key_v4(PORT_A, enc_in))
    inner = Ether(dst=ROUTER_MAC, src=ROUTER_MAC) / ip4(src=POD_A, dst=REMOTE_POD, ttl=63) / TCP(
        sport=40000, dport=443, seq=1, ack=0, flags="S", window=8192) / Raw(pattern(10, 3))
    add("encap_out", tunnel(UPLINK_MAC, NEXT_HOP_MAC, TUNNEL_IP, PEER_TUNNEL_IP, sport, 20, 1,
                            ROUTER_EGRESS_KEY, inner))

    # From the remote node: decapsulated, delivered with router MAC to pod-a's MAC.
    rbody = UDP(sport=5353, dport=8080) / Raw(pattern(30, 9))
    add("decap_in", tunnel(NEXT_HOP_MAC, UPLINK_MAC, PEER_TUNNEL_IP, TUNNEL_IP, 50000, 10, 9,
                           ROUTER_EGRESS_KEY,
                           Ether(dst=ROUTER_MAC, src=REMOTE_POD_MAC) / ip4(src=REMOTE_POD, dst=POD_A, ttl=63)
                           / rbody))
    add("decap_out", Ether(dst=MAC_A, src=ROUTER_MAC) / ip4(src=REMOTE_POD, dst=POD_A, ttl=63) / rbody)

    # ARP for the gateway.
    add("arp_in", Ether(dst="ff:ff:ff:ff:ff:ff", src=MAC_A)
        / ARP(hwtype=1, ptype=0x0800, hwlen=6, plen=4, op=1, hwsrc=MAC_A, psrc=POD_A,
              hwdst="00:00:00:00:00:00", pdst=GW))
    add("arp_out", Ether(dst=MAC_A, src=ROUTER_MAC)
        / ARP(hwtype=1, ptype=0x0800, hwlen=6, plen=4, op=2, hwsrc=ROUTER_MAC, psrc=GW, hwdst=MAC_A, pdst=POD_A))

    # Too big for the tunnel (pod MTU 1400): frag-needed / packet-too-big, to the sender.
    big4 = Ether(dst=ROUTER_MAC, src=MAC_A) / ip4(src=POD_A, dst=REMOTE_POD, flags="DF", id=0x77) / TCP(
        sport=40001, dport=80, seq=1, ack=2, flags="A", window=512) / Raw(pattern(1401 - 40))
    add("fragneeded_in", big4)
    add("fragneeded_out", Ether(dst=MAC_A, src=ROUTER_MAC) / ip4(src=GW, dst=POD_A, ttl=64)
        / ICMP(type=3, code=4, unused=0, nexthopmtu=1400) / Raw(raw(big4[IP])[:28]))
    big6 = Ether(dst=ROUTER_MAC, src=MAC_A) / IPv6(src=POD_A6, dst=REMOTE_POD6, hlim=64, tc=0, fl=0) / UDP(
        sport=1234, dport=5678) / Raw(pattern(1401 - 48))
    add("packettoobig_in", big6)
    add("packettoobig_out", Ether(dst=MAC_A, src=ROUTER_MAC) / IPv6(src=GW6, dst=POD_A6, hlim=64, tc=0, fl=0)
        / ICMPv6PacketTooBig(mtu=1400) / Raw(raw(big6[IPv6])[:1280 - 48]))

    with open(sys.argv[1], "w") as f:
        f.write("# Generated by gen_engine.py (scapy); do not edit.\n")
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
