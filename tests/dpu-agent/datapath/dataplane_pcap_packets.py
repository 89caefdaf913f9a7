#!/usr/bin/env python3
"""Packets for the dpu-dataplane pcap component test (dataplane_pcap_test.sh).

  dataplane_pcap_packets.py DIR
writes DIR/model.json (the logical model of node 1), the input pcaps
DIR/<port>-in.pcap for the uplink and the two representors, and the expected
output DIR/<port>-expected.pcap for each. Built with scapy (Debian's 2.5:
GENEVE's optionlen is given explicitly, it does not compute it).

Node 1: tunnel 192.168.100.1, subnet 10.244.1.0/24 (gateway .1, datapath key 1),
pods A (pf0vf1, key 1, 10.244.1.5) and B (pf0vf2, key 2, 10.244.1.6).
Node 2: tunnel 192.168.100.2, subnet 10.244.2.0/24 (datapath key 2).
"""
import json
import os
import sys

from scapy.all import ARP, IP, UDP, TCP, Ether, Raw, wrpcap
from scapy.contrib.geneve import GENEVE

ROUTER_MAC = "0a:58:0a:f4:00:01"
MAC_A, IP_A = "0a:58:0a:f4:01:05", "10.244.1.5"
MAC_B, IP_B = "0a:58:0a:f4:01:06", "10.244.1.6"
GW1 = "10.244.1.1"
REMOTE_POD = "10.244.2.7"
TUN1, TUN2 = "192.168.100.1", "192.168.100.2"
UPLINK_MAC = "02:00:00:00:01:00"   # uplink_mac in the test's config
NEXT_HOP_MAC = "02:00:00:00:02:00"  # next_hops entry for node 2
# The egress key the engine sends towards another node's subnet (the
# destination pod's key is the receiving node's business).
EGRESS_ROUTED = 0x8000


def model():
    return {
        "node": {"name": "node1", "tunnel_ip": TUN1, "underlay_mtu": 1500, "pod_mtu": 1400,
                 "router_mac": ROUTER_MAC, "cluster_cidrs": ["10.244.0.0/16"]},
        "local_subnets": [{"cidr": "10.244.1.0/24", "gateway_ip": GW1, "datapath_key": 1}],
        "ports": [
            {"name": "pod-a", "key": 1, "kind": "POD", "representor": "pf0vf1", "mac": MAC_A, "ips": [IP_A],
             "datapath_key": 1},
            {"name": "pod-b", "key": 2, "kind": "POD", "representor": "pf0vf2", "mac": MAC_B, "ips": [IP_B],
             "datapath_key": 1},
        ],
        "remote_nodes": [{"name": "node2", "tunnel_ip": TUN2,
                          "subnets": [{"cidr": "10.244.2.0/24", "gateway_ip": "10.244.2.1", "datapath_key": 2}]}],
    }


def ovn_option(ingress, egress):
    # class 0x0102, type 0x80, length 1 (4 bytes): 1 bit zero, 15 bits ingress, 16 bits egress
    return bytes([0x01, 0x02, 0x80, 0x01]) + ((ingress & 0x7fff) << 16 | egress).to_bytes(4, "big")


def geneve(src, dst, vni, inner, ingress=1, egress=1, options=None):
    opts = ovn_option(ingress, egress) if options is None else options
    return (Ether(src=NEXT_HOP_MAC, dst=UPLINK_MAC) / IP(src=src, dst=dst, flags="DF", ttl=64, id=0) /
            UDP(sport=50000, dport=6081, chksum=0) /
            GENEVE(vni=vni, proto=0x6558, optionlen=len(opts) // 4, critical=1 if opts else 0) / Raw(opts) / inner)


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "model.json"), "w") as f:
        json.dump(model(), f, indent=1)

    payload = Raw(b"dpu-dataplane pcap test payload")
    vf1_in, vf1_out, vf2_out, up_in, up_out = [], [], [], [], []

    # 1. ARP for the gateway: answered on the same port.
    vf1_in.append(Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") /
                  ARP(op=1, hwsrc=MAC_A, psrc=IP_A, hwdst="00:00:00:00:00:00", pdst=GW1))
    vf1_out.append(Ether(src=ROUTER_MAC, dst=MAC_A) /
                   ARP(op=2, hwsrc=ROUTER_MAC, psrc=GW1, hwdst=MAC_A, pdst=IP_A))
    # 2. A → B on the same node, routed through the gateway MAC: MACs rewritten, TTL - 1.
    for i in range(3):
        vf1_in.append(Ether(src=MAC_A, dst=ROUTER_MAC) / IP(src=IP_A, dst=IP_B, ttl=64, id=i) /
                      UDP(sport=1000, dport=2000) / payload)
        vf2_out.append(Ether(src=ROUTER_MAC, dst=MAC_B) / IP(src=IP_A, dst=IP_B, ttl=63, id=i) /
                       UDP(sport=1000, dport=2000) / payload)
    # 3. A → a pod on node 2: Geneve to node 2 (VNI = node 2's switch, OVN option ingress = A's key).
    for i in range(2):
        inner_in = Ether(src=MAC_A, dst=ROUTER_MAC) / IP(src=IP_A, dst=REMOTE_POD, ttl=64, id=i) / \
            TCP(sport=3333, dport=80, flags="S")
        vf1_in.append(inner_in)
        # The inner frame leaves with the router MAC on both sides (node 2's
        # pipeline sets the destination pod's MAC).
        inner_out = Ether(src=ROUTER_MAC, dst=ROUTER_MAC) / \
            IP(src=IP_A, dst=REMOTE_POD, ttl=63, id=i) / TCP(sport=3333, dport=80, flags="S")
        up_out.append(Ether(src=UPLINK_MAC, dst=NEXT_HOP_MAC) / IP(src=TUN1, dst=TUN2, flags="DF", ttl=64, id=0) /
                      UDP(sport=0, dport=6081, chksum=0) /
                      GENEVE(vni=2, proto=0x6558, optionlen=2, critical=1) / Raw(ovn_option(1, EGRESS_ROUTED)) /
                      inner_out)
    # 4. Spoofed source IP and source MAC: dropped (port security).
    vf1_in.append(Ether(src=MAC_A, dst=ROUTER_MAC) / IP(src="10.244.1.99", dst=IP_B) / UDP() / payload)
    vf1_in.append(Ether(src="0a:58:0a:f4:01:63", dst=ROUTER_MAC) / IP(src=IP_A, dst=IP_B) / UDP() / payload)
    # 5. Truncated IPv4: dropped, the lcore goes on.
    vf1_in.append(Ether(bytes(Ether(src=MAC_A, dst=ROUTER_MAC) / IP(src=IP_A, dst=IP_B) / UDP() / payload)[:24]))

    # 6. From node 2: Geneve to pod A, decapsulated and delivered.
    inner = Ether(src=ROUTER_MAC, dst=MAC_A) / IP(src=REMOTE_POD, dst=IP_A, ttl=63) / UDP(sport=53, dport=4444) / payload
    up_in.append(geneve(TUN2, TUN1, 1, inner, ingress=7, egress=1))
    vf1_out.append(inner)
    # 7. Unknown VNI, unknown peer, another node's address: dropped.
    up_in.append(geneve(TUN2, TUN1, 99, inner, ingress=7, egress=1))
    up_in.append(geneve("192.168.100.77", TUN1, 1, inner, ingress=7, egress=1))
    up_in.append(geneve(TUN2, "192.168.100.3", 1, inner, ingress=7, egress=1))

    for name, pkts in [("pf0vf1-in", vf1_in), ("pf0vf2-in", []), ("uplink-in", up_in),
                       ("pf0vf1-expected", vf1_out), ("pf0vf2-expected", vf2_out), ("uplink-expected", up_out)]:
        wrpcap(os.path.join(out, name + ".pcap"), pkts)
    with open(os.path.join(out, "counts.json"), "w") as f:
        json.dump({"pf0vf1": len(vf1_in), "uplink": len(up_in),
                   "expected": {"pf0vf1": len(vf1_out), "pf0vf2": len(vf2_out), "uplink": len(up_out)}}, f)


if __name__ == "__main__":
    main()
