#!/usr/bin/python3
"""Writes the seed corpus of fuzz_esp (tests/fuzz/corpus/esp/): valid ESP
packets from the fuzz target's SAs (fixed test keys, sequence number 1, IV =
sequence number) and malformed ones, each prefixed with the selector byte that
fuzz_esp.cpp documents. Deterministic; crash regressions found by fuzzing are
added to the folder by hand and are not touched by this script.

Usage: gen_esp_corpus.py <corpus folder>
"""

import os
import struct
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop
from scapy.packet import Raw

SPI = 0x0A0B0C0D
KEY = bytes(range(1, 17))
SALT = bytes.fromhex("deadbeef")
TUNNEL_SRC, TUNNEL_DST = "198.51.100.1", "198.51.100.2"


def esp(seq, payload_trailer, esn=False, implicit=False):
    iv = struct.pack("!Q", seq)
    aad = struct.pack("!LQ", SPI, seq) if esn else struct.pack("!LL", SPI, seq & 0xFFFFFFFF)
    sealed = AESGCM(KEY).encrypt(SALT + iv, payload_trailer, aad)
    return struct.pack("!LL", SPI, seq & 0xFFFFFFFF) + (b"" if implicit else iv) + sealed


def trailer(payload, nh):
    pad = -(len(payload) + 2) % 4
    return payload + bytes(range(1, pad + 1)) + bytes([pad, nh])


def inner_v4():
    return raw(IP(src="10.0.0.1", dst="10.0.0.2", id=1, flags="DF", ttl=64) / UDP(sport=1, dport=6081) / (b"g" * 21))


def inner_v6():
    return raw(IPv6(src="fd00::1", dst="fd00::2", hlim=64) / UDP(sport=2, dport=6081) / (b"h" * 10))


def transport_v4(seq=1, esn=False, implicit=False):
    udp = raw(UDP(sport=1, dport=6081) / (b"t" * 13))
    body = esp(seq, trailer(udp, 17), esn, implicit)
    return raw(IP(src="192.0.2.1", dst="192.0.2.2", id=0, flags="DF", ttl=64, proto=50) / body)


def transport_v6_ext():
    udp = raw(UDP(sport=1, dport=6081) / b"six")
    body = esp(1, trailer(udp, 17))
    return raw(IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=64) / IPv6ExtHdrHopByHop(nh=60)
               / IPv6ExtHdrDestOpt(nh=50) / Raw(body))


def tunnel_v4(inner, nh, esn=False):
    body = esp(1, trailer(inner, nh), esn)
    return raw(IP(src=TUNNEL_SRC, dst=TUNNEL_DST, id=0, flags="DF", ttl=64, proto=50) / body)


def seeds():
    t4 = transport_v4()
    tun = tunnel_v4(inner_v4(), 4)
    return {
        # selector 0x00-0x0f: decrypt as is
        "valid_transport_v4": b"\x00" + t4,
        "valid_transport_v4_esn": b"\x02" + transport_v4(esn=True),
        "valid_transport_v4_implicit_iv": b"\x04" + transport_v4(implicit=True),
        "valid_transport_v4_openssl": b"\x08" + t4,
        "valid_transport_v6_ext_headers": b"\x00" + transport_v6_ext(),
        "valid_tunnel_v4_in_v4": b"\x01" + tun,
        "valid_tunnel_v6_in_v4_esn": b"\x03" + tunnel_v4(inner_v6(), 41, esn=True),
        "bad_icv": b"\x00" + t4[:-1] + bytes([t4[-1] ^ 1]),
        "bad_spi": b"\x00" + t4[:20] + b"\x00\x00\x01\x00" + t4[24:],
        "truncated_esp": b"\x00" + raw(IP(src="192.0.2.1", dst="192.0.2.2", proto=50) / t4[20:40]),
        "bad_ihl": b"\x01" + bytes([0x4F]) + tun[1:],
        "seq_zero": b"\x00" + t4[:24] + b"\x00\x00\x00\x00" + t4[28:],
        # selector 0x10-0x1f: encrypt, mutate, decrypt
        "roundtrip_v4": b"\x10\x00" + inner_v4(),
        "roundtrip_v6_tunnel": b"\x11\x00" + inner_v6(),
        "mutate_two_bytes": b"\x12\x02" + b"\x00\x16\x01" + b"\x00\x30\x80" + inner_v4(),
        # selector 0x20-0x3f / 0x60-: authentic hostile payloads
        "sealed_valid_inner": b"\x21" + trailer(inner_v4(), 4),
        "sealed_bad_padding": b"\x21" + inner_v4() + b"\x01\x03\x02\x04",
        "sealed_dummy_v6_outer": b"\x61" + b"\x00\x00\x01\x02\x02\x3b",
        "sealed_short_inner": b"\x21" + b"\x45\x00\x00\x04",
        # selector 0x30: SPI peek
        "peek_spi": b"\x30" + t4,
    }


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_esp_corpus.py <corpus folder>")
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(sys.argv[1], name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
