#!/usr/bin/env python3
"""The scapy side of esp_scapy.sh.

esp_scapy.py decrypt OURS.pcap PLAIN.pcap KEYMAT MODE ESN FIRST_SEQ
    decrypts every packet of OURS with scapy and compares it with PLAIN; prints "ok".
esp_scapy.py encrypt PLAIN.pcap OUT.pcap KEYMAT MODE ESN FIRST_SEQ
    encrypts every packet of PLAIN with scapy (scapy's own random IVs) into OUT.
KEYMAT is the key followed by the 4-byte salt, in hex (tshark's format).
"""
import sys

from scapy.all import IP, Ether, rdpcap, wrpcap
from scapy.layers.ipsec import ESP, SecurityAssociation

SPI = 0x2002


def make_sa(keymat, mode, esn, seq):
    tunnel = IP(src="172.16.0.1", dst="172.16.0.2") if mode == "tunnel" else None
    return SecurityAssociation(ESP, spi=SPI, crypt_algo="AES-GCM", crypt_key=bytes.fromhex(keymat),
                               auth_algo="NULL", tunnel_header=tunnel, esn_en=(esn == "on"),
                               esn=(seq >> 32))


def main():
    op, src, dst, keymat, mode, esn, seq = sys.argv[1:8]
    seq = int(seq)
    packets = rdpcap(src)
    if op == "decrypt":
        plain = rdpcap(dst)
        for i, (p, want) in enumerate(zip(packets, plain)):
            n = seq + i
            # scapy takes the high half of the ESN from the SA; a receiver infers it.
            sa = make_sa(keymat, mode, esn, n)
            got = sa.decrypt(p[IP])
            if bytes(got) != bytes(want[IP]):
                print(f"packet {i + 1}: scapy's decryption differs from the plaintext")
                return 1
        if len(packets) != len(plain):
            print(f"{len(packets)} encrypted packets for {len(plain)} plaintext ones")
            return 1
        print("ok")
        return 0
    out = []
    for i, p in enumerate(packets):
        n = seq + i
        sa = make_sa(keymat, mode, esn, n)
        # scapy reads seq_num=0 as "not given" (`seq_num or self.seq_num`), so the
        # low half 0 that ESN streams carry at each 2^32 boundary goes through the SA.
        sa.seq_num = n & 0xffffffff
        enc = sa.encrypt(p[IP], seq_num=n & 0xffffffff)
        frame = Ether(src=p[Ether].src, dst=p[Ether].dst) / enc
        frame.time = p.time
        out.append(frame)
    wrpcap(dst, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
