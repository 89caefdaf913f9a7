#!/usr/bin/env python3
"""Writes a pcap of plain pod frames for the interop tests (deterministic)."""
import sys

from scapy.all import ICMP, IP, TCP, UDP, Ether, IPv6, Raw, wrpcap

A = dict(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b")
frames = [
    Ether(**A) / IP(src="10.244.1.5", dst="10.244.2.7", id=1) / ICMP(id=7, seq=1) / Raw(b"p" * 56),
    Ether(**A) / IP(src="10.244.1.5", dst="10.244.2.7", id=2) / TCP(sport=40000, dport=80, flags="S", seq=1000),
    Ether(**A) / IP(src="10.244.1.5", dst="10.244.2.7", id=3) / UDP(sport=40001, dport=5201) / Raw(b"u" * 1300),
    Ether(**A) / IPv6(src="fd00:10:244:1::5", dst="fd00:10:244:2::7") / UDP(sport=5000, dport=5201) / Raw(b"q" * 30),
    Ether(**A) / IP(src="10.244.1.5", dst="10.244.2.7", id=4) / UDP(sport=40002, dport=5201) / Raw(b""),
]
for i, f in enumerate(frames):
    f.time = 1700000000 + i
wrpcap(sys.argv[1], frames)
