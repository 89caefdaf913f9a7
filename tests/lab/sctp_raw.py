"""SCTP's first exchange over raw IPv4 sockets, for a kernel without SCTP.

The lab's kernel has no SCTP module, so neither end can open an SCTP socket;
the datapath only needs to see an association start to judge it (conntrack,
NetworkPolicy, service DNAT), so a prober sends an INIT and an answerer sends
the INIT ACK back (RFC 9260 3.3.2, 3.3.3), each with a valid CRC32c, over
raw sockets of IP protocol 132. The kernel's own "protocol unreachable" for
each of them is an ICMP error about the association, which the datapath
passes as such.

As a script: answer INITs to the ports given, in the network namespace it
runs in (usage: sctp_raw.py answer PORT[,PORT...] [NAME]).
"""
import os
import socket
import struct
import sys

IPPROTO_SCTP = 132
INIT, INIT_ACK = 1, 2


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def packet(sport, dport, vtag, chunk_type, tag, params=b""):
    """An SCTP packet of one INIT or INIT ACK chunk: the common header, then
    initiate tag, a_rwnd, outbound and inbound streams, initial TSN and the
    parameters given; the checksum is CRC32c over it all, sent little-endian
    as the RFC's reference code and Linux place it."""
    body = struct.pack("!IIHHI", tag, 65536, 1, 1, tag) + params
    chunk = struct.pack("!BBH", chunk_type, 0, 4 + len(body)) + body
    chunk += b"\0" * (-len(chunk) % 4)
    head = struct.pack("!HHII", sport, dport, vtag, 0)
    crc = crc32c(head + chunk)
    return head[:8] + struct.pack("<I", crc) + chunk


def parse(datagram):
    """(source IP, source port, destination port, vtag, chunk type, initiate
    tag) of an IPv4 datagram a raw socket read, or None if it is not an SCTP
    packet with a valid checksum and a first chunk of INIT or INIT ACK."""
    if len(datagram) < 20:
        return None
    ihl = (datagram[0] & 0x0F) * 4
    src = socket.inet_ntoa(datagram[12:16])
    sctp = datagram[ihl:]
    if len(sctp) < 12 + 4 + 16:
        return None
    sport, dport, vtag = struct.unpack("!HHI", sctp[:8])
    (crc,) = struct.unpack("<I", sctp[8:12])
    if crc32c(sctp[:8] + b"\0\0\0\0" + sctp[12:]) != crc:
        return None
    ctype = sctp[12]
    if ctype not in (INIT, INIT_ACK):
        return None
    (tag,) = struct.unpack("!I", sctp[16:20])
    return src, sport, dport, vtag, ctype, tag


def raw_socket(timeout=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_SCTP)
    s.settimeout(timeout)
    return s


def answer(ports):
    """Answers every INIT to one of `ports` with an INIT ACK (a state cookie
    included, as the RFC requires), forever."""
    s = raw_socket()
    while True:
        got = parse(s.recv(65535))
        if not got:
            continue
        src, sport, dport, _, ctype, tag = got
        if ctype != INIT or dport not in ports:
            continue
        cookie = struct.pack("!HH", 7, 4 + 8) + os.urandom(8)
        mine = struct.unpack("!I", os.urandom(4))[0] or 1
        s.sendto(packet(dport, sport, tag, INIT_ACK, mine, cookie), (src, 0))


def probe(ip, port, deadline, resend=0.4):
    """True when (ip, port) answers an INIT with an INIT ACK for it within
    `deadline` seconds; the INIT is sent again every `resend` seconds."""
    import time

    end = time.monotonic() + deadline
    sport = 20000 + struct.unpack("!H", os.urandom(2))[0] % 40000
    tag = struct.unpack("!I", os.urandom(4))[0] or 1
    with raw_socket() as s:
        while time.monotonic() < end:
            s.sendto(packet(sport, port, 0, INIT, tag), (ip, 0))
            until = min(end, time.monotonic() + resend)
            while time.monotonic() < until:
                s.settimeout(max(0.01, until - time.monotonic()))
                try:
                    got = parse(s.recv(65535))
                except socket.timeout:
                    break
                if got and got[:4] == (ip, port, sport, tag) and got[4] == INIT_ACK:
                    return True
    return False


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "answer":
        sys.exit("usage: sctp_raw.py answer PORT[,PORT...] [NAME]")
    answer({int(p) for p in sys.argv[2].split(",")})
