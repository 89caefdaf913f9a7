#!/usr/bin/python3
"""dpu-cni's IPsec pair keys, computed independently of the C++ library.

Reads two nodes' key files (the agent's <ipsec stateDir>/keys.json) and the
optional cluster PSK file, and computes every SA key, salt and SPI between
them by the derivation docs/ipsec.md specifies ("Derivation"), with Debian's
python3-cryptography for X25519 and the RFC 5869 HKDF written out here over
HMAC-SHA256. Prints one JSON line per direction and pair of epochs:

  {"from", "to", "sender_epoch", "receiver_epoch", "spi", "key", "salt"}   (hex)

usage: ipsec_keys.py NODE=KEYFILE NODE=KEYFILE [--psk FILE] [--key-bits 128|256]
"""
import argparse
import base64
import binascii
import json
import struct
import sys

from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

EXTRACT_SALT = b"dpu-cni ipsec v1"
SA_INFO_LABEL = b"dpu-cni ipsec v1 sa"


def hmac_sha256(key, data):
    h = hmac.HMAC(key, hashes.SHA256())
    h.update(data)
    return h.finalize()


def hkdf_extract(salt, ikm):
    # RFC 5869 2.2: no salt is HashLen zero octets.
    return hmac_sha256(salt if salt else bytes(32), ikm)


def hkdf_expand(prk, info, length):
    # RFC 5869 2.3.
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac_sha256(prk, block + info + bytes([counter]))
        out += block
        counter += 1
    return out[:length]


def load_keys(path, node):
    with open(path) as f:
        doc = json.load(f)
    if doc.get("version") != 1 or doc.get("node") != node:
        sys.exit(f"{path}: not a version 1 key file of node {node}")
    keys = {}
    for k in doc["keys"]:
        raw = base64.b64decode(k["privateKey"], validate=True)
        if len(raw) != 32:
            sys.exit(f"{path}: epoch {k['epoch']}: a private key is 32 bytes")
        keys[k["epoch"]] = X25519PrivateKey.from_private_bytes(raw)
    return keys


def load_psk(path):
    if not path:
        return b""
    with open(path) as f:
        psk = base64.b64decode(f.read().strip(), validate=True)
    if not 32 <= len(psk) <= 64:
        sys.exit(f"{path}: a PSK is 32 to 64 bytes")
    return psk


def sa(sender, sender_epoch, sender_key, receiver, receiver_epoch, receiver_key, psk, key_bytes):
    """The SA `sender` sends to `receiver` with, as the sender computes it."""
    peer_public = receiver_key.public_key()
    shared = sender_key.exchange(peer_public)
    prk = hkdf_extract(EXTRACT_SALT, shared + psk)
    s, r = sender.encode(), receiver.encode()
    lo, hi = (s, r) if s < r else (r, s)
    lo_epoch, hi_epoch = (sender_epoch, receiver_epoch) if s < r else (receiver_epoch, sender_epoch)
    direction = 0 if s == lo else 1  # 0: lo sends to hi
    alg = 1 if key_bytes == 16 else 2
    info = (SA_INFO_LABEL + bytes([direction, alg]) + struct.pack(">II", lo_epoch, hi_epoch) +
            struct.pack(">H", len(lo)) + lo + struct.pack(">H", len(hi)) + hi)
    okm = hkdf_expand(prk, info, key_bytes + 8)
    key, salt = okm[:key_bytes], okm[key_bytes:key_bytes + 4]
    rv = struct.unpack(">I", okm[key_bytes + 4:key_bytes + 8])[0]
    spi = ((receiver_epoch & 0xF) << 28) | ((sender_epoch & 0xF) << 24) | (256 + rv % ((1 << 24) - 256))
    return spi, key, salt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("nodes", nargs=2, metavar="NODE=KEYFILE")
    ap.add_argument("--psk")
    ap.add_argument("--key-bits", type=int, choices=(128, 256), default=128)
    a = ap.parse_args()
    sides = []
    for arg in a.nodes:
        node, _, path = arg.partition("=")
        sides.append((node, load_keys(path, node)))
    psk = load_psk(a.psk)
    for i in (0, 1):
        (sender, skeys), (receiver, rkeys) = sides[i], sides[1 - i]
        for se in sorted(skeys):
            for re_ in sorted(rkeys):
                spi, key, salt = sa(sender, se, skeys[se], receiver, re_, rkeys[re_], psk, a.key_bits // 8)
                print(json.dumps({"from": sender, "to": receiver, "sender_epoch": se, "receiver_epoch": re_,
                                  "spi": "%08x" % spi, "key": binascii.hexlify(key).decode(),
                                  "salt": binascii.hexlify(salt).decode()}))


if __name__ == "__main__":
    main()
