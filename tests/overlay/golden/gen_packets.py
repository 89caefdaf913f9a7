#!/usr/bin/python3
"""Golden packets for the packet library (overlay/include/overlay/{parse,nat,
replies,packet_builder}.h) built by scapy, an implementation independent of ours.

tests/overlay/packet/test_golden.cpp builds the same frames with PacketBuilder,
the slow-path replies with replies.h, and the NAT results with nat.h, and
compares them byte for byte with these. Every NAT expectation here is computed
from scratch (the checksum fields deleted so scapy sums the whole packet), so
it checks our RFC 1624 incremental updates against full recomputation.

Every field scapy would choose by itself (IP id, addresses, ports, fragment
ids) is fixed, so the output never changes unless this script does.

Usage: gen_packets.py <output file>
"""

import sys

from scapy.compat import raw
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_Router_Alert, IPOption_RR, fragment
from scapy.layers.inet6 import (ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS,
                                ICMPv6DestUnreach, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, ICMPv6PacketTooBig, IPv6,
                                IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
                                IPv6ExtHdrRouting, PadN)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

# The addresses; tests/overlay/packet/golden_fixtures.h has the same constants.
POD_MAC = "02:00:00:00:00:01"
PEER_MAC = "02:00:00:00:00:02"
GW_MAC = "02:00:00:00:00:fe"
POD_V4, PEER_V4, GW_V4 = "10.0.0.1", "10.0.0.2", "10.0.0.254"
POD_V6, PEER_V6, GW_V6 = "fd00::1", "fd00::2", "fd00::fe"
NAT_V4 = "192.168.1.10"
SVC_V4 = "10.96.0.10"
NAT_V6 = "2001:db8::10"
SVC_V6 = "fd00:96::10"

PAYLOAD = b"hello overlay"
TCP_OPTIONS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (12345, 0)), ("NOP", None), ("WScale", 7)]


def pattern(n, seed=0):
    return bytes((seed + 7 * i) & 0xFF for i in range(n))


def ip4(**kw):
    """IPv4 with every field fixed (scapy's id defaults to 1)."""
    fields = dict(src=POD_V4, dst=PEER_V4, id=0, ttl=64, tos=0, flags=0, frag=0)
    fields.update(kw)
    return IP(**fields)


def ip6(**kw):
    fields = dict(src=POD_V6, dst=PEER_V6, hlim=64, tc=0, fl=0)
    fields.update(kw)
    return IPv6(**fields)


def eth(dst=PEER_MAC, src=POD_MAC):
    return Ether(dst=dst, src=src)


def recompute(pkt):
    """A copy with every length and checksum recomputed by scapy from scratch."""
    pkt = pkt.copy()
    if IP in pkt:
        del pkt[IP].chksum
        del pkt[IP].len
    if IPv6 in pkt:
        del pkt[IPv6].plen
    if UDP in pkt:
        del pkt[UDP].len
        if pkt[UDP].chksum != 0:  # "no checksum" stays so (RFC 768)
            del pkt[UDP].chksum
    if TCP in pkt:
        del pkt[TCP].chksum
    if ICMP in pkt:
        del pkt[ICMP].chksum
    for layer in (ICMPv6EchoRequest, ICMPv6EchoReply):
        if layer in pkt:
            del pkt[layer].cksum
    return pkt.__class__(raw(pkt))


def packets():
    out = []

    def add(name, pkt):
        out.append((name, raw(pkt)))

    # --- frames PacketBuilder must reproduce -------------------------------------------
    udp4 = eth() / ip4() / UDP(sport=1234, dport=5678) / Raw(PAYLOAD)
    add("eth_ipv4_udp", udp4)
    tcp4 = eth() / ip4(flags="DF") / TCP(sport=40000, dport=80, seq=1000, ack=0, flags="S", window=65535,
                                          options=TCP_OPTIONS)
    add("eth_ipv4_tcp_options", tcp4)
    opts4 = eth() / ip4(options=[IPOption_Router_Alert(), IPOption_RR(pointer=4, routers=["0.0.0.0", "0.0.0.0"])]) \
        / UDP(sport=1234, dport=5678) / Raw(PAYLOAD)
    add("eth_ipv4_options_udp", opts4)
    echo4 = eth() / Dot1Q(prio=3, vlan=100) / ip4() / ICMP(type=8, code=0, id=0x1234, seq=1) / Raw(pattern(32))
    add("vlan_ipv4_icmp_echo", echo4)
    qinq = eth() / Dot1AD(vlan=10) / Dot1Q(vlan=20) / ip4() / UDP(sport=1234, dport=5678) / Raw(PAYLOAD)
    add("qinq_ipv4_udp", qinq)
    nocsum4 = eth() / ip4() / UDP(sport=1234, dport=5678, chksum=0) / Raw(PAYLOAD)
    add("eth_ipv4_udp_nocsum", nocsum4)
    tcp6 = eth() / ip6() / TCP(sport=40000, dport=443, seq=7, ack=9, flags="PA", window=512) / Raw(PAYLOAD)
    add("eth_ipv6_tcp", tcp6)
    ext6 = (eth() / ip6()
            / IPv6ExtHdrHopByHop(autopad=0, options=[PadN(optdata=b"\x00" * 4)])
            / IPv6ExtHdrRouting(type=0, segleft=0, addresses=[])
            / IPv6ExtHdrDestOpt(autopad=0, options=[PadN(optdata=b"\x00" * 4)])
            / UDP(sport=1234, dport=5678) / Raw(PAYLOAD))
    add("eth_ipv6_ext_udp", ext6)
    # scapy leaves the checksum of TCP behind AH at 0; AH is not in the pseudo-header
    # (RFC 8200 §8.1), so take it from the same segment without the extension headers.
    tcp_ah = TCP(sport=40000, dport=443, seq=1, ack=0, flags="S", window=1024)
    tcp_ah.chksum = IPv6(raw(ip6() / tcp_ah))[TCP].chksum
    ah6 = (eth() / ip6() / IPv6ExtHdrDestOpt(autopad=0, options=[PadN(optdata=b"\x00" * 4)])
           / AH(nh=6, payloadlen=4, reserved=0, spi=0x100, seq=5, icv=pattern(12, 3)) / tcp_ah)
    add("eth_ipv6_ah_tcp", ah6)
    frag6 = eth() / ip6() / IPv6ExtHdrFragment(offset=0, m=1, id=0xabcdef) / UDP(sport=1234, dport=5678) \
        / Raw(pattern(24))
    add("eth_ipv6_frag_first_udp", frag6)
    echo6 = eth() / ip6() / ICMPv6EchoRequest(id=0x4321, seq=2, data=pattern(16))
    add("eth_ipv6_icmpv6_echo", echo6)

    # --- ARP and neighbor discovery: requests and our gateway's replies --------------------
    arp_req = Ether(dst="ff:ff:ff:ff:ff:ff", src=POD_MAC) / ARP(
        hwtype=1, ptype=0x0800, hwlen=6, plen=4, op=1, hwsrc=POD_MAC, psrc=POD_V4, hwdst="00:00:00:00:00:00",
        pdst=GW_V4)
    add("arp_request", arp_req)
    add("arp_reply", Ether(dst=POD_MAC, src=GW_MAC) / ARP(
        hwtype=1, ptype=0x0800, hwlen=6, plen=4, op=2, hwsrc=GW_MAC, psrc=GW_V4, hwdst=POD_MAC, pdst=POD_V4))
    arp_req_vlan = Ether(dst="ff:ff:ff:ff:ff:ff", src=POD_MAC) / Dot1Q(vlan=100) / ARP(
        op=1, hwsrc=POD_MAC, psrc=POD_V4, hwdst="00:00:00:00:00:00", pdst=GW_V4)
    add("vlan_arp_request", arp_req_vlan)
    add("vlan_arp_reply", Ether(dst=POD_MAC, src=GW_MAC) / Dot1Q(vlan=100) / ARP(
        op=2, hwsrc=GW_MAC, psrc=GW_V4, hwdst=POD_MAC, pdst=POD_V4))

    solicited_node = "ff02::1:ff00:fe"
    ns = (Ether(dst="33:33:ff:00:00:fe", src=POD_MAC) / ip6(dst=solicited_node, hlim=255)
          / ICMPv6ND_NS(tgt=GW_V6) / ICMPv6NDOptSrcLLAddr(lladdr=POD_MAC))
    add("icmpv6_ns", ns)
    add("icmpv6_na", Ether(dst=POD_MAC, src=GW_MAC) / ip6(src=GW_V6, dst=POD_V6, hlim=255)
        / ICMPv6ND_NA(R=1, S=1, O=1, tgt=GW_V6) / ICMPv6NDOptDstLLAddr(lladdr=GW_MAC))
    ns_dad = (Ether(dst="33:33:ff:00:00:fe", src=POD_MAC) / ip6(src="::", dst=solicited_node, hlim=255)
              / ICMPv6ND_NS(tgt=GW_V6))
    add("icmpv6_ns_dad", ns_dad)
    add("icmpv6_na_dad", Ether(dst="33:33:00:00:00:01", src=GW_MAC) / ip6(src=GW_V6, dst="ff02::1", hlim=255)
        / ICMPv6ND_NA(R=1, S=0, O=1, tgt=GW_V6) / ICMPv6NDOptDstLLAddr(lladdr=GW_MAC))

    # --- "too big" errors: the offending packets and our replies ------------------------
    big4 = eth(dst=GW_MAC) / ip4(dst="10.1.0.2", flags="DF", id=0x77) / TCP(
        sport=40000, dport=80, seq=1, ack=2, flags="A", window=512) / Raw(pattern(1400))
    add("big_ipv4_tcp", big4)
    quote4 = raw(big4[IP])[:20 + 8]
    add("icmp_frag_needed", Ether(dst=POD_MAC, src=GW_MAC) / ip4(src=GW_V4, dst=POD_V4, ttl=64)
        / ICMP(type=3, code=4, unused=0, nexthopmtu=1400) / Raw(quote4))
    big6 = eth(dst=GW_MAC) / ip6(dst="fd00:1::2") / UDP(sport=1234, dport=5678) / Raw(pattern(1452))
    add("big_ipv6_udp", big6)
    quote6 = raw(big6[IPv6])[:1280 - 40 - 8]
    add("icmpv6_packet_too_big", Ether(dst=POD_MAC, src=GW_MAC) / ip6(src=GW_V6, dst=POD_V6, hlim=64)
        / ICMPv6PacketTooBig(mtu=1400) / Raw(quote6))

    # --- refusals of a connection to a service without endpoints ----------------------
    # (from the service address the packet was sent to, as kube-proxy's REJECT)
    udp_svc = eth(dst=GW_MAC) / ip4(dst=SVC_V4, id=0x33) / UDP(sport=5353, dport=53) / Raw(b"query")
    add("svc_ipv4_udp", udp_svc)
    add("icmp_port_unreachable", Ether(dst=POD_MAC, src=GW_MAC) / ip4(src=SVC_V4, dst=POD_V4, ttl=64)
        / ICMP(type=3, code=3) / Raw(raw(udp_svc[IP])[:20 + 8]))
    udp6_svc = eth(dst=GW_MAC) / ip6(dst="fd00:96::a") / UDP(sport=5353, dport=53) / Raw(b"query")
    add("svc_ipv6_udp", udp6_svc)
    add("icmpv6_port_unreachable", Ether(dst=POD_MAC, src=GW_MAC) / ip6(src="fd00:96::a", dst=POD_V6, hlim=64)
        / ICMPv6DestUnreach(code=4) / Raw(raw(udp6_svc[IPv6])))
    syn = eth(dst=GW_MAC) / ip4(dst=SVC_V4) / TCP(sport=40000, dport=80, seq=1000, flags="S", window=512)
    add("svc_ipv4_tcp_syn", syn)
    add("tcp_rst_for_syn", Ether(dst=POD_MAC, src=GW_MAC) / ip4(src=SVC_V4, dst=POD_V4, ttl=64, flags="DF")
        / TCP(sport=80, dport=40000, seq=0, ack=1001, flags="RA", window=0))
    ack = eth(dst=GW_MAC) / ip4(dst=SVC_V4) / TCP(sport=40001, dport=80, seq=5, ack=777, flags="PA",
                                                   window=512) / Raw(b"GET /")
    add("svc_ipv4_tcp_ack", ack)
    add("tcp_rst_for_ack", Ether(dst=POD_MAC, src=GW_MAC) / ip4(src=SVC_V4, dst=POD_V4, ttl=64, flags="DF")
        / TCP(sport=80, dport=40001, seq=777, ack=0, flags="R", window=0))
    syn6 = eth(dst=GW_MAC) / ip6(dst="fd00:96::a") / TCP(sport=40002, dport=443, seq=9, flags="S", window=512)
    add("svc_ipv6_tcp_syn", syn6)
    add("tcp6_rst_for_syn", Ether(dst=POD_MAC, src=GW_MAC) / ip6(src="fd00:96::a", dst=POD_V6, hlim=64)
        / TCP(sport=443, dport=40002, seq=0, ack=10, flags="RA", window=0))

    # --- NAT, each recomputed from scratch by scapy ------------------------------------
    p = udp4.copy()
    p[IP].src, p[UDP].sport = NAT_V4, 40001
    add("nat_ipv4_udp_snat", recompute(p))
    p = tcp4.copy()
    p[IP].dst, p[TCP].dport = SVC_V4, 8080
    add("nat_ipv4_tcp_dnat", recompute(p))
    p = opts4.copy()
    p[IP].dst = SVC_V4
    add("nat_ipv4_options_udp_dnat", recompute(p))
    p = echo4.copy()
    p[IP].src, p[ICMP].id = NAT_V4, 0x9999
    add("nat_vlan_ipv4_icmp_echo", recompute(p))
    p = qinq.copy()
    p[IP].src, p[IP].dst, p[UDP].sport, p[UDP].dport = NAT_V4, SVC_V4, 1, 65535
    add("nat_qinq_ipv4_udp", recompute(p))
    p = nocsum4.copy()
    p[IP].src, p[UDP].sport = NAT_V4, 40001
    add("nat_ipv4_udp_nocsum", recompute(p))
    p = tcp6.copy()
    p[IPv6].src, p[TCP].sport = NAT_V6, 50000
    add("nat_ipv6_tcp_snat", recompute(p))
    p = ext6.copy()
    p[IPv6].dst, p[UDP].dport = SVC_V6, 53
    add("nat_ipv6_ext_udp_dnat", recompute(p))
    p = echo6.copy()
    p[IPv6].src, p[ICMPv6EchoRequest].id = NAT_V6, 0x1111
    add("nat_ipv6_icmpv6_echo", recompute(p))

    # A UDP datagram whose checksum after SNAT sums to zero, so it must be sent as
    # 0xffff (RFC 768): search the payload deterministically.
    for i in range(65536):
        p = eth() / ip4() / UDP(sport=1234, dport=5678) / Raw(i.to_bytes(2, "big") + PAYLOAD)
        q = p.copy()
        q[IP].src = NAT_V4
        q = recompute(q)
        if q[UDP].chksum == 0xFFFF:
            add("eth_ipv4_udp_zero_sum", p)
            add("nat_ipv4_udp_zero_sum", q)
            break

    # Fragments: the NATed first fragment must carry the checksum of the whole
    # NATed datagram, and a later fragment changes only in its IP header.
    whole = ip4(flags=0, id=0x55) / UDP(sport=1234, dport=5678) / Raw(pattern(64, 9))
    frags = fragment(whole, fragsize=32)
    nat_whole = whole.copy()
    nat_whole.src, nat_whole[UDP].sport = NAT_V4, 40001
    nat_whole = recompute(nat_whole)
    nat_frags = fragment(nat_whole, fragsize=32)
    add("ipv4_frag_first_udp", eth() / frags[0])
    add("ipv4_frag_later_udp", eth() / frags[1])
    add("nat_ipv4_frag_first_udp", eth() / nat_frags[0])
    add("nat_ipv4_frag_later_udp", eth() / nat_frags[1])

    # TTL and hop limit decremented by one.
    p = udp4.copy()
    p[IP].ttl = 63
    add("ttl_ipv4_udp", recompute(p))
    p = tcp6.copy()
    p[IPv6].hlim = 63
    add("ttl_ipv6_tcp", recompute(p))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_packets.py <output file>")
    with open(sys.argv[1], "w") as f:
        f.write("# Generated by gen_packets.py (scapy); do not edit. Format: <name> <hex>\n")
        for name, data in packets():
            f.write(f"{name} {data.hex()}\n")


if __name__ == "__main__":
    main()
