#!/usr/bin/env python3
"""Authenticates and decrypts every ESP in UDP 4500 packet of a capture, independently of the dataplane.

esp_udp_verify.py PCAP SAS
    PCAP: a fabric capture; SAS: the JSON lines of tests/dpu-agent/ipsec/ipsec_keys.py (spi, key, salt).
    Each UDP datagram to or from port 4500 that is not a NAT keepalive is taken back to ESP (RFC 3948
    §3.1: the UDP header removed) and opened with scapy's SecurityAssociation under the SA its SPI names:
    AES-GCM with 64-bit extended sequence numbers, as every SA of dpu-cni, the ICV checked (scapy raises
    on a bad one). The high half of the sequence number is taken as 0: a lab's SAs start at 1.
    Prints "authenticated N failed M unknown-spi K geneve G" and exits 1 when anything failed.

Debian's tshark (Wireshark 4.0) decrypts ESP in UDP but has no ESN in its SA table, so its esp.icv_good
can only be false for these SAs (the AAD has the high sequence half); the check of the ICV is done here.
"""
import json
import sys

from scapy.all import IP, UDP, rdpcap
from scapy.layers.ipsec import ESP, SecurityAssociation


def main():
    pcap, sas_file = sys.argv[1:3]
    sas = {}
    with open(sas_file) as f:
        for line in f:
            if line.strip():
                sa = json.loads(line)
                sas[int(sa["spi"], 16)] = bytes.fromhex(sa["key"] + sa["salt"])
    ok = failed = unknown = geneve = 0
    for p in rdpcap(pcap):
        if IP not in p or UDP not in p or 4500 not in (p[UDP].sport, p[UDP].dport):
            continue
        payload = bytes(p[UDP].payload)[: p[UDP].len - 8]
        if payload == b"\xff" or len(payload) < 8 or payload[:4] == b"\0\0\0\0":
            continue  # a NAT keepalive, or not ESP
        spi = int.from_bytes(payload[:4], "big")
        if spi not in sas:
            unknown += 1
            continue
        esp = IP(src=p[IP].src, dst=p[IP].dst, proto=50) / ESP(payload)
        esp = IP(bytes(esp))
        sa = SecurityAssociation(ESP, spi=spi, crypt_algo="AES-GCM", crypt_key=sas[spi], auth_algo="NULL",
                                 esn_en=True, esn=0)
        try:
            inner = sa.decrypt(esp)
        except Exception:  # scapy's IPSecIntegrityError, or a malformed packet
            failed += 1
            continue
        ok += 1
        if UDP in inner and inner[UDP].dport == 6081:
            geneve += 1
    print(f"authenticated {ok} failed {failed} unknown-spi {unknown} geneve {geneve}")
    return 1 if failed or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
